"""Features: shape, relation and neighbour slots, question types. Never the words themselves."""

from __future__ import annotations

import math
import sys
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from heaprank.model.features import (
    NO_STRUCTURE,
    STRUCTURE_CODE,
    length_bucket,
    neighbour_slots,
    relation_slots,
    retrieval_features,
    shape_of,
)
from heaprank.model.questions import QUESTION_TYPES, analyze_query, english_question_type
from heaprank.model.text import names, tokens
from heaprank.scoring.space import FeatureSpace
from tests.strategies import batch_of


def slots(text: str, kind=None, source=None, tags=frozenset(), tag_slots=()) -> dict[str, str]:
    """The shape slots of ``text`` as ``{"date": "yes", ...}``."""
    out = {}
    for slot in shape_of(text, kind, source, frozenset(tags), tag_slots).slots:
        name, _, value = slot.partition(":")
        out[name] = value
    return out


@pytest.mark.parametrize("question, qtype", [
    ("When is my flight to Lisbon?", "when"),
    ("What time does the train leave?", "when"),
    ("What date is the wedding?", "when"),
    ("How long ago did we meet?", "when"),
    ("How often do you run?", "when"),
    ("Do you know when it opens?", "when"),
    ("Who is Zoë?", "who"),
    ("Whose bag is this?", "who"),
    ("To whom did she write?", "who"),
    ("Where do they live?", "where"),
    ("How many cats does Maya have?", "howmany"),
    ("How much did the hotel cost?", "howmuch"),
    ("How expensive was it?", "howmuch"),
    ("What is her job?", "what"),
    ("Which city did he pick?", "what"),
    ("Why did she leave?", "why"),
    ("How do I get there?", "how"),
    ("Is it raining?", "yesno"),
    ("Did Maya call back?", "yesno"),
    ("Can you help me?", "yesno"),
    ("Tell me about Lisbon", "other"),
    ("lisbon flights", "other"),
    ("", "other"),
    ("the of and", "other"),
    ("Когда рейс?", "other"),
])
def test_english_question_types(question, qtype):
    assert english_question_type(question) == qtype
    assert analyze_query(question).qtype == qtype


def test_question_types_are_the_documented_ten():
    assert set(QUESTION_TYPES) == {"when", "who", "where", "howmany", "howmuch", "what", "why",
                                   "how", "yesno", "other"}


def test_a_pluggable_classifier_is_used_and_checked():
    assert analyze_query("Cuándo sale el vuelo?", lambda q: "when").qtype == "when"
    with pytest.raises(ValueError, match="question classifier returned 'cuando'"):
        analyze_query("Cuándo?", lambda q: "cuando")


@pytest.mark.parametrize("n_words, bucket", [
    (0, "len:<=3"), (1, "len:<=3"), (3, "len:<=3"), (4, "len:<=6"), (6, "len:<=6"),
    (7, "len:<=10"), (10, "len:<=10"), (15, "len:<=15"), (22, "len:<=22"), (32, "len:<=32"),
    (33, "len:<=48"), (48, "len:<=48"), (49, "len:>48"), (1000, "len:>48"),
])
def test_length_buckets(n_words, bucket):
    assert length_bucket(n_words) == bucket
    if n_words:
        assert "len:" + slots(" ".join(["word"] * n_words))["len"] == bucket


@pytest.mark.parametrize("text, date", [
    ("Meet me on Monday", "yes"),
    ("see you tomorrow", "yes"),
    ("Born in 1987", "yes"),
    ("The train leaves at 10:40", "yes"),
    ("dinner at 7pm", "yes"),
    ("Due 2024-03-14", "yes"),
    ("Due 14/03", "yes"),
    ("March 3 works", "yes"),
    ("three weeks ago", "yes"),
    ("会议在3月14日", "yes"),
    ("I like green tea", "no"),
    ("Room 12 has a view", "no"),
])
def test_date_slot(text, date):
    assert slots(text)["date"] == date


@pytest.mark.parametrize("text, num", [
    ("I have 3 cats", "yes"), ("twelve apples", "yes"), ("It costs $5", "yes"),
    ("€20 each", "yes"), ("twice a week", "yes"), ("会议在3月14日", "yes"),
    ("I like green tea", "no"), ("Nothing here", "no"),
])
def test_num_slot(text, num):
    assert slots(text)["num"] == num


@pytest.mark.parametrize("text, ent", [
    ("I met Zoë yesterday", "yes"),
    ("Alice and Bob went to Paris", "yes"),
    ("We flew with NASA", "yes"),
    ("Мы летим в Москва", "yes"),
    ("Встреча с Зоей завтра", "yes"),
    ("Lisbon", "no"),  # sentence-initial capitals are not names
    ("hello world", "no"),
    ("The cat sat. The dog ran.", "no"),
    ("会议在3月14日", "no"),
])
def test_ent_slot(text, ent):
    assert slots(text)["ent"] == ent


