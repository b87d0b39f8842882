from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from crag_heuristic import (
    DEFAULT_PROFILE,
    Chunk,
    ConfigError,
    Evaluator,
    EvaluatorConfig,
    ScoreKind,
    _config,
    available_profiles,
    load_config,
)
from crag_heuristic.config import SignalWeights, Thresholds


def test_synapse_is_the_named_linear_profile() -> None:
    config = EvaluatorConfig.from_profile("synapse")
    assert config.name == "synapse" and config.model is None and config.chunk_thresholds is None
    assert config.weights.as_dict() == {
        "keyword_overlap": 0.30,
        "semantic_coherence": 0.40,
        "length_adequacy": 0.15,
        "source_diversity": 0.15,
    }
    assert (config.thresholds.relevant, config.thresholds.partial) == (0.75, 0.50)


def test_one_default_gate() -> None:
    """Evaluator(), Evaluator(EvaluatorConfig()) and load_config(None) are one gate."""
    default = EvaluatorConfig.from_profile(DEFAULT_PROFILE)
    assert EvaluatorConfig() == default
    assert load_config(None) == default
    assert EvaluatorConfig.from_dict({}) == default
    assert Evaluator().config == default
    assert Evaluator(EvaluatorConfig()).config == default
    chunks = [
        Chunk(id="a", text="Honeybees dance to tell the hive where flowers are.", score=0.62,
              score_kind=ScoreKind.COSINE),
        Chunk(id="b", text="Roman roads were built in layers.", score=0.21,
              score_kind=ScoreKind.COSINE),
    ]  # fmt: skip
    query = "how do bees tell where flowers are?"
    assert Evaluator().evaluate(query, chunks) == Evaluator(EvaluatorConfig()).evaluate(
        query, chunks
    )


def test_the_default_is_whatever_default_profile_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_config, "DEFAULT_PROFILE", "crag")
    crag = EvaluatorConfig.from_profile("crag")
    assert EvaluatorConfig() == crag == load_config(None) == Evaluator().config
    assert EvaluatorConfig(name="mine").thresholds == crag.thresholds


def test_fields_left_out_come_from_the_default_profile() -> None:
    default = EvaluatorConfig()
    bands = Thresholds(relevant=0.9, partial=0.1)
    built = EvaluatorConfig(thresholds=bands)
    assert built.thresholds == bands
    assert built.model == default.model and built.chunk_thresholds == default.chunk_thresholds
    loaded = EvaluatorConfig.from_dict({"thresholds": {"relevant": 0.9}})
    assert loaded.thresholds.relevant == 0.9
    assert loaded.thresholds.partial == default.thresholds.partial
    assert loaded.model == default.model
    assert loaded.name == f"{DEFAULT_PROFILE}+overrides"


def test_profiles_are_complete_definitions() -> None:
    """Built-in and bundled profiles do not depend on the default (no cycle)."""
    names = {f.name for f in dataclasses.fields(EvaluatorConfig) if f.init}  # settings only
    assert set(_config._bare_profile("x")) == names
    for name in available_profiles():
        assert EvaluatorConfig.from_profile(name).name == name


def test_the_default_profile_is_the_fitted_gate() -> None:
    config = EvaluatorConfig.from_profile(DEFAULT_PROFILE)
    assert DEFAULT_PROFILE == "minilm-multi" == Evaluator().config.name
    assert config.model is not None and "scifact train, llmjudge test" in config.model.fitted_on
    assert "birco-clinical-trial test" in config.model.fitted_on  # nine collections
    assert [t.feature for t in config.model.set.terms] == [
        "similarity_top",
        "keyword_coverage",
        "lexical_coherence",
    ]
    assert {f.missing for f in config.model.fallbacks} == {
        ("similarity",),
        ("corpus_stats",),
        ("corpus_stats", "similarity"),
    }
    assert 0 < config.thresholds.partial < config.thresholds.relevant < 1
    assert EvaluatorConfig.from_profile(DEFAULT_PROFILE) is config  # parsed once, shared


def test_crag_profile_uses_the_papers_bands() -> None:
    config = EvaluatorConfig.from_profile("crag")
    assert (config.thresholds.relevant, config.thresholds.partial) == (0.7, 0.3)
    assert config.name == "crag"


