"""Benchmark section ``stream``: the learning cascade on a folder's traffic, list by list.

The folder's natural retrievals (its judged queries, each retrieval once) are replayed
through a :class:`~crag_heuristic._calibration.learning.LearningCascade` in ``orders``
random orders by :func:`~crag_heuristic._calibration.stream.stream_rows` (the library's
replay, the router's steps), with each grader the folder has: its qrels (a list is good
when it holds a relevant document) and each LLM label set. The rows say how many lists
went to the grader over the stream and over its last 400, and what realised failure
recall the cascade kept, against grading every list, the shipped gate's band certified
once on the first ``explore`` labels, and the top cosine's.

``chunk_kappa``: for each grader, the chunk stage refitted on the grader's chunk grades
of a random half of the queries (:func:`~crag_heuristic._calibration.learning.fit_on_views`),
scored against people (the qrels) on the other half by Cohen's kappa, over
``orders`` halvings; beside it the shipped chunk stage's kappa and the grader's own
on the same chunks.

``results["sections"]["stream"]["rows"]``: one per (predictor, grader, target, eps,
delta): ``calls``, ``calls_last_400``, ``recall``, ``window_recall_min``,
``violations``, ``orders``; ``["chunk_kappa"]``: one per grader.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._calibration.gate import GateExample
from .._calibration.learning import Learning, LearningCascade, ListView, fit_on_views
from .._calibration.stream import stream_rows
from .._config import EvaluatorConfig, load_config
from .._evaluator.evaluator import Evaluator
from .._evaluator.model import apply
from .._exceptions import InputError
from .._optional import requires
from .data import read_qrels
from .pipeline import Prepared, prepare, retrievals_for

TARGETS: tuple[tuple[str, float], ...] = (("recall", 0.10), ("recall", 0.05))


def natural_lists(prepared: Prepared, k: int) -> list[GateExample]:
    """Each judged query's natural retrieval, once (the traffic a user sends)."""
    merged: dict[str, dict[str, int]] = {}
    for split in sorted(prepared.collection.qrels):
        for query, docs in prepared.collection.qrels[split].items():
            merged.setdefault(query, {}).update(docs)
    return retrievals_for(prepared, merged, k, probes=False)


def grader_grades(
    prepared: Prepared, lists: Sequence[GateExample]
) -> dict[str, list[dict[str, float]]]:
    """Per grader, each list's chunk grades: 1 for a chunk it finds relevant, else 0
    (``qrels``: the folder's judgments; ``llm:RUN``: each LLM label set, a chunk it
    did not judge is not relevant)."""
    out = {"qrels": [{c.id: float(c.id in r.relevant) for c in r.chunks} for r in lists]}
    folder = prepared.collection.path / "llm_judgments"
    if folder.is_dir():
        threshold = prepared.collection.relevant_min
        for path in sorted(folder.glob("*.tsv")):
            labels = read_qrels(path)
            out[f"llm:{path.stem}"] = [
                {c.id: float(labels.get(r.group, {}).get(c.id, 0) >= threshold) for c in r.chunks}
                for r in lists
            ]
    return out


