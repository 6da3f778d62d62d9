"""``python -m dashboards`` writes the dashboards' JSON into dashboards/json/;
``--check`` only compares and exits 1 when the committed files are not what the sources
generate (for CI and pre-commit)."""

from __future__ import annotations

import argparse
import sys

from dashboards import JSON_DIR, differences, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dashboards", description=__doc__)
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed JSON instead of writing it")
    args = parser.parse_args(argv)
    if args.check:
        stale = differences()
        for name in stale:
            print(f"{JSON_DIR / name}: differs from its source; run `make dashboards`",
                  file=sys.stderr)
        return 1 if stale else 0
    for path in write():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
