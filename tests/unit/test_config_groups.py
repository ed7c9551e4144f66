"""Config by concern: one frozen settings group per stage, each checking its own fields; the
flat shape of 0.1 still reads from mappings and files, with a DeprecationWarning."""

from __future__ import annotations

import json
import warnings
from dataclasses import FrozenInstanceError, fields, replace

import pytest

import heaprank
from heaprank import (
    Config,
    ConfigError,
    CoUse,
    Exploration,
    Features,
    Inputs,
    Learning,
    Prior,
    Refit,
    Reranker,
    Retention,
    Scoring,
    Weights,
)
from heaprank.config import FLAT_KEYS, GROUPS, load_config

GROUP_CLASSES = (Inputs, Features, Scoring, Retention, Learning, Refit, Exploration)


def test_each_group_is_a_field_of_config_with_its_defaults():
    assert {name: kind for name, kind in GROUPS.items()} == {
        "inputs": Inputs, "features": Features, "scoring": Scoring, "retention": Retention,
        "learning": Learning, "refit": Refit, "exploration": Exploration}
    cfg = Config()
    for name, kind in GROUPS.items():
        assert getattr(cfg, name) == kind()
    assert [f.name for f in fields(Config)] == ["weights", "qtype_weights", *GROUPS]


def test_the_groups_are_exported_by_heaprank():
    for kind in GROUP_CLASSES:
        assert getattr(heaprank, kind.__name__) is kind
        assert kind.__name__ in heaprank.__all__


def test_a_group_is_frozen_and_takes_keywords_only():
    with pytest.raises(FrozenInstanceError):
        Refit().every = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        Refit(5)  # type: ignore[misc]


def test_the_flat_keywords_are_gone():
    flat = {"refit_every": 5}  # (a mapping, so that a rewrite of flat keywords leaves it)
    with pytest.raises(TypeError, match="refit_every"):
        Config(**flat)


@pytest.mark.parametrize("make, match", [
    (lambda: Refit(every=-1), r"^refit\.every: expected an int >= 0, got -1$"),
    (lambda: Refit(every=True), r"^refit\.every: expected an int >= 0"),
    (lambda: Refit(window=0), r"^refit\.window: expected an int >= 1"),
    (lambda: Refit(shrinkage=-1.0), r"^refit\.shrinkage: must be finite and >= 0"),
    (lambda: Refit(poll_s=float("nan")), r"^refit\.poll_s: must be finite"),
    (lambda: Refit(signals=("recency", "speed")), r"^refit\.signals: expected None or signal"),
    (lambda: Refit(signals="recency"), r"^refit\.signals: expected None or signal"),
    (lambda: Refit(qtypes=1), r"^refit\.qtypes: expected a bool, got int"),
    (lambda: Exploration(rate=1.5), r"^exploration\.rate: must be in \[0, 1\], got 1\.5"),
    (lambda: Exploration(rate=-0.1), r"^exploration\.rate: must be finite and >= 0"),
    (lambda: Exploration(seed=-1), r"^exploration\.seed: expected None or an int >= 0"),
    (lambda: Retention(reinforcement_cap=0.5), r"^retention\.reinforcement_cap: must be >= 1"),
    (lambda: Retention(recency_kernel="linear"), r"^retention\.recency_kernel: expected "
                                                 r"'exponential' or 'ebbinghaus'"),
    (lambda: Retention(policy=3), r"^retention\.policy: expected a file path"),
    (lambda: Retention(drop_forgotten="yes"), r"^retention\.drop_forgotten: expected a bool"),
    (lambda: Features(prefix_chars=99), r"^features\.prefix_chars: expected an int >= 100"),
    (lambda: Features(stage_slots=None), r"^features\.stage_slots: expected a bool"),
    (lambda: Features(speaker_roles=1), r"^features\.speaker_roles: expected a bool"),
    (lambda: Learning(co_use={"rate": 0.3}), r"^learning\.co_use: expected CoUse or None, got dict"),
    (lambda: Learning(em_credit="no"), r"^learning\.em_credit: expected a bool"),
    (lambda: Scoring(intent_recency={"soon": 1.0}), r"^scoring\.intent_recency: unknown intent"),
    (lambda: Scoring(fusion_weights={"": 1.0}), r"^scoring\.fusion_weights: score names must"),
    (lambda: Inputs(future_tolerance_s=float("inf")), r"^inputs\.future_tolerance_s: must be"),
    (lambda: Config(refit={"every": 5}), r"^refit: expected Refit, got dict$"),
    (lambda: Config(scoring=Retention()), r"^scoring: expected Scoring, got Retention$"),
    (lambda: Config(qtype_weights={"whenever": Weights()}), r"^qtype_weights: unknown question type"),
    (lambda: Config(weights=Weights(association=1.0)),
     r"^weights\.association: > 0 needs learning\.co_use=CoUse"),
])
def test_each_group_checks_its_fields_and_names_them_group_dot_field(make, match):
    with pytest.raises(ConfigError, match=match):
        make()


def test_a_group_changes_with_dataclasses_replace():
    cfg = Config(refit=Refit(every=50))
    other = replace(cfg, refit=replace(cfg.refit, window=200))
    assert (other.refit.every, other.refit.window) == (50, 200)
    assert cfg.refit.window == 5000
    with pytest.raises(ConfigError, match=r"refit\.window"):
        replace(cfg, refit=replace(cfg.refit, window=0))


