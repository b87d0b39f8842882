"""The lexical rankings' RRF weight from the gate's own evidence (RouterConfig.fusion_weights)."""

from __future__ import annotations

from typing import Any

import pytest

from crag_heuristic import CRAG, ConfigError, Evaluator, RouterConfig
from crag_heuristic._expansion.fusion import reciprocal_rank_fusion

QUERY = "How do honeybees communicate the distance to food?"


@pytest.mark.parametrize("mode", ["fixed", "gate", "keywords"])
def test_the_lexical_weight_follows_the_first_evaluation(
    retriever: Any, bm25: Any, always_partial: Evaluator, mode: str
) -> None:
    crag = CRAG(
        retriever,
        always_partial,
        lexical=bm25,
        cache=False,
        config={"fusion_weights": mode, "lexical_weight": 0.8, "fetch_k": 20},
    )
    result = crag.retrieve(QUERY, 5)
    first = result.initial_evaluation
    overlap = first.signals.keyword_overlap
    assert overlap is not None
    weight = {
        "fixed": 0.8,
        "gate": 0.8 * 2 * (1 - first.score),  # equal to the dense list's at p = 0.5
        "keywords": 0.8 * 2 * (1 - overlap),
    }[mode]
    expected = reciprocal_rank_fusion(
        [retriever.search(QUERY, 20), bm25.search(QUERY, 20)],
        weights=[1.0, weight],
        keep_scores=True,
    )[:5]
    assert [c.id for c in result.chunks] == [c.id for c in expected]
    assert [c.metadata["rrf_score"] for c in result.chunks] == pytest.approx(
        [c.metadata["rrf_score"] for c in expected]
    )


def test_fusion_weights_are_checked() -> None:
    with pytest.raises(ConfigError, match="fusion_weights"):
        RouterConfig(fusion_weights="loud")  # type: ignore[arg-type]
