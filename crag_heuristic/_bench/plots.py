"""PNG plots for the benchmark report (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .._calibration.auc import auc
from .._optional import requires


def pyplot() -> Any:
    with requires("bench", "the benchmark plots"):
        import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(plt: Any, fig: Any, path: Path) -> Path:
    """Lay out, write at 120 dpi and close (a figure left open leaks memory)."""
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def roc_plot(failed: np.ndarray, scores: dict[str, np.ndarray], path: Path, title: str) -> Path:
    """ROC curves for detecting failed retrievals (a low score should mean failed)."""
    with requires("bench", "the benchmark plots"):
        from sklearn.metrics import roc_curve

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 5))
    for name, score in scores.items():
        fpr, tpr, _ = roc_curve(failed, -score)
        ax.plot(fpr, tpr, label=f"{name} (AUC {auc(failed, -score):.3f})")
    ax.plot([0, 1], [0, 1], ":", color="grey")
    ax.set(xlabel="false alarms (good retrievals flagged)", ylabel="failures caught", title=title)
    ax.legend(fontsize=7, loc="lower right")
    return save_figure(plt, fig, path)


def verdict_plot(table: dict[str, Any], path: Path, title: str) -> Path:
    """Stacked bars: how many good, failed and probe retrievals each verdict got."""
    plt = pyplot()
    verdicts = ["relevant", "partial", "irrelevant"]
    groups = [("good", "good natural"), ("failed_natural", "failed natural"), ("probe", "probe")]
    fig, ax = plt.subplots(figsize=(6, 4))
    bottom = np.zeros(len(verdicts))
    for key, label in groups:
        values = np.array([table["counts"][v][key] for v in verdicts])
        ax.bar(verdicts, values, bottom=bottom, label=label)
        bottom += values
    ax.set(ylabel="retrievals", title=title)
    ax.legend()
    return save_figure(plt, fig, path)


def latency_plot(samples: dict[str, list[float]], path: Path, title: str) -> Path:
    """Latency histograms (log scale), one per measured path."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    values = [v for v in samples.values() if v]
    low = max(min(min(v) for v in values), 1e-3)
    high = max(max(v) for v in values)
    bins = np.logspace(np.log10(low), np.log10(high), 50)
    for name, data in samples.items():
        if data:
            ax.hist(data, bins=bins, alpha=0.5, label=f"{name} (p50 {np.median(data):.3f} ms)")
    ax.set_xscale("log")
    ax.set(xlabel="milliseconds", ylabel="queries", title=title)
    ax.legend(fontsize=7)
    return save_figure(plt, fig, path)


def reliability_plot(prob_good: np.ndarray, good: np.ndarray, path: Path, title: str) -> Path:
    """Predicted P(good retrieval) against the observed rate, in ten bins."""
    plt = pyplot()
    edges = np.linspace(0, 1, 11)
    index = np.clip(np.digitize(prob_good, edges) - 1, 0, 9)
    centers, observed, counts = [], [], []
    for b in range(10):
        here = index == b
        if here.any():
            centers.append(prob_good[here].mean())
            observed.append(good[here].mean())
            counts.append(int(here.sum()))
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], ":", color="grey", label="perfect calibration")
    ax.plot(centers, observed, "o-", label="gate")
    for x, y, n in zip(centers, observed, counts, strict=True):
        ax.annotate(str(n), (x, y), fontsize=7, textcoords="offset points", xytext=(3, -10))
    ax.set(
        xlabel="predicted P(good retrieval)",
        ylabel="observed share good",
        title=title,
        xlim=(0, 1),
        ylim=(0, 1),
    )
    ax.legend(fontsize=8)
    return save_figure(plt, fig, path)


def cascade_plot(
    section: dict[str, Any], path: Path, title: str, *, goal: tuple[float, float] = (0.40, 0.30)
) -> Path:
    """Kappa vs people against the share of pairs escalated: one panel per policy,
    one curve per LLM label set (the ones at or above the goal alone in colour,
    with their oracle reference dashed), the gate alone at 0 %."""
    plt = pyplot()
    goal_kappa, goal_share = goal
    policies = [
        p for p in ("band", "budget") if any(p in g["curves"] for g in section["graders"].values())
    ]
    fig, axes = plt.subplots(1, len(policies), figsize=(6 * len(policies), 5), sharey=True)
    axes = np.atleast_1d(axes)
    ranked = sorted(section["graders"].items(), key=lambda kv: -kv[1]["kappa_alone"])
    strong = [name for name, g in ranked if g["kappa_alone"] >= goal_kappa] or [ranked[0][0]]
    for ax, policy in zip(axes, policies, strict=True):
        for name, grader in ranked:
            curve = grader["curves"][policy]
            share = 100 * np.asarray(curve["share"])
            if name in strong:
                (line,) = ax.plot(
                    share, curve["kappa"], lw=2, label=f"{name} (alone {grader['kappa_alone']:.3f})"
                )
                oracle = grader["curves"].get("oracle")
                if oracle is not None:
                    ax.plot(
                        100 * np.asarray(oracle["share"]),
                        oracle["kappa"],
                        "--",
                        color=line.get_color(),
                        lw=1,
                        label=f"{name}: escalating the gate's errors first (reference)",
                    )
            else:
                ax.plot(share, curve["kappa"], color="grey", lw=0.6, alpha=0.5)
        ax.axhline(goal_kappa, color="black", ls=":", lw=1)
        ax.axvline(100 * goal_share, color="black", ls=":", lw=1)
        ax.set(
            xlabel="pairs escalated to the LLM grader (%)",
            title=f"policy: {policy}",
            xlim=(0, 100),
        )
    axes[0].set_ylabel("Cohen's kappa vs people")
    axes[0].legend(fontsize=7, loc="upper left")
    fig.suptitle(title + " (grey: the other label sets)")
    return save_figure(plt, fig, path)