@pytest.mark.parametrize("text, q", [
    ("Is the museum open?", "yes"), ("营业吗？", "yes"), ("Is it?  ", "yes"),
    ("The museum is open.", "no"), ("What? No way.", "no"),
])
def test_q_slot(text, q):
    assert slots(text)["q"] == q


def test_kind_source_and_tag_slots():
    s = slots("text", kind="fact", source="maya", tags={"travel"}, tag_slots=("travel", "work"))
    assert s["kind"] == "fact" and s["source"] == "maya"
    shape = shape_of("text", None, None, frozenset({"travel"}), ("travel", "work"))
    assert "tag:travel=yes" in shape.slots and "tag:work=no" in shape.slots
    assert slots("text")["kind"] == "none" and slots("text")["source"] == "none"


def test_relation_slots_name_the_source_and_shared_names():
    query = analyze_query("What did Maya say about Lisbon?")
    shape = shape_of("we should fly to Lisbon in May", None, "Maya", frozenset(), ())
    assert relation_slots(query, shape, "Maya") == ("qsrc:yes", "qent:yes")
    other = shape_of("we should fly somewhere warm", None, "Ben", frozenset(), ())
    assert relation_slots(query, other, "Ben") == ("qsrc:no", "qent:no")
    assert relation_slots(query, other, None) == ("qsrc:no", "qent:no")


def test_retrieval_features_cross_every_slot_with_the_question_type():
    query = analyze_query("When is my flight to Lisbon?")
    shape = shape_of("Flight to Lisbon on March 3", "fact", None, frozenset(), ())
    feats = retrieval_features(query, shape, None, None)
    plain = [f for f in feats if not f.startswith("qt:")]
    crossed = [f for f in feats if f.startswith("qt:")]
    assert crossed == [f"qt:when&{f}" for f in plain]
    assert {"kind:fact", "date:yes", "num:yes", "qent:yes", "qsrc:no", "q:no"} <= set(plain)
    assert "qt:when&date:yes" in crossed
    with_doc = retrieval_features(query, shape, None, "doc-7")
    assert with_doc == feats + ("doc:doc-7",)


def test_features_hold_no_words_of_the_text():
    query = analyze_query("When is my flight to Lisbon?")
    shape = shape_of("Flight to Lisbon on March 3", None, None, frozenset(), ())
    joined = " ".join(retrieval_features(query, shape, None, None)).lower()
    assert "lisbon" not in joined and "flight" not in joined and "march" not in joined


@given(st.text(max_size=200), st.text(max_size=60),
       st.sampled_from([(), ("travel",), ("travel", "work", "home")]), st.booleans())
def test_feature_count_is_fixed_whatever_the_text(text, query, tag_slots, doc):
    shape = shape_of(text, None, None, frozenset({"travel"}), tag_slots)
    feats = retrieval_features(analyze_query(query), shape, None, "d" if doc else None)
    assert len(shape.slots) == 7 + len(tag_slots)
    assert len(feats) == 2 * (len(shape.slots) + 2) + doc
    assert len(set(feats)) == len(feats)


# ------------------------------------------------------------------- neighbour slots

NAN = math.nan


@pytest.mark.parametrize("rank, bucket", [
    (0, "top1"), (1, "top3"), (2, "top3"), (3, "top10"), (9, "top10"), (10, "lower"),
    (57, "lower"),
])
def test_neighbour_slots_bucket_the_neighbours_retriever_rank(rank, bucket):
    # Turn 4 (ranked ``rank``) is the previous turn of turn 5 (ranked 99), whatever the
    # input order; turn 4 sees turn 5 as its next one.
    out = neighbour_slots(["s", "s"], [4.0, 5.0], [rank, 99])
    assert out == [("prev:none", "next:lower"), (f"prev:{bucket}", "next:none")]
    flipped = neighbour_slots(["s", "s"], [5.0, 4.0], [99, rank])
    assert flipped == [(f"prev:{bucket}", "next:none"), ("prev:none", "next:lower")]


def test_neighbour_slots_see_both_sides_of_a_turn():
    out = neighbour_slots(["s", "s", "s"], [2.0, 1.0, 3.0], [2, 0, 5])
    assert out == [("prev:top1", "next:top10"), ("prev:none", "next:top3"),
                   ("prev:top3", "next:none")]


