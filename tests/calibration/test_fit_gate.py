"""fit_gate's shortcuts for many fits on the same retrievals give the same gate."""

from __future__ import annotations

import pytest

from crag_heuristic import EvaluatorConfig, InputError
from crag_heuristic._calibration.gate import (
    GateExample,
    evaluate_examples,
    fit_chunk_stage,
    fit_gate,
)
from crag_heuristic.sample import load_sample_queries, sample_retriever


@pytest.fixture(scope="module")
def examples() -> list[GateExample]:
    retriever = sample_retriever()
    out = []
    for q in load_sample_queries():
        hits = retriever.search(q["text"], 5)
        relevant = frozenset(q["metadata"]["relevant"])
        out.append(GateExample(q["_id"], "natural", q["text"], tuple(hits), relevant))
        gap = [h for h in retriever.search(q["text"], 5 + len(relevant)) if h.id not in relevant]
        out.append(GateExample(q["_id"], "probe", q["text"], tuple(gap[:5]), relevant))
    return out


def test_precomputed_evaluations_and_chunk_stage_give_the_same_gate(examples) -> None:
    stats = sample_retriever().corpus_stats()
    base = EvaluatorConfig.from_profile("synapse")
    plain = fit_gate(examples, base=base, corpus_stats=stats, fallbacks=False)
    evaluations = evaluate_examples(examples, base, stats)
    shared = fit_gate(
        examples,
        base=base,
        corpus_stats=stats,
        fallbacks=False,
        evaluations=evaluations,
        chunk_stage=fit_chunk_stage(examples, evaluations=evaluations),
    )
    assert shared.config == plain.config


def test_evaluations_of_other_examples_are_refused(examples) -> None:
    base = EvaluatorConfig.from_profile("synapse")
    evaluations = evaluate_examples(examples[:4], base, None)
    with pytest.raises(InputError, match="one per example"):
        fit_gate(examples, base=base, fallbacks=False, evaluations=evaluations)
    stage = fit_chunk_stage(examples[:6])
    with pytest.raises(InputError, match="other examples"):
        fit_gate(examples, base=base, fallbacks=False, chunk_stage=stage)


def test_a_shrunk_set_stage_lies_between_the_anchor_and_the_full_fit(examples) -> None:
    stats = sample_retriever().corpus_stats()
    base = EvaluatorConfig.from_profile("synapse")
    evaluations = evaluate_examples(examples, base, stats)
    chunk_stage = fit_chunk_stage(examples, evaluations=evaluations)
    features = ("similarity_top", "bm25_top")

    def set_weights(**options: object) -> dict[str, float]:
        config = fit_gate(
            examples,
            base=base,
            corpus_stats=stats,
            fallbacks=False,
            evaluations=evaluations,
            chunk_stage=chunk_stage,
            set_features=features,
            **options,  # type: ignore[arg-type]
        ).config
        assert config.model is not None
        return {t.feature: t.weight for t in config.model.set.terms}

    full = set_weights()
    anchor_model = fit_gate(
        examples,
        base=base,
        corpus_stats=stats,
        fallbacks=False,
        evaluations=evaluations,
        chunk_stage=chunk_stage,
        set_features=("similarity_top",),
    ).config.model
    assert anchor_model is not None
    anchor = anchor_model.set.terms[0].weight
    assert set_weights(shrink=1.0) == pytest.approx(full)
    half = set_weights(shrink=0.5)
    assert half["bm25_top"] == pytest.approx(full["bm25_top"] / 2)
    assert half["similarity_top"] == pytest.approx((anchor + full["similarity_top"]) / 2)
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(InputError, match="shrink"):
            set_weights(shrink=bad)
    with pytest.raises(InputError, match="anchor"):
        set_weights(shrink=0.5, anchor=("similarity_mean",))


def test_shrink_is_a_number_not_a_bool(examples) -> None:
    with pytest.raises(InputError, match="shrink"):
        fit_gate(examples, fallbacks=False, shrink=True)
