"""SQLiteState specifics: the file, its schema version, reopening, and what it refuses."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from heaprank import (
    ConfigError,
    FeedbackError,
    Reranker,
    ScrubIncompleteError,
    SQLiteState,
    StateCorruptError,
    StateError,
    StateReadOnlyError,
)
from heaprank.records import Impression
from heaprank.state import open_state
from heaprank.state.sqlite.schema import SCHEMA_VERSION
from heaprank.state.sqlite.writes import json_array

NOW = 1_750_000_000.0
CANDS = [{"id": "a", "text": "Flight on Monday", "score": 2.0},
         {"id": "b", "text": "Tea", "score": 1.0}]


def test_file_is_created_in_wal_mode_with_a_schema_version(tmp_path):
    path = tmp_path / "state.db"
    with SQLiteState(path) as state:
        assert state.integrity_check() == "ok"
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        assert int(version[0]) == SCHEMA_VERSION
    finally:
        conn.close()


def test_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "future.db"
    SQLiteState(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                 (str(SCHEMA_VERSION + 1),))
    conn.commit()
    conn.close()
    with pytest.raises(StateError, match="newer than this heaprank"):
        SQLiteState(path)


def test_a_file_that_is_not_a_database_is_a_state_error(tmp_path):
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StateCorruptError, match="garbage.db': the file is damaged"):
        SQLiteState(path)


def test_reopening_keeps_everything(tmp_path):
    path = tmp_path / "keep.db"
    with Reranker(SQLiteState(path)) as rr:
        ranking = rr.rerank("When is the flight?", CANDS, namespace="n", k=2, now=NOW)
        rr.feedback(ranking.recall_id, used=["a"])
        links, stats = rr.links("*"), rr.stats()
    with Reranker(SQLiteState(path)) as rr:
        assert rr.links("*") == links and rr.stats() == stats
        assert rr.state.get_impression(ranking.recall_id).resolved == {"a": True, "b": False}


def test_close_is_idempotent_and_the_state_reconnects(tmp_path):
    state = SQLiteState(tmp_path / "x.db")
    state.close()
    state.close()
    assert state.stats()["feedbacks"] == 0  # used again: reconnects lazily
    state.close()


def test_in_memory_database(tmp_path):
    with Reranker(SQLiteState(":memory:")) as rr:
        ranking = rr.rerank("When is the flight?", CANDS, k=2, now=NOW)
        assert rr.feedback(ranking.recall_id, used=["a"], namespace="default").applied == \
            ("a", "b")


@pytest.mark.parametrize("kwargs, match", [
    ({"max_impressions": 0}, "max_impressions"),
    ({"synchronous": "SOMETIMES"}, "synchronous"),
])
def test_bad_options(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        SQLiteState(tmp_path / "bad.db", **kwargs)


@pytest.mark.parametrize("url, match", [
    ("sqlite://", "names no file"),
    ("mysql://x/y", "unknown backend URL"),
    ("postgres://x/y?schema=Robert;drop", "schema"),
])
def test_bad_state_urls(url, match):
    with pytest.raises(ConfigError, match=match):
        open_state(url)



def test_a_path_without_its_scheme_is_refused_with_the_sqlite_url_to_give(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"\(for a SQLite file: 'sqlite:///heaprank\.db'\)"):
        Reranker("heaprank.db")
    assert not (tmp_path / "heaprank.db").exists()

def test_relative_sqlite_url(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    state = open_state("sqlite:///rel.db")
    try:
        assert (tmp_path / "rel.db").exists()
    finally:
        state.close()


def test_the_log_stays_bounded_across_short_lived_connections(tmp_path):
    """A CLI or a worker that opens the file, reranks once and exits must still prune: here
    every connection writes one impression that is already past its time to live."""
    path = tmp_path / "short.db"
    old = int((time.time() - 2 * 86_400) * 1000)
    for i in range(40):
        with SQLiteState(path) as state:
            state.put_impression(Impression(
                recall_id=f"{(old + i) << 20:016x}", namespace="n", qtype="other", time=NOW + i,
                time_explicit=True, ids=("a",), slots=(("kind:none",),)))
    with SQLiteState(path) as state:
        assert state.stats()["impressions"] <= 1  # each new connection prunes on its first write


def test_a_missing_folder_is_an_error_naming_the_path(tmp_path):
    path = tmp_path / "typo" / "state.db"
    with pytest.raises(StateError, match="folder .*typo.* does not exist"):
        SQLiteState(path)
    assert not (tmp_path / "typo").exists()


def test_home_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    with open_state("sqlite:///~/home.db") as state:
        assert state.path == str(tmp_path / "home.db")
    assert (tmp_path / "home.db").exists()


def _foreign(path):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices VALUES (1, 9.5)")
    conn.commit()
    conn.close()


def test_a_file_of_another_application_is_refused_and_left_as_it_was(tmp_path):
    path = tmp_path / "app.db"
    _foreign(path)
    before = path.read_bytes()
    with pytest.raises(StateError, match="another application"):
        SQLiteState(path)
    conn = sqlite3.connect(path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()
    assert tables == {"invoices"} and path.read_bytes() == before


def test_a_file_with_someone_elses_meta_table_is_refused(tmp_path):
    path = tmp_path / "meta.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("INSERT INTO meta VALUES ('owner', 'billing')")
    conn.commit()
    conn.close()
    with pytest.raises(StateError, match="another application"):
        SQLiteState(path)


def test_a_file_with_a_schema_version_but_no_application_marker_is_left_untouched(tmp_path):
    """Another application's file that keeps its own ``schema_version`` in a ``meta`` table is
    refused before anything is written: no table added, no version rewritten, no WAL."""
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '2')")
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StateError, match="another application"):
        SQLiteState(path)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master")} >= {"meta", "orders"}
    assert "edges" not in {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert path.read_bytes() == before


def test_corrupted_meta_values_are_a_state_error(tmp_path):
    path = tmp_path / "meta.db"
    SQLiteState(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = 'two' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(StateCorruptError, match="meta.schema_version holds 'two', not a number"):
        SQLiteState(path)


def test_read_only_mode_reads_and_never_writes(tmp_path):
    path = tmp_path / "ro.db"
    with Reranker(f"sqlite:///{path}") as rr:
        ranking = rr.rerank("When is the flight?", CANDS, namespace="n", k=2, now=NOW)
        rr.feedback(ranking.recall_id, used=["a"])
        links = rr.links("*")
    before = path.read_bytes()
    with Reranker(f"sqlite:///{path}?mode=ro") as ro:
        assert ro.state.read_only and ro.links("*") == links
        assert ro.rerank("When?", CANDS, namespace="n", k=2, now=NOW, track=False).ids
        tracked = ro.rerank("When?", CANDS, namespace="n", k=2, now=NOW)  # cannot be recorded
        assert "state read-only: not tracked" in tracked[0].flags
        with pytest.raises(StateReadOnlyError, match="read-only"):
            ro.state.put_impression(ro.state.get_impression(ranking.recall_id))
    assert path.read_bytes() == before
    with pytest.raises(StateError, match="no such file"):
        open_state(f"sqlite:///{tmp_path / 'absent.db'}?mode=ro")


@pytest.mark.parametrize("url, match", [
    ("sqlite:///x.db?mode=sideways", "mode="),
    ("sqlite:///x.db?colour=blue", "unknown option 'colour'"),
    ("sqlite:///x.db?max_impressions=many", "max_impressions"),
])
def test_bad_url_options(url, match, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=match):
        open_state(url)


def test_url_options_reach_the_backend(tmp_path):
    with open_state(f"sqlite:///{tmp_path / 'o.db'}?synchronous=normal&max_impressions=7"
                    f"&impression_ttl=60&busy_timeout=2") as state:
        assert (state.synchronous, state.max_impressions, state.impression_ttl_s,
                state.busy_timeout_s) == ("NORMAL", 7, 60.0, 2.0)


def test_a_schema_1_file_is_migrated_keeping_links_pool_and_documents(tmp_path):
    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema_version', '1'), ('feedbacks', '3');
        CREATE TABLE links (namespace TEXT NOT NULL, feature TEXT NOT NULL, pos REAL NOT NULL
            DEFAULT 0, neg REAL NOT NULL DEFAULT 0, PRIMARY KEY (namespace, feature)) WITHOUT ROWID;
        CREATE TABLE global_links (feature TEXT PRIMARY KEY, pos REAL NOT NULL DEFAULT 0,
            neg REAL NOT NULL DEFAULT 0) WITHOUT ROWID;
        CREATE TABLE docs (namespace TEXT NOT NULL, id TEXT NOT NULL, last_used REAL,
            use_count REAL NOT NULL DEFAULT 0, ignore_count REAL NOT NULL DEFAULT 0,
            PRIMARY KEY (namespace, id)) WITHOUT ROWID;
        CREATE TABLE impressions (seq INTEGER PRIMARY KEY AUTOINCREMENT, recall_id TEXT NOT NULL
            UNIQUE, namespace TEXT NOT NULL, time REAL NOT NULL, payload TEXT NOT NULL);
        CREATE INDEX impressions_ns ON impressions (namespace);
        CREATE TABLE resolutions (recall_id TEXT NOT NULL, id TEXT NOT NULL, used INTEGER NOT NULL,
            PRIMARY KEY (recall_id, id)) WITHOUT ROWID;
        INSERT INTO links VALUES ('a', 'kind:fact', 1.5, 2.0), ('b', 'kind:fact', 0.5, 1.0),
            ('b', 'date:yes', 1.0, 0.0);
        INSERT INTO global_links VALUES ('kind:fact', 2.0, 3.0), ('date:yes', 1.0, 0.0);
        INSERT INTO docs VALUES ('a', 'd1', 1750000000.0, 2, 1), ('b', 'd2', NULL, 0, 4);
        INSERT INTO impressions (recall_id, namespace, time, payload) VALUES ('r', 'a', 1, '{}');
    """)
    conn.close()
    with SQLiteState(path) as state:
        features, pos, neg = state.list_links(None)
        assert features == ["date:yes", "kind:fact"]
        assert pos.tolist() == [1.0, 2.0] and neg.tolist() == [0.0, 3.0]
        features, pos, neg = state.list_links("b")
        assert features == ["date:yes", "kind:fact"] and pos.tolist() == [1.0, 0.5]
        docs = state.read_docs("a", ["d1"])
        assert docs.use_count.tolist() == [2.0] and docs.last_used.tolist() == [1750000000.0]
        stats = state.stats()
        assert stats["feedbacks"] == 3 and stats["impressions"] == 0 and stats["documents"] == 1
        # forgetting after a migration still removes the names only that namespace had
        state.forget_namespace("b")
        assert state.list_links(None)[0] == ["kind:fact"]


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)))))
def test_json_arrays_of_names_read_back_as_given(items):
    """The reads pass names as a JSON array to json_each: joined directly or dumped, they
    come back exactly."""
    assert json.loads(json_array(items)) == items


