"""``heaprank`` command line: demo, links, explain, stats."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._version import __version__
from .errors import HeapRankError
from .state import sqlite_path

DEFAULT_STATE = "sqlite:///heaprank.db"


def _state_url(args: argparse.Namespace, *, must_exist: bool = True) -> str:
    url: str = args.state or os.environ.get("HEAPRANK_STATE") or DEFAULT_STATE
    if must_exist and url.startswith("sqlite://"):
        path = sqlite_path(url)
        if not Path(path).exists():
            raise SystemExit(f"heaprank: no state at {url!r} (file {path!r} does not exist); "
                             f"pass --state or set HEAPRANK_STATE")
    return url


def _print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


def _cmd_demo(args: argparse.Namespace) -> int:
    import tempfile

    from .demo import run

    if args.state:
        run(sys.stdout, args.state).close()
        return 0
    with tempfile.TemporaryDirectory(prefix="heaprank-demo-") as tmp:
        url = f"sqlite:///{tmp}/demo.db"
        sys.stdout.write("(learned state: a SQLite file in a temporary folder, the embedded "
                         "default; removed after the demo)\n\n")
        run(sys.stdout, url).close()
    return 0


def _cmd_links(args: argparse.Namespace) -> int:
    from .reranker import Reranker

    with Reranker(_state_url(args)) as rr:
        rows = rr.links(args.namespace, min_n=args.min_n)
        if args.prefix:
            rows = [r for r in rows if r.feature.startswith(tuple(args.prefix))]
        rows = rows[:args.limit] if args.limit else rows
    if args.json:
        _print_json([{"feature": r.feature, "p": r.p, "n": r.n, "low": r.low, "high": r.high}
                     for r in rows])
        return 0
    if not rows:
        print(f"no learned links in {args.namespace!r}")
        return 0
    width = max(len(r.feature) for r in rows)
    print(f"{'feature':<{width}}  P(useful)        n   90% interval")
    for r in rows:
        print(f"{r.feature:<{width}}  {r.p:9.4f}  {r.n:7.1f}   {r.low:.4f}-{r.high:.4f}")
    return 0


def _cmd_explain(args: argparse.Namespace) -> int:
    from .reranker import Reranker

    data = json.loads(Path(args.candidates).read_text(encoding="utf-8"))
    if isinstance(data, dict):
        data = data.get("candidates", data)
    with Reranker(_state_url(args, must_exist=False)) as rr:
        ranking = rr.rerank(args.query, data, namespace=args.namespace, k=args.k, now=args.now,
                            track=False)
    if args.json:
        _print_json({"query": ranking.query, "qtype": ranking.qtype,
                     "namespace": ranking.namespace, "results": ranking.to_dicts()})
    else:
        print(f"Q: {ranking.query}   (type {ranking.qtype}, namespace {ranking.namespace})")
        print(ranking.explain())
    return 0


def _cmd_stats(args: argparse.Namespace) -> int:
    from .reranker import Reranker

    with Reranker(_state_url(args)) as rr:
        stats = rr.stats()
        namespaces = rr.state.namespaces()
    if args.json:
        _print_json({**stats, "namespace_names": namespaces})
        return 0
    width = max(len(k) for k in stats)
    for key, value in stats.items():
        print(f"{key:<{width}}  {value:>10}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="heaprank", description=(
        "Re-rank retrieved candidates by relevance, recency, importance and learned usefulness."))
    parser.add_argument("--version", action="version", version=f"heaprank {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str, func: Any, state: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        if state:
            p.add_argument("--state", help=f"state URL (default $HEAPRANK_STATE or {DEFAULT_STATE})")
            p.add_argument("--json", action="store_true", help="print JSON")
        p.set_defaults(func=func)
        return p

    demo = sub.add_parser("demo", help="the Lisbon example: search vs heaprank, before and after "
                          "feedback")
    demo.add_argument("--state", help="state URL (default: a temporary SQLite file)")
    demo.set_defaults(func=_cmd_demo)

    links = command("links", "list learned links, strongest first", _cmd_links)
    links.add_argument("--namespace", default="*", help="a namespace, or * for the pooled layer")
    links.add_argument("--min-n", type=float, default=0.0, help="only links with this much evidence")
    links.add_argument("--limit", type=int, default=30, help="rows to show (0: all)")
    links.add_argument("--prefix", action="append", help="only features starting with this")

    explain = command("explain", "rank candidates from a JSON file and explain each position",
                      _cmd_explain)
    explain.add_argument("--query", required=True)
    explain.add_argument("--candidates", required=True,
                         help="JSON file: a list of {id, text, score, metadata}")
    explain.add_argument("--namespace", default="default")
    explain.add_argument("-k", type=int, default=10)
    explain.add_argument("--now", help="current time (epoch seconds or ISO 8601)")

    command("stats", "counts of what the state holds", _cmd_stats)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if getattr(args, "now", None) is not None:
            try:
                args.now = float(args.now)
            except ValueError:
                pass
        return int(args.func(args))
    except HeapRankError as exc:
        print(f"heaprank: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
