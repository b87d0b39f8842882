"""The learning cascade in the router: every answer a label, sync and async alike."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from crag_heuristic import CRAG
from crag_heuristic._calibration.learning import Learning, LearningCascade
from crag_heuristic._exceptions import InputError
from crag_heuristic._grading.graders import CallableGrader
from crag_heuristic._grading.monitor import JsonlGradeLog
from crag_heuristic._sample import load_sample_queries, sample_retriever

QUERIES = load_sample_queries()
RELEVANT = {q["text"]: set(q["metadata"]["relevant"]) for q in QUERIES}


def by_labels(query: str, texts: Sequence[str]) -> list[float]:
    """The sample's own labels as a grader: a chunk answers when its text is one of a
    relevant document's (the grader sees texts, not ids)."""
    return [1.0 if text in ANSWERS.get(query, ()) else 0.0 for text in texts]


RETRIEVER = sample_retriever()
DOCS = {chunk.id: chunk.text for chunk in RETRIEVER.search("honeybees", k=64)}
ANSWERS = {q: {DOCS[d] for d in ids if d in DOCS} for q, ids in RELEVANT.items()}
GRADER = CallableGrader(by_labels, name="sample-labels:v1")


def test_every_answer_is_a_label_and_the_result_says_so(tmp_path: Path) -> None:
    log = JsonlGradeLog(tmp_path / "grades.jsonl")
    learner = LearningCascade(settings=Learning(explore=10, refits=0), log=log, background=False)
    crag = CRAG(RETRIEVER, grader=GRADER, learning=learner)
    results = [crag.retrieve(q["text"], k=3) for q in QUERIES]
    assert all(r.learning is not None for r in results)
    first = results[0].learning
    assert first.exploring and first.audited and first.labelled and first.propensity == 1.0
    assert first.band == (0.0, 1.0) and not first.certified
    assert learner.status().labels == sum(r.learning.labelled for r in results)
    assert results[0].to_dict()["learning"]["labelled"] is True
    # the log holds each query's digest, never its text
    text = (tmp_path / "grades.jsonl").read_text()
    assert QUERIES[0]["text"] not in text


async def test_the_async_router_learns_the_same() -> None:
    sync_learner = LearningCascade(settings=Learning(explore=30, refits=0), background=False)
    async_learner = LearningCascade(settings=Learning(explore=30, refits=0), background=False)
    sync_router = CRAG(RETRIEVER, grader=GRADER, learning=sync_learner)
    async_router = CRAG(RETRIEVER, grader=GRADER, learning=async_learner)
    for q in QUERIES:
        a = sync_router.retrieve(q["text"], k=3)
        b = await async_router.aretrieve(q["text"], k=3)
        assert a.learning == b.learning
    assert sync_learner.status().labels == async_learner.status().labels


def test_the_gate_and_the_escalation_are_the_cascades() -> None:
    learner = LearningCascade(background=False)
    with pytest.raises(InputError, match="needs a grader"):
        CRAG(RETRIEVER, learning=learner)
    with pytest.raises(InputError, match="are its own"):
        CRAG(RETRIEVER, evaluator="minilm-multi", grader=GRADER, learning=learner)
    with pytest.raises(InputError, match="LearningCascade"):
        CRAG(RETRIEVER, grader=GRADER, learning=object())  # type: ignore[arg-type]


def test_an_index_directory_serves_a_learning_cascade(built: Any) -> None:
    learner = LearningCascade(settings=Learning(explore=10, refits=0), background=False)
    crag = CRAG.from_index_dir(built.path, grader=GRADER, learning=learner)
    result = crag.retrieve(QUERIES[0]["text"], k=3)
    assert result.learning is not None and result.learning.labelled
    with pytest.raises(InputError, match="its own"):
        CRAG.from_index_dir(built.path, "minilm-multi", grader=GRADER, learning=learner)