def set_cascade_plot(section: dict[str, Any], path: Path, title: str) -> Path:
    """Failure AUC against the share of lists escalated: one panel per pointer; the
    best and the median label set in colour (the best one's oracle dashed), the
    others grey; the gate alone and the best label set alone as lines."""
    plt = pyplot()
    pointers = [
        p
        for p in ("threshold", "youden")
        if p in section["graders"][section["best_label_set"]]["curves"]
    ]
    fig, axes = plt.subplots(1, len(pointers), figsize=(6 * len(pointers), 5), sharey=True)
    axes = np.atleast_1d(axes)
    ranked = sorted(section["graders"].items(), key=lambda kv: -(kv[1]["auc_alone"] or 0.0))
    median_name = ranked[len(ranked) // 2][0]
    for ax, pointer in zip(axes, pointers, strict=True):
        for name, grader in ranked:
            curve = grader["curves"][pointer]
            share = 100 * np.asarray(curve["share"])
            if name in (section["best_label_set"], median_name):
                tag = "best" if name == section["best_label_set"] else "median"
                (line,) = ax.plot(
                    share,
                    curve["auc"],
                    lw=2,
                    label=f"{name} ({tag}; alone {grader['auc_alone']:.3f})",
                )
                if tag == "best":
                    oracle = grader["curves"]["oracle"]
                    ax.plot(
                        100 * np.asarray(oracle["share"]),
                        oracle["auc"],
                        "--",
                        color=line.get_color(),
                        lw=1,
                        label="escalating the gate's worst-ranked lists first (reference)",
                    )
            else:
                ax.plot(share, curve["auc"], color="grey", lw=0.6, alpha=0.5)
        ax.axhline(section["gate_auc"], color="black", ls=":", lw=1, label="gate alone")
        ax.axhline(
            section["best_llm_as_gate_auc"], color="red", ls=":", lw=1, label="best label set alone"
        )
        ax.axvline(30, color="black", ls=":", lw=0.8)
        ax.set(
            xlabel="lists escalated to the LLM grader (%)",
            title=f"pointer: {pointer}",
            xlim=(0, 100),
        )
    axes[0].set_ylabel("failure ROC-AUC (natural + probes)")
    axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle(title + " (grey: the other label sets)")
    return save_figure(plt, fig, path)


def context_plot(section: dict[str, Any], path: Path, title: str) -> Path:
    """Evidence recall against tokens sent: a curve per method (top-k over k, the refined
    methods over token budgets), each LLM label set as a point."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 5))
    for name, points in section["curves"].items():
        xs = [p["tokens"] for p in points]
        ys = [p["recall"] for p in points]
        ax.plot(xs, ys, "o-", label=name, markersize=3)
        for p in points:
            tag = f"k={p['k']}" if "k" in p else str(p["budget"])
            ax.annotate(
                tag,
                (p["tokens"], p["recall"]),
                fontsize=6,
                xytext=(2, -8),
                textcoords="offset points",
            )
    graders = section.get("llm_graders") or {}
    if graders:
        ax.scatter(
            [g["tokens_mean"] for g in graders.values()],
            [g["evidence_recall"] for g in graders.values()],
            marker="x",
            color="grey",
            label=f"top-{section['k']} filtered by an LLM label set ({len(graders)})",
        )
    gate = section["methods"].get("gate filter (chunks >= PARTIAL)")
    if gate is not None:
        ax.scatter(
            [gate["tokens_mean"]],
            [gate["evidence_recall"]],
            marker="D",
            color="black",
            label="top-k filtered by the gate's chunk grades",
        )
    ax.set(xlabel="tokens sent (mean per query)", ylabel="evidence recall", title=title)
    ax.legend(fontsize=7, loc="lower right")
    return save_figure(plt, fig, path)
