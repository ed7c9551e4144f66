"""Properties of the pooled prior's k-anonymity (:func:`heaprank.model.privacy.mask_pooled`): a
caller's value that fewer than k namespaces hold reads no other namespace's evidence (its
posterior is the same whatever the others taught, never above what its own counts give), a
codebook feature keeps its pooled counts, and k = 1 changes nothing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from heaprank import Config, ConfigError, Learning, Prior
from heaprank.model.evidence import LinkCounts
from heaprank.model.links import posterior, posterior_mean
from heaprank.model.privacy import CODEBOOK, caller_valued, mask_pooled, withheld

counts = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)
priors = st.builds(Prior, mean=st.floats(min_value=1e-4, max_value=1 - 1e-4),
                   strength=st.floats(min_value=0.1, max_value=1000.0),
                   kappa=st.floats(min_value=0.0, max_value=1e4))
values = st.text(alphabet="abcxyz-_.0", min_size=1, max_size=8)
caller_names = st.one_of(
    st.builds("kind:{}".format, values), st.builds("source:{}".format, values),
    st.builds("tag:{}=yes".format, values), st.builds("qt:when&kind:{}".format, values))
codebook_names = st.sampled_from(sorted(CODEBOOK))
names = st.one_of(caller_names, codebook_names)
#: A feature's row: its name, own (pos, neg), the others' (pos, neg) and how many namespaces
#: hold it (0 to 9).
rows = st.tuples(names, counts, counts, counts, counts, st.integers(min_value=0, max_value=9))
ks = st.integers(min_value=1, max_value=10)


def _read(table: list[tuple]) -> tuple[list[str], LinkCounts]:
    """The features and counts a state would read: the pooled counts include the own."""
    features = [r[0] for r in table]
    arr = np.array([r[1:] for r in table], dtype=np.float64).reshape(-1, 5)
    return features, LinkCounts(arr[:, 0], arr[:, 1], arr[:, 0] + arr[:, 2], arr[:, 1] + arr[:, 3],
                                arr[:, 4])


@given(st.lists(rows, max_size=20), priors)
def test_a_threshold_of_one_is_the_identity(table, prior):
    features, read = _read(table)
    assert mask_pooled(features, read, 1) is read


@given(st.lists(rows, min_size=1, max_size=20), ks)
def test_codebook_features_and_values_held_widely_keep_their_pooled_counts(table, k):
    features, read = _read(table)
    masked = mask_pooled(features, read, k)
    kept = ~caller_valued(features) | (read.holders >= k)
    assert masked.gpos[kept].tolist() == read.gpos[kept].tolist()
    assert masked.gneg[kept].tolist() == read.gneg[kept].tolist()
    assert masked.pos.tolist() == read.pos.tolist() and masked.neg.tolist() == read.neg.tolist()


@given(st.lists(rows, min_size=1, max_size=20), st.lists(st.tuples(counts, counts), min_size=20,
                                                          max_size=20), priors, ks)
def test_a_rare_caller_value_reads_nothing_of_the_others(table, others, prior, k):
    """Whatever the other namespaces taught a withheld feature (any pooled counts), its
    posterior is the one its own counts give with nothing pooled: never raised, never lowered."""
    features, read = _read(table)
    hidden = withheld(features, read.holders, k)
    _, other_read = _read([(f, p, n, *q, h) for (f, p, n, _, _, h), q in zip(table, others)])
    alone = posterior_mean(*posterior(read, prior, pooled=False))
    for counts_read in (read, other_read):
        p = posterior_mean(*posterior(mask_pooled(features, counts_read, k), prior))
        assert p[hidden].tolist() == alone[hidden].tolist()


@given(st.lists(caller_names, min_size=1, max_size=10), ks)
def test_a_caller_value_is_withheld_exactly_below_the_threshold(features, k):
    holders = np.arange(len(features), dtype=np.float64) % 7
    assert withheld(features, holders, k).tolist() == [k > 1 and h < k for h in holders.tolist()]
    assert not withheld(sorted(CODEBOOK)[:len(features)], holders, k).any()


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "5", None])
def test_the_threshold_must_be_an_int_of_at_least_one(bad):
    with pytest.raises(ConfigError, match=r"learning\.pooled_min_namespaces: expected an int >= 1"):
        Config(learning=Learning(pooled_min_namespaces=bad))


def test_the_threshold_defaults_to_five_and_round_trips():
    assert Config().learning.pooled_min_namespaces == 5
    one = Config.from_dict({"learning": {"pooled_min_namespaces": 1}})
    assert one.learning.pooled_min_namespaces == 1
    assert Config.from_dict(Config(learning=Learning(pooled_min_namespaces=8)).to_dict()) \
        == Config(learning=Learning(pooled_min_namespaces=8))
