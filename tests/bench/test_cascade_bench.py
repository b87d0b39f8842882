"""The cascade section on a folder the tests build: its ends are the gate alone and
the grader alone, it agrees with the agreement section, and it renders."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from crag_heuristic import EvaluatorConfig
from crag_heuristic._bench.agreement import agreement_section, judged_pools
from crag_heuristic._bench.cascade import CURVES, cascade_section, share_for
from crag_heuristic._bench.harness import _cascade_lines
from crag_heuristic._bench.pipeline import prepare
from crag_heuristic._bench.plots import cascade_plot


def test_share_for_reads_the_curve_by_hand() -> None:
    shares = [0.0, 0.1, 0.2, 0.3]
    assert share_for(shares, [0.2, 0.3, 0.5, 0.6], 0.4) == pytest.approx(0.15)
    assert share_for(shares, [0.45, 0.5, 0.5, 0.6], 0.4) == 0.0
    assert share_for(shares, [0.2, 0.3, 0.35, 0.39], 0.4) is None
    assert share_for(shares, [0.2, 0.4, 0.3, 0.5], 0.4) == pytest.approx(0.1)


def test_cascade_section_on_the_sample(beir_folder: Path, tmp_path: Path) -> None:
    prepared = prepare(beir_folder, encode=False)
    profile = EvaluatorConfig.from_profile("minilm-scifact")
    section = cascade_section(prepared, profile)
    assert section is not None
    agreement = agreement_section(prepared, profile, repeats=1)
    assert agreement is not None
    # the same protocol as the agreement section: the same gate, the same label sets
    assert section["pairs"] == agreement["pairs"] and section["queries"] == 18
    assert section["gate_kappa"] == pytest.approx(
        agreement["kappa_vs_human"]["fitted"]["fixed_split"]
    )
    noisy = section["graders"]["noisy-grader"]
    assert noisy["kappa_alone"] == pytest.approx(
        agreement["llm_graders"]["noisy-grader"]["kappa_vs_human"]
    )
    for curve in CURVES:  # each curve runs from the gate alone to the grader alone
        points = noisy["curves"][curve]
        assert points["share"][0] == 0.0 and points["share"][-1] == 1.0
        assert points["kappa"][0] == pytest.approx(section["gate_kappa"], abs=1e-6)
        assert points["kappa"][-1] == pytest.approx(noisy["kappa_alone"], abs=1e-6)
        assert all(a <= b + 1e-12 for a, b in itertools.pairwise(points["share"]))
    examples, _ = judged_pools(prepared)  # the budget takes floor(b * n) of each list
    sizes = [len(ex.chunks) for ex in examples]
    for step, share in zip(
        noisy["curves"]["budget"]["step"], noisy["curves"]["budget"]["share"], strict=True
    ):
        expected = sum(math.floor(step * n + 1e-9) for n in sizes) / sum(sizes)
        assert share == pytest.approx(expected, abs=1e-6)
    assert section["gate_error_rate"] > 0
    goal = section["goal"]
    assert goal["kappa"] == 0.40 and goal["max_share"] == 0.30
    assert goal["graders_at_or_above_goal_alone"] == (
        ["noisy-grader"] if noisy["kappa_alone"] >= 0.40 else []
    )
    lines = "\n".join(_cascade_lines(section))
    assert "| noisy-grader |" in lines and "share for 0.4" in lines
    assert cascade_plot(section, tmp_path / "cascade.png", "sample").stat().st_size > 0


def test_no_label_sets_no_section(beir_folder: Path, tmp_path: Path) -> None:
    folder = tmp_path / "no-llm"
    folder.mkdir()
    for item in beir_folder.iterdir():
        if item.name != "llm_judgments":
            (folder / item.name).symlink_to(item)
    prepared = prepare(folder, encode=False)
    assert cascade_section(prepared, EvaluatorConfig.from_profile("minilm-scifact")) is None