def test_neighbour_slots_stay_within_one_thread():
    # Position 2 of thread "b" is not the next turn of position 1 in thread "a".
    assert neighbour_slots(["a", "b"], [1.0, 2.0], [0, 1]) == [("prev:none", "next:none")] * 2
    # ...while position 2 of "a" is, wherever it sits in the input.
    out = neighbour_slots(["a", "b", "a"], [1.0, 2.0, 2.0], [3, 0, 1])
    assert out == [("prev:none", "next:top3"), ("prev:none", "next:none"),
                   ("prev:top10", "next:none")]


def test_neighbour_slots_need_adjacent_positions():
    out = neighbour_slots(["s", "s"], [1.0, 3.0], [0, 1])  # turn 2 was not retrieved
    assert out == [("prev:none", "next:none")] * 2


def test_neighbour_slots_are_none_without_thread_or_position():
    none = ("prev:none", "next:none")
    assert neighbour_slots([None, None], [1.0, 2.0], [0, 1]) == [none, none]
    assert neighbour_slots(["s", "s"], [NAN, NAN], [0, 1]) == [none, none]
    assert neighbour_slots([], [], []) == []
    # A candidate without a thread neither has neighbours nor is one.
    out = neighbour_slots(["s", None, "s"], [1.0, 2.0, 3.0], [0, 1, 2])
    assert out == [none, none, none]
    # Mixed: the thread-less candidate at position 2 does not block "s" turns 1 and 2.
    out = neighbour_slots(["s", None, "s"], [1.0, 2.0, 2.0], [1, 0, 2])
    assert out == [("prev:none", "next:top3"), none, ("prev:top3", "next:none")]


def test_neighbour_slots_skip_nan_positions():
    none = ("prev:none", "next:none")
    # A NaN position is nobody's neighbour and has none, even next to real turns.
    out = neighbour_slots(["s", "s", "s"], [1.0, NAN, 2.0], [2, 0, 1])
    assert out == [("prev:none", "next:top3"), none, ("prev:top3", "next:none")]
    assert neighbour_slots(["s", "s"], [NAN, 1.0], [0, 1]) == [none, none]


# ------------------------------------------------------------------------- Unicode

@pytest.mark.parametrize("text, expected", [
    ("I met Zoë yesterday", {"ent": "yes", "date": "yes"}),
    ("Мы летим в Москва завтра", {"ent": "yes"}),
    ("Встреча в Москве в 10:30", {"ent": "yes", "date": "yes", "num": "yes"}),
    ("会议在3月14日", {"date": "yes", "num": "yes"}),
    ("Rendez-vous avec Zoë à 14h30", {"ent": "yes", "num": "yes"}),
])
def test_non_ascii_text_keeps_its_features(text, expected):
    got = slots(text)
    assert {k: got[k] for k in expected} == expected


def test_non_ascii_names_are_read_from_queries():
    info = analyze_query("When did Zoë visit Москва?")
    assert {"zoë", "москва"} <= info.names
    assert info.has_content and info.qtype == "when"


def test_decomposed_accents_match_composed_ones():
    decomposed = unicodedata.normalize("NFD", "Who is Zoë?")
    assert decomposed != "Who is Zoë?"
    info = analyze_query(decomposed)
    shape = shape_of("Zoë lives in Porto", None, None, frozenset(), ())
    assert relation_slots(info, shape, None)[1] == "qent:yes"


def test_tokens_keep_accents_cyrillic_and_cjk():
    assert tokens("Zoë, Москва; 東京 don't") == ["Zoë", "Москва", "東京", "don't"]
    assert names("Yesterday Zoë met Иван.") == frozenset({"zoë", "иван"})


@pytest.mark.parametrize("query", ["", "   ", "the of and", "?!", "Is it?"])
def test_empty_or_stop_word_queries_have_no_content(query):
    info = analyze_query(query)
    assert info.has_content is False
    assert info.qtype in QUESTION_TYPES


# ------------------------------------------------------------------------------- cache

def test_feature_space_rows_name_exactly_the_reference_features():
    space = FeatureSpace(max_bytes=1000)
    query = analyze_query("When did Maya fly to Lisbon?")
    ids, texts = ["a", "b", "c"], ["Maya flew on March 3", "Lisbon is hilly", "Is it far?"]
    kinds, sources = ["fact", None, "episode"], ["Maya", None, "Ben"]
    tags = [frozenset()] * 3
    structure = [("prev:none", "next:top1"), ("prev:top1", "next:none"), ("prev:none", "next:none")]
    for _ in range(2):  # the second pass is served from the caches (evicting: 1000 B hold ~2)
        distinct, of = space.rows(query, batch_of(ids, texts, kinds, sources, tags),
                                  structure=[STRUCTURE_CODE[s] for s in structure],
                                  tag_slots=(), doc_features=True)
        rows = distinct[of]
        for i, row in enumerate(rows):
            shape = shape_of(texts[i], kinds[i], sources[i], tags[i], ())
            expected = retrieval_features(query, shape, sources[i], ids[i], structure[i])
            assert space.names_of(row) == expected
            assert [space.names[j] for j in space.matrix(rows)[i]] == list(expected)


