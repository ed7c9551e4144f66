"""``heaprank`` command line: demo, links, explain, stats, forget, tune, replay, plot, state, mcp.

A mistake in what the user typed or pointed at (a missing file, bad JSON, a candidate of the wrong
type, an unknown state URL, a bad ``--now``) ends the command with one line on stderr, starting
``heaprank:``, and exit status 2; tracebacks are kept for heaprank's own bugs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from .._version import __version__
from ..errors import HeapRankError
from ..mcp.command import add_command as add_mcp_command
from ..state import sqlite_path
from .grants import add_commands as add_grant_commands
from .options import FEATURES, known_namespace, number, print_fit, whole_number
from .urls import POSTGRES_SCHEMES, UsageError, existing_state

DEFAULT_STATE = "sqlite:///heaprank.db"
DEFAULT_CONFIG = "heaprank-config.json"
MEMORY_STATE = "memory://"



class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors, like every other user error of this command."""

    def error(self, message: str) -> NoReturn:
        _report(f"{message} (see {self.prog} --help)")
        raise SystemExit(2)


def _report(message: str) -> None:
    # One line even when a message quotes user text with newlines in it.
    print("heaprank: " + " ".join(message.split()), file=sys.stderr)


def _now(text: str | None) -> float | str | None:
    """Epoch seconds as a float; anything else is passed on as ISO 8601 for the library to parse."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return text
    if not math.isfinite(value):
        raise UsageError(f"--now: expected epoch seconds or an ISO 8601 time, got {text!r}")
    return value


def _state_url(args: argparse.Namespace) -> str:
    return existing_state(args.state or os.environ.get("HEAPRANK_STATE") or DEFAULT_STATE)


def _explain_state_url(args: argparse.Namespace) -> str:
    """The state to rank with: a named one must exist; by default ``./heaprank.db`` if it exists,
    else an empty in-memory state (``explain`` only reads, so it never creates a file)."""
    named = args.state or os.environ.get("HEAPRANK_STATE")
    if named:
        return existing_state(named)
    return DEFAULT_STATE if Path(sqlite_path(DEFAULT_STATE)).is_file() else MEMORY_STATE


def _print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


def _load_candidates(name: str) -> list[Any]:
    """The candidates of a JSON file: a list, or an object with a ``candidates`` list."""
    try:
        text = Path(name).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--candidates: cannot read {name!r}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"--candidates: {name!r} is not UTF-8 text ({exc.reason})") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--candidates: {name!r} is not valid JSON: {exc.msg} at line "
                         f"{exc.lineno} column {exc.colno}") from exc
    if isinstance(data, dict) and "candidates" in data:
        data = data["candidates"]
    if not isinstance(data, list):
        raise UsageError(f"--candidates: {name!r} must hold a JSON list of candidates or "
                         f'{{"candidates": [...]}}, got {type(data).__name__}')
    return data


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
    from ..reranker import Reranker

    with Reranker(_state_url(args)) as rr:
        known_namespace(rr, args.namespace)
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
    from ..reranker import Reranker

    candidates = _load_candidates(args.candidates)
    now = _now(args.now)
    with Reranker(_explain_state_url(args)) as rr:
        try:
            ranking = rr.rerank(args.query, candidates, namespace=args.namespace, k=args.k, now=now,
                                track=False)
        except (TypeError, ValueError) as exc:  # the library names the field the input got wrong
            raise UsageError(str(exc)) from exc
    if args.json:
        _print_json({"query": ranking.query, "qtype": ranking.qtype,
                     "namespace": ranking.namespace, "results": ranking.to_dicts()})
    else:
        print(f"Q: {ranking.query}   (type {ranking.qtype}, namespace {ranking.namespace})")
        print(ranking.explain())
    return 0


def _cmd_stats(args: argparse.Namespace) -> int:
    from ..learning.refit import describe_fit, describe_rejects, describe_types
    from ..reranker import Reranker

    with Reranker(_state_url(args)) as rr:
        stats = rr.stats()
        namespaces = rr.state.namespaces()
    if args.json:
        _print_json({**stats, "namespace_names": namespaces})
        return 0
    weights, fitted = stats.pop("weights"), stats.pop("weights_fitted")
    rejects = stats.pop("reject_weights")
    width = max(len(k) for k in stats)
    for key, value in stats.items():
        print(f"{key:<{width}}  {value:>10}")
    print("weights           " + ", ".join(f"{k} {v:.3g}" for k, v in weights.items()))
    print("weights fitted    " + describe_fit(fitted))
    for line in describe_types(fitted):
        print("  by type         " + line)
    print("reject weights    " + describe_rejects(rejects))
    return 0


def _cmd_state_copy(args: argparse.Namespace) -> int:
    from ..state import open_state
    from ..state.copy import copy_state

    if args.dst.startswith("memory:"):
        raise UsageError("state copy: memory:// keeps nothing once the command exits; copy to "
                         "sqlite:///path, redis://host:port/db or postgresql://host/dbname")
    source = open_state(existing_state(args.src))
    try:
        target = open_state(args.dst)
        try:
            stats = copy_state(source, target)
        finally:
            target.close()
    finally:
        source.close()
    if args.json:
        _print_json(stats)
        return 0
    print(f"copied {args.src} -> {args.dst}: " + ", ".join(f"{k} {v}" for k, v in stats.items()))
    return 0


def _cmd_state_migrate(args: argparse.Namespace) -> int:
    if args.url.split(":", 1)[0] in POSTGRES_SCHEMES:
        from ..state.postgres.admin import migrate_url as migrate_postgres

        counts = migrate_postgres(args.url)
        return _counts(args, f"{'created' if counts['created'] else 'checked'} the heaprank "
                       f"schema {counts['schema']} (version {counts['schema_version']}), row-level "
                       f"security {'on' if counts['rls'] else 'off'}", counts)
    from ..state.redis.migrate import migrate_url

    return _counts(args, f"migrated {args.url} to Redis layout 2", migrate_url(args.url))


def _cmd_state_reshard(args: argparse.Namespace) -> int:
    from ..state.redis.reshard import reshard_url

    return _counts(args, f"resharded {args.url}", reshard_url(args.url, args.shards, args.pause))


def _counts(args: argparse.Namespace, done: str, counts: dict[str, Any]) -> int:
    print(json.dumps(counts, indent=2) if args.json else f"{done}: "
          + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return 0


def _policy(args: argparse.Namespace) -> Any:
    """The retention policy a ``--policy`` file holds, or the built-in defaults."""
    from ..model.retention import PolicySet, load_policy

    return load_policy(args.policy) if args.policy else PolicySet()


def _cmd_forget(args: argparse.Namespace) -> int:
    from ..reranker import Reranker

    if not args.preview:
        raise UsageError("forget: only --preview is available: heaprank never deletes your "
                         "documents (drop forgotten ones from rankings with "
                         "Config(retention=Retention(drop_forgotten=True)))")
    policies = _policy(args)
    with Reranker(_state_url(args)) as rr:
        report = rr.forget_candidates(args.namespace, now=_now(args.now), policy=policies)
    if args.json:
        _print_json(report.to_dict())
        return 0
    settings = ", ".join(f"{k} {v:g}" if not isinstance(v, bool) else f"{k} {str(v).lower()}"
                         for k, v in report.policy.to_dict().items())
    print(f"namespace {report.namespace!r}: {report.count} of {report.checked} used documents "
          f"forgotten ({settings})")
    rows = report.ids[:args.limit] if args.limit else report.ids
    if rows:
        width = max(len(i) for i in rows)
        print(f"{'id':<{width}}  retention  idle days")
        for doc_id, r, idle in zip(rows, report.retention, report.idle_days):
            print(f"{doc_id:<{width}}  {r:9.4f}  {idle:9.1f}")
        if len(rows) < report.count:
            print(f"... {report.count - len(rows)} more (--limit 0 shows all)")
    print("preview only: nothing was deleted")
    return 0


def _config(args: argparse.Namespace) -> Any:
    """The config of ``--config FILE``, else the defaults."""
    from ..config import Config, load_config

    return load_config(args.config) if args.config else Config()


def _cmd_tune(args: argparse.Namespace) -> int:
    from ..config import save_config
    from ..reranker import Reranker

    if args.out and not args.apply:
        raise UsageError("--out: names the config file --apply writes; add --apply")
    with Reranker(_state_url(args), config=_config(args)) as rr:
        known_namespace(rr, args.namespace)
        result = rr.tune(args.namespace, fit_half_life=args.fit_half_life,
                         min_impressions=args.min_impressions)
    out = args.out or args.config or DEFAULT_CONFIG
    written = bool(args.apply and result.moved)
    if written:
        save_config(result.config, out)
    if args.json:
        _print_json({**result.to_dict(), "written": out if written else None})
        return 0
    for fit in (result.pooled, *result.namespaces.values()):
        print_fit(fit, result.start)
    print("skipped impressions: " + ", ".join(f"{k} {v}" for k, v in result.skipped.items()))
    if written:
        print(f"wrote the tuned config to {out} (load it with --config {out})")
    elif args.apply:
        print("nothing written: the chosen fit did not move")
    return 0


def _cmd_replay(args: argparse.Namespace) -> int:
    from ..learning.tuning import replay
    from ..state import open_state

    config = _config(args)
    namespace = None if args.namespace == "*" else args.namespace
    state = open_state(_state_url(args))
    try:
        result = replay(state.feedback_log(namespace), config)
    finally:
        state.close()
    if args.json:
        _print_json(result.to_dict())
        return 0
    print(f"{result.impressions} usable impressions ({result.choices} used items); skipped: "
          + ", ".join(f"{k} {v}" for k, v in result.skipped.items()))
    if result.mrr is None:
        return 0
    ks = list(result.used_at)
    print(f"{'order':<8} {'MRR':>7}" + "".join(f" {'used@' + str(k):>7}" for k in ks))
    for name, mrr, used_at in (("config", result.mrr, result.used_at),
                               ("logged", result.logged_mrr, result.logged_used_at)):
        print(f"{name:<8} {mrr:7.4f}" + "".join(f" {used_at[k]:7.4f}" for k in ks))
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from ..reranker import Reranker
    from .plots import PLOTS

    entry = PLOTS[args.plot]
    folder = Path(args.out).expanduser().parent
    if not folder.is_dir():
        raise UsageError(f"--out: cannot write {args.out!r}: folder {str(folder)!r} does not exist")
    # A plot of a policy alone reads a state only when one is named.
    url = _state_url(args) if entry.reads_state or args.state else MEMORY_STATE
    with Reranker(url, config=_config(args)) as rr:
        try:
            entry.draw(args, rr)
        except OSError as exc:  # the file itself: a folder named so, no permission, disk full
            raise UsageError(f"--out: cannot write {args.out!r}: {exc.strerror or exc}") from exc
    if not getattr(args, "json", False):  # --json: the plot printed its values as JSON
        print(f"wrote {args.out}")
    return 0


_EXISTING = f"URL of an existing state (default $HEAPRANK_STATE or {DEFAULT_STATE})"
_CONFIG_HELP = "config file (JSON, or TOML on Python 3.11+); default: the built-in defaults"
_Command = Callable[[str, str, Any, str], argparse.ArgumentParser]


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="heaprank", description=(
        "Re-rank retrieved candidates by relevance, recency, importance and learned usefulness."))
    parser.add_argument("--version", action="version", version=f"heaprank {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str, func: Any, state_help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--state", help=state_help)
        p.add_argument("--json", action="store_true", help="print JSON")
        p.set_defaults(func=func)
        return p

    demo = sub.add_parser("demo", help="the Lisbon example: search vs heaprank, before and after "
                          "feedback")
    demo.add_argument("--state", help="state URL (default: a temporary SQLite file)")
    demo.set_defaults(func=_cmd_demo)
    _reading_commands(command)
    _fitting_commands(command)
    _plot_commands(sub)
    _state_commands(sub)
    add_mcp_command(sub)
    return parser


def _reading_commands(command: _Command) -> None:
    """``links``, ``explain``, ``stats`` and ``forget``: what the state holds and implies."""
    links = command("links", "list learned links, strongest first", _cmd_links, _EXISTING)
    links.epilog, links.formatter_class = FEATURES, argparse.RawDescriptionHelpFormatter
    links.add_argument("--namespace", default="*", help="a namespace, or * for the pooled layer")
    links.add_argument("--min-n", type=number, default=0.0,
                       help="only links with this much evidence")
    links.add_argument("--limit", type=whole_number, default=30, help="rows to show (0: all)")
    links.add_argument("--prefix", action="append", help="only features starting with this")

    explain = command("explain", "rank candidates from a JSON file and explain each position "
                      "(reads the state, never writes it)", _cmd_explain,
                      f"URL of an existing state (default $HEAPRANK_STATE, or {DEFAULT_STATE} if "
                      "that file exists, else nothing learned)")
    explain.add_argument("--query", required=True)
    explain.add_argument("--candidates", required=True,
                         help="JSON file: a list of {id, text, score, metadata}")
    explain.add_argument("--namespace", default="default")
    explain.add_argument("-k", type=int, default=10)
    explain.add_argument("--now", help="current time (epoch seconds or ISO 8601)")

    command("stats", "counts of what the state holds", _cmd_stats, _EXISTING)

    forget = command("forget", "report the documents a retention policy counts as forgotten "
                     "(nothing is deleted)", _cmd_forget, _EXISTING)
    forget.add_argument("--policy", help="TOML or JSON retention policy file (default: the "
                        "built-in policy)")
    forget.add_argument("--namespace", required=True, help="the namespace to examine")
    forget.add_argument("--preview", action="store_true",
                        help="print what would be forgotten (the only mode: nothing is deleted)")
    forget.add_argument("--now", help="current time (epoch seconds or ISO 8601)")
    forget.add_argument("--limit", type=whole_number, default=50, help="ids to list (0: all)")


def _fitting_commands(command: _Command) -> None:
    """``tune`` and ``replay``: the weights against the impression log."""
    tune = command("tune", "fit the weights to the impression log (reads the state, never "
                   "writes it; --apply writes a config file)", _cmd_tune, _EXISTING)
    tune.add_argument("--namespace", help="also fit this namespace (shrunk toward the pooled "
                      "fit; its fit is the one applied), or * for every namespace")
    tune.add_argument("--config", help=_CONFIG_HELP + " (the weights tuning starts from)")
    tune.add_argument("--apply", action="store_true", help="write the tuned config if it moved")
    tune.add_argument("--out", help=f"the file --apply writes (default: --config, else "
                      f"{DEFAULT_CONFIG})")
    tune.add_argument("--fit-half-life", action="store_true", help="fit the recency half-life too")
    tune.add_argument("--min-impressions", type=whole_number, default=50,
                      help="a fit needs this many usable impressions (default 50)")

    replay = command("replay", "re-order the logged impressions under a config: MRR and used@k "
                     "(reads the state, never writes it)", _cmd_replay, _EXISTING)
    replay.add_argument("--config", help=_CONFIG_HELP)
    replay.add_argument("--namespace", default="*", help="a namespace, or * for all")


def _plot_commands(sub: Any) -> None:
    from .plots import PLOTS

    plot = sub.add_parser("plot", help="draw a PNG (needs heaprank[plot])",
                          description="draw a PNG (needs heaprank[plot])")
    plot_sub = plot.add_subparsers(dest="plot", required=True)
    for name, entry in PLOTS.items():
        text = entry.help.replace("%", "%%")  # argparse %-formats help strings
        p = plot_sub.add_parser(name, help=text, description=entry.help)
        p.add_argument("--state", help=_EXISTING)
        p.add_argument("--config", help=_CONFIG_HELP)
        p.add_argument("--out", required=True, help="the image file to write (FILE.png)")
        entry.add_arguments(p)
        p.set_defaults(func=_cmd_plot)


def _state_commands(sub: Any) -> None:
    state = sub.add_parser("state", help="manage states", description="manage states")
    state_sub = state.add_subparsers(dest="state_command", required=True)
    copy_help = ("copy a whole state (links, global layer, documents, impressions) into an empty "
                 "one: between SQLite, Redis and PostgreSQL (sqlite:///path, redis://host:port/db, "
                 "redis+cluster://host:port, postgresql://user@host:port/dbname?schema=...)")
    copy = state_sub.add_parser("copy", help=copy_help, description=copy_help)
    copy.add_argument("src", help="URL of the existing state to read")
    copy.add_argument("dst", help="URL of the empty state to write (a SQLite file is created)")
    copy.add_argument("--json", action="store_true", help="print the target's stats as JSON")
    copy.set_defaults(func=_cmd_state_copy)
    migrate = state_sub.add_parser("migrate", help="convert a Redis state of layout 1 to layout 2 "
                                   "while writers run (docs/redis.md); create or upgrade the "
                                   "schema of a PostgreSQL state (docs/postgres.md)")
    migrate.add_argument("url", help="the Redis state (with its prefix= option) or the "
                         "PostgreSQL one (with its schema= option)")
    migrate.add_argument("--json", action="store_true", help="print the counts as JSON")
    migrate.set_defaults(func=_cmd_state_migrate)
    reshard = state_sub.add_parser("reshard", help="move a Redis state's pooled layer to N "
                                   "shards while writers run (one server; docs/redis.md)")
    reshard.add_argument("url", help="the Redis state (with its prefix= option)")
    reshard.add_argument("--shards", type=int, required=True, help="the new shard count")
    reshard.add_argument("--pause", type=float, default=0.0, help="seconds between two shards")
    reshard.add_argument("--json", action="store_true", help="print the counts as JSON")
    reshard.set_defaults(func=_cmd_state_reshard)
    add_grant_commands(state_sub)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; 0 on success, 2 on a user error (one line on stderr)."""
    args = _parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (UsageError, HeapRankError, OSError, sqlite3.Error) as exc:
        if isinstance(exc, BrokenPipeError):
            return 0  # the reader (head, less) went away: nothing left to say
        _report(str(exc))
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
