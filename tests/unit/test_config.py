"""Config validation: every bad value is a ConfigError (a ValueError) naming the field."""

from __future__ import annotations

import json
import math
import pickle

import pytest

from heaprank import Config, ConfigError, CoUse, Prior, Reranker, Weights


@pytest.mark.parametrize("make, match", [
    (lambda: Weights(relevance=-1), r"weights\.relevance: must be finite and >= 0"),
    (lambda: Weights(recency=math.nan), r"weights\.recency: must be finite"),
    (lambda: Weights(importance=math.inf), r"weights\.importance: must be finite"),
    (lambda: Weights(usefulness=-0.001), r"weights\.usefulness"),
    (lambda: Weights(relevance=True), r"weights\.relevance: expected a number"),
    (lambda: Weights(relevance="1"), r"weights\.relevance: expected a number"),
    (lambda: Config(relevance_floor=1.0), r"relevance_floor: must be in \[0, 1\)"),
    (lambda: Config(relevance_floor=1.5), r"relevance_floor"),
    (lambda: Config(relevance_floor=-0.1), r"relevance_floor"),
    (lambda: Config(relevance_floor=math.nan), r"relevance_floor"),
    (lambda: Config(recency_floor=1.0), r"recency_floor: must be in \[0, 1\)"),
    (lambda: Config(half_life_s=0), r"half_life_s: must be > 0"),
    (lambda: Config(half_life_s=-5), r"half_life_s"),
    (lambda: Config(rank_tau=0), r"rank_tau"),
    (lambda: Config(superseded_multiplier=1.5), r"superseded_multiplier"),
    (lambda: Config(future_tolerance_s=-1), r"future_tolerance_s"),
    (lambda: Config(score_kind="cosine"), r"score_kind"),
    (lambda: Config(reject_discount="linear"), r"reject_discount"),
    (lambda: Config(on_invalid="ignore"), r"on_invalid"),
    (lambda: Config(kind_importance={"fact": 0}), r"kind_importance\['fact'\]"),
    (lambda: Config(kind_importance={"fact": -1}), r"kind_importance\['fact'\]"),
    (lambda: Config(tag_slots="travel"), r"tag_slots"),
    (lambda: Config(tag_slots=("ok", 3)), r"tag_slots"),
    (lambda: Config(weights={"relevance": 1}), r"weights: expected Weights"),
    (lambda: Config(prior=(0.02, 2.0)), r"prior: expected Prior"),
    (lambda: Prior(mean=0), r"prior\.mean: must be in \(0, 1\)"),
    (lambda: Prior(mean=1), r"prior\.mean"),
    (lambda: Prior(mean=math.nan), r"prior\.mean"),
    (lambda: Prior(strength=0), r"prior\.strength: must be > 0"),
    (lambda: Prior(strength=math.inf), r"prior\.strength"),
    (lambda: Prior(kappa=-1), r"prior\.kappa: must be >= 0"),
    (lambda: Prior(kappa=math.nan), r"prior\.kappa"),
])
def test_bad_config_raises_config_error(make, match):
    with pytest.raises(ConfigError, match=match):
        make()


def test_config_error_is_a_value_error():
    with pytest.raises(ValueError):
        Weights(relevance=-1)


def test_defaults_are_valid_and_sensible():
    cfg = Config()
    assert cfg.weights.as_tuple() == (1.0, 1.0, 1.0, 1.5, 0.0)  # association off
    assert cfg.recency_floor == 0.9
    assert cfg.reject_discount == "log"
    assert cfg.em_credit is True
    assert (cfg.prior.mean, cfg.prior.strength, cfg.prior.kappa) == (0.01, 2.0, 50.0)
    assert 0.01 <= cfg.prior.mean <= 0.1  # sceptical: the noisy-OR must not saturate
    assert cfg.prior.a0 == pytest.approx(cfg.prior.mean * cfg.prior.strength)
    assert cfg.prior.a0 + cfg.prior.b0 == pytest.approx(cfg.prior.strength)
    assert cfg.on_invalid == "raise"


def test_zero_weights_and_floors_are_allowed():
    cfg = Config(weights=Weights(relevance=0, recency=0, importance=0, usefulness=0),
                 relevance_floor=0.0, recency_floor=0.0, superseded_multiplier=0.0)
    assert cfg.weights.as_tuple() == (0.0, 0.0, 0.0, 0.0, 0.0)


def test_with_weights_returns_a_changed_copy():
    cfg = Config()
    other = cfg.with_weights(recency=0, usefulness=2)
    assert other.weights.as_tuple() == (1.0, 0.0, 1.0, 2.0, 0.0)
    assert cfg.weights.as_tuple() == (1.0, 1.0, 1.0, 1.5, 0.0)  # association off
    with pytest.raises(ConfigError):
        cfg.with_weights(recency=-1)


def test_config_is_frozen_and_its_kind_table_read_only():
    cfg = Config(kind_importance={"fact": 1.1})
    with pytest.raises(AttributeError):
        cfg.relevance_floor = 0.5  # type: ignore[misc]
    with pytest.raises(TypeError):
        cfg.kind_importance["fact"] = 9  # type: ignore[index]


def test_caller_mapping_is_copied():
    table = {"fact": 1.1}
    cfg = Config(kind_importance=table)
    table["fact"] = 5.0
    assert cfg.kind_importance["fact"] == 1.1


def test_to_dict_is_json_ready():
    cfg = Config(tag_slots=["travel"], weights=Weights(recency=0.5))
    data = json.loads(json.dumps(cfg.to_dict()))
    assert data["weights"] == {"relevance": 1.0, "recency": 0.5, "importance": 1.0,
                               "usefulness": 1.5, "association": 0.0}
    assert data["prior"] == {"mean": 0.01, "strength": 2.0, "kappa": 50.0}
    assert data["recency_floor"] == 0.9 and data["reject_discount"] == "log"
    assert data["tag_slots"] == ["travel"]
    assert data["kind_importance"]["instruction"] == 1.5
    assert data["co_use"] is None
    learning = json.loads(json.dumps(Config(co_use=CoUse(rate=0.3)).to_dict()))
    assert learning["co_use"]["rate"] == 0.3 and learning["co_use"]["ltp_threshold"] == 5


def test_a_config_with_co_use_pickles():
    cfg = Config(co_use=CoUse(max_edges=50)).with_weights(association=0.5)
    assert pickle.loads(pickle.dumps(cfg)) == cfg


def test_reranker_rejects_a_non_config():
    with pytest.raises(TypeError, match="config: expected Config"):
        Reranker(config={"weights": None})  # type: ignore[arg-type]


def test_a_config_pickles_and_stays_read_only():
    import pickle

    cfg = Config(kind_importance={"fact": 2.0}, tag_slots=("urgent",)).with_weights(recency=0.5)
    back = pickle.loads(pickle.dumps(cfg))
    assert back == cfg and back.kind_importance["fact"] == 2.0
    with pytest.raises(TypeError):
        back.kind_importance["fact"] = 3.0  # type: ignore[index]
