"""Self-calibration through a real FAISS retriever over the bundled sample (LSA vectors)."""

from __future__ import annotations

from collections.abc import Sequence

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
from crag_heuristic._config import DEFAULT_PROFILE
from crag_heuristic._self_calibrate import calibrate_self
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