def test_plain_names_are_joined_without_json_dumps(monkeypatch):
    """Names with nothing to escape (the usual feature names and ids, any script) are joined
    as they are; json.dumps is for the others only."""
    from heaprank.state.sqlite import writes as sqlite_writes
    def refuse(*args, **kwargs):
        raise AssertionError("json.dumps called for names that need no escape")

    monkeypatch.setattr(sqlite_writes.json, "dumps", refuse)
    names = ["kind:fact", "qt:who&kind:fact", "source:zoë", "d-1"]
    assert json_array(names) == '["kind:fact","qt:who&kind:fact","source:zoë","d-1"]'
    assert json_array(["one"]) == '["one"]'
    with pytest.raises(AssertionError):
        json_array(['say "hi"', "b"])  # a quote inside: escaped by json.dumps


def _shown(recall_id: str, namespace: str, ids: tuple[str, ...] = ("a",)) -> Impression:
    return Impression(recall_id=recall_id, namespace=namespace, qtype="other", time=NOW,
                      time_explicit=True, ids=ids, slots=tuple(("kind:none",) for _ in ids))


def test_an_impression_is_stored_once_whether_its_namespace_is_new_or_known(tmp_path):
    """The first impression of a namespace creates it; later ones are one statement each. A
    recall id taken already is refused either way and leaves the stored impression as it was;
    every stored one is committed, visible to another connection at once."""
    path = tmp_path / "puts.db"
    key = int(time.time() * 1000) << 20
    first, second = f"{key:016x}", f"{key + 1:016x}"
    with SQLiteState(path) as state, SQLiteState(path) as other:
        assert state.put_impression(_shown(first, "n")) == first  # a new namespace
        assert state.put_impression(_shown(second, "n", ("b", "c"))) == second  # a known one
        assert state.put_impression(_shown(second, "n", ("z",))) is None  # its key is taken
        assert state.put_impression(_shown(first, "m", ("z",))) is None  # taken, new namespace
        stored = other.get_impression(first), other.get_impression(second)
        assert [(i.namespace, i.ids) for i in stored if i is not None] == [
            ("n", ("a",)), ("n", ("b", "c"))]
        assert other.stats()["impressions"] == 2


