"""Config validation: every bad value is a ConfigError (a ValueError) naming the field."""

from __future__ import annotations

import json
import math
import pickle

import pytest

from heaprank import (
    Config,
    ConfigError,
    CoUse,
    Features,
    Inputs,
    Learning,
    Prior,
    Reranker,
    Retention,
    Scoring,
    Weights,
)
from heaprank.config import load_config, save_config


@pytest.mark.parametrize("make, match", [
    (lambda: Weights(relevance=-1), r"weights\.relevance: must be finite and >= 0"),
    (lambda: Weights(recency=math.nan), r"weights\.recency: must be finite"),
    (lambda: Weights(importance=math.inf), r"weights\.importance: must be finite"),
    (lambda: Weights(usefulness=-0.001), r"weights\.usefulness"),
    (lambda: Weights(relevance=True), r"weights\.relevance: expected a number"),
    (lambda: Weights(usefulness=10**400), r"weights\.usefulness: must be finite and >= 0, got "
                                          r"an integer too large for a float"),
    (lambda: Weights(usefulness=1e308), r"weights\.usefulness: must be at most 100, got 1e\+308"),
    (lambda: Weights(recency=100.5), r"weights\.recency: must be at most 100"),
    (lambda: Scoring(fusion_weights={"dense": 1e9}),
     r"scoring\.fusion_weights\['dense'\]: must be at most 100"),
    (lambda: Scoring(intent_recency={"past": -1e9}),
     r"scoring\.intent_recency\['past'\]: must be finite and in \[-100, 100\]"),
    (lambda: Retention(half_life_s=10**400),
     r"retention\.half_life_s: must be finite and >= 0, got an integer"),
    (lambda: Weights(relevance="1"), r"weights\.relevance: expected a number"),
    (lambda: Config(scoring=Scoring(relevance_floor=1.0)), r"scoring\.relevance_floor: must be in \[0, 1\)"),
    (lambda: Config(scoring=Scoring(relevance_floor=1.5)), r"relevance_floor"),
    (lambda: Config(scoring=Scoring(relevance_floor=-0.1)), r"relevance_floor"),
    (lambda: Config(scoring=Scoring(relevance_floor=math.nan)), r"relevance_floor"),
    (lambda: Config(retention=Retention(recency_floor=1.0)),
     r"retention\.recency_floor: must be in \[0, 1\)"),
    (lambda: Config(retention=Retention(half_life_s=0)), r"retention\.half_life_s: must be > 0"),
    (lambda: Config(retention=Retention(half_life_s=-5)), r"half_life_s"),
    (lambda: Config(scoring=Scoring(rank_tau=0)), r"scoring\.rank_tau"),
    (lambda: Config(scoring=Scoring(superseded_multiplier=1.5)), r"scoring\.superseded_multiplier"),
    (lambda: Config(inputs=Inputs(future_tolerance_s=-1)), r"inputs\.future_tolerance_s"),
    (lambda: Config(scoring=Scoring(score_kind="cosine")), r"scoring\.score_kind"),
    (lambda: Config(learning=Learning(reject_discount="linear")), r"learning\.reject_discount"),
    (lambda: Config(inputs=Inputs(on_invalid="ignore")), r"inputs\.on_invalid"),
    (lambda: Config(scoring=Scoring(kind_importance={"fact": 0})), r"scoring\.kind_importance\['fact'\]"),
    (lambda: Config(scoring=Scoring(kind_importance={"fact": -1})), r"scoring\.kind_importance\['fact'\]"),
    (lambda: Config(features=Features(tag_slots="travel")), r"features\.tag_slots"),
    (lambda: Config(features=Features(tag_slots=("ok", 3))), r"features\.tag_slots"),
    (lambda: Config(weights={"relevance": 1}), r"weights: expected Weights"),
    (lambda: Config(learning=Learning(prior=(0.02, 2.0))), r"learning\.prior: expected Prior"),
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
    assert cfg.weights.as_tuple() == (1.0, 1.0, 1.0, 1.5, 0.0, 0.0)  # reinforcement, association off
    assert cfg.retention.recency_floor == 0.9
    assert cfg.learning.reject_discount == "log"
    assert cfg.learning.em_credit is True
    prior = cfg.learning.prior
    assert (prior.mean, prior.strength, prior.kappa) == (0.01, 2.0, 50.0)
    assert 0.01 <= prior.mean <= 0.1  # sceptical: the noisy-OR must not saturate
    assert prior.a0 == pytest.approx(prior.mean * prior.strength)
    assert prior.a0 + prior.b0 == pytest.approx(prior.strength)
    assert cfg.inputs.on_invalid == "raise"


def test_zero_weights_and_floors_are_allowed():
    cfg = Config(weights=Weights(relevance=0, recency=0, importance=0, usefulness=0),
                 scoring=Scoring(relevance_floor=0.0, superseded_multiplier=0.0),
                 retention=Retention(recency_floor=0.0))
    assert cfg.weights.as_tuple() == (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def test_with_weights_returns_a_changed_copy():
    cfg = Config()
    other = cfg.with_weights(recency=0, usefulness=2)
    assert other.weights.as_tuple() == (1.0, 0.0, 1.0, 2.0, 0.0, 0.0)
    assert cfg.weights.as_tuple() == (1.0, 1.0, 1.0, 1.5, 0.0, 0.0)
    with pytest.raises(ConfigError):
        cfg.with_weights(recency=-1)


def test_config_is_frozen_and_its_kind_table_read_only():
    cfg = Config(scoring=Scoring(kind_importance={"fact": 1.1}))
    with pytest.raises(AttributeError):
        cfg.scoring.relevance_floor = 0.5  # type: ignore[misc]
    with pytest.raises(TypeError):
        cfg.scoring.kind_importance["fact"] = 9  # type: ignore[index]


def test_caller_mapping_is_copied():
    table = {"fact": 1.1}
    cfg = Config(scoring=Scoring(kind_importance=table))
    table["fact"] = 5.0
    assert cfg.scoring.kind_importance["fact"] == 1.1


def test_to_dict_is_json_ready():
    cfg = Config(weights=Weights(recency=0.5), features=Features(tag_slots=["travel"]))
    data = json.loads(json.dumps(cfg.to_dict()))
    assert data["weights"] == {"relevance": 1.0, "recency": 0.5, "importance": 1.0,
                               "usefulness": 1.5, "reinforcement": 0.0,
                               "association": 0.0}
    assert data["learning"]["prior"] == {"mean": 0.01, "strength": 2.0, "kappa": 50.0}
    assert data["retention"]["recency_floor"] == 0.9
    assert data["learning"]["reject_discount"] == "log"
    assert data["features"]["tag_slots"] == ["travel"]
    assert data["scoring"]["kind_importance"]["instruction"] == 1.5
    assert data["learning"]["co_use"] is None
    assert data["refit"]["every"] == 100 and data["exploration"] == {"rate": 0.0, "seed": None}
    learning = json.loads(json.dumps(Config(learning=Learning(co_use=CoUse(rate=0.3))).to_dict()))
    co_use = learning["learning"]["co_use"]
    assert co_use["rate"] == 0.3 and co_use["ltp_threshold"] == 5


def test_a_config_with_co_use_pickles():
    cfg = Config(learning=Learning(co_use=CoUse(max_edges=50))).with_weights(association=0.5)
    assert pickle.loads(pickle.dumps(cfg)) == cfg


def test_reranker_rejects_a_non_config():
    with pytest.raises(TypeError, match="config: expected Config"):
        Reranker(config={"weights": None})  # type: ignore[arg-type]


def test_a_config_pickles_and_stays_read_only():
    import pickle

    cfg = Config(features=Features(tag_slots=("urgent",)),
                 scoring=Scoring(kind_importance={"fact": 2.0})).with_weights(recency=0.5)
    back = pickle.loads(pickle.dumps(cfg))
    assert back == cfg and back.scoring.kind_importance["fact"] == 2.0
    with pytest.raises(TypeError):
        back.scoring.kind_importance["fact"] = 3.0  # type: ignore[index]


# ------------------------------------------------------------------------- config files

def test_from_dict_inverts_to_dict_and_fills_defaults():
    cfg = Config(features=Features(tag_slots=("urgent",)),
                 scoring=Scoring(kind_importance={"fact": 1.4}),
                 retention=Retention(half_life_s=7 * 86_400.0),
                 learning=Learning(em_credit=False, prior=Prior(mean=0.02, kappa=10.0)),
                 ).with_weights(recency=0.25)
    assert Config.from_dict(cfg.to_dict()) == cfg
    assert Config.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    assert Config.from_dict({}) == Config()
    partial = Config.from_dict({"weights": {"usefulness": 2.5}, "learning": {"prior": {"kappa": 5}}})
    assert partial.weights == Weights(usefulness=2.5) and partial.learning.prior == Prior(kappa=5)
    assert partial.learning.em_credit is True  # the group's other fields keep their defaults


@pytest.mark.parametrize("data, match", [
    ({"weight": {}}, r"^weight: unknown field; expected one of weights, "),
    ({"weights": {"usefulnes": 2}}, r"weights\.usefulnes: unknown field"),
    ({"weights": [1, 2]}, r"weights: expected a mapping of fields, got list"),
    ({"weights": {"recency": "1"}}, r"weights\.recency: expected a number, got '1'"),
    ({"weights": {"recency": -1}}, r"weights\.recency: must be finite and >= 0"),
    ({"learning": {"prior": {"mean": "0.1"}}}, r"learning\.prior\.mean: expected a number"),
    ({"learning": {"prior": {"mean": 2}}}, r"prior\.mean: must be in \(0, 1\)"),
    ({"learning": {"em_credit": "yes"}}, r"learning\.em_credit: expected true or false"),
    ({"retention": {"half_life_s": True}}, r"retention\.half_life_s: expected a number"),
    ({"retention": {"half_life_s": None}}, r"retention\.half_life_s: null is not a value"),
    ({"scoring": {"score_kind": 1}}, r"scoring\.score_kind: expected a string"),
    ({"scoring": {"score_kind": "cosine"}},
     r"scoring\.score_kind: expected 'similarity' or 'distance'"),
    ({"features": {"tag_slots": "urgent"}}, r"features\.tag_slots: expected a list"),
    ({"scoring": {"kind_importance": ["fact"]}}, r"scoring\.kind_importance: expected a mapping"),
    ({"scoring": {"kind_importance": {"fact": "high"}}},
     r"scoring\.kind_importance\['fact'\]: expected a number"),
    ({"features": {"prefix_chars": 2000.5}}, r"features\.prefix_chars: expected an int >= 100"),
    ({"refit": {"every": -1}}, r"refit\.every: expected an int >= 0, got -1"),
    ({"refit": {"evry": 1}}, r"refit\.evry: unknown field; expected one of every, "),
    ({"refit": 5}, r"refit: expected a mapping of fields, got int"),
    (["weights"], r"config: expected a mapping of fields, got list"),
])
def test_from_dict_names_the_bad_field(data, match):
    with pytest.raises(ConfigError, match=match):
        Config.from_dict(data)


def test_co_use_settings_round_trip_through_dicts_and_files(tmp_path):
    cfg = Config(learning=Learning(co_use=CoUse(max_edges=50, rate=0.3))).with_weights(association=0.5)
    assert Config.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    assert Config.from_dict({"learning": {"co_use": None}}) == Config()  # off, as to_dict writes it
    assert Config.from_dict({"learning": {"co_use": {}}}).learning.co_use == CoUse()
    save_config(cfg, tmp_path / "c.json")
    assert load_config(tmp_path / "c.json") == cfg
    with pytest.raises(ConfigError, match=r"learning\.co_use\.rat: unknown field"):
        Config.from_dict({"learning": {"co_use": {"rat": 0.3}}})
    with pytest.raises(ConfigError, match=r"co_use\.depth: expected an int"):
        Config.from_dict({"learning": {"co_use": {"depth": 1.5}}})


def test_save_and_load_config_round_trip(tmp_path):
    cfg = Config(features=Features(tag_slots=("urgent",))).with_weights(usefulness=2.25, relevance=0.5)
    path = tmp_path / "tuned.json"
    save_config(cfg, path)
    assert load_config(path) == cfg
    assert load_config(str(path)) == cfg
    assert [p.name for p in tmp_path.iterdir()] == ["tuned.json"]  # no partial file left
    save_config(Config(), path)  # replaced whole
    assert load_config(path) == Config()


def test_load_config_reads_toml(tmp_path):
    path = tmp_path / "heaprank.toml"
    path.write_text('[weights]\nusefulness = 2.0\n\n[features]\ntag_slots = ["urgent"]\n\n'
                    '[retention]\nhalf_life_s = 86400.0\n', encoding="utf-8")
    assert load_config(path) == Config(weights=Weights(usefulness=2.0),
                                       features=Features(tag_slots=("urgent",)),
                                       retention=Retention(half_life_s=86_400.0))
    path.write_text("[weights\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="heaprank.toml.*not valid TOML"):
        load_config(path)


def test_load_config_errors_name_the_file_and_the_field(tmp_path):
    with pytest.raises(ConfigError, match=r"missing\.json.*cannot read it"):
        load_config(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"weights": {"recency": 1,}}', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.json.*not valid JSON.*line 1 column"):
        load_config(bad)
    bad.write_text('{"weights": {"recency": -2}}', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.json.*weights\.recency: must be finite and >= 0"):
        load_config(bad)
    with pytest.raises(ConfigError, match="config: expected Config"):
        save_config({"weights": {}}, tmp_path / "x.json")  # type: ignore[arg-type]


def test_the_largest_weight_still_orders_and_scores_apart() -> None:
    """At the bound, scores stay apart (no 0.0 ties) and the order is the retriever's."""
    top = Weights(relevance=100, recency=100, importance=100, usefulness=100)
    rr = Reranker(config=Config(weights=top))
    ranking = rr.rerank("when is my flight?", [
        {"id": str(i), "text": f"flight at {i} pm", "score": 1 - i / 10} for i in range(5)],
        now=1.7e9)
    scores = [r.score for r in ranking]
    assert [r.id for r in ranking] == ["0", "1", "2", "3", "4"]
    assert all(s > 0 for s in scores) and len(set(scores)) == 5


def test_an_invalid_redis_url_is_a_config_error_naming_state_without_its_password() -> None:
    with pytest.raises(ConfigError, match=r"^state: not a valid URL \(Invalid IPv6 URL\)$") as caught:
        Reranker("redis://:s3cret@[::1")
    assert "s3cret" not in str(caught.value)
