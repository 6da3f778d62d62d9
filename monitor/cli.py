"""The ``kafka-monitor`` command line.

``check-config FILE`` validates a configuration and prints it as the service will use it;
``run --config FILE`` starts the service; ``healthcheck --config FILE`` asks it for /healthz
(the container image's health check); ``demo`` runs a local Kafka with a demo workload and
the service watching it; ``pipeline stream|backtest`` run the Spark jobs; ``failover
plan|apply`` translate groups' positions to a mirror's destination and commit one.
"""

from __future__ import annotations

import argparse
import ssl
import sys
from pathlib import Path

import yaml

from monitor import __version__
from monitor.config import ConfigError, effective_config, load_config
from monitor.failover.commands import add_failover_parser
from monitor.logs import setup_logging
from monitor.pipeline.commands import add_pipeline_parser
from monitor.supervisor import Supervisor, child_command, is_supervised_child

EXIT_CONFIG = 2
EXIT_LISTEN = 1


def _check_config(args: argparse.Namespace) -> int:
    config = load_config(args.file)
    print(f"# {args.file}: valid; effective configuration (defaults filled, secrets masked)")
    print(yaml.safe_dump(effective_config(config), sort_keys=False), end="")
    return 0


def _run(args: argparse.Namespace) -> int:
    """The service in a child process that a small supervisor restarts if it crashes
    (``monitor/supervisor.py``), behind the HTTP front that holds the port
    (``monitor/serve/front.py``); the configuration is checked here first."""
    config = load_config(args.config)
    setup_logging(config.logging.level, args.log_format or config.logging.format)
    if is_supervised_child():
        from monitor.service import run

        return run(config)
    from monitor.serve.front import Front

    front = Front(config)
    try:
        front.start()
    except (OSError, ssl.SSLError) as exc:
        front.close()
        print(f"cannot serve http on {config.http.host}:{config.http.port}: {exc}",
              file=sys.stderr)
        return EXIT_LISTEN
    return Supervisor(child_command(args.config, args.log_format), front=front).run()


def _healthcheck(args: argparse.Namespace) -> int:
    """GET /healthz of the service this configuration describes, on this host: exit 0 when
    it answers 200 (the container image's HEALTHCHECK)."""
    import urllib.request

    from monitor.serve.http.tls import local_client

    config = load_config(args.config)
    base, context = local_client(config.http)
    url = f"{base}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=args.timeout, context=context) as response:
            status = int(response.status)
    except OSError as exc:  # refused, timed out, TLS failure, HTTP error status
        print(f"{url}: {exc}", file=sys.stderr)
        return 1
    print(f"{url}: {status}")
    return 0 if status == 200 else 1


def _demo(args: argparse.Namespace) -> int:
    from monitor.dev.demo import run_demo

    return run_demo(port=args.port, brokers=args.brokers, status_every=args.status_every)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafka-monitor",
        description="Kafka consumer-lag evaluation, broker health and canary probes.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = commands.add_parser("check-config", help="validate a configuration file")
    check.add_argument("file", type=Path)
    check.set_defaults(func=_check_config)

    run = commands.add_parser("run", help="run the service")
    run.add_argument("--config", "-c", type=Path, required=True)
    run.add_argument("--log-format", choices=["json", "text"], help="override logging.format")
    run.set_defaults(func=_run)

    health = commands.add_parser(
        "healthcheck", help="exit 0 when the service of this configuration answers /healthz"
    )
    health.add_argument("--config", "-c", type=Path, required=True)
    health.add_argument("--timeout", type=float, default=5.0, help="seconds")
    health.set_defaults(func=_healthcheck)

    demo = commands.add_parser(
        "demo", help="start a local Kafka with a demo workload and monitor it (Ctrl-C stops)"
    )
    demo.add_argument("--port", type=int, default=8000, help="HTTP port (0: any free port)")
    demo.add_argument("--brokers", type=int, default=1, choices=[1, 3])
    demo.add_argument(
        "--status-every", type=float, default=10.0, help="seconds between workload lines"
    )
    demo.set_defaults(func=_demo)

    add_pipeline_parser(commands)  # pipeline stream|backtest (Spark, imported when run)
    add_failover_parser(commands)  # failover plan|apply
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"invalid configuration:\n{exc}", file=sys.stderr)
        return EXIT_CONFIG


if __name__ == "__main__":
    sys.exit(main())
