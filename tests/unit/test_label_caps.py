"""Label values become stored feature names (``source:<value>``): their length is capped, on the
kernel's path and the checked one, for reranks and explicit feedback alike."""

from __future__ import annotations

import pytest

from heaprank import Candidate, Reranker
from heaprank._checks import MAX_LABEL_CHARS
from heaprank.errors import InputError
from heaprank.scoring.candidates import coerce_checked

NOW = 1_700_000_000.0
LONG = "x" * (MAX_LABEL_CHARS + 1)


@pytest.mark.parametrize(("metadata", "field"), [
    ({"source": LONG}, "metadata.source"),
    ({"kind": LONG}, "metadata.kind"),
    ({"tags": ["fine", LONG]}, "metadata.tags[1]"),
    ({"tags": LONG}, "metadata.tags[0]"),
])
def test_a_label_over_the_cap_is_an_input_error_naming_field_and_cap(metadata, field):
    rr = Reranker()
    for candidate in ({"id": "a", "text": "hello", "metadata": metadata},
                      Candidate("a", "hello", metadata=metadata)):
        with pytest.raises(InputError) as caught:
            rr.rerank("where?", [candidate], now=NOW)
        message = str(caught.value)
        assert field in message and f"at most {MAX_LABEL_CHARS}" in message
        assert LONG not in message  # the value itself is never echoed


def test_a_label_at_the_cap_is_accepted():
    rr = Reranker()
    edge = "y" * MAX_LABEL_CHARS
    ranking = rr.rerank("where?", [{"id": "a", "text": "hello",
                                    "metadata": {"source": edge, "kind": edge, "tags": [edge]}}],
                        now=NOW)
    assert ranking[0].id == "a"


def test_explicit_feedback_checks_the_cap_before_writing(tmp_path):
    rr = Reranker(f"sqlite:///{tmp_path / 'state.db'}")
    with pytest.raises(InputError, match="metadata.source"):
        rr.feedback(namespace="n", query="where?", used=["a"], now=NOW,
                    shown=[{"id": "a", "text": "hello", "metadata": {"source": LONG}}])
    assert rr.stats()["impressions"] == 0


def test_lenient_handling_drops_a_long_label_and_flags_it():
    batch = coerce_checked([{"id": "a", "text": "hello", "metadata": {"source": LONG}}],
                           now=NOW, on_invalid="neutral")
    assert batch.sources == (None,)
    assert "at most" in batch.flags[0][0]
