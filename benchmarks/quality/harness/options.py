"""What the quality commands share: where the data is, the development split, the conversations
a run holds out, Config rows written as JSON, and writing a result."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ... import REPO_ROOT

#: Relative to the repository root, so the default does not depend on the working directory.
DEFAULT_DATA = "../shared/data/locomo10.json"
#: heaprank's default weights, recency floor, reject discount and prior were chosen on these
#: (README, "a development split of LoCoMo (conversations 0-4)"), so only the others are
#: held out for the defaults.
DEV_CONVERSATIONS = "0,1,2,3,4"
RETRIEVER_LABEL = {"bm25": "BM25 top 50 (bm25s)", "dense": "dense top 50 (MiniLM-L6)",
                   "union": "BM25 + dense union (fused)"}


#: The options several commands take, each declared once: ``--name`` -> argparse keywords.
SHARED: dict[str, dict[str, Any]] = {
    "data": {"metavar": "PATH", "help": f"locomo10.json (default $HEAPRANK_LOCOMO, or "
             f"{DEFAULT_DATA} from the repository root)"},
    "seed": {"type": int, "default": 0, "help": "seed of the orders, the noise and the bootstrap"},
    "resamples": {"type": int, "default": 2000, "help": "bootstrap resamples"},
    "conversations": {"type": int, "help": "use only the first N conversations"},
    "questions-limit": {"type": int,
                        "help": "use only the first N usable questions of each conversation"},
    "now-offset-days": {"type": float, "default": 1.0, "help": "questions are asked this long "
                        "after the last session (default 1)"},
    "write": {"metavar": "FILE", "help": "save the augmented data here"},
    "json": {"action": "store_true", "help": "print one JSON object"},
    "out": {"metavar": "FILE", "help": "also write the JSON result here"},
    "no-progress": {"action": "store_true", "help": "no progress bar"},
    "no-timing": {"action": "store_true",
                  "help": "leave wall times out (byte-identical output across runs)"},
}


def add_shared(parser: argparse.ArgumentParser, *names: str) -> None:
    """Declare the :data:`SHARED` options ``names`` (``"seed"`` is ``--seed``)."""
    for name in names:
        parser.add_argument(f"--{name}", **SHARED[name])


def data_path(arg: str | None) -> Path:
    """The LoCoMo file: ``--data``, else ``$HEAPRANK_LOCOMO``, else :data:`DEFAULT_DATA`."""
    default = str((REPO_ROOT / DEFAULT_DATA).resolve())
    candidates = [arg] if arg else [os.environ.get("HEAPRANK_LOCOMO"), default]
    for c in candidates:
        if c and Path(c).is_file():
            return Path(c)
    raise FileNotFoundError(f"LoCoMo data not found ({arg or DEFAULT_DATA}); pass --data PATH "
                            "to a copy of locomo10.json (github.com/snap-research/locomo)")


def augmented_data(args: argparse.Namespace, augment: Any, command: str) -> tuple[Path, Any] | None:
    """``(path, raw)``: the LoCoMo file of ``--data`` rewritten by ``augment(raw, args.seed)``
    (saved to ``--write`` when given), for the test sets built from it; None once the missing
    file is reported."""
    try:
        path = data_path(args.data)
    except FileNotFoundError as exc:
        print(f"python -m benchmarks {command}: {exc}", file=sys.stderr)
        return None
    raw = augment(json.loads(path.read_text(encoding="utf-8")), args.seed)
    if args.write:
        Path(args.write).write_text(json.dumps(raw, indent=1), encoding="utf-8")
    return path, raw


def dev_split(n_conversations: int, *, halve_small: bool = False) -> list[int]:
    """The development conversations a file of ``n_conversations`` has; with ``halve_small``, a
    file too small to hold them all besides a test conversation (the smoke fixtures) uses its
    first half instead."""
    dev = [c for c in map(int, DEV_CONVERSATIONS.split(",")) if c < n_conversations]
    if halve_small and n_conversations <= max(dev, default=0) + 1:
        dev = list(range(max(1, n_conversations // 2)))
    return dev


def folds(arg: str | None, data: Any) -> list[int]:
    """The held-out conversations of ``--folds`` (indices or sample ids; default all)."""
    if not arg:
        return list(range(len(data.conversations)))
    ids = {c.sample_id: i for i, c in enumerate(data.conversations)}
    out = []
    for part in arg.split(","):
        part = part.strip()
        if part in ids:
            out.append(ids[part])
        elif part.isdigit() and int(part) < len(data.conversations):
            out.append(int(part))
        else:
            raise ValueError(f"--folds: unknown conversation {part!r}")
    return sorted(set(out))


def dev_conversations(arg: str | None, data: Any) -> list[int]:
    """Indices of the development conversations that exist in this run (ids or indices)."""
    text = (arg or "").strip()
    if text.lower() in ("", "none"):
        return []
    ids = {c.sample_id: i for i, c in enumerate(data.conversations)}
    out: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        index = int(part) if part.isdigit() else ids.get(part, -1)
        if 0 <= index < len(data.conversations):
            out.add(index)
    return sorted(out)


def config_from_json(spec: dict[str, Any]) -> Any:
    """A :class:`heaprank.Config` from its JSON form (``to_dict``'s shape, any subset; the flat
    shape of 0.1 reads with a DeprecationWarning)."""
    from heaprank import Config

    return Config.from_dict(spec)


def named_json(text: str, option: str) -> tuple[str, dict[str, Any]]:
    """``(name, spec)`` of one ``NAME=JSON`` option value (``--row``, ``--lever``)."""
    name, sep, body = text.partition("=")
    if not sep or not name.strip():
        raise ValueError(f"{option}: expected NAME=JSON, got {text!r}")
    return name.strip(), json.loads(body)


def emit(result: dict[str, Any], rendered: str, args: argparse.Namespace,
         indent: int = 1) -> None:
    """Write ``result`` as JSON to ``--out`` (when given), then print it (``--json``) or the
    rendered table."""
    text = json.dumps(result, indent=indent)
    if getattr(args, "out", None):
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text if getattr(args, "json", False) else rendered)