def test_with_changes_takes_a_group_or_a_mapping_of_its_fields():
    cfg = Config(exploration=Exploration(rate=0.2, seed=3))
    changed = cfg.with_changes(exploration={"rate": 0.5}, weights=Weights(recency=0.0))
    assert changed.exploration == Exploration(rate=0.5, seed=3)  # the seed is kept
    assert changed.weights == Weights(recency=0.0)
    assert cfg.with_changes(refit=Refit(every=0)).refit == Refit(every=0)
    with pytest.raises(ConfigError, match=r"^exploration\.sed: unknown field"):
        cfg.with_changes(exploration={"sed": 1})
    with pytest.raises(ConfigError, match=r"^refit_every: unknown field; expected one of weights"):
        cfg.with_changes(refit_every=0)


def test_reranker_with_config_changes_fields_of_one_group():
    rr = Reranker(config=Config(exploration=Exploration(seed=7), refit=Refit(every=0)))
    other = rr.with_config(exploration={"rate": 0.5})
    assert other.config.exploration == Exploration(rate=0.5, seed=7)
    assert other.config.refit.every == 0 and rr.config.exploration.rate == 0.0


def test_to_dict_is_the_grouped_shape_and_reads_back_without_a_warning():
    cfg = Config(refit=Refit(every=50, signals=("recency",)),
                 learning=Learning(co_use=CoUse(max_edges=10), prior=Prior(kappa=5.0)),
                 exploration=Exploration(rate=0.1, seed=1)).with_weights(association=0.5)
    data = json.loads(json.dumps(cfg.to_dict()))
    assert set(data) == {"weights", "qtype_weights", *GROUPS}
    assert data["refit"]["every"] == 50 and data["refit"]["signals"] == ["recency"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Config.from_dict(data) == cfg


def test_every_flat_key_of_0_1_has_one_place_in_a_group():
    places = {(group, name) for group, name in FLAT_KEYS.values()}
    # the 36 flat fields before the groups, less weights and qtype_weights
    assert len(places) == len(FLAT_KEYS) == 34
    born_grouped = {("features", "answer_slots")}  # settings added after the flat shape
    assert places == {(group, f.name) for group, kind in GROUPS.items()
                      for f in fields(kind)} - born_grouped


def test_the_flat_shape_still_reads_with_a_warning_naming_each_new_place():
    flat = {"refit_every": 50, "half_life_s": 86_400.0, "exploration_seed": 3,
            "retention_policy": None, "feature_prefix_chars": 500, "weights": {"recency": 0.5}}
    with pytest.warns(DeprecationWarning) as caught:
        cfg = Config.from_dict(flat)
    message = str(caught[0].message)
    for moved in ("refit_every -> refit.every", "half_life_s -> retention.half_life_s",
                  "exploration_seed -> exploration.seed", "retention_policy -> retention.policy",
                  "feature_prefix_chars -> features.prefix_chars"):
        assert moved in message
    assert "weights" not in message.split("(", 1)[1]  # weights stay where they were
    assert cfg == Config(weights=Weights(recency=0.5), refit=Refit(every=50),
                         retention=Retention(half_life_s=86_400.0),
                         exploration=Exploration(seed=3), features=Features(prefix_chars=500))


def test_flat_and_grouped_keys_mix_but_one_field_given_both_ways_is_an_error():
    with pytest.warns(DeprecationWarning):
        cfg = Config.from_dict({"refit": {"window": 10}, "refit_every": 5})
    assert (cfg.refit.every, cfg.refit.window) == (5, 10)
    with pytest.raises(ConfigError, match=r"^refit_every: given twice, flat and as refit\.every"):
        Config.from_dict({"refit": {"every": 10}, "refit_every": 5})


def test_a_bad_flat_value_is_named_by_its_new_place():
    with pytest.warns(DeprecationWarning), pytest.raises(
            ConfigError, match=r"^refit\.every: expected a number, got 'often'"):
        Config.from_dict({"refit_every": "often"})


def test_a_flat_config_file_still_loads_with_a_warning(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"refit_every": 0, "tag_slots": ["urgent"],
                                "co_use": {"max_edges": 5}}), encoding="utf-8")
    with pytest.warns(DeprecationWarning, match=r"co_use -> learning\.co_use"):
        cfg = load_config(path)
    assert cfg == Config(refit=Refit(every=0), features=Features(tag_slots=("urgent",)),
                         learning=Learning(co_use=CoUse(max_edges=5)))


def test_a_flat_toml_file_still_loads_and_a_bad_grouped_one_names_file_and_field(tmp_path):
    pytest.importorskip("tomllib")
    old = tmp_path / "old.toml"
    old.write_text('exploration_rate = 0.25\n\n[weights]\nusefulness = 2.0\n', encoding="utf-8")
    with pytest.warns(DeprecationWarning, match=r"exploration_rate -> exploration\.rate"):
        assert load_config(old) == Config(weights=Weights(usefulness=2.0),
                                          exploration=Exploration(rate=0.25))
    bad = tmp_path / "bad.toml"
    bad.write_text("[exploration]\nrate = 2.0\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.toml.*exploration\.rate: must be in \[0, 1\]"):
        load_config(bad)