def chunk_kappa(
    views: Sequence[ListView],
    grades: Sequence[Mapping[str, float]],
    people: Sequence[Mapping[str, float]],
    gate: EvaluatorConfig,
    *,
    halvings: int,
    seed: int,
) -> dict[str, Any] | None:
    """Cohen's kappa with people of the chunk stage refitted on ``grades`` of half the
    lists, on the other half (module doc); ``None`` when a half has one class."""
    with requires("calibrate", "the stream section"):
        from sklearn.metrics import cohen_kappa_score

    assert gate.model is not None
    rng = np.random.default_rng(seed)
    learned, shipped, grader = [], [], []
    for _ in range(halvings):
        order = rng.permutation(len(views))
        fit, test = order[: len(order) // 2], order[len(order) // 2 :]
        try:
            refit = fit_on_views(gate, [views[i] for i in fit], [grades[i] for i in fit])
        except InputError:
            continue
        assert refit.model is not None
        truth, ours, theirs, base = [], [], [], []
        for i in test:
            for chunk_id, row in views[i].chunks:
                truth.append(people[i].get(chunk_id, 0.0) >= 0.5)
                theirs.append(grades[i].get(chunk_id, 0.0) >= 0.5)
                ours.append(
                    apply(refit.model.chunk, row)[0] > refit.effective_chunk_thresholds.relevant
                )
                base.append(
                    apply(gate.model.chunk, row)[0] > gate.effective_chunk_thresholds.relevant
                )
        if len(set(truth)) < 2:
            continue
        learned.append(cohen_kappa_score(truth, ours))
        shipped.append(cohen_kappa_score(truth, base))
        grader.append(cohen_kappa_score(truth, theirs))
    if not learned:
        return None
    return {
        "learned": float(np.mean(learned)),
        "shipped": float(np.mean(shipped)),
        "grader": float(np.mean(grader)),
        "halvings": len(learned),
    }


def _views(
    prepared: Prepared, config: EvaluatorConfig, k: int, settings: Learning | None
) -> tuple[list[ListView], dict[str, list[dict[str, float]]]]:
    """The folder's natural lists as a learning cascade reads them, and each grader's
    chunk grades of them."""
    lists = natural_lists(prepared, k)
    gate = LearningCascade(config, settings=settings, background=False).gate
    evaluator = Evaluator(gate, analyzer=prepared.analyzer)
    views = [
        ListView.of(r.query, evaluator.evaluate(r.query, r.chunks, prepared.stats)) for r in lists
    ]
    return views, grader_grades(prepared, lists)


def _rarer(
    views: list[ListView], graders: dict[str, list[dict[str, float]]], rate: float, seed: int
) -> tuple[list[ListView], dict[str, list[dict[str, float]]]]:
    """Every good list (by the qrels) and a seeded sample of the failed ones, so that
    failures are ``rate`` of the lists: rarer-failure traffic from the same folder."""
    failed = np.array([not any(g.values()) for g in graders["qrels"]])
    good, bad = np.flatnonzero(~failed), np.flatnonzero(failed)
    wanted = round(rate * len(good) / (1.0 - rate))
    if wanted > len(bad):
        raise InputError(f"the folder's failure rate {failed.mean():.3f} is below {rate}")
    rng = np.random.default_rng(seed)
    keep = np.sort(np.concatenate([good, rng.choice(bad, wanted, replace=False)]))
    return [views[i] for i in keep], {n: [g[i] for i in keep] for n, g in graders.items()}


def run_stream(
    data_dir: str | Path,
    variants: Mapping[str, Learning],
    *,
    profile: EvaluatorConfig | str | None = None,
    k: int = 10,
    orders: int = 20,
    seed: int = 0,
    failure_rate: float | None = None,
    cache_dir: str | Path | None = None,
    encode: bool = True,
) -> dict[str, Any]:
    """The stream section's rows for several learning cascades' settings on one folder
    (qrels as the grader), each replayed in the same ``orders``; ``failure_rate``: keep
    every good list and a seeded sample of failed ones so that failures are that share
    (rarer-failure traffic). Returns ``{"lists", "failure_rate", "rows"}``, each row
    with its ``variant``."""
    prepared = prepare(data_dir, cache_dir, encode=encode)
    config = load_config(profile)
    views, graders = _views(prepared, config, k, None)
    if failure_rate is not None:
        views, graders = _rarer(views, graders, failure_rate, seed)
    rows: list[dict[str, Any]] = []
    for name, settings in variants.items():

        def fixed(target: str, eps: float, chosen: Learning = settings) -> Learning:
            return chosen

        found = stream_rows(
            views, {"qrels": graders["qrels"]}, gate=config,
            targets=((settings.target, settings.eps),), orders=orders, seed=seed, settings=fixed,
        )  # fmt: skip
        rows += [{"variant": name, **row} for row in found]
    return {
        "collection": prepared.collection.name,
        "lists": len(views),
        "failure_rate": float(np.mean([not any(g.values()) for g in graders["qrels"]])),
        "rows": rows,
    }


def stream_section(
    prepared: Prepared,
    config: EvaluatorConfig,
    k: int,
    *,
    orders: int = 20,
    seed: int = 0,
    settings: Learning | None = None,
    log: Callable[[str], None] = lambda message: None,
) -> dict[str, Any]:
    """The section of the module doc, for the folder behind ``prepared``."""
    views, graders = _views(prepared, config, k, settings)
    base = settings or Learning()
    log(f"stream: {len(views)} lists, {len(graders)} grader(s), {orders} orders")

    def chosen(target: str, eps: float) -> Learning:
        from dataclasses import replace

        return replace(base, target=target, eps=eps)  # type: ignore[arg-type]

    rows = stream_rows(
        views,
        graders,
        gate=config,
        targets=TARGETS,
        orders=orders,
        seed=seed,
        settings=chosen,
        progress=prepared.loops,
    )
    kappas = {}
    for name, grades in graders.items():
        found = chunk_kappa(views, grades, graders["qrels"], config, halvings=orders, seed=seed)
        if found is not None:
            kappas[name] = found
    return {
        "lists": len(views),
        "failure_rate": float(np.mean([not any(g.values()) for g in graders["qrels"]])),
        "settings": {
            "explore": base.explore,
            "audit": base.audit,
            "first_refit": base.first_refit,
            "refits": base.refits,
            "prior_c": base.prior_c,
            "delta": base.delta,
        },
        "rows": rows,
        "chunk_kappa": kappas,
    }


def stream_lines(section: Mapping[str, Any]) -> list[str]:
    """The section's tables for a report."""
    s = section["settings"]
    lines = [
        "## Stream: a cascade that learns from its grader",
        "",
        f"{section['lists']} natural lists (failure rate {section['failure_rate']:.2f}) replayed "
        f"in random orders; the learning cascade explores {s['explore']} lists, then audits "
        f"{s['audit']:g} of them, refits up to {s['refits']} times from {s['first_refit']} "
        f"labels, delta {s['delta']:g}. Each cell: calls over the stream / over its last 400 / "
        "realised failure recall / lowest recall over 200 lists / share of orders below target.",
        "",
        "| grader | target | always | learning | static band | top-1 band |",
        "|---|---|---|---|---|---|",
    ]
    rows: Sequence[Mapping[str, Any]] = section["rows"]
    keys = sorted(
        {(r["grader"], r["target"], r["eps"]) for r in rows}, key=lambda x: (x[0] != "qrels", x)
    )
    for grader, target, eps in keys:
        cells = []
        for predictor in ("always", "learning", "static", "top-1"):
            r = next(
                x
                for x in rows
                if (x["grader"], x["target"], x["eps"], x["predictor"])
                == (grader, target, eps, predictor)
            )
            recall = "n/a" if r["recall"] is None else f"{r['recall']:.3f}"
            window = "n/a" if r["window_recall_min"] is None else f"{r['window_recall_min']:.2f}"
            violations = "n/a" if r["violations"] is None else f"{r['violations']:.2f}"
            cells.append(
                f"{r['calls']:.2f} / {r['calls_last_400']:.2f} / {recall} / {window} / {violations}"
            )
        lines.append(f"| {grader} | {target} {1 - eps:.2f} | " + " | ".join(cells) + " |")
    kappas = section.get("chunk_kappa") or {}
    if kappas:
        lines += [
            "",
            "Chunk stage refitted on a grader's chunk grades of half the queries: Cohen's kappa "
            "with people on the other half (the shipped chunk stage's and the grader's own "
            "beside it).",
            "",
            "| grader | learned | shipped | grader itself | halvings |",
            "|---|---|---|---|---|",
        ]
        for name, row in kappas.items():
            kappa = f"{row['learned']:.3f} | {row['shipped']:.3f} | {row['grader']:.3f}"
            lines.append(f"| {name} | {kappa} | {row['halvings']} |")
    lines.append("")
    return lines