def _from_its_file(name: str) -> EvaluatorConfig:
    """A bundled profile built the slow way: its TOML file parsed, every field checked."""
    return _config._definition(name, _config._read_file(_config._bundled_profile_files()[name]))


def test_each_shipped_profile_is_its_toml_file() -> None:
    """The shipped JSON (what a process builds its profiles from, unchecked) is each TOML
    file exactly: field for field, type for type (repr), fingerprint too; one per file, none
    more (after changing a profile file: python tools/ship_profiles.py)."""
    files = _config._bundled_profile_files()
    shipped = {path.stem for path in _config._SHIPPED.glob("*.json")}
    assert shipped == set(files) and DEFAULT_PROFILE in shipped
    for name in files:
        expected = _from_its_file(name)
        text = (_config._SHIPPED / f"{name}.json").read_text(encoding="utf-8")
        assert text == _config.shipped_text(expected), f"{name}: python tools/ship_profiles.py"
        built = _config._shipped(name)
        assert built is not None and built is EvaluatorConfig.from_profile(name)
        assert built == expected and repr(built) == repr(expected)
        assert built.fingerprint() == expected.fingerprint()
        fresh = built.replace()  # checked again, its fingerprint computed again
        assert fresh == built and fresh.fingerprint() == built.fingerprint()


def test_a_profile_name_never_reaches_outside_the_shipped_folder() -> None:
    for name in ["../profiles/minilm-multi", "/etc/passwd", "minilm-multi.json", "a b", "é"]:
        assert not _config._plain_name(name)
        with pytest.raises(ConfigError, match="unknown profile"):
            EvaluatorConfig.from_profile(name)
    assert _config._plain_name("minilm-multi") and _config._plain_name("my_profile2")


def test_a_profile_without_shipped_json_is_read_from_its_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(_config, "_SHIPPED", tmp_path)  # nothing shipped
    _config._shipped.cache_clear()
    try:
        assert EvaluatorConfig.from_profile(DEFAULT_PROFILE) == _from_its_file(DEFAULT_PROFILE)
    finally:
        _config._shipped.cache_clear()


def test_profiles_are_listed() -> None:
    assert {"synapse", "crag"} <= set(available_profiles())


def test_unknown_profile_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="synapse") as info:
        EvaluatorConfig.from_profile("nope")
    assert info.value.field == "profile" and info.value.value == "nope"


def test_config_is_frozen_and_keyword_only() -> None:
    config = EvaluatorConfig()
    with pytest.raises(AttributeError):
        config.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Thresholds(0.8, 0.5)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("data", "field", "value"),
    [
        (
            {
                "weights": {
                    "keyword_overlap": -0.1,
                    "semantic_coherence": 0.6,
                    "length_adequacy": 0.25,
                    "source_diversity": 0.25,
                }
            },
            "weights.keyword_overlap",
            -0.1,
        ),
        ({"weights": {"keyword_overlap": 0.5}}, "weights", None),
        ({"weights": {"keyword_overlap": "0.3"}}, "weights.keyword_overlap", "0.3"),
        ({"thresholds": {"relevant": 1.5}}, "thresholds.relevant", 1.5),
        ({"thresholds": {"relevant": 0.4, "partial": 0.6}}, "thresholds.partial", 0.6),
        ({"thresholds": {"relevnt": 0.4}}, "thresholds.relevnt", 0.4),
        (
            {"coherence": {"cosine_floor": 0.5, "cosine_ceiling": 0.5}},
            "coherence.cosine_ceiling",
            0.5,
        ),
        ({"coherence": {"mean": 0, "top": 0, "gap": 0}}, "coherence.mean", 0),
        ({"length": {"min_tokens": 0}}, "length.min_tokens", 0),
        ({"length": {"min_tokens": 10.5}}, "length.min_tokens", 10.5),
        ({"keyword": {"aggregate": "sum"}}, "keyword.aggregate", "sum"),
        ({"keyword": {"use_idf": "yes"}}, "keyword.use_idf", "yes"),
        ({"refine": {"token_budget": -5}}, "refine.token_budget", -5),
        ({"nonsense": 1}, "nonsense", 1),
        ({"thresholds": 0.5}, "thresholds", 0.5),
        ({"name": ""}, "name", ""),
    ],
)
def test_errors_name_the_field_and_the_value(
    data: dict[str, Any], field: str, value: object
) -> None:
    with pytest.raises(ConfigError) as info:
        EvaluatorConfig.from_dict(data)
    assert info.value.field == field
    if value is not None:
        assert info.value.value == value
    assert field in str(info.value)


