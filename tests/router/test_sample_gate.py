"""The default gate on the bundled sample: every route, decided the way a reader would."""

from __future__ import annotations

from collections import Counter
from typing import Any

from crag_heuristic import CRAG, BM25Retriever, Verdict
from crag_heuristic.sample import load_sample_corpus, load_sample_queries


def test_default_gate_separates_answered_from_unanswered(retriever: Any) -> None:
    crag = CRAG(retriever, lexical=BM25Retriever(load_sample_corpus()), cache=False)
    seen: Counter[tuple[str, str]] = Counter()
    for query in load_sample_queries():
        result = crag.retrieve(query["text"], 5)
        expect = query["metadata"]["expect"]
        seen[(expect, result.initial_evaluation.verdict.value)] += 1
        if expect != "unanswered":  # the answer stays in the final chunks
            assert {c.id for c in result.chunks} & set(query["metadata"]["relevant"]), query
    answered = sum(n for (e, _), n in seen.items() if e == "answered")
    unanswered = sum(n for (e, _), n in seen.items() if e == "unanswered")
    # every directly answered query takes the fast path ...
    assert seen[("answered", Verdict.RELEVANT.value)] == answered == 12
    # ... and no unanswered one does; most of them are called irrelevant
    assert seen[("unanswered", Verdict.RELEVANT.value)] == 0
    assert seen[("unanswered", Verdict.IRRELEVANT.value)] >= unanswered // 2
