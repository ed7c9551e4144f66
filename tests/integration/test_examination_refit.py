"""``Config.learning.reject_discount="fitted"`` on every real backend: each re-fit also fits the readers'
examination curve on the impression log (a position-based click model), stores it with the
fitted weights so every reranker sharing the state weighs ignored items by it, and shows it in
stats(); before the log holds ``refit.reject_impressions`` impressions, the fixed log curve."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from heaprank import Config, Learning, Refit, Reranker
from heaprank.records import Impression, new_recall_id
from heaprank.state import codec
from tests.tuning_logs import COLUMNS, NOW, record

K = 8
#: The readers' examination curve the log is drawn from.
TRUE = 1.0 / np.arange(1, K + 1)
#: Max absolute error of the fitted curve from 800 impressions (measured 0.042 on seed 0).
TOLERANCE = 0.08
FITTED = Config(learning=Learning(reject_discount="fitted"),
                refit=Refit(every=1000, poll_s=0.0, reject_impressions=500))


def positional_log(n: int, seed: int = 0) -> list[Impression]:
    """``n`` impressions of ``K`` items of six shapes (``kind:k0`` useful with p 0.9 ...
    ``kind:k5`` with p 0.05, the usefulness the ranking logged), the more useful shapes shown
    higher; an item is used when its rank is examined (:data:`TRUE`) and it is useful."""
    rng = np.random.default_rng(seed)
    useful = np.array([0.9, 0.6, 0.4, 0.2, 0.1, 0.05])
    out = []
    for i in range(n):
        shapes = np.sort(rng.integers(len(useful), size=K) + rng.integers(-1, 2, size=K))
        shapes = np.clip(shapes, 0, len(useful) - 1)
        used = (rng.random(K) < TRUE) & (rng.random(K) < useful[shapes])
        relevance = rng.uniform(0.1, 1.0, K)
        out.append(Impression(
            recall_id=new_recall_id(), namespace="ns", qtype="when", time=NOW + 60.0 * i,
            time_explicit=True, ids=tuple(f"d{i}-{j}" for j in range(K)),
            slots=tuple((f"kind:k{s}",) for s in shapes.tolist()),
            signal_names=COLUMNS, signals=tuple((float(r), 1.0, 1.0, float(useful[s]), 1.0)
                                                for r, s in zip(relevance, shapes)),
            verdicts=tuple(codec.USED if u else codec.IGNORED for u in used.tolist())))
    return out


def test_a_fitted_curve_recovers_the_readers_and_every_reranker_uses_it(state):
    record(state, positional_log(800))
    rr = Reranker(state, config=FITTED)
    assert rr.stats()["reject_weights"]["curve"] == "log"
    fitted = rr.refit()
    assert fitted is not None and fitted.examination_impressions == 800
    curve = np.array(fitted.examination)
    assert len(curve) == K and curve[0] == 1.0
    assert np.abs(curve - TRUE).max() < TOLERANCE
    shown = rr.stats()["reject_weights"]
    assert shown["curve"] == "fitted" and shown["impressions"] == 800 and shown["needs"] == 500
    assert shown["weights"][:K] == pytest.approx(curve.tolist(), abs=1e-4)
    other = Reranker(state, config=FITTED)  # the curve lives in the state, beside the weights
    assert other.stats()["reject_weights"] == shown


def test_an_ignored_item_takes_its_ranks_fitted_weight(state):
    record(state, positional_log(800))
    rr = Reranker(state, config=FITTED)
    curve = rr.refit().examination
    cands = [{"id": f"c{j}", "text": f"memory number {j} of {'x ' * j}", "kind": f"k{j}",
              "score": 1.0 - 0.1 * j} for j in range(3)]
    ranking = rr.rerank("when did we meet?", cands, namespace="fresh", k=3, now=NOW)
    rr.feedback(ranking.recall_id, used=[])
    imp = rr.state.get_impression(ranking.recall_id)
    counts = rr.state.read_links("fresh", [imp.features[r][0] for r in range(3)])
    assert counts.neg.tolist() == pytest.approx(list(curve[:3]), abs=1e-4)


def test_below_the_impressions_it_needs_the_log_curve_stays(state):
    record(state, positional_log(300))
    rr = Reranker(state, config=FITTED)
    fitted = rr.refit()
    assert fitted is not None and fitted.examination is None
    shown = rr.stats()["reject_weights"]
    assert shown["curve"] == "log" and shown["impressions"] == 300
    assert shown["weights"] == pytest.approx([1 / math.log2(1 + r) for r in range(1, 11)],
                                             abs=1e-4)


def test_the_log_discount_fits_no_curve(state):
    record(state, positional_log(600))
    rr = Reranker(state, config=Config(refit=Refit(every=1000)))
    fitted = rr.refit()
    assert fitted is not None and fitted.examination is None
    assert rr.stats()["reject_weights"]["curve"] == "log"


@pytest.mark.parametrize("make, message", [
    (lambda: Learning(reject_discount="probit"),
     r"learning\.reject_discount: expected 'none' or 'log' or 'fitted'"),
    (lambda: Refit(reject_impressions=0), r"refit\.reject_impressions: expected an int >= 1"),
    (lambda: Refit(reject_impressions=True), r"refit\.reject_impressions: expected an int >= 1"),
    (lambda: Refit(reject_impressions=5.0), r"refit\.reject_impressions: expected an int >= 1"),
])
def test_the_fitted_discounts_settings_are_checked_naming_the_field(make, message):
    from heaprank import ConfigError

    with pytest.raises(ConfigError, match=message):
        make()
    assert Config.from_dict(FITTED.to_dict()) == FITTED


def test_the_curve_survives_the_records_json_and_an_older_record_reads_without_one():
    from heaprank import Weights
    from heaprank.learning.refit import FittedWeights

    record = FittedWeights(version=3, weights=Weights(), fitted_at=NOW, moved=False,
                           reason="kept", labels={}, qtype_weights={}, held={}, types={},
                           examination=(1.0, 0.5, 0.25), examination_impressions=900)
    assert FittedWeights.from_json(record.to_json()) == record
    older = record.to_dict()
    del older["examination"], older["examination_impressions"]
    read = FittedWeights.from_json(json.dumps(older))
    assert read is not None and read.examination is None and read.examination_impressions == 0
