"""A folder's relevance threshold, and self-calibration on a folder from the command line."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from crag_heuristic import EvaluatorConfig, InputError
from crag_heuristic._bench.data import load_collection, relevance_threshold
from crag_heuristic._cli import main
from crag_heuristic._cli.common import EXIT_BAD_INPUT, EXIT_OK
from crag_heuristic.bench import prepare


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


@pytest.mark.slow
def test_calibrate_self_reads_no_qrels_and_no_queries(
    beir_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus_only = tmp_path / "corpus-only"
    corpus_only.mkdir()
    for name in ("corpus.jsonl", "corpus_minilm_l6_v2.npy", "corpus_minilm_l6_v2.ids.txt"):
        shutil.copy(beir_folder / name, corpus_only / name)
    prepared = prepare(corpus_only, encode=False, corpus_only=True)
    assert len(prepared.collection.doc_ids) == 64 and prepared.collection.qrels == {}
    with pytest.raises(InputError, match=r"queries\.jsonl is missing"):
        prepare(corpus_only, encode=False)
    out = io.StringIO()
    args = ["calibrate", "--self", "--data-dir", str(corpus_only), "--no-encode"]
    code = main([*args, "--out", str(tmp_path / "p.toml")], out=out)
    # simulated queries need MiniLM to be encoded: refused before any work
    assert code == EXIT_BAD_INPUT
    assert "drop --no-encode" in capsys.readouterr().err


@pytest.mark.slow
def test_calibrate_self_from_the_command_line(tmp_path: Path) -> None:
    from crag_heuristic._sample import _read_jsonl

    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps(d) + "\n" for d in _read_jsonl("sample_documents.jsonl")))
    # a FAISS file of one's own and its docs (the older form; an index directory's vectors)
    assert (
        main(["index", "--docs", str(docs), "--out", str(tmp_path / "idx"), "--no-calibrate"]) == 0
    )
    index = tmp_path / "idx" / "vectors.faiss"
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
