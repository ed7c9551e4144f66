"""Beta links: the pooled posterior, noisy-OR, intervals and EM credit, against hand-computed
values (docs/design.md, "Learning")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from heaprank import Prior
from heaprank.model.evidence import LinkCounts
from heaprank.model.links import (
    Judged,
    global_posterior,
    increments,
    interval,
    noisy_or,
    posterior,
    posterior_mean,
)


@pytest.fixture()
def prior() -> Prior:
    return Prior(mean=0.05, strength=2.0, kappa=10.0)


def counts(pos, neg, gpos, gneg) -> LinkCounts:
    return LinkCounts(*(np.array(x, dtype=np.float64) for x in (pos, neg, gpos, gneg)))


def test_prior_parameters(prior):
    assert prior.a0 == pytest.approx(0.1) and prior.b0 == pytest.approx(1.9)


def test_no_evidence_anywhere_is_the_plain_prior(prior):
    alpha, beta = posterior(counts([0], [0], [0], [0]), prior)
    assert alpha[0] == pytest.approx(0.1) and beta[0] == pytest.approx(1.9)
    assert posterior_mean(alpha, beta)[0] == pytest.approx(0.05)


def test_pool_is_borrowed_at_most_kappa_strong(prior):
    # Others taught 30 pos / 70 neg; kappa = 10 borrows a tenth of it: 3 / 7.
    alpha, beta = posterior(counts([0], [0], [30], [70]), prior)
    assert alpha[0] == pytest.approx(0.1 + 3) and beta[0] == pytest.approx(1.9 + 7)
    # Little pooled evidence is borrowed whole (c = min(1, kappa / n)).
    alpha, beta = posterior(counts([0], [0], [2], [3]), prior)
    assert alpha[0] == pytest.approx(2.1) and beta[0] == pytest.approx(4.9)


def test_own_evidence_is_left_out_of_the_pool(prior):
    # Global = own (4 / 6) + others (30 / 70): only the others' part is borrowed.
    alpha, beta = posterior(counts([4], [6], [34], [76]), prior)
    assert alpha[0] == pytest.approx(0.1 + 3 + 4) and beta[0] == pytest.approx(1.9 + 7 + 6)


def test_unpooled_posterior_ignores_the_global_layer(prior):
    alpha, beta = posterior(counts([4], [6], [34], [76]), prior, pooled=False)
    assert alpha[0] == pytest.approx(4.1) and beta[0] == pytest.approx(7.9)


def test_a_namespace_with_much_evidence_follows_its_own(prior):
    # Own: 900 / 100. Others: 10 / 990, of which kappa = 10 observations are borrowed.
    alpha, beta = posterior(counts([900], [100], [900 + 10], [100 + 990]), prior)
    assert posterior_mean(alpha, beta)[0] == pytest.approx((0.1 + 0.1 + 900) / (2 + 10 + 1000))
    assert posterior_mean(alpha, beta)[0] > 0.88


def test_global_posterior(prior):
    alpha, beta = global_posterior(np.array([3.0]), np.array([7.0]), prior)
    assert (alpha[0], beta[0]) == pytest.approx((3.1, 8.9))


def test_noisy_or_values():
    assert noisy_or(np.array([0.5, 0.5])) == pytest.approx(0.75)
    assert noisy_or(np.array([0.0, 0.0])) == 0.0
    assert noisy_or(np.array([1.0, 0.2])) == 1.0
    rows = noisy_or(np.array([[0.1, 0.2], [0.3, 0.0]]))
    assert rows.tolist() == pytest.approx([1 - 0.9 * 0.8, 0.3])
    tiny = noisy_or(np.full(15, 1e-12))
    assert tiny == pytest.approx(15e-12, rel=1e-9)  # accurate where 1 - prod(...) is not


def test_interval_brackets_the_mean():
    alpha, beta = np.array([2.0, 30.0]), np.array([8.0, 70.0])
    low, high = interval(alpha, beta, 0.9)
    mean = posterior_mean(alpha, beta)
    assert np.all((0 < low) & (low < mean) & (mean < high) & (high < 1))
    assert (high - low)[1] < (high - low)[0]  # more evidence, narrower
    low95, high95 = interval(alpha, beta, 0.95)
    assert np.all(low95 < low) and np.all(high95 > high)


def _means(table: dict[str, tuple[float, float]], prior, features):
    """The posterior means of ``features`` with own counts ``table`` (and the pool holding just
    them, so nothing is borrowed)."""
    rows = np.array([table.get(f, (0.0, 0.0)) for f in features], dtype=np.float64).reshape(-1, 2)
    counts = LinkCounts(rows[:, 0], rows[:, 1], rows[:, 0].copy(), rows[:, 1].copy())
    return dict(zip(features, posterior_mean(*posterior(counts, prior)).tolist()))


def item(used, features, weight=1.0):
    return Judged(features, used, weight)


def test_reject_adds_its_weight_to_every_feature(prior):
    feats, dpos, dneg = increments([item(False, ("x", "y")), item(False, ("y", "z"), 0.5)], {})
    assert feats == ("x", "y", "z")
    assert dpos.tolist() == [0, 0, 0] and dneg.tolist() == [1.0, 1.5, 0.5]


def test_confirm_credits_each_feature_by_em(prior):
    # Links "x" strong (p = 0.5 with no pool: a0 + 9.9 / (2 + 19.8)), "y" at the prior.
    means = _means({"x": (9.9, 7.9)}, prior, ("x", "y"))
    feats, dpos, dneg = increments([item(True, ("x", "y"))], means)
    px = (0.1 + 9.9) / (2 + 9.9 + 7.9)
    py = 0.05
    u = 1 - (1 - px) * (1 - py)
    assert feats == ("x", "y")
    assert dpos.tolist() == pytest.approx([px / u, py / u])
    assert (dpos + dneg).tolist() == pytest.approx([1.0, 1.0])


def test_credit_is_capped_at_one(prior):
    _, dpos, dneg = increments([item(True, ("only",))], _means({}, prior, ("only",)))
    assert dpos.tolist() == [1.0] and dneg.tolist() == [0.0]


def test_uniform_credit_without_em(prior):
    means = _means({"x": (50.0, 1.0)}, prior, ("x", "y", "z", "w"))
    _, dpos, dneg = increments([item(True, ("x", "y", "z", "w"))], means, em=False)
    assert dpos.tolist() == [0.25] * 4 and dneg.tolist() == [0.75] * 4


def test_credit_does_not_depend_on_item_order(prior):
    items = [item(True, ("x", "y")), item(False, ("y", "z")), item(True, ("z", "x"))]
    means = _means({"x": (3.0, 5.0), "z": (0.5, 9.0)}, prior, ("x", "y", "z"))
    a = increments(items, means)
    b = increments(items[::-1], means)
    assert a.features == b.features
    np.testing.assert_allclose(a.dpos, b.dpos, rtol=1e-15)
    np.testing.assert_allclose(a.dneg, b.dneg, rtol=1e-15)


def test_every_item_adds_exactly_one_unit_per_feature(prior):
    items = [item(True, ("x", "y", "z")), item(False, ("x", "q")), item(True, ("x", "q"))]
    feats, dpos, dneg = increments(items, _means({"q": (7.0, 2.0)}, prior, ("q", "x", "y", "z")))
    total = dict(zip(feats, (dpos + dneg).tolist(), strict=False))
    assert total == pytest.approx({"q": 2.0, "x": 3.0, "y": 1.0, "z": 1.0})
    assert all(math.isfinite(v) for v in total.values())


def test_an_item_without_features_teaches_nothing(prior):
    assert increments([item(False, (), 0.0), item(True, ())], {}).features == ()
