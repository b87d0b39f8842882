"""The README's first command answers its own question: the waggle dance first, graded
relevant; and every sample query keeps a sensible result."""

from __future__ import annotations

import io
import json
import re
import shlex
from pathlib import Path
from typing import Any

from crag_heuristic import CRAG, BM25Retriever, Verdict
from crag_heuristic._cli import main
from crag_heuristic._cli.common import EXIT_OK
from crag_heuristic.sample import load_sample_corpus, load_sample_queries

README = Path(__file__).resolve().parents[2] / "README.md"


def first_command() -> list[str]:
    """The arguments of the README's first ``crag-heuristic`` command."""
    match = re.search(r"^pip install \. && crag-heuristic (.+)$", README.read_text(), re.M)
    assert match, "the README's first command moved"
    return shlex.split(match.group(1))


def test_the_readme_shows_what_its_first_command_prints() -> None:
    text = README.read_text()
    shown = text[text.index("\nverdict    ") : text.index("```", text.index("\nverdict    "))]
    out = io.StringIO()
    assert main(first_command(), out=out) == EXIT_OK
    printed = [" ".join(line.split()) for line in out.getvalue().splitlines()]
    for line in shown.strip().splitlines():
        assert " ".join(line.split()) in printed, line


def test_the_readme_command_shows_the_answer_first() -> None:
    argv = first_command()
    assert argv[:2] == ["retrieve", "--query"] and "--pretty" in argv
    assert argv[2] == "How do honeybees tell each other where food is?"
    out = io.StringIO()
    assert main(argv, out=out) == EXIT_OK
    lines = out.getvalue().splitlines()
    header = next(line.split() for line in lines if line.split()[:2] == ["#", "chunk"])
    rows = [line.split() for line in lines if line[:2].strip().isdigit()]
    grade = header.index("grade")  # a corrected route adds the fused rank's rrf column
    assert rows[0][:2] == ["1", "honeybees-3"] and rows[0][grade] == "relevant", out.getvalue()
    assert "The waggle dance" in " ".join(rows[0])
    # the JSON form says the same
    out = io.StringIO()
    assert main([a for a in argv if a != "--pretty"], out=out) == EXIT_OK
    data = json.loads(out.getvalue())
    assert data["chunks"][0]["id"] == "honeybees-3"
    grades = {g["chunk_id"]: g["verdict"] for g in data["evaluation"]["chunks"]}
    assert grades["honeybees-3"] == "relevant"


def test_every_answered_sample_query_gets_its_document_first(retriever: Any) -> None:
    crag = CRAG(retriever, lexical=BM25Retriever(load_sample_corpus()), cache=False)
    for query in load_sample_queries():
        meta = query["metadata"]
        if meta["expect"] != "answered":
            continue
        result = crag.retrieve(query["text"], 5)
        assert result.chunks[0].id in meta["relevant"], query
        grade = {g.chunk_id: g.verdict for g in result.evaluation.chunks}[result.chunks[0].id]
        assert grade is Verdict.RELEVANT, query


def test_the_shipped_gate_on_the_sample_s_labelled_questions(retriever: Any) -> None:
    """What the README says of the sample: every answered question on the fast path, every
    question the corpus cannot answer sent to IRRELEVANT."""
    from crag_heuristic import Evaluator

    gate = Evaluator()
    verdicts: dict[str, list[Verdict]] = {"answered": [], "unanswered": []}
    for query in load_sample_queries():
        expect = query["metadata"]["expect"]
        if expect in verdicts:
            hits = retriever.search(query["text"], 5)
            verdicts[expect].append(
                gate.evaluate(query["text"], hits, retriever.corpus_stats()).verdict
            )
    assert verdicts["answered"] == [Verdict.RELEVANT] * 12
    assert verdicts["unanswered"] == [Verdict.IRRELEVANT] * 6