def test_a_read_only_state_refuses_to_store_an_impression(tmp_path):
    path = tmp_path / "ro.db"
    key = int(time.time() * 1000) << 20
    with SQLiteState(path) as state:
        state.put_impression(_shown(f"{key:016x}", "n"))
    with SQLiteState(path, read_only=True) as state, pytest.raises(StateError, match="read-only"):
        state.put_impression(_shown(f"{key + 1:016x}", "n"))


# ------------------------------------------------------------------------- group commits

def _tables(path) -> dict[str, list[tuple]]:
    """Every learned row of a state file, by name rather than by row id (impressions without
    their random keys)."""
    conn = sqlite3.connect(path)
    try:
        return {
            "features": conn.execute("SELECT name, pos, neg, nscount FROM features "
                                     "ORDER BY name").fetchall(),
            "links": conn.execute("SELECT n.name, f.name, l.pos, l.neg FROM links l JOIN "
                                  "namespaces n ON n.id = l.ns JOIN features f ON f.id = l.fid "
                                  "ORDER BY 1, 2").fetchall(),
            "docs": conn.execute("SELECT n.name, d.id, d.last_used, d.use_count FROM docs d "
                                 "JOIN namespaces n ON n.id = d.ns ORDER BY 1, 2").fetchall(),
            "edges": conn.execute("SELECT n.name, e.a, e.b, e.strength, e.count, e.last FROM "
                                  "edges e JOIN namespaces n ON n.id = e.ns "
                                  "ORDER BY 1, 2, 3").fetchall(),
            "impressions": sorted(conn.execute("SELECT n.name, i.fed, i.body FROM impressions i "
                                               "JOIN namespaces n ON n.id = i.ns").fetchall()),
            "feedbacks": conn.execute("SELECT value FROM meta WHERE key = 'feedbacks'").fetchall(),
        }
    finally:
        conn.close()


