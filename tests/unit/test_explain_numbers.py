"""EXPLAIN prints numbers a person reads: weights (exponents), retriever scores and rule
multipliers with at most three significant digits, never a fitted weight's six."""

from __future__ import annotations

import re

from heaprank import Config, Refit, Reranker, Rule
from heaprank.config import Weights

FITTED = Weights(relevance=0.502374, recency=1.0, importance=1.8135, usefulness=3.24902)
CANDIDATES = [
    {"id": "booked", "text": "Booked the flight: SFO to LIS, departs March 14, 9:40am",
     "score": 0.50712345, "metadata": {"kind": "fact"}},
    {"id": "price", "text": "Flights to Lisbon usually run $400-700 round trip",
     "score": 0.81812345, "metadata": {"kind": "tool_result"}},
]


def _significant(number: str) -> int:
    return len(number.replace(".", "").lstrip("0"))


def _lines(config: Config, rules: tuple[Rule, ...] = ()) -> list[str]:
    rr = Reranker(config=config, rules=list(rules))
    return [r.explain() for r in rr.rerank("When is my flight?", CANDIDATES, track=False)]


def test_fitted_exponents_show_three_significant_digits() -> None:
    lines = _lines(Config(weights=FITTED, refit=Refit(every=0)))
    exponents = [e for line in lines for e in re.findall(r"\^([0-9.]+)", line)]
    assert exponents and all(_significant(e) <= 3 for e in exponents), lines
    text = " ".join(lines)
    assert "^0.502 " in text and "^1.81 " in text and "^3.25" in text


def test_retriever_scores_and_rule_multipliers_show_three_significant_digits() -> None:
    halve = Rule("tool results", lambda c: c.kind == "tool_result", 0.123456)
    lines = _lines(Config(refit=Refit(every=0)), (halve,))
    text = " ".join(lines)
    scores = re.findall(r"\(score ([0-9.]+)\)", text)
    assert sorted(scores) == ["0.507", "0.818"], lines
    assert "tool results x0.123" in text and "0.123456" not in text
