"""Self-calibration through a real FAISS retriever over the bundled sample (LSA vectors)."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from typing import Any

import pytest

from crag_heuristic import (
    Chunk,
    Evaluator,
    EvaluatorConfig,
    InputError,
    RetrieverError,
    ScoreKind,
    Verdict,
)
from crag_heuristic._calibration import self_calibration as self_calibrate
from crag_heuristic._calibration.self_calibration import (
    Simulation,
    calibrate_self,
    fit_simulation,
    simulate,
)
from crag_heuristic._config import DEFAULT_PROFILE
from crag_heuristic.bench import CalibrationWarning
from crag_heuristic.sample import load_sample_corpus, load_sample_queries, sample_retriever


@pytest.fixture(scope="module")
def retriever():
    return sample_retriever()


@pytest.fixture(scope="module")
def fitted(retriever):
    return calibrate_self(retriever, load_sample_corpus(), k=5, queries=80, seed=1)


def test_the_profile_loads_and_says_how_it_was_made(fitted, tmp_path) -> None:
    path = fitted.write(tmp_path / "self.toml")
    loaded = EvaluatorConfig.from_file(path)
    assert loaded == fitted.config and loaded.model is not None
    assert "simulated queries" in loaded.model.fitted_on
    assert "no relevance labels" in loaded.model.fitted_on
    text = path.read_text()
    assert "# method: calibrate_self" in text and "# simulated_queries:" in text
    assert fitted.report["prior"].startswith(DEFAULT_PROFILE)
    assert {f.missing for f in loaded.model.fallbacks} == {
        ("similarity",),
        ("corpus_stats",),
        ("corpus_stats", "similarity"),
    }


def test_same_seed_same_profile(retriever, fitted) -> None:
    again = calibrate_self(retriever, load_sample_corpus(), k=5, queries=80, seed=1)
    assert again.config == fitted.config


def test_the_self_calibrated_gate_passes_the_sample_answers(retriever, fitted) -> None:
    evaluator = Evaluator(fitted.config)
    answered = [q for q in load_sample_queries() if q["metadata"]["expect"] == "answered"]
    verdicts = [
        evaluator.evaluate(q["text"], retriever.search(q["text"], 5), retriever.corpus_stats())
        for q in answered
    ]
    assert sum(e.verdict is not Verdict.IRRELEVANT for e in verdicts) >= len(answered) * 0.7


class _Flaky:
    """The sample retriever failing on every ``every``-th query."""

    def __init__(self, inner, every: int) -> None:
        self.inner, self.every, self.calls = inner, every, 0

    def search(self, query: str, k: int) -> list[Chunk]:
        self.calls += 1
        if self.calls % self.every == 0:
            raise ConnectionError("the index went away")
        hits: list[Chunk] = self.inner.search(query, k)
        return hits


def test_a_retriever_failing_now_and_then_is_counted(retriever) -> None:
    result = calibrate_self(_Flaky(retriever, 10), load_sample_corpus(), k=5, queries=60)
    assert 0 < result.report["retriever_failures"] <= 10


def test_a_retriever_failing_often_is_an_error(retriever) -> None:
    with pytest.raises(RetrieverError, match=r"failed on .* simulated queries"):
        calibrate_self(_Flaky(retriever, 2), load_sample_corpus(), k=5, queries=60)


class _Batched:
    def __init__(self, inner) -> None:
        self.inner, self.batches = inner, 0

    def search(self, query: str, k: int) -> list[Chunk]:
        raise AssertionError("search_many is preferred")

    def search_many(self, queries: Sequence[str], k: int) -> list[list[Chunk]]:
        self.batches += 1
        return [self.inner.search(q, k) for q in queries]


def test_search_many_is_used_in_batches(retriever) -> None:
    batched = _Batched(retriever)
    calibrate_self(batched, load_sample_corpus(), k=5, queries=60, styles=("title", "terms"))
    assert 1 <= batched.batches <= 3


class _Answers:
    def __init__(self, answer: object) -> None:
        self.answer = answer

    def search(self, query: str, k: int) -> object:
        return self.answer


def test_bad_input_is_a_typed_error(retriever) -> None:
    docs = load_sample_corpus()
    with pytest.raises(InputError, match="at least 50 documents"):
        calibrate_self(retriever, docs[:49])
    blank = [d.replace(text="   ") for d in docs[:20]] + docs[20:60]
    with pytest.raises(InputError, match="at least 50 documents with text, got 40"):
        calibrate_self(retriever, blank)
    with pytest.raises(InputError, match="ids repeat"):
        calibrate_self(retriever, [*docs, docs[0]])
    with pytest.raises(RetrieverError, match="not a list of chunks"):
        calibrate_self(_Answers(None), docs)  # type: ignore[arg-type]
    with pytest.raises(RetrieverError, match="not a Chunk"):
        calibrate_self(_Answers([1, 2]), docs)  # type: ignore[arg-type]
    strangers = [Chunk(id="x", text="nothing here", score=0.5, score_kind=ScoreKind.COSINE)]
    with pytest.raises(InputError, match="found no simulated query's source"):
        calibrate_self(_Answers(strangers), docs, styles=("terms",))  # type: ignore[arg-type]
    with pytest.raises(InputError, match="has no fitted model"):
        calibrate_self(retriever, docs, prior="synapse")


def _shuffled(simulation: Simulation) -> Simulation:
    """The simulation with its queries' targets shuffled between them: labels that
    the evidence cannot predict, so no band meets its targets."""
    targets = [ex.relevant for ex in simulation.natural]
    random.Random(0).shuffle(targets)
    by_group = {ex.group: t for ex, t in zip(simulation.natural, targets, strict=True)}
    examples = [dataclasses.replace(ex, relevant=by_group[ex.group]) for ex in simulation.examples]
    return dataclasses.replace(simulation, examples=examples)


@pytest.fixture(scope="module")
def unpredictable(retriever) -> Simulation:
    return _shuffled(simulate(retriever, load_sample_corpus(), k=5, queries=60, seed=1))


def test_bands_that_miss_their_targets_are_said_and_the_prior_s_are_kept(
    unpredictable, tmp_path
) -> None:
    """The warnings on the result and in the profile's header, and the prior's bands
    in place of the fitted ones."""
    prior = EvaluatorConfig.from_profile(DEFAULT_PROFILE)
    result = fit_simulation(unpredictable, fallbacks=False)
    assert result.report["bands_met_targets"] is False
    assert any("prior's bands are kept" in w for w in result.warnings)
    assert result.report["warnings"] == list(result.warnings)
    assert result.report["bands"].startswith("the prior's")
    assert result.config.thresholds == prior.thresholds
    header = result.write(tmp_path / "p.toml").read_text().splitlines()
    assert header[1].startswith("# WARNING: the fast-path band cannot meet its targets")


def test_without_a_prior_missed_targets_keep_the_closest_bands(unpredictable) -> None:
    result = fit_simulation(unpredictable, prior=None, fallbacks=False)
    assert any("the closest it could fit" in w for w in result.warnings)
    assert result.report["bands"].startswith("fitted (targets missed")


def test_bands_that_meet_their_targets_raise_no_warning(fitted) -> None:
    assert fitted.report["bands_met_targets"] is True
    assert fitted.warnings == () and fitted.report["warnings"] == []
    assert fitted.report["bands"] == "fitted on the simulated queries (out-of-fold)"


@pytest.fixture
def unpredictable_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    """calibrate_self fitting on shuffled targets (the missed-targets path end to end)."""
    real = self_calibrate.fit_simulation

    def shuffled_fit(simulation: Simulation, **kwargs: Any) -> Any:
        return real(_shuffled(simulation), **kwargs)

    monkeypatch.setattr(self_calibrate, "fit_simulation", shuffled_fit)


@pytest.mark.usefixtures("unpredictable_fits")
def test_calibrate_self_warns_where_the_targets_are_missed(retriever) -> None:
    with pytest.warns(CalibrationWarning, match="cannot meet its targets"):
        result = calibrate_self(retriever, load_sample_corpus(), k=5, queries=60, seed=1)
    assert result.warnings


@pytest.mark.usefixtures("unpredictable_fits")
def test_strict_calibration_fails_where_the_targets_are_missed(tmp_path, capsys) -> None:
    import json

    from crag_heuristic._cli import main
    from crag_heuristic._cli.common import EXIT_BAD_INPUT, EXIT_OK
    from crag_heuristic._sample import _read_jsonl

    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps(d) + "\n" for d in _read_jsonl("sample_documents.jsonl")))
    index = tmp_path / "index"  # an index directory: its documents, vectors and statistics
    assert main(["index", "--docs", str(docs), "--out", str(index)]) == EXIT_OK
    profile = tmp_path / "self.toml"
    args = ["calibrate", "--self", "--index", str(index), "--k", "5"]
    args += ["--queries", "60"]
    capsys.readouterr()
    assert main([*args, "--out", str(profile)]) == EXIT_OK
    assert "crag-heuristic: warning: the fast-path band" in capsys.readouterr().err
    assert profile.read_text().splitlines()[1].startswith("# WARNING:")
    strict = tmp_path / "strict.toml"
    assert main([*args, "--out", str(strict), "--strict"]) == EXIT_BAD_INPUT
    assert "--strict" in capsys.readouterr().err and not strict.exists()
