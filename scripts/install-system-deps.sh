#!/usr/bin/env bash
# Installs what the project needs from the operating system, only where it is missing:
# a Java runtime (the local Kafka brokers and jmxquery run on it), a Java compiler (builds the
# one-JVM-per-round JMX launcher; without it JMX falls back to a JVM per broker), npm
# (fetches the Kafka jars and helm), and Prometheus with promtool and Alertmanager's amtool
# (the alert rules' unit tests, the example Alertmanager configuration's check and the
# end-to-end test with a real Prometheus server), a headless Chromium (the status page's
# browser test), and buildah, podman and debootstrap (the container image's build-and-run
# test: no Docker engine needed).
set -euo pipefail

missing=()
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v npm >/dev/null 2>&1 || missing+=(npm)
{ command -v prometheus && command -v promtool; } >/dev/null 2>&1 || missing+=(prometheus)
command -v amtool >/dev/null 2>&1 || missing+=(prometheus-alertmanager)
command -v chromium-headless-shell >/dev/null 2>&1 || missing+=(chromium-headless-shell)
command -v buildah >/dev/null 2>&1 || missing+=(buildah)
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "missing ${missing[*]} and no apt-get here: install them with your package manager" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing ${missing[*]} with apt-get" >&2
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