def _links(state) -> dict[str | None, list[tuple[str, float, float]]]:
    """The pool's and each namespace's learned links, by feature name."""
    out = {}
    for ns in [None, *state.namespaces()]:
        names, pos, neg = state.list_links(ns)
        out[ns] = sorted(zip(names, pos.tolist(), neg.tolist()))
    return out


GROUP_CANDS = [{"id": f"m{i}", "text": text, "score": float(12 - i),
                "metadata": {"kind": kind, "created_at": NOW - 3600.0 * i}}
               for i, (text, kind) in enumerate([
                   ("Flight to Lisbon on Monday at 9", "fact"), ("Tea with Ben", "note"),
                   ("Booked seat 14C for 212 euros", "tool_result"), ("Maya likes jazz", "fact"),
                   ("We talked about the trip", "episode"), ("Gate B7 opens at 8:15", "fact"),
                   ("Dentist on Friday", "note"), ("Ben moved to Porto in 2019", "fact")])]


@given(st.lists(st.tuples(st.sampled_from(["ana", "ben", "cy"]),
                          st.sampled_from(["When is the flight?", "Who is Ben?",
                                           "How much was the seat?", "Why the trip?"]),
                          st.lists(st.integers(0, 4), max_size=3, unique=True)),
                min_size=1, max_size=14),
       st.lists(st.integers(1, 6), min_size=1, max_size=14), st.booleans(), st.data())
