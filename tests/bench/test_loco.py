"""Relevance thresholds, leave-one-collection-out and self-calibration from the command line."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from crag_heuristic import EvaluatorConfig, InputError
from crag_heuristic._bench.data import load_collection, relevance_threshold
from crag_heuristic._bench.loco import SelfVariant, collection_folders, render, run_loco
from crag_heuristic._cli import EXIT_BAD_INPUT, EXIT_OK, main


def _copy(folder: Path, to: Path) -> Path:
    to.mkdir()
    for item in folder.iterdir():
        (to / item.name).symlink_to(item)
    return to


def test_the_relevance_threshold_follows_the_grading_scale(tmp_path: Path) -> None:
    binary = {"test": {"q": {"a": 1, "b": 0}}}
    beir_graded = {"test": {"q": {"a": 1, "b": 2}}}  # NFCorpus: BEIR counts from 1
    trec_graded = {"test": {"q": {"a": 0, "b": 1, "c": 3}}}  # TREC DL: 1 means related
    assert relevance_threshold(tmp_path, binary) == 1
    assert relevance_threshold(tmp_path, beir_graded) == 1
    assert relevance_threshold(tmp_path, trec_graded) == 2
    assert relevance_threshold(tmp_path, trec_graded, declared=3) == 3
    (tmp_path / "relevance.json").write_text('{"relevant_min": 3}')
    assert relevance_threshold(tmp_path, binary) == 3
    (tmp_path / "relevance.json").write_text("[]")
    with pytest.raises(InputError, match="relevant_min"):
        relevance_threshold(tmp_path, binary)
    with pytest.raises(InputError, match=">= 1"):
        relevance_threshold(tmp_path, binary, declared=0)


def test_a_folder_declares_its_threshold(beir_folder: Path, tmp_path: Path) -> None:
    folder = _copy(beir_folder, tmp_path / "declared")
    (folder / "relevance.json").write_text('{"relevant_min": 2}')
    assert load_collection(folder).relevant_min == 2
    assert load_collection(folder, relevant_min=1).relevant_min == 1


def test_leave_one_collection_out(beir_folder: Path, tmp_path: Path) -> None:
    parent = tmp_path / "collections"
    parent.mkdir()
    _copy(beir_folder, parent / "alpha")
    _copy(beir_folder, parent / "beta")
    assert [p.name for p in collection_folders([parent])] == ["alpha", "beta"]
    results = run_loco(
        [parent], tmp_path / "out", k=5, self_calibrate=False, encode=False, log=lambda m: None
    )
    assert set(results["collections"]) == {"alpha", "beta"}
    row = results["collections"]["alpha"]
    gate = row["gates"]["gate fitted on the other collections"]
    assert gate["over_best_baseline"] == pytest.approx(gate["auc_mix"] - row["best_baseline_auc"])
    assert row["best_baseline"] in row["baselines"]
    table = (tmp_path / "out" / "loco.md").read_text()
    assert "| alpha |" in table and "| beta |" in table
    assert json.loads((tmp_path / "out" / "loco.json").read_text())["k"] == 5
    assert results["self_variants"] == []  # self_calibrate=False: none ran


def test_self_calibration_variants_are_listed() -> None:
    variants = [
        SelfVariant(label="a", styles=("title", "sentence", "terms", "topic")),
        SelfVariant(label="b", styles=("terms",), prior_c=None),
    ]
    results = {
        "k": 5,
        "library_version": "0",
        "seconds": 1.0,
        "chunk_features": ["similarity"],
        "set_features": ["best_chunk"],
        "self_calibration_queries": 300,
        "command": "",
        "collections": {},
        "summary": {"best baseline": {"mean_auc_mix": 0.5}},
        "self_variants": [
            {"label": v.label, "styles": list(v.styles), "queries": v.queries, "prior_c": v.prior_c}
            for v in variants
        ],
    }
    table = render(results)
    assert "- a: 300 queries, styles title, sentence, terms, topic, pulled towards" in table
    assert "- b: 300 queries, styles terms, fitted from the simulated queries alone" in table


def test_calibrate_self_from_the_command_line(tmp_path: Path) -> None:
    from crag_heuristic._sample import _read_jsonl

    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps(d) + "\n" for d in _read_jsonl("sample_documents.jsonl")))
    index = tmp_path / "s.faiss"
    assert main(["index", "--docs", str(docs), "--out", str(index)], out=io.StringIO()) == 0
    out = io.StringIO()
    profile = tmp_path / "self.toml"
    args = ["calibrate", "--self", "--index", str(index), "--docs", str(docs)]
    code = main([*args, "--out", str(profile), "--queries", "60", "--k", "5"], out=out)
    assert code == EXIT_OK
    report = json.loads(out.getvalue())
    assert report["method"] == "calibrate_self" and report["profile"] == str(profile)
    assert set(report["simulated_queries"]) == {"topic"}  # the default style
    out = io.StringIO()
    code = main(
        [*args, "--out", str(profile), "--queries", "60", "--styles", "title,terms"], out=out
    )
    assert code == EXIT_OK
    assert set(json.loads(out.getvalue())["simulated_queries"]) == {"title", "terms"}
    code = main([*args, "--out", str(profile), "--styles", "riddle"], out=io.StringIO())
    assert code == EXIT_BAD_INPUT
    assert EvaluatorConfig.from_file(profile).model is not None
    assert main(["calibrate", "--out", str(profile)], out=io.StringIO()) == EXIT_BAD_INPUT
    both = ["calibrate", "--self", "--data-dir", str(tmp_path), "--index", str(index)]
    assert main([*both, "--docs", str(docs), "--out", str(profile)], out=io.StringIO()) == 2
