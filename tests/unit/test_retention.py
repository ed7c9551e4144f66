"""Retention policies (files, overrides, hot reload), the Ebbinghaus recency kernel, the
forgotten rule and the forget preview on a real SQLite state."""

from __future__ import annotations

import json
import logging
import math
import os

import numpy as np
import pytest

from heaprank import Config, ConfigError, Exploration, Reranker, Retention, Scoring, Weights
from heaprank.config import RECENCY_EVERY_QUESTION
from heaprank.model.retention import (
    PolicyFile,
    PolicySet,
    RetentionPolicy,
    load_policy,
    parse_policy,
    retention,
)

DAY = 86_400.0
NOW = 1_760_000_000.0

POLICY = {
    "half_life_days": 60, "k_importance": 2.0, "k_access": 1.5, "threshold": 0.3,
    "namespaces": {
        "facts": {"half_life_days": 365, "k_access": 2.0, "threshold": None, "enabled": True},
        "scratch": {"half_life_days": 7},
        "pinned": {"enabled": False},
    },
}
POLICY_TOML = """\
half_life_days = 60
threshold = 0.3

[namespaces.facts]
half_life_days = 365
k_access = 2.0

[namespaces.scratch]
half_life_days = 7

[namespaces.pinned]
enabled = false
"""


def _aged(ages_days, *, importance=None):
    """One candidate per age, same text shape and score, created ``age`` days before NOW."""
    out = []
    for i, age in enumerate(ages_days):
        meta = {"created_at": NOW - age * DAY}
        if importance is not None:
            meta["importance"] = importance[i]
        out.append({"id": f"m{i}", "text": f"note {i} about the trip", "score": 1.0,
                    "metadata": meta})
    return out


# ----------------------------------------------------------------------- policy files


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_overrides_inherit_and_exempt_in_both_formats(tmp_path, suffix):
    path = tmp_path / f"policy{suffix}"
    path.write_text(json.dumps(POLICY) if suffix == ".json" else POLICY_TOML, encoding="utf-8")
    policies = load_policy(path)
    assert policies.default == RetentionPolicy(half_life_days=60, threshold=0.3)
    facts = policies.for_namespace("facts")
    assert (facts.half_life_days, facts.k_access) == (365, 2.0)
    assert facts.threshold == 0.3 and facts.k_importance == 2.0  # null / absent: inherited
    assert policies.for_namespace("scratch").half_life_days == 7
    assert policies.for_namespace("scratch").k_access == 1.5
    assert policies.for_namespace("pinned").enabled is False
    assert policies.for_namespace("somebody else") == policies.default
    assert policies.namespaces == ("facts", "scratch", "pinned")


def test_global_fields_change_every_namespace_that_inherits_them():
    policies = parse_policy({"threshold": 0.5, "namespaces": {"a": {"half_life_days": 10}}})
    assert policies.for_namespace("a").threshold == 0.5
    assert policies.for_namespace("b").threshold == 0.5


