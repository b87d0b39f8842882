"""The calibration and the benchmark harness end to end, on a folder the tests build."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from crag_heuristic import EvaluatorConfig, InputError, Verdict
from crag_heuristic._bench.data import load_collection
from crag_heuristic._bench.pipeline import labels_for, prepare, retrievals_for
from crag_heuristic._cli import main
from crag_heuristic._cli.common import EXIT_BAD_INPUT, EXIT_OK
from crag_heuristic.bench import calibrate, run_bench


def test_the_folder_loads_with_graded_relevance(beir_folder: Path) -> None:
    collection = load_collection(beir_folder)
    assert len(collection.doc_ids) == 64 and collection.relevant_min == 1  # grades 0 and 2
    assert collection.doc_vectors is not None and collection.doc_vectors.shape == (64, 48)
    assert set(collection.qrels) == {"train", "test"}
    assert len(collection.split_queries("test")) == 18


def test_probes_remove_the_relevant_documents(beir_folder: Path) -> None:
    prepared = prepare(beir_folder, encode=False)
    retrievals = retrievals_for(prepared, labels_for(prepared.collection, "qrels", "test"), 5)
    natural = [r for r in retrievals if r.kind == "natural"]
    probes = [r for r in retrievals if r.kind == "probe"]
    assert len(natural) == len(probes) == 18
    assert all(r.failed for r in probes)
    assert all(not ({c.id for c in r.chunks} & r.relevant) for r in probes)
    assert sum(not r.failed for r in natural) >= 15  # the sample's answers are found


def test_missing_vectors_without_encoding_is_a_clear_error(
    beir_folder: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "copy"
    folder.mkdir()
    for item in beir_folder.iterdir():
        if not item.name.startswith("queries_test"):
            (folder / item.name).symlink_to(item)
    prepared = prepare(folder, encode=False)
    with pytest.raises(InputError, match="encoding is off"):
        retrievals_for(prepared, labels_for(prepared.collection, "qrels", "test"), 5)
    with pytest.raises(InputError, match=r"no LLM label set 'nobody'; known: noisy-grader"):
        labels_for(prepared.collection, "llm:nobody", "test")
    with pytest.raises(InputError, match="not in BEIR layout"):
        load_collection(tmp_path)


def test_calibrate_writes_a_profile_the_config_loads(beir_folder: Path, tmp_path: Path) -> None:
    result = calibrate(beir_folder, split="train", k=5, name="sample-fit", encode=False)
    path = result.write(tmp_path / "sample-fit.toml")
    loaded = EvaluatorConfig.from_file(path)
    assert loaded == result.config and loaded.model is not None
    assert loaded.name == "sample-fit" and "sample-beir" in loaded.model.fitted_on
    assert 0 <= loaded.thresholds.partial <= loaded.thresholds.relevant <= 1
    assert result.report["queries"] == 64 and result.report["retrievals"] == 128
    assert 0.5 < result.report["oof_chunk_auc"] <= 1.0
    assert path.read_text().startswith("# crag-heuristic profile 'sample-fit'")


def test_calibrate_on_llm_labels(beir_folder: Path) -> None:
    result = calibrate(beir_folder, labels="llm:noisy-grader", split="test", k=5, encode=False)
    assert "labels llm:noisy-grader" in result.config.description


@pytest.mark.slow
def test_bench_writes_every_section(beir_folder: Path, tmp_path: Path) -> None:
    profile = calibrate(beir_folder, split="train", k=5, encode=False).config
    results = run_bench(
        beir_folder,
        tmp_path / "out",
        k=5,
        profile=profile,
        encode=False,
        agreement_splits=2,  # the reports use 20; each split refits the chunk stage twice
        guarantee_splits=2,  # the reports use 200
        stream_orders=2,  # the reports use 20
        progress=lambda message: None,
    )
    sections = results["sections"]
    assert set(sections) == {
        "failure",
        "agreement",
        "cascade",
        "set-cascade",
        "guarantee",
        "stream",
        "quality",
        "cost",
        "context",
    }
    stream = sections["stream"]
    row_keys = {"predictor", "grader", "target", "eps", "delta", "n", "calls", "calls_last_400",
                "recall", "window_recall_min", "violations", "orders"}  # fmt: skip
    assert all(set(row) == row_keys for row in stream["rows"])
    assert {r["predictor"] for r in stream["rows"]} == {"always", "learning", "static", "top-1"}
    assert {r["grader"] for r in stream["rows"]} == {"qrels", "llm:noisy-grader"}
    assert all(r["orders"] == 2 for r in stream["rows"])
    # 18 lists: the cascade explores them all; every failure goes to the grader
    assert all(r["recall"] in (None, 1.0) for r in stream["rows"] if r["predictor"] == "learning")
    assert "## Stream: a cascade that learns" in (tmp_path / "out" / "report.md").read_text()
    failure = sections["failure"]
    assert failure["natural"] == failure["probes"] == 18
    assert {"seed design (as written)", "synapse", "NQC", "fitted", "WIG"} <= set(failure["auc"])
    assert {"top-1 BM25 / idf mass", "max BM25 / idf mass", "keyword coverage"} <= set(
        failure["auc"]
    )
    assert "LLM as gate: noisy-grader" in failure["auc"]
    assert "seed 004 design" in failure["auc"]
    assert {r["grader"] for r in sections["guarantee"]["rows"]} == {"qrels", "llm:noisy-grader"}
    assert "## Guarantee: grader calls saved" in (tmp_path / "out" / "report.md").read_text()
    set_cascade = sections["set-cascade"]
    assert set_cascade["label_sets"] == 1 and set_cascade["best_label_set"] == "noisy-grader"
    assert set(set_cascade["cascade_auc_at_30pct"]) == {"threshold", "youden"}
    counts = failure["verdicts"]["fitted"]["counts"]
    assert sum(sum(row.values()) for row in counts.values()) == 36
    agreement = sections["agreement"]
    assert agreement["queries"] == 18 and "noisy-grader" in agreement["llm_graders"]
    assert agreement["random_splits"] == 2
    # the noisy grader flips one pair in five: far from perfect, far from chance
    assert 0.3 < agreement["llm_graders"]["noisy-grader"]["kappa_vs_human"] < 0.9
    quality = sections["quality"]
    assert quality["fast_path"]["identical_to_bare"] == quality["fast_path"]["queries"]
    assert sections["cost"]["query_encoder"] == "none (FAISS only)"
    assert "noisy-grader" in sections["cascade"]["graders"]
    context = sections["context"]
    assert context["queries"] == 18 and context["k"] == 5 and context["token_budget"] == 512
    methods = context["methods"]
    assert {"top-k", "always-hybrid, refined", "router", "gate filter (chunks >= PARTIAL)"} <= set(
        methods
    )
    # refinement never sends more than the whole chunks, and the budget holds
    assert methods["top-k, refined"]["tokens_mean"] <= methods["top-k"]["tokens_mean"]
    assert all(m["evidence_recall"] <= 1 for m in methods.values())
    assert methods["router"]["abstention"] is not None and methods["top-k"]["abstention"] is None
    assert [p["k"] for p in context["curves"]["top-k"]] == [1, 2, 3, 4, 5]
    assert "noisy-grader" in context["llm_graders"]
    for name in (
        "report.md",
        "results.json",
        "roc.png",
        "verdicts.png",
        "latency.png",
        "cascade.png",
        "set_cascade.png",
        "context.png",
    ):
        assert (tmp_path / "out" / name).stat().st_size > 0
    report = (tmp_path / "out" / "report.md").read_text()
    assert "| failure ROC-AUC, natural + probes: `fitted` (shipped default) |" in report
    assert "a gate fitted on this folder's train split (qrels)" in report  # it has one
    assert "Section self-calibration skipped: simulated queries need MiniLM" in report
    assert "## Context sent to the generator" in report and "| noisy-grader |" in report
    assert "## Set-level cascade: an LLM grader settles the uncertain lists" in report
    assert json.loads((tmp_path / "out" / "results.json").read_text())["k"] == 5


@pytest.mark.slow
def test_cli_bench_and_calibrate(beir_folder: Path, tmp_path: Path) -> None:
    out = io.StringIO()
    profile = tmp_path / "p.toml"
    code = main(
        [
            "calibrate",
            "--data-dir",
            str(beir_folder),
            "--out",
            str(profile),
            "--k",
            "5",
            "--no-encode",
            "--name",
            "cli-fit",
        ],
        out=out,
    )
    assert code == EXIT_OK and json.loads(out.getvalue())["profile"] == str(profile)
    out = io.StringIO()
    code = main(
        [
            "bench",
            "--data-dir",
            str(beir_folder),
            "--out",
            str(tmp_path / "b"),
            "--k",
            "5",
            "--profile",
            str(profile),
            "--sections",
            "failure,quality",
            "--no-encode",
        ],
        out=out,
    )
    assert code == EXIT_OK
    assert "nDCG@10 bare dense -> CRAG router" in out.getvalue()
    not_beir = tmp_path / "empty"
    not_beir.mkdir()
    bad = ["bench", "--data-dir", str(not_beir), "--out", str(tmp_path / "never"), "--no-encode"]
    assert main(bad, out=io.StringIO()) == EXIT_BAD_INPUT
    assert not (tmp_path / "never").exists()  # nothing written for bad input


def test_the_number_of_agreement_splits_is_an_option(beir_folder: Path, tmp_path: Path) -> None:
    from crag_heuristic._cli import build_parser

    args = build_parser().parse_args(["bench", "--data-dir", "d", "--agreement-splits", "3"])
    assert args.agreement_splits == 3
    assert build_parser().parse_args(["bench", "--data-dir", "d"]).agreement_splits == 20
    with pytest.raises(InputError, match="agreement_splits"):
        run_bench(beir_folder, tmp_path / "never", agreement_splits=-1, encode=False)
    assert not (tmp_path / "never").exists()


def test_the_grader_calibrated_halvings_are_an_option(beir_folder: Path, tmp_path: Path) -> None:
    from crag_heuristic._cli import build_parser

    args = ["bench", "--data-dir", "d", "--guarantee-calibrated-splits", "200"]
    assert build_parser().parse_args(args).guarantee_calibrated_splits == 200
    assert (
        build_parser().parse_args(["bench", "--data-dir", "d"]).guarantee_calibrated_splits is None
    )
    for bad in (0, 3, 1.5, True):
        with pytest.raises(InputError, match="guarantee_calibrated_splits"):
            run_bench(
                beir_folder, tmp_path / "never", guarantee_splits=2,
                guarantee_calibrated_splits=bad, encode=False,  # type: ignore[arg-type]
            )  # fmt: skip
    assert not (tmp_path / "never").exists()


@pytest.mark.slow
def test_a_profile_fitted_here_grades_the_sample(beir_folder: Path) -> None:
    from crag_heuristic import Evaluator

    config = calibrate(beir_folder, split="train", k=5, encode=False).config
    prepared = prepare(beir_folder, encode=False)
    [answered] = [
        r
        for r in retrievals_for(prepared, labels_for(prepared.collection, "qrels", "test"), 5)
        if r.kind == "natural" and r.group == "q1"
    ]
    evaluation = Evaluator(config).evaluate(answered.query, answered.chunks, prepared.stats)
    top = next(g for g in evaluation.chunks if g.chunk_id in answered.relevant)
    assert top.score == max(g.score for g in evaluation.chunks)  # the answer grades highest
    assert evaluation.verdict in set(Verdict)