def test_a_group_commit_writes_what_one_feedback_at_a_time_writes(tmp_path_factory, plan, sizes,
                                                                     co_use, data):
    """Feedbacks in groups (repeats, an unknown recall, several namespaces sharing features,
    co-use edges) leave every table as the same feedbacks given one by one: the counts a group
    holds in memory until its commit are the per-feedback sums to the last bit. Both learn the
    links the memory backend learns from the same feedbacks, pool and namespaces."""
    from heaprank import Config, CoUse, Learning, MemoryState

    folder = tmp_path_factory.mktemp("group")
    config = Config(learning=Learning(co_use=CoUse(max_per_doc=3, max_edges=6) if co_use else None))
    one = Reranker(SQLiteState(folder / "one.db", synchronous="OFF"), config=config)
    many = Reranker(SQLiteState(folder / "many.db", synchronous="OFF"), config=config)
    memory = Reranker(MemoryState(), config=config)
    requests_one, requests_many, requests_memory = [], [], []
    for ns, query, used in plan:
        a = one.rerank(query, GROUP_CANDS, namespace=ns, k=5, now=NOW)
        b = many.rerank(query, GROUP_CANDS, namespace=ns, k=5, now=NOW)
        c = memory.rerank(query, GROUP_CANDS, namespace=ns, k=5, now=NOW)
        assert a.ids == b.ids == c.ids
        requests_one.append((a.recall_id, [a.ids[i] for i in used]))
        requests_memory.append((c.recall_id, [c.ids[i] for i in used]))
        requests_many.append((b.recall_id, [b.ids[i] for i in used]))
    order = data.draw(st.lists(st.integers(0, len(plan) - 1), min_size=1, max_size=20))
    unknown = "0000000000000000"
    for at in order:
        for reranker, requests in ((one, requests_one), (memory, requests_memory)):
            try:
                reranker.feedback(*requests[at], now=NOW + 60.0)
            except FeedbackError:
                pass  # a repeat applies nothing new; a contradiction is refused
    with pytest.raises(FeedbackError):
        one.feedback(unknown, used=["m0"], now=NOW + 60.0)
    groups, start = [], 0
    asked = [requests_many[at] for at in order] + [(unknown, ["m0"])]
    for size in sizes:
        if start < len(asked):
            groups.append(asked[start:start + size])
            start += size
    groups.append(asked[start:])
    for group in groups:
        many.feedback_many(group, now=NOW + 60.0)
    learned = _links(memory.state)
    assert _links(one.state) == learned and _links(many.state) == learned
    one.close()
    many.close()
    assert _tables(folder / "many.db") == _tables(folder / "one.db")


def test_a_forget_that_another_reader_keeps_in_the_log_says_so_until_the_scrub_ends(
        tmp_path, monkeypatch):
    """While another connection holds a read snapshot, the write-ahead log keeps older copies
    of the forgotten namespace's pages: forget raises ScrubIncompleteError (after waiting
    ``SCRUB_WAIT_S``) instead of returning as if no byte were left; once the reader is gone,
    ``checkpoint()`` finishes the scrub and neither the file nor its log holds the tenant."""
    from heaprank.state.sqlite import backend as sqlite_backend

    monkeypatch.setattr(sqlite_backend, "SCRUB_WAIT_S", 0.2)
    path = tmp_path / "scrub.db"
    secret = "tenant-zq7-secret-memory"
    with Reranker(SQLiteState(path)) as rr:
        cands = [{"id": f"{secret}-{i}", "text": "A note from Monday", "score": 1.0 + i}
                 for i in range(3)]
        for _ in range(3):
            ranking = rr.rerank("When?", cands, namespace="zq7", k=3, now=NOW)
            rr.feedback(ranking.recall_id, used=[ranking.ids[0]])
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        assert reader.execute("SELECT COUNT(*) FROM docs").fetchone()[0] > 0  # a snapshot
        with pytest.raises(ScrubIncompleteError, match="write-ahead log"):
            rr.forget_namespace("zq7")
        assert rr.state.namespaces() == [] and rr.state.iter_docs("zq7") == []
        reader.execute("COMMIT")
        reader.close()
        rr.state.checkpoint()
    for file in (path, tmp_path / "scrub.db-wal"):
        if file.exists():
            assert secret.encode() not in file.read_bytes()
