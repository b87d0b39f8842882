"""RecordedGrader: label files in the llm_judgments layout as a grader (files written
here; nothing read from ../shared)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from crag_heuristic import CRAG, Chunk, ConfigError, InputError, ScoreKind
from crag_heuristic._grading.recorded import read_labels
from crag_heuristic.grading import GraderOutputError, RecordedGrader, SetEscalation
from crag_heuristic.testing import ListRetriever

HEADER = "query-id\tcorpus-id\tscore\n"
QUERIES = {"q1": "How do bees find flowers?", "q2": "Where does coffee grow?"}


def chunks(*ids: str) -> list[Chunk]:
    return [Chunk(id=i, text=f"text of {i}", score=0.5, score_kind=ScoreKind.COSINE) for i in ids]


@pytest.fixture
def labels_file(tmp_path: Path) -> Path:
    path = tmp_path / "llm_judgments" / "judge-A.tsv"
    path.parent.mkdir()
    path.write_text(
        HEADER + "q1\tp1\t3\nq1\tp2\t2\nq1\tp3\t1\nq1\tp4\t0\nq2\tp5\t10\nq2\tp6\t2.0\n\n",
        encoding="utf-8",
    )
    return path


def test_the_file_is_read_as_scores(labels_file: Path) -> None:
    assert read_labels(labels_file) == {
        "q1": {"p1": 3.0, "p2": 2.0, "p3": 1.0, "p4": 0.0},
        "q2": {"p5": 10.0, "p6": 2.0},
    }


def test_binary_grades_count_relevant_from_the_minimum(labels_file: Path) -> None:
    grader = RecordedGrader.from_file(labels_file)
    assert grader.grade("q1", chunks("p1", "p2", "p3", "p4")) == [1.0, 1.0, 0.0, 0.0]
    assert grader.grade("q2", chunks("p5")) == [1.0]  # a score beyond the scale is relevant
    strict = RecordedGrader.from_file(labels_file, relevant_min=3)
    assert strict.grade("q1", chunks("p1", "p2")) == [1.0, 0.0]  # >= 3, not > 3
    loose = RecordedGrader.from_file(labels_file, relevant_min=1)
    assert loose.grade("q1", chunks("p3", "p4")) == [1.0, 0.0]


def test_graded_grades_are_the_score_over_the_scale_clipped(labels_file: Path) -> None:
    grader = RecordedGrader.from_file(labels_file, output="graded")
    assert grader.grade("q1", chunks("p1", "p2", "p3", "p4")) == pytest.approx(
        [1.0, 2 / 3, 1 / 3, 0.0]
    )
    assert grader.grade("q2", chunks("p5")) == [1.0]  # 10 / 3 clipped
    halves = RecordedGrader.from_file(labels_file, output="graded", scale=4)
    assert halves.grade("q1", chunks("p2")) == [0.5]


def test_a_query_is_found_by_its_text_or_its_id(labels_file: Path) -> None:
    grader = RecordedGrader.from_file(labels_file, queries=QUERIES)
    assert grader.grade("  How do bees find flowers? ", chunks("p1")) == [1.0]
    assert grader.grade("q2", chunks("p6")) == [1.0]
    assert grader.query_id("Where does coffee grow?") == "q2"


def test_an_unjudged_pair_is_an_error_or_the_missing_grade(labels_file: Path) -> None:
    grader = RecordedGrader.from_file(labels_file, queries=QUERIES)
    with pytest.raises(GraderOutputError) as info:
        grader.grade(QUERIES["q1"], chunks("p1", "p9"))
    assert "no recorded label for chunk 'p9' under query 'q1'" in str(info.value)
    assert "bees" not in str(info.value)  # the query's text is not repeated
    assert info.value.grader == grader.fingerprint
    unjudged = RecordedGrader.from_file(labels_file, queries=QUERIES, missing=0.0)
    assert unjudged.grade(QUERIES["q1"], chunks("p1", "p9")) == [1.0, 0.0]


def test_an_unknown_query_is_an_error_whatever_missing_says(labels_file: Path) -> None:
    grader = RecordedGrader.from_file(labels_file, queries=QUERIES, missing=0.0)
    with pytest.raises(GraderOutputError, match="hold no query with this text or id") as info:
        grader.grade("What is the capital of France?", chunks("p1"))
    assert "France" not in str(info.value)
    assert grader.grade("What is the capital of France?", []) == []  # nothing asked


def test_the_fingerprint_changes_with_the_labels_and_the_reading(labels_file: Path) -> None:
    grader = RecordedGrader.from_file(labels_file)
    assert grader.fingerprint.startswith(
        "recorded:judge-A|binary|relevant_min=2|scale=3|missing=error|labels="
    )
    same = RecordedGrader(read_labels(labels_file), name="judge-A")
    assert same.fingerprint == grader.fingerprint
    edited = read_labels(labels_file)
    edited["q1"]["p3"] = 2.0
    variants = [
        RecordedGrader(edited, name="judge-A"),
        RecordedGrader.from_file(labels_file, relevant_min=3),
        RecordedGrader.from_file(labels_file, output="graded"),
        RecordedGrader.from_file(labels_file, missing=0.0),
        RecordedGrader.from_file(labels_file, name="judge-B"),
    ]
    prints = {v.fingerprint for v in variants}
    assert len(prints) == len(variants) and grader.fingerprint not in prints
    assert repr(grader) == (
        "RecordedGrader(name='judge-A', queries=2, pairs=6, output='binary', missing=None)"
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", ":1: the header must be"),
        ("query\tdoc\tscore\nq1\tp1\t1\n", ":1: the header must be"),
        (HEADER + "q1\tp1\n", ":2: 2 field(s), expected 3"),
        (HEADER + "q1\tp1\t1\nq1\tp2\thigh\n", ":3: expected an id, an id and a finite score"),
        (HEADER + "q1\tp1\tnan\n", ":2: expected"),
        (HEADER + "q1\t\t1\n", ":2: expected"),
        (HEADER + "q1\tp1\t1\nq1\tp1\t2\n", ":3: q1 / p1 scored 2, and 1 before"),
    ],
)
def test_a_bad_label_file_names_its_line(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "bad.tsv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_labels(path)
    assert str(info.value).startswith(str(path)) and says in str(info.value)


def test_a_pair_repeated_with_its_score_is_fine_and_a_missing_file_is_named(
    tmp_path: Path,
) -> None:
    path = tmp_path / "twice.tsv"
    path.write_text(HEADER + "q1\tp1\t1\nq1\tp1\t1.0\n", encoding="utf-8")
    assert read_labels(path) == {"q1": {"p1": 1.0}}
    with pytest.raises(InputError, match="cannot read the label file"):
        read_labels(tmp_path / "absent.tsv")


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"relevant_min": float("nan")}, "relevant_min"),
        ({"output": "probability"}, "output"),
        ({"scale": 0}, "scale"),
        ({"missing": 1.5}, "missing"),
        ({"name": "a|b"}, "name"),
        ({"queries": {"q1": "same text", "q2": "same text"}}, "queries"),
        ({"queries": ["q1"]}, "queries"),
    ],
)
def test_bad_options_are_refused(options: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        RecordedGrader({"q1": {"p1": 1}}, **options)  # type: ignore[arg-type]
    assert info.value.field == field
    with pytest.raises(ConfigError):
        RecordedGrader({"q1": {"p1": "high"}})  # type: ignore[dict-item]


def test_it_grades_the_router_s_lists_sync_and_async(labels_file: Path) -> None:
    grader = RecordedGrader.from_file(labels_file, queries=QUERIES, missing=0.0)
    crag = CRAG(
        ListRetriever(chunks("p2", "p9", "p4")),
        expander=False,
        cache=False,
        grader=grader,
        escalation=SetEscalation(band=(0.0, 1.0)),
    )
    for result in (
        crag.retrieve(QUERIES["q1"], 3),
        asyncio.run(crag.aretrieve(QUERIES["q1"], 3)),
    ):
        report = result.cascade
        assert report is not None and report.error is None and report.usage is None
        assert dict(report.grades) == {"p2": 1.0, "p9": 0.0, "p4": 0.0}
