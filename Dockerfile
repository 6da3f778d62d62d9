# The kafka-monitor image: the service in a virtualenv, the Java runtime its JMX collector
# starts (with the one-JVM-per-round launcher compiled in), a non-root user.
#
#   docker build -t registry.example.com/kafka-monitor:0.1.0 .
#   buildah bud --format docker -t registry.example.com/kafka-monitor:0.1.0 .
#
# BASE is any Debian-based image with python3 (3.11 or newer) and its venv module; the default
# is the official slim image of the Python the project supports. tests/test_image.py builds
# it on a local Debian base (made with debootstrap) and runs it against a real broker.
ARG BASE=python:3.11-slim-bookworm

FROM ${BASE} AS build
ARG DEBIAN_FRONTEND=noninteractive
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# javac, only here: it compiles the JMX launcher into the cache copied below.
RUN apt-get update -q \
 && apt-get install -y -q --no-install-recommends openjdk-17-jdk-headless \
 && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml README.md /src/
COPY monitor /src/monitor
RUN python3 -m venv /opt/kafka-monitor/venv \
 && /opt/kafka-monitor/venv/bin/pip install -q /src \
 && XDG_CACHE_HOME=/opt/kafka-monitor/cache \
    /opt/kafka-monitor/venv/bin/python -m monitor.ingest.jmx_launcher --build

FROM ${BASE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="kafka-monitor" \
      org.opencontainers.image.description="Kafka consumer-lag evaluation (Burrow's rules, lag in seconds), broker health, canary probes; Prometheus metrics and a Burrow-compatible API" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
ARG DEBIAN_FRONTEND=noninteractive
# The JMX collector runs jmxquery's classes in a JVM; 65532 is the chart's runAsUser.
RUN apt-get update -q \
 && apt-get install -y -q --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd -K GID_MAX=65535 --gid 65532 kafka-monitor \
 && useradd -K UID_MAX=65535 --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin kafka-monitor \
 && mkdir -p /etc/kafka-monitor /var/lib/kafka-monitor/state \
 && chown 65532:65532 /var/lib/kafka-monitor/state
COPY --from=build /opt/kafka-monitor /opt/kafka-monitor
# The cache holds the launcher jar; the JVM's class-data-sharing archives are added to it at
# the first JMX round where it is writable (a read-only root file system just skips them).
RUN chown -R 65532:65532 /opt/kafka-monitor/cache
ENV PATH=/opt/kafka-monitor/venv/bin:$PATH \
    XDG_CACHE_HOME=/opt/kafka-monitor/cache \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 65532:65532
WORKDIR /var/lib/kafka-monitor
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \
  CMD ["kafka-monitor", "healthcheck", "--config", "/etc/kafka-monitor/config.yaml"]
ENTRYPOINT ["kafka-monitor"]
CMD ["run", "--config", "/etc/kafka-monitor/config.yaml"]