def test_a_source_named_none_is_named_by_the_question_and_no_source_is_not():
    # Both have the slot "source:none"; only one of them is what the question names.
    space = FeatureSpace()
    query = analyze_query("Is there none left?")
    sources = [None, "none", None]
    for _ in range(2):  # built, then served from the caches
        distinct, of = space.rows(query, batch_of(["a", "b", "c"], ["hi"] * 3, None, sources),
                                  structure=None, tag_slots=(), doc_features=False)
        names = [space.names_of(r) for r in distinct[of]]
        assert [n[1] for n in names] == ["source:none"] * 3
        assert ["qsrc:yes" in n for n in names] == [False, True, False]
        assert of[0] == of[2] != of[1]


@pytest.mark.parametrize("query", ["Tell me when Caroline moved", "Когда Маша приехала?"])
def test_a_questions_first_word_is_not_taken_for_a_name(query):
    info = analyze_query(query)
    assert "tell" not in info.names and "когда" not in info.names
    assert info.names  # the name after it is still read


def test_only_a_bounded_prefix_of_a_text_is_featurised():
    space = FeatureSpace(prefix_chars=200)
    query = analyze_query("When is it?")
    filler = "word " * 100  # 500 characters without a date
    texts = [filler + "on Monday", filler + "on March 3", "on Monday"]
    distinct, of = space.rows(query, batch_of(["a", "b", "c"], texts),
                              structure=[NO_STRUCTURE] * 3, tag_slots=(),
                              doc_features=False)
    names = [space.names_of(r) for r in distinct[of]]
    assert "date:no" in names[0] and "date:no" in names[1]  # the dates lie past the prefix
    assert "date:yes" in names[2]
    assert of[0] == of[1]  # one shape: the same prefix
    assert len(space._shapes) == 2


def test_the_shape_cache_is_bounded_by_bytes_and_holds_no_text():
    space = FeatureSpace(max_bytes=20_000)
    query = analyze_query("When is it?")
    for i in range(300):
        text = f"{i} " + "Lisbon flight on Monday at 9:40 " * 200
        space.rows(query, batch_of([f"t{i}"], [text]), structure=[NO_STRUCTURE],
                   tag_slots=(), doc_features=False)
        assert space.cached_bytes <= 20_000
    assert 0 < len(space._shapes) < 300
    # keyed by a hash of the prefix and the shape fields, never by the text itself
    assert all(type(key) is int for key in space._shapes)


def test_threads_reranking_through_evictions_and_growths_rank_as_one_thread():
    """Several threads share one reranker whose shape cache evicts all the time (and whose
    kernel table grows past 512 and 1,024 entries, when the kernels are built): every ranking is
    the one a reranker alone gives. Before the feature space took a lock to change its caches,
    two threads evicting at once raised 'dictionary changed size during iteration'."""
    import threading

    from heaprank import Reranker

    def candidates(round_: int) -> list[dict]:
        return [{"id": f"d{i}", "text": f"Maya met Ben in Lisbon on day {round_ * 30 + i}",
                 "score": float(i % 5), "metadata": {"kind": "fact", "source": "maya"}}
                for i in range(30)]

    # ~900 shapes fit (~2.5 KB each as counted, their strings and sets included): the table
    # grows past 512 and 1,024 live entries, then evicts
    shared = Reranker(feature_cache_bytes=2_400_000)
    alone = Reranker(feature_cache_bytes=2_400_000)
    want = {r: [x.explain() for x in alone.rerank("Where did Maya meet Ben?", candidates(r),
                                                  now=1_750_000_000.0, track=False)]
            for r in range(40)}
    failures: list[object] = []

    def work(offset: int) -> None:
        try:
            for step in range(120):
                r = (offset + step) % 40
                got = shared.rerank("Where did Maya meet Ben?", candidates(r), now=1_750_000_000.0,
                                    track=False)
                if [x.explain() for x in got] != want[r]:
                    failures.append((offset, r))
        except Exception as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(k * 10,)) for k in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as the interpreter lets them
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert failures == []
    assert len(shared._space._shapes) > 512
    if shared._space._table is not None:
        assert len(shared._space._table) == len(shared._space._shapes)
