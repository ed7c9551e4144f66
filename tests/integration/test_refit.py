"""Continuous re-fitting (``Config.refit.every``) on every real backend: the weights are re-fitted
from the state's own impression log after every N feedbacks, with tune's held-out check, kept
in the state so that several rerankers sharing it agree, and shown in stats() and EXPLAIN."""

from __future__ import annotations

import json
import re

import pytest

from heaprank import Config, Refit, Reranker, SQLiteState, Weights
from heaprank.app.cli import main
from heaprank.learning.refit import FittedWeights
from tests.integration.redis_servers import unique_prefix
from tests.tuning_logs import NOW, record, synthetic_log

CANDS = [{"id": "a", "text": "We met in Lisbon on 2024-05-01", "kind": "fact", "score": 0.9},
         {"id": "b", "text": "I moved to Porto in May", "kind": "note", "score": 0.5}]
#: A log whose choices do not depend on usefulness at all: a re-fit must take it to ~0.
NO_USE = {"relevance": 1.0, "recency": 1.0, "importance": 1.0, "usefulness": 0.0}


def test_a_refit_drives_usefulness_toward_0_where_the_links_do_not_help(state):
    record(state, synthetic_log(600, **NO_USE))
    rr = Reranker(state, config=Config(refit=Refit(every=1000)))
    assert rr.stats()["weights_fitted"] is None
    fitted = rr.refit()
    assert fitted is not None and fitted.moved and fitted.version == 1
    assert fitted.weights.usefulness < 0.35 < Config().weights.usefulness
    assert rr.config.weights == fitted.weights
    stats = rr.stats()
    assert stats["weights"]["usefulness"] == fitted.weights.usefulness
    got = stats["weights_fitted"]
    assert got["version"] == 1 and got["moved"] and got["impressions"] == 600
    assert got["heldout"] == 120 and got["gain"] == pytest.approx(
        got["heldout_mrr"] - got["heldout_mrr_relevance"])


def test_a_refit_runs_by_itself_after_every_n_feedbacks_and_never_in_rerank(state):
    record(state, synthetic_log(200, **NO_USE))
    rr = Reranker(state, config=Config(refit=Refit(every=3)))
    for n in range(1, 7):
        ranking = rr.rerank("where did we meet?", CANDS, namespace="maya", k=2, now=NOW + n)
        assert (rr.stats()["weights_fitted"] or {"version": 0})["version"] == (n - 1) // 3
        rr.feedback(ranking.recall_id, used=["a"])
    assert rr.stats()["weights_fitted"]["version"] == 2


def test_too_little_data_stores_nothing_and_refit_every_0_keeps_the_config(state):
    record(state, synthetic_log(30, **NO_USE))
    assert Reranker(state).refit() is None
    record(state, synthetic_log(600, seed=3, **NO_USE))
    fixed = Reranker(state, config=Config(refit=Refit(every=0)))
    assert fixed.refit() is None and fixed.config.weights == Weights()
    assert fixed.stats()["weights_fitted"] is None


def _two(url_or_state_a, url_or_state_b):
    config = Config(refit=Refit(every=1000, poll_s=0.0))
    return Reranker(url_or_state_a, config=config), Reranker(url_or_state_b, config=config)


def _agree(writer: Reranker, reader: Reranker) -> None:
    record(writer.state, synthetic_log(600, **NO_USE))
    before = reader.rerank("where did we meet?", CANDS, namespace="maya", k=2, now=NOW)
    assert "^1.5" in before.explain()  # the default usefulness exponent
    fitted = writer.refit()
    assert fitted is not None and fitted.moved
    after = reader.rerank("where did we meet?", CANDS, namespace="maya", k=2, now=NOW)
    assert reader.config.weights == fitted.weights
    assert reader.stats()["weights_fitted"]["version"] == 1
    # EXPLAIN shows the weights the ranking used: the fitted ones
    shown = after.explain()
    assert f"rel 1.00^{fitted.weights.relevance:.3g}" in shown
    assert re.search(rf"useful \d\.\d\d\^{re.escape(f'{fitted.weights.usefulness:.3g}')} ", shown)
    assert after[0].score != before[0].score


def test_two_rerankers_on_one_sqlite_file_agree_on_the_weights(tmp_path):
    writer, reader = _two(SQLiteState(tmp_path / "s.db"), SQLiteState(tmp_path / "s.db"))
    with writer, reader:
        _agree(writer, reader)


def test_two_rerankers_on_one_redis_prefix_agree_on_the_weights(redis_url):
    from heaprank.state.redis import RedisState

    prefix = unique_prefix()
    a, b = RedisState(redis_url, prefix=prefix), RedisState(redis_url, prefix=prefix)
    writer, reader = _two(a, b)
    try:
        _agree(writer, reader)
    finally:
        a.clear()
        writer.close()
        reader.close()


