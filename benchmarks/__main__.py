"""``python -m benchmarks NAME ...``: run one benchmark of :data:`benchmarks.BENCHMARKS` from the
repository root."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from . import BENCHMARKS, MissingRequirement


def parser() -> argparse.ArgumentParser:
    """One subcommand per benchmark, each with the options its module declares."""
    top = argparse.ArgumentParser(prog="python -m benchmarks",
                                  description="heaprank's benchmarks (see benchmarks/requirements.txt)")
    sub = top.add_subparsers(dest="benchmark", required=True)
    for name, (module_name, help_text) in BENCHMARKS.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(p)
        p.set_defaults(run=module.run)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.run(args))
    except MissingRequirement as exc:
        print(f"python -m benchmarks {args.benchmark}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