def test_nan_weight_is_rejected() -> None:
    with pytest.raises(ConfigError, match="finite"):
        SignalWeights(keyword_overlap=float("nan"))


def test_unknown_key_suggests_the_closest() -> None:
    with pytest.raises(ConfigError, match="did you mean 'thresholds'"):
        EvaluatorConfig.from_dict({"thresholdz": {}})


def test_replace_merges_nested_sections() -> None:
    config = EvaluatorConfig.from_profile("synapse").replace(
        thresholds={"relevant": 0.9}, name="strict"
    )
    assert config.thresholds == Thresholds(relevant=0.9, partial=0.5)
    assert config.name == "strict"
    assert config.replace(chunk_thresholds={"relevant": 0.6}).effective_chunk_thresholds == (
        Thresholds(relevant=0.6, partial=0.5)
    )


def test_profile_key_in_a_dict_is_the_base() -> None:
    config = EvaluatorConfig.from_dict({"profile": "crag", "thresholds": {"partial": 0.2}})
    assert (config.thresholds.relevant, config.thresholds.partial) == (0.7, 0.2)
    assert config.name == "crag+overrides"


def test_to_dict_round_trips() -> None:
    config = EvaluatorConfig.from_profile("crag").replace(chunk_thresholds={"relevant": 0.8})
    assert EvaluatorConfig.from_dict(config.to_dict()) == config


def test_fingerprint_is_stable_and_ignores_the_name() -> None:
    a = EvaluatorConfig()
    assert a.fingerprint() == EvaluatorConfig().fingerprint()
    assert a.fingerprint() == a.replace(name="other").fingerprint()
    assert a.fingerprint() != a.replace(thresholds={"relevant": 0.8}).fingerprint()
    assert len(a.fingerprint()) == 16


TOML = """
profile = "crag"
[weights]
keyword_overlap = 0.5
semantic_coherence = 0.3
length_adequacy = 0.1
source_diversity = 0.1
"""


def test_loads_toml_json_and_yaml(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text(TOML)
    data = {"thresholds": {"relevant": 0.8, "partial": 0.4}}
    (tmp_path / "c.json").write_text(json.dumps(data))
    (tmp_path / "c.yaml").write_text("thresholds:\n  relevant: 0.8\n  partial: 0.4\n")
    toml = EvaluatorConfig.from_file(tmp_path / "c.toml")
    assert toml.weights.keyword_overlap == 0.5 and toml.thresholds.relevant == 0.7
    assert EvaluatorConfig.from_file(tmp_path / "c.json") == EvaluatorConfig.from_file(
        tmp_path / "c.yaml"
    )


def test_file_errors_are_config_errors(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text("weights = [")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "c.ini").write_text("")
    for name, pattern in [
        ("bad.toml", "cannot parse"),
        ("list.json", "mapping"),
        ("c.ini", "suffix"),
        ("missing.toml", "cannot read"),
    ]:
        with pytest.raises(ConfigError, match=pattern):
            EvaluatorConfig.from_file(tmp_path / name)


def test_load_config_resolves_every_form(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text('{"profile": "crag"}')
    assert load_config(None) == EvaluatorConfig.from_profile(DEFAULT_PROFILE)
    assert load_config("crag").thresholds.relevant == 0.7
    assert load_config(tmp_path / "c.json").thresholds.relevant == 0.7
    assert load_config(str(tmp_path / "c.json")).thresholds.relevant == 0.7
    assert load_config({"thresholds": {"relevant": 0.8}}).thresholds.relevant == 0.8
    assert load_config("synapse", thresholds={"partial": 0.4}).thresholds.partial == 0.4
    with pytest.raises(ConfigError):
        load_config(42)  # type: ignore[arg-type]