def test_of_two_fits_from_one_version_the_second_adopts_the_first(state):
    record(state, synthetic_log(600, **NO_USE))
    slow = Config(refit=Refit(every=1000, poll_s=3600.0))
    first, second = Reranker(state, config=slow), Reranker(state, config=slow)
    mine = first.refit()
    assert mine is not None and mine.version == 1
    # second still holds version 0: its write from it loses, and it takes the stored record
    lost = FittedWeights(version=0, weights=Weights(usefulness=9.0), fitted_at=0.0, moved=True,
                         reason="test")
    assert second._refit.store_record(lost).weights == mine.weights
    assert second._refit.version == 1


def test_heaprank_stats_prints_the_weights_and_their_fit(tmp_path, capsys):
    path = tmp_path / "s.db"
    with Reranker(SQLiteState(path)) as rr:
        record(rr.state, synthetic_log(600, **NO_USE))
        fitted = rr.refit()
    assert main(["stats", "--state", f"sqlite:///{path}"]) == 0
    out = capsys.readouterr().out
    assert f"usefulness {fitted.weights.usefulness:.3g}" in out
    assert "weights fitted" in out and "version 1, 600 impressions, moved" in out
    assert "vs relevance alone" in out
    assert main(["stats", "--state", f"sqlite:///{path}", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["weights_fitted"]["version"] == 1


def test_afeedback_refits_off_the_event_loop(state):
    import asyncio

    record(state, synthetic_log(200, **NO_USE))
    rr = Reranker(state, config=Config(refit=Refit(every=1)))
    ranking = rr.rerank("where did we meet?", CANDS, namespace="maya", k=2, now=NOW)

    async def give() -> None:
        try:
            await rr.afeedback(ranking.recall_id, used=["a"])
        finally:
            if hasattr(state, "aclose_loop"):  # the async client of this loop (Redis)
                await state.aclose_loop()

    asyncio.run(give())
    assert rr.stats()["weights_fitted"]["version"] == 1


def test_refit_qtypes_fits_each_question_type_where_it_pays(state):
    from dataclasses import replace

    when = synthetic_log(500, **NO_USE, seed=5)
    what = [replace(imp, qtype="what") for imp in synthetic_log(
        500, relevance=1.0, recency=1.0, importance=1.0, usefulness=3.0, seed=6,
        namespace="other")]
    record(state, when + what)
    rr = Reranker(state, config=Config(refit=Refit(every=1000, qtypes=True)))
    fitted = rr.refit()
    assert fitted is not None and set(fitted.qtype_weights) == {"what", "when"}
    assert fitted.qtype_weights["when"].usefulness + 1.0 < fitted.qtype_weights["what"].usefulness
    assert rr.config.qtype_weights == fitted.qtype_weights
    ranking = rr.rerank("when did we meet?", CANDS, namespace="maya", k=2, now=NOW)
    assert f"^{fitted.qtype_weights['when'].usefulness:.3g}" in ranking.explain()
    assert Reranker(state).config.qtype_weights == {}  # off by default: not adopted


def test_refit_signals_moves_only_the_weights_it_names(state):
    record(state, synthetic_log(600, **NO_USE))
    only = Config(refit=Refit(every=1000, signals=("relevance", "usefulness")))
    fitted = Reranker(state, config=only).refit()
    assert fitted is not None and fitted.moved
    assert fitted.weights.recency == 1.0 and fitted.weights.importance == 1.0
    assert fitted.weights.usefulness < 0.35


@pytest.mark.parametrize(("field", "value", "message"), [
    ("every", -1, r"refit\.every: expected an int >= 0"),
    ("every", 2.5, r"refit\.every: expected an int >= 0"),
    ("window", 0, r"refit\.window: expected an int >= 1"),
    ("shrinkage", -1.0, r"refit\.shrinkage: must be finite and >= 0"),
    ("poll_s", float("nan"), r"refit\.poll_s: must be finite and >= 0"),
    ("signals", ("relevance", "bogus"), r"refit\.signals: expected None or signal names"),
    ("signals", "relevance", r"refit\.signals: expected None or signal names"),
    ("qtypes", 1, r"refit\.qtypes: expected a bool"),
])
def test_refit_settings_are_checked_naming_the_field(field, value, message):
    from heaprank import ConfigError

    with pytest.raises(ConfigError, match=message):
        Refit(**{field: value})
    assert Config.from_dict({"refit": {"signals": ["usefulness"]}}).refit.signals == ("usefulness",)


def test_state_copy_carries_the_fitted_weights(tmp_path, redis_url):
    from heaprank.state.copy import copy_state
    from heaprank.state.redis import RedisState

    source = Reranker(config=Config(refit=Refit(every=1000)))
    record(source.state, synthetic_log(300, **NO_USE))
    fitted = source.refit()
    assert fitted is not None
    redis_target = RedisState(redis_url, prefix=unique_prefix())
    try:
        for target in (SQLiteState(tmp_path / "copy.db"), redis_target):
            copy_state(source.state, target)
            copied = Reranker(target).stats()["weights_fitted"]
            assert copied == fitted.to_dict()
            assert Reranker(target).config.weights == fitted.weights
    finally:
        redis_target.clear()
        redis_target.close()
