"""benchmarks/corrections.py end to end on two small collections the test builds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from crag_heuristic._bench.corrections import VARIANTS
from crag_heuristic._bench.quality import HYBRID

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.slow
def test_route_variants_are_chosen_on_training_data(
    beir_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "data"
    root.mkdir()
    for name in ("scifact", "other"):
        (root / name).symlink_to(beir_folder, target_is_directory=True)
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import corrections
    finally:
        sys.path.remove(str(BENCHMARKS))
    out = tmp_path / "out"
    args = ["--data-root", str(root), "--out", str(out), "--collections", "scifact,other"]
    assert corrections.main([*args, "--latency-queries", "0"]) == 0
    results = json.loads((out / "results.json").read_text())
    folds = results["selection"]["folds"]
    # scifact is chosen on its train split; the other on the collections it is not
    assert folds["scifact"]["training"] == ["scifact:train"]
    assert "other:test" not in folds["other"]["training"]
    assert results["selection"]["shipped"] in {v.name for v in VARIANTS}
    for run in results["runs"].values():
        hybrid = run["references"][HYBRID]["ndcg@10"]
        assert 0.0 <= hybrid <= 1.0
    report = (out / "report.md").read_text()
    assert "## nDCG@10 on each test split" in report and "## Recall@100" in report
    assert (out / "corrections.png").stat().st_size > 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["shipped"]
