"""The pooled prior's k-anonymity: what one tenant may borrow of the others' evidence.

A feature named from the codebook (:data:`CODEBOOK`: ``kind:fact``, ``len:<=10``,
``qt:when&source:user``...) holds no caller data, and every namespace borrows its pooled
counts. Any other feature holds a value some caller chose: a ``kind`` or ``source`` outside the
codebook (``kind:zorblax``, ``source:acme-crm``), a tag, their crossings with the question
type. Its pooled counts are borrowed only once at least ``k`` distinct namespaces hold a link
of it (``Config.learning.pooled_min_namespaces``, 5 by default); until then a namespace reads its own
counts in their place, so the others' evidence neither raises nor lowers its scores, its
EXPLAIN or the credit its feedback gives, and a rare value one tenant used cannot be probed
by another. ``doc:`` features are never pooled at all. :func:`mask_pooled` is the one place
this rule is written: the rerank's links, the feedback's credit and the namespace's
``links()`` all read the counts it returns.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ConfigError
from .evidence import LinkCounts
from .features import FIXED_SLOTS
from .questions import QUESTION_TYPES

#: The feature names that hold no caller data: the slot codebook and its crossings with every
#: question type. Their pooled counts are shared however few namespaces hold them.
CODEBOOK = frozenset(FIXED_SLOTS + tuple(f"qt:{q}&{slot}" for q in QUESTION_TYPES
                                         for slot in FIXED_SLOTS))
#: ``Config.learning.pooled_min_namespaces`` by default.
DEFAULT_MIN_NAMESPACES = 5


def check_min_namespaces(name: str, value: object) -> int:
    """``value`` as a k-anonymity threshold (an int >= 1), else the ConfigError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name}: expected an int >= 1, got {value!r}")
    return value


def caller_valued(features: Sequence[str]) -> np.ndarray:
    """Whether each feature holds a caller's value (it is not in :data:`CODEBOOK`)."""
    return ~np.fromiter(map(CODEBOOK.__contains__, features), dtype=bool, count=len(features))


def withheld(features: Sequence[str], holders: np.ndarray | None, k: int) -> np.ndarray:
    """Whether each feature's pooled counts are withheld from a namespace: it holds a caller's
    value and fewer than ``k`` namespaces hold a link of it (``holders``; None: not known, as
    0), none withheld when ``k <= 1``."""
    if k <= 1 or CODEBOOK.issuperset(features):  # (the usual rows: codebook names only)
        return np.zeros(len(features), dtype=bool)
    caller = caller_valued(features)
    return caller if holders is None else caller & (np.asarray(holders) < k)


def mask_pooled(features: Sequence[str], counts: LinkCounts, k: int) -> LinkCounts:
    """``counts`` of ``features`` as a namespace may read them: the pooled counts of every
    :func:`withheld` feature replaced by the namespace's own (so it borrows nothing of the
    others'), every other count as it is. ``k = 1``: ``counts`` itself."""
    hidden = withheld(features, counts.holders, k)
    if not hidden.any():
        return counts
    return LinkCounts(counts.pos, counts.neg, np.where(hidden, counts.pos, counts.gpos),
                      np.where(hidden, counts.neg, counts.gneg), counts.holders)
