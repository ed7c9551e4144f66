"""Properties of the Beta-link math: posteriors stay in (0, 1), noisy-OR is monotone, and the
posterior mean moves toward the rate a feedback observed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from heaprank import Prior, Reranker
from heaprank.model.evidence import LinkCounts
from heaprank.model.links import (
    Judged,
    increments,
    means_of,
    noisy_or,
    posterior,
    posterior_mean,
)
from tests.strategies import NOW, POOL, feedback_step

# Realistic ranges: up to a million observations per link, priors that are not degenerate at
# double precision (a0 and b0 at least 1e-5, so 1e6 / (1e6 + b0) is still below 1).
counts = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)
priors = st.builds(
    Prior,
    mean=st.floats(min_value=1e-4, max_value=1 - 1e-4),
    strength=st.floats(min_value=0.1, max_value=1000.0),
    kappa=st.floats(min_value=0.0, max_value=1e4),
)


def _counts(rows: list[tuple[float, float, float, float]]) -> LinkCounts:
    arr = np.array(rows, dtype=np.float64).reshape(-1, 4)
    return LinkCounts(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3])


@given(st.lists(st.tuples(counts, counts, counts, counts), min_size=1, max_size=20), priors,
       st.booleans())
def test_posterior_mean_is_strictly_inside_unit_interval(rows, prior, pooled):
    alpha, beta = posterior(_counts(rows), prior, pooled=pooled)
    p = posterior_mean(alpha, beta)
    assert np.all(alpha > 0) and np.all(beta > 0)
    assert np.all((p > 0) & (p < 1)), p


any_counts = st.one_of(counts, st.sampled_from([0.0, 5e-324, 1e-300, 1.0, 1e300]))


@given(st.lists(st.tuples(any_counts, any_counts, any_counts, any_counts), min_size=1,
                max_size=20), priors)
def test_means_of_is_the_pooled_posterior_mean_to_the_last_bit(rows, prior):
    """The plain-Python means a feedback's credit reads are numpy's posterior means, float for
    float (a namespace's own counts above the pool's included)."""
    counts = _counts(rows)
    assert means_of(counts, prior) == posterior_mean(*posterior(counts, prior)).tolist()


@given(st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=30),
       st.data())
def test_noisy_or_is_monotone_in_every_link(ps, data):
    p = np.array(ps)
    i = data.draw(st.integers(min_value=0, max_value=len(ps) - 1), label="index")
    raised = data.draw(st.floats(min_value=p[i], max_value=1.0), label="raised")
    q = p.copy()
    q[i] = raised
    assert noisy_or(q) >= noisy_or(p)
    assert 0.0 <= noisy_or(p) <= 1.0


@given(st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=30))
def test_noisy_or_is_at_least_the_strongest_link(ps):
    p = np.array(ps)
    assert noisy_or(p) >= p.max() - 1e-12


@given(counts, counts, counts, counts, priors,
       st.floats(min_value=0.0, max_value=50.0), st.floats(min_value=0.0, max_value=50.0))
def test_beta_mean_moves_toward_observed_rate(pos, neg, gextra_pos, gextra_neg, prior, dp, dn):
    """New evidence with rate ``dp / (dp + dn)`` puts the new mean between the old mean and it
    (the pooled share is unchanged: the evidence goes to the namespace and the pool alike)."""
    assume(dp + dn > 1e-6)
    before = _counts([(pos, neg, pos + gextra_pos, neg + gextra_neg)])
    after = _counts([(pos + dp, neg + dn, pos + gextra_pos + dp, neg + gextra_neg + dn)])
    old = float(posterior_mean(*posterior(before, prior))[0])
    new = float(posterior_mean(*posterior(after, prior))[0])
    rate = dp / (dp + dn)
    tol = 1e-9
    assert min(old, rate) - tol <= new <= max(old, rate) + tol
    assert abs(new - rate) <= abs(old - rate) + tol


@given(st.lists(feedback_step(), min_size=1, max_size=6))
def test_feedback_moves_each_link_toward_its_credit_rate(steps):
    """Through the Reranker: after each feedback every touched link's namespace mean lies
    between its old mean and the rate of the evidence that feedback added to it."""
    rr = Reranker()
    prior = rr.config.learning.prior
    for namespace, query, k, used in steps:
        ranking = rr.rerank(query, POOL, namespace=namespace, k=k, now=NOW)
        features = sorted({f for row in ranking.items for f in _features(rr, ranking, row.id)})
        before = rr.state.read_links(namespace, features)
        old = posterior_mean(*posterior(before, prior))
        rr.feedback(ranking.recall_id, used=[ranking.ids[r] for r in used])
        after = rr.state.read_links(namespace, features)
        new = posterior_mean(*posterior(after, prior))
        dpos, dneg = after.pos - before.pos, after.neg - before.neg
        assert np.all(dpos >= -1e-12) and np.all(dneg >= -1e-12)
        rate = dpos / (dpos + dneg)
        tol = 1e-9
        assert np.all(new >= np.minimum(old, rate) - tol)
        assert np.all(new <= np.maximum(old, rate) + tol)
        if not used:  # a pure rejection can only lower every link
            assert np.all(new <= old + 1e-12)


def _features(rr: Reranker, ranking, doc_id: str) -> tuple[str, ...]:
    imp = rr.state.get_impression(ranking.recall_id)
    return imp.features[imp.ids.index(doc_id)]


FEATURES = [f"f{i}" for i in range(12)]
feedback_items = st.lists(
    st.tuples(st.booleans(), st.lists(st.sampled_from(FEATURES), min_size=1, max_size=6,
                                      unique=True),
              st.sampled_from([1.0, 0.5, 1 / 3, 0.6309297535714575])),
    min_size=1, max_size=10)


@given(feedback_items, st.dictionaries(st.sampled_from(FEATURES), st.floats(0.0, 1.0)),
       st.booleans())
def test_increments_are_finite_and_add_one_unit_per_used_feature(rows, table, em):
    """Whatever the means: a used item adds exactly 1 to ``pos + neg`` of each of its
    features, an ignored one its weight; every share lies in [0, 1]."""
    items = [Judged(tuple(feats), used, weight) for used, feats, weight in rows]
    means = {f: table.get(f, 0.01) for f in FEATURES}
    inc = increments(items, means, em=em)
    want: dict[str, float] = {}
    for used, feats, weight in rows:
        for f in feats:
            want[f] = want.get(f, 0.0) + (1.0 if used else weight)
    got = dict(zip(inc.features, (inc.dpos + inc.dneg).tolist()))
    assert got == pytest.approx(want, rel=1e-12)
    assert np.all(np.isfinite(inc.dpos)) and np.all(inc.dpos >= 0.0)
    assert np.all(np.isfinite(inc.dneg)) and np.all(inc.dneg >= -1e-12)
    assert sorted(inc.features) == sorted(want) and len(set(inc.features)) == len(inc.features)