@pytest.mark.parametrize("data, field", [
    ({"threshold": 1.5}, "policy.json.threshold"),
    ({"half_life_days": 0}, "policy.json.half_life_days"),
    ({"k_access": -1}, "policy.json.k_access"),
    ({"half_life_days": "long"}, "policy.json.half_life_days"),
    ({"enabled": "no"}, "policy.json.enabled"),
    ({"treshold": 0.2}, "unknown field 'treshold'"),
    ({"namespaces": {"a": {"threshold": 0}}}, "policy.json.namespaces.a.threshold"),
    ({"namespaces": {"a": {"halflife": 3}}}, "policy.json.namespaces.a: unknown field"),
    ({"namespaces": ["a"]}, "policy.json.namespaces"),
    ([1, 2], "expected a table"),
])
def test_a_bad_policy_names_the_file_and_the_field(data, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        parse_policy(data, "policy.json")


def test_unreadable_or_malformed_files_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_policy(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_policy(bad)
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("threshold = ", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_policy(bad_toml)
    with pytest.raises(ConfigError, match="cannot read"):
        Reranker(config=Config(retention=Retention(drop_forgotten=True, policy=tmp_path / "missing.json")))


def _write(path, data):
    """Write a policy and move its mtime on, as a later edit would (coarse clocks)."""
    path.write_text(json.dumps(data), encoding="utf-8")
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))


def test_a_changed_file_takes_effect_on_the_next_call_without_a_restart(tmp_path):
    path = tmp_path / "policy.json"
    _write(path, {"threshold": 0.3})
    rr = Reranker(config=Config(retention=Retention(drop_forgotten=True, policy=str(path))))
    cands = _aged([1, 40, 200])
    assert set(rr.rerank("trip", cands, namespace="u", now=NOW, track=False).dropped) == {"m2"}
    _write(path, {"threshold": 0.3, "namespaces": {"u": {"half_life_days": 5}}})
    assert set(rr.rerank("trip", cands, namespace="u", now=NOW, track=False).dropped) == {"m1", "m2"}
    _write(path, {"namespaces": {"u": {"enabled": False}}})
    assert rr.rerank("trip", cands, namespace="u", now=NOW, track=False).dropped == {}


def test_the_file_is_read_only_when_it_changes(tmp_path, monkeypatch):
    path = tmp_path / "policy.json"
    _write(path, {"threshold": 0.3})
    source = PolicyFile(path)
    reads = []
    import heaprank.model.retention as retention_module

    real = retention_module.load_policy
    monkeypatch.setattr(retention_module, "load_policy", lambda p: reads.append(p) or real(p))
    first = source.current()
    assert source.current() is first and source.current() is first
    assert len(reads) == 1
    _write(path, {"threshold": 0.4})
    assert source.current().default.threshold == 0.4
    assert len(reads) == 2


def test_a_broken_edit_keeps_the_last_good_policy_and_warns(tmp_path, caplog):
    path = tmp_path / "policy.json"
    _write(path, {"threshold": 0.4})
    source = PolicyFile(path)
    assert source.current().default.threshold == 0.4
    _write(path, {"threshold": 7})
    with caplog.at_level(logging.WARNING, logger="heaprank"):
        assert source.current().default.threshold == 0.4
        assert source.current().default.threshold == 0.4
    warnings = [r for r in caplog.records if "not reloaded" in r.getMessage()]
    assert len(warnings) == 1 and "threshold" in warnings[0].getMessage()
    path.unlink()
    assert source.current().default.threshold == 0.4  # a vanished file: the last good one


# ------------------------------------------------------------- the kernel and the rule


def test_defaults_leave_every_new_signal_off():
    cfg = Config()
    assert cfg.retention.recency_kernel == "exponential" and cfg.retention.drop_forgotten is False
    assert cfg.exploration.rate == 0.0 and cfg.weights.reinforcement == 0.0
    rr = Reranker()
    ranking = rr.rerank("trip", _aged([1, 40, 200, 5000]), namespace="u", now=NOW)
    assert ranking.dropped == {}
    assert "ebbinghaus" not in ranking.explain() and "reinforcement" not in ranking.explain()
    assert rr.state.get_impression(ranking.recall_id).signal_names == (
        "relevance", "age_days", "importance", "usefulness", "rules")


def test_the_ebbinghaus_kernel_is_floor_plus_retention_and_explained():
    policy = RetentionPolicy(half_life_days=30, k_importance=2.0, k_access=1.5)
    cfg = Config(scoring=Scoring(intent_recency=RECENCY_EVERY_QUESTION),  # recency on every question
                 retention=Retention(recency_kernel="ebbinghaus", policy=policy, recency_floor=0.5))
    rr = Reranker(config=cfg)
    cands = _aged([0, 10, 100], importance=[1.0, 5.0, 1.0])
    ranking = rr.rerank("trip", cands, namespace="u", now=NOW, k=3)
    by_id = {r.id: r for r in ranking}
    expected = 0.5 + 0.5 * retention(np.array([0.0, 10.0, 100.0]), np.array([1.0, 5.0, 1.0]),
                                      np.zeros(3), policy)
    assert [by_id[f"m{i}"].signals["recency"] for i in range(3)] == pytest.approx(expected)
    assert "ebbinghaus S 60d" in by_id["m1"].explain()  # 30 x (1 + 2 x 5 / 10)
    assert [r.id for r in ranking] == ["m1", "m0", "m2"]  # importance 5 leads
    stored = rr.state.get_impression(ranking.recall_id)
    column = stored.signal_names.index("recency")
    assert [row[column] for row in stored.signals] == pytest.approx(
        [by_id[i].signals["recency"] for i in stored.ids], rel=1e-6)


def test_use_lengthens_the_ebbinghaus_recency_of_a_document():
    rr = Reranker(config=Config(scoring=Scoring(intent_recency=RECENCY_EVERY_QUESTION),  # every question
                                retention=Retention(recency_kernel="ebbinghaus", recency_floor=0.0)))
    cands = _aged([300, 300])
    before = rr.rerank("trip", cands, namespace="u", now=NOW - 200 * DAY)
    for _ in range(5):  # m1 used five times, 200 days ago
        ranking = rr.rerank("trip", cands, namespace="u", now=NOW - 200 * DAY)
        rr.feedback(ranking.recall_id, used=["m1"])
    after = {r.id: r for r in rr.rerank("trip", cands, namespace="u", now=NOW, track=False)}
    assert before[0].signals["recency"] == pytest.approx(before[1].signals["recency"])
    assert after["m1"].signals["recency"] > after["m0"].signals["recency"]
    s_used = 60 * (1 + 2.0 * 0.1 + 1.5 * 5 / 10)
    assert after["m1"].signals["recency"] == pytest.approx(math.exp(-200 / s_used))
    assert "used 5x, ebbinghaus S 117d" in after["m1"].explain()


def test_drop_forgotten_drops_only_what_the_policy_forgets_and_says_so():
    cfg = Config(retention=Retention(drop_forgotten=True,
                                     policy=PolicySet(
        RetentionPolicy(), (("pinned", (("enabled", False),)),))))
    rr = Reranker(config=cfg)
    cands = _aged([0.5, 80, 90, 400])  # forgotten after 60 x 1.2 x ln(1/0.3) = 86.7 days
    ranking = rr.rerank("trip", cands, namespace="u", now=NOW)
    assert ranking.ids == ["m0", "m1"]
    assert ranking.dropped == {"m2": "rule forgotten x0", "m3": "rule forgotten x0"}
    assert "forgotten" in str(ranking.why_not("m3"))
    assert rr.rerank("trip", cands, namespace="pinned", now=NOW).ids == ["m0", "m1", "m2", "m3"]
    plain = Reranker().rerank("trip", cands, namespace="u", now=NOW)
    assert plain.ids == ["m0", "m1", "m2", "m3"]


# ------------------------------------------------------------------------ the preview


@pytest.fixture()
def sqlite_rr(tmp_path):
    rr = Reranker(f"sqlite:///{tmp_path}/state.db")
    yield rr
    rr.close()


def _use(rr, namespace, doc_id, when, times=1):
    cands = [{"id": doc_id, "text": "a note", "score": 1.0}]
    for _ in range(times):
        ranking = rr.rerank("q", cands, namespace=namespace, now=when)
        rr.feedback(ranking.recall_id, used=[doc_id])


def test_forget_preview_on_a_sqlite_state_reports_and_deletes_nothing(sqlite_rr):
    rr = sqlite_rr
    _use(rr, "u", "old", NOW - 300 * DAY)
    _use(rr, "u", "old-but-used", NOW - 300 * DAY, times=20)
    _use(rr, "u", "fresh", NOW - 2 * DAY)
    _use(rr, "other", "their-old", NOW - 900 * DAY)
    before = rr.stats()
    report = rr.forget_candidates("u", now=NOW)
    assert (report.count, report.checked, report.ids) == (1, 3, ("old",))
    assert report.retention[0] == pytest.approx(math.exp(-300 / (60 * (1 + 0.2 + 0.15))))
    assert report.idle_days == pytest.approx((300.0,))
    assert rr.stats() == before  # a preview changes nothing
    assert rr.forget_candidates("u", now=NOW).ids == ("old",)  # and can be repeated
    # Another policy, previewed without touching the configured one.
    strict = RetentionPolicy(half_life_days=1)
    assert set(rr.forget_candidates("u", now=NOW, policy=strict).ids) == {
        "old", "old-but-used", "fresh"}
    exempt = PolicySet(RetentionPolicy(), (("u", (("enabled", False),)),))
    assert rr.forget_candidates("u", now=NOW, policy=exempt).count == 0
    # Namespaces stay apart: "other" sees only its own document.
    assert rr.forget_candidates("other", now=NOW).ids == ("their-old",)
    assert rr.forget_candidates("nobody", now=NOW).checked == 0


def test_forget_preview_of_candidates_uses_their_dates_importance_and_the_state(sqlite_rr):
    rr = sqlite_rr
    cands = _aged([10, 200, 200, 200], importance=[1.0, 1.0, 10.0, 1.0])
    _use(rr, "u", "m3", NOW - 5 * DAY)  # used recently: idle 5 days
    report = rr.forget_candidates("u", cands, now=NOW)
    # m1: S = 72, forgotten after 86.7 days; m2: S = 60 x 3 = 180, after 216.7 days.
    assert report.ids == ("m1",)
    assert report.checked == 4


def test_a_config_file_round_trips_the_new_fields(tmp_path):
    from heaprank.config import load_config, save_config
    cfg = Config(weights=Weights(reinforcement=0.5),
                 retention=Retention(recency_kernel="ebbinghaus",
                                     drop_forgotten=True,
                                     policy=parse_policy(POLICY)),
                 exploration=Exploration(rate=0.1, seed=3))
    save_config(cfg, tmp_path / "cfg.json")
    back = load_config(tmp_path / "cfg.json")
    assert back == cfg
    assert back.retention.policy.for_namespace("scratch").half_life_days == 7
    save_config(Config(), tmp_path / "default.json")  # None fields: no policy, no seed
    assert load_config(tmp_path / "default.json") == Config()
    save_config(Config(retention=Retention(policy=tmp_path / "p.toml")), tmp_path / "path.json")
    assert load_config(tmp_path / "path.json").retention.policy == str(tmp_path / "p.toml")
