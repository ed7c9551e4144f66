"""Memory per learned link: fill a fresh state through ``apply`` in a subprocess."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .. import REPO_ROOT, T0

QTYPES = ("when", "who", "where", "howmany", "howmuch", "what", "why", "how", "yesno", "other")
PER_NAMESPACE = 500  # links per namespace in the fill: 2,000 namespaces for a million links


def _slot_values() -> list[tuple[str, str]]:
    """Every shape and relation slot value heaprank's features take (``kind``, ``len``, ...)."""
    kinds = ["instruction", "preference", "decision", "error", "summary", "insight", "fact",
             "note", "episode", "tool_result", "none"]
    sources = ["user", "assistant", "tool", "none"] + [f"speaker{i}" for i in range(16)]
    lens = ["<=3", "<=6", "<=10", "<=15", "<=22", "<=32", "<=48", ">48"]
    out = [("kind", k) for k in kinds] + [("source", s) for s in sources]
    out += [("len", v) for v in lens]
    out += [(slot, v) for slot in ("date", "num", "ent", "q", "qsrc", "qent")
            for v in ("yes", "no")]
    return out


def _namespace_features(per_namespace: int) -> tuple[str, ...]:
    """Fresh feature strings, as ``retrieval_features`` makes them: slots, then slots x qtype."""
    slots = _slot_values()
    feats = [f"{s}:{v}" for s, v in slots]
    feats += [f"qt:{qt}&{s}:{v}" for qt in QTYPES for s, v in slots]
    return tuple(feats[:per_namespace])


def _rss_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    import resource  # pragma: no cover - no /proc: peak RSS instead

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # pragma: no cover


def links_child(backend: str, links: int, path: str) -> dict[str, Any]:
    """Fill a fresh state with ``links`` namespace links through ``apply``; measure."""
    from heaprank.records import Impression, new_recall_id
    from heaprank.state import MemoryState, SQLiteState

    from .fill import update_of

    state = MemoryState() if backend == "memory" else SQLiteState(path, synchronous="OFF")
    namespaces = max(1, links // PER_NAMESPACE)
    gc.collect()
    before = _rss_bytes()
    t0 = time.perf_counter()
    for i in range(namespaces):
        recall_id, namespace = new_recall_id(), f"user:{i:06d}"
        imp = Impression(recall_id=recall_id, namespace=namespace, qtype="other", time=T0,
                         time_explicit=True, ids=("d0",), slots=(("kind:none",),))
        state.put_impression(imp)
        state.apply([update_of(imp, [_namespace_features(min(links, PER_NAMESPACE))],
                               [False])])
    fill_s = time.perf_counter() - t0
    gc.collect()
    after = _rss_bytes()
    stats = state.stats()
    state.close()
    out = {"backend": backend, "links": stats["links"], "global_links": stats["global_links"],
           "namespaces": stats["namespaces"], "documents": stats["documents"],
           "fill_s": fill_s, "rss_growth_bytes": after - before,
           "rss_bytes_per_link": (after - before) / max(stats["links"], 1)}
    if backend == "sqlite":
        size = sum(os.path.getsize(p) for p in (path, path + "-wal", path + "-shm")
                   if os.path.exists(p))
        out.update(file_bytes=size, file_bytes_per_link=size / max(stats["links"], 1))
    return out


def measure_links(backend: str, links: int, tmp: str) -> dict[str, Any]:
    """:func:`links_child` in a fresh interpreter, so the RSS growth is the state's alone."""
    path = str(Path(tmp) / "links.db")
    code = ("import json, sys; from benchmarks.state.linksize import links_child; "
            "print(json.dumps(links_child(sys.argv[1], int(sys.argv[2]), sys.argv[3])))")
    # cwd: the child imports this package, which is importable from the repository root only.
    proc = subprocess.run([sys.executable, "-c", code, backend, str(links), path],
                          capture_output=True, text=True, check=False, cwd=REPO_ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"memory measurement ({backend}) failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
