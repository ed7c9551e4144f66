"""Rules: superseded by key (version, else created_at), user rules, and multiplier 0 drops."""

from __future__ import annotations

import math

import pytest

from heaprank import ConfigError, Reranker, Rule
from heaprank.scoring.candidates import coerce_candidates
from heaprank.scoring.rules import RuleView, apply_rules, superseded_mask

NOW = 1_750_000_000.0
DAY = 86_400.0


def mask(*metas):
    batch = coerce_candidates([{"id": f"c{i}", "text": "t", "metadata": m}
                               for i, m in enumerate(metas)], now=NOW)
    return superseded_mask(batch).tolist()


def test_older_version_of_a_key_is_superseded():
    assert mask({"key": "plan", "version": 1}, {"key": "plan", "version": 3},
                {"key": "plan", "version": 2}, {"key": "seat", "version": 1}) == \
        [True, False, True, False]


def test_without_versions_the_older_created_at_is_superseded():
    assert mask({"key": "plan", "created_at": NOW - 2 * DAY},
                {"key": "plan", "created_at": NOW - DAY}) == [True, False]


def test_a_key_where_only_some_candidates_have_a_version_is_ordered_by_date():
    # comparing version 5 with the other's created_at epoch would call the newer one older
    assert mask({"key": "plan", "version": 5, "created_at": NOW - DAY},
                {"key": "plan", "created_at": NOW - 2 * DAY}) == [False, True]


def test_a_partial_version_without_dates_supersedes_nothing():
    assert mask({"key": "plan"}, {"key": "plan", "version": 1}) == [False, False]


def test_each_key_chooses_its_own_order():
    assert mask({"key": "a", "version": 2, "created_at": NOW - 5 * DAY},
                {"key": "a", "version": 1, "created_at": NOW - DAY},
                {"key": "b", "version": 9, "created_at": NOW - 5 * DAY},
                {"key": "b", "created_at": NOW - DAY}) == [False, True, True, False]


def test_int_and_str_keys_with_the_same_digits_are_one_key():
    assert mask({"key": 7, "version": 1}, {"key": "7", "version": 2}) == [True, False]


def test_candidates_tied_for_newest_are_both_kept():
    assert mask({"key": "plan", "version": 2}, {"key": "plan", "version": 2},
                {"key": "plan", "version": 1}) == [False, False, True]
    assert mask({"key": "plan"}, {"key": "plan"}) == [False, False]


def test_a_lone_key_and_no_key_are_never_superseded():
    assert mask({"key": "plan", "version": 1}, {}, {"version": 9}) == [False, False, False]


def test_metadata_can_say_superseded():
    assert mask({"superseded": True}, {"superseded": False}) == [True, False]


def test_superseded_multiplier_shows_in_explain():
    cands = [{"id": "old", "text": "Flight on March 3", "score": 2.0,
              "metadata": {"key": "flight", "version": 1}},
             {"id": "new", "text": "Flight moved to March 5", "score": 1.8,
              "metadata": {"key": "flight", "version": 2}},
             {"id": "filler", "text": "Unrelated", "score": 0.0}]
    ranking = Reranker().rerank("When is my flight?", cands, k=3, now=NOW)
    assert ranking.ids == ["new", "old", "filler"]
    old = ranking[1]
    assert old.rules == (("superseded", 0.1),)
    assert old.explain().endswith("x rules superseded x0.1")
    assert "rules" not in ranking[0].explain()


def test_user_rule_multiplies_and_sees_the_candidate():
    seen: list[RuleView] = []

    def stale(view: RuleView) -> bool:
        seen.append(view)
        return view.kind == "tool_result" and view.age_days > 7

    rule = Rule("stale tool output", stale, 0.5)
    cands = [{"id": "a", "text": "result", "score": 1.0,
              "metadata": {"kind": "tool_result", "created_at": NOW - 10 * DAY, "extra": 1}},
             {"id": "b", "text": "result", "score": 1.0,
              "metadata": {"kind": "tool_result", "created_at": NOW - 1 * DAY}},
             {"id": "c", "text": "result", "score": 1.0}]
    batch = coerce_candidates(cands, now=NOW)
    mult, fired = apply_rules(batch, (rule,), 0.1, NOW)
    assert mult.tolist() == [0.5, 1.0, 1.0]
    assert fired == {0: [("stale tool output", 0.5)]}  # only where a rule fired
    assert seen[0].age_days == pytest.approx(10.0) and seen[0].metadata["extra"] == 1
    assert math.isnan(seen[2].age_days)
    ranked = Reranker(rules=[rule]).rerank("What did the tool say?", cands, k=3, now=NOW)
    a = next(r for r in ranked if r.id == "a")
    assert "x rules stale tool output x0.5" in a.explain()
    assert ranked.ids[-1] == "a"


def test_rules_compose_with_superseded():
    cands = [{"id": "a", "text": "x", "metadata": {"key": "k", "version": 1, "kind": "note"}},
             {"id": "b", "text": "y", "metadata": {"key": "k", "version": 2}}]
    batch = coerce_candidates(cands, now=NOW)
    mult, fired = apply_rules(batch, (Rule("notes", lambda v: v.kind == "note", 0.5),), 0.1, NOW)
    assert mult.tolist() == pytest.approx([0.05, 1.0])
    assert fired[0] == [("superseded", 0.1), ("notes", 0.5)]


def test_multiplier_zero_drops_the_candidate_and_why_not_says_so():
    rule = Rule("no drafts", lambda v: "draft" in v.tags, 0.0)
    cands = [{"id": "draft", "text": "Draft plan", "score": 9.0, "metadata": {"tags": ["draft"]}},
             {"id": "final", "text": "Final plan", "score": 1.0},
             {"id": "other", "text": "Other", "score": 0.5}]
    ranking = Reranker(rules=[rule]).rerank("What is the plan?", cands, k=3, now=NOW)
    assert ranking.ids == ["final", "other"]
    why = ranking.why_not("draft")
    assert why.factor == "rules" and why.rank is None
    assert "dropped" in str(why) and "no drafts x0" in str(why)


def test_superseded_multiplier_zero_drops_too():
    from heaprank import Config, Scoring

    cands = [{"id": "v1", "text": "x", "metadata": {"key": "k", "version": 1}},
             {"id": "v2", "text": "y", "metadata": {"key": "k", "version": 2}}]
    rr = Reranker(config=Config(scoring=Scoring(superseded_multiplier=0.0)))
    ranking = rr.rerank("What?", cands, now=NOW)
    assert ranking.ids == ["v2"]
    assert "superseded" in ranking.why_not("v1").message


@pytest.mark.parametrize("kwargs, match", [
    ({"name": "", "predicate": bool, "multiplier": 0.5}, "rule name"),
    ({"name": "r", "predicate": 3, "multiplier": 0.5}, "predicate must be callable"),
    ({"name": "r", "predicate": bool, "multiplier": 1.5}, r"multiplier must be in \[0, 1\]"),
    ({"name": "r", "predicate": bool, "multiplier": -0.1}, "multiplier"),
    ({"name": "r", "predicate": bool, "multiplier": math.nan}, "multiplier"),
    ({"name": "r", "predicate": bool, "multiplier": True}, "multiplier"),
])
def test_bad_rules_are_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        Rule(**kwargs)


def test_reranker_rejects_non_rules():
    with pytest.raises(TypeError, match="rules: expected Rule"):
        Reranker(rules=[lambda c: True])  # type: ignore[list-item]
