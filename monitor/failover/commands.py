"""The ``kafka-monitor failover`` subcommands' arguments; the work, and the Kafka clients it
needs, are imported only when one runs (``act.py``), so ``kafka-monitor --help`` stays light."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def _plan(args: argparse.Namespace) -> int:
    from monitor.failover.act import plan_command

    return plan_command(args)


def _apply(args: argparse.Namespace) -> int:
    from monitor.failover.act import apply_command

    return apply_command(args)


def add_failover_parser(commands: argparse._SubParsersAction[Any]) -> None:
    failover = commands.add_parser(
        "failover", help="translate groups' positions to a mirror's destination; apply one")
    sub = failover.add_subparsers(dest="failover_command", required=True, metavar="ACTION")
    plan = sub.add_parser("plan", help="print where each group would resume on the destination")
    apply = sub.add_parser("apply", help="commit a group's plan on the destination")
    for p in (plan, apply):
        p.add_argument("--config", "-c", type=Path, required=True)
        p.add_argument("--mirror", required=True, help="a name from mirrors[]")
    plan.add_argument("--group", help="one group (default: every group on the mirror's topics)")
    plan.add_argument("--json", action="store_true", help="JSON, as the API and apply --plan")
    plan.set_defaults(func=_plan)
    apply.add_argument("--group", required=True)
    apply.add_argument("--plan", type=Path, help="a plan saved by `failover plan --json` "
                       "(default: the running service's, from the configuration's http)")
    apply.add_argument("--token", help="bearer token for the service's API (http.auth.reads)")
    apply.add_argument("--max-age", type=float, help="seconds; default mirrors[].failover."
                       "max_plan_age")
    apply.add_argument("--yes", action="store_true", help="commit (without it: a dry run)")
    apply.set_defaults(func=_apply)
