"""Each signal is declared once (heaprank/model/signals.py) and everything else reads that
declaration: the weights, the scorer's columns, EXPLAIN's labels, the impression codes and the
re-fit's columns. The last test adds a signal to a copy of the package by editing that one
file and nothing else, and uses it end to end."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import heaprank
from heaprank import Weights
from heaprank.config import SIGNALS
from heaprank.learning.choices import OPTIONAL_COLUMNS
from heaprank.model.signals import LOGGED, NAMES
from heaprank.model.signals import SIGNALS as DECLARED
from heaprank.scoring.results import _LABEL
from heaprank.state import codec


def test_weights_have_one_field_per_declared_signal_with_its_default() -> None:
    assert tuple(f.name for f in fields(Weights)) == NAMES == SIGNALS
    assert Weights().as_tuple() == tuple(s.weight for s in DECLARED)


def test_each_signal_keeps_its_impression_code_and_explain_label() -> None:
    assert [codec.SIGNAL_CODES[s.code] for s in DECLARED] == list(NAMES)
    assert codec.SIGNAL_CODES[:9] == ("relevance", "recency", "importance", "usefulness",
                                      "age_days", "rules", "reinforcement",
                                      "usefulness_sampled", "association")  # stored: fixed
    assert _LABEL == {"relevance": "rel", "recency": "recency", "importance": "importance",
                      "usefulness": "useful", "reinforcement": "reinforcement",
                      "association": "assoc"}


def test_the_refit_reads_every_logged_signal() -> None:
    assert set(LOGGED) <= set(OPTIONAL_COLUMNS)


NEW_SIGNAL = '''

def _brevity(inputs):
    """Short texts first: 2 for an empty text, toward 1 for long ones."""
    import numpy as np
    lengths = np.array([len(t) for t in inputs.batch.texts], dtype=np.float64)
    return 1.0 + 1.0 / (1.0 + lengths / 20.0)


SIGNALS = (*SIGNALS, Signal("brevity", _brevity, 0.0, code=9, label="brief", logged=True))
NAMES = tuple(s.name for s in SIGNALS)
BY_NAME = {s.name: s for s in SIGNALS}
LOGGED = tuple(s.name for s in SIGNALS if s.logged)
'''

USE_IT = '''
import json
from heaprank import Config, Reranker, Weights
cands = [{"id": "long", "text": "a long note " * 20, "score": 1.0},
         {"id": "low", "text": "low " * 20, "score": 0.0},
         {"id": "short", "text": "short note", "score": 0.9}]
off = Reranker().rerank("what note?", cands)
rr = Reranker(config=Config(weights=Weights(brevity=3.0)))
on = rr.rerank("what note?", cands)
imp = rr.state.get_impression(on.recall_id)
print(json.dumps({"off": [r.id for r in off.items], "on": [r.id for r in on.items],
                  "explain": on.items[0].explain(), "stored": list(imp.signal_names),
                  "weights": rr.stats()["weights"]}, default=str))
'''


def test_a_new_signal_is_one_declaration(tmp_path: Path) -> None:
    package = Path(heaprank.__file__).parent
    copy = tmp_path / "heaprank"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    declaration = copy / "model" / "signals.py"
    declaration.write_text(declaration.read_text(encoding="utf-8") + NEW_SIGNAL, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "HEAPRANK_PURE_PYTHON": "1"}
    proc = subprocess.run([sys.executable, "-c", USE_IT], env=env, capture_output=True,
                          text=True, timeout=120, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json
    out = json.loads(proc.stdout)
    assert out["off"] == ["long", "short", "low"]  # weight 0 by default: the retriever's order
    assert out["on"][:2] == ["short", "long"]
    assert "brief " in out["explain"]
    assert "brevity" in out["stored"]
    assert out["weights"]["brevity"] == 3.0
