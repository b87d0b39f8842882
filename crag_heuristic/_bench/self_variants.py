"""Benchmark: how to self-calibrate (query styles, how many queries, how strong the prior).

Nested leave-one-collection-out (:func:`~.loco.run_loco`) with the
self-calibration variants of :data:`VARIANTS`: each collection's corpus
simulates its own queries (no qrels), the nested gate (chosen and fitted
without it) is the prior, and the variant is chosen on the other collections by
its mean gain over the nested gate there, each inner collection
self-calibrated with a prior fitted without the outer one. That nested number
is the estimate of what self-calibration is worth.

The library's default (``DEFAULT_SELF_STYLES``, ``DEFAULT_SELF_QUERIES``,
``DEFAULT_PRIOR_C``) is the variant with the best mean gain when every
collection is self-calibrated with its own nested prior (:func:`choose`: the
same rule on every collection; not a result: the nested number is).
:func:`run_self_calibration` writes ``loco.md``, ``ledger.md`` and
``loco.json`` (with a ``choice`` key); ``benchmarks/self_calibration.py`` is
its command line.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from .._calibration.self_calibration import (
    DEFAULT_PRIOR_C,
    DEFAULT_SELF_QUERIES,
    DEFAULT_SELF_STYLES,
)
from .._calibration.simulation import STYLES
from .loco import LOCO_GATE, SELF_GATE, SelfVariant, run_loco
from .markdown import table_head

KNOWN_ITEM = ("title", "sentence", "terms")  # the styles that quote a known document
VARIANTS = (
    SelfVariant(label="all four styles", styles=STYLES),
    SelfVariant(label="title, sentence, terms", styles=KNOWN_ITEM),
    SelfVariant(label="topic only", styles=("topic",)),
    SelfVariant(label="topic only, 100 queries", styles=("topic",), queries=100),
    SelfVariant(label="topic only, 600 queries", styles=("topic",), queries=600),
    SelfVariant(label="topic only, weaker prior (prior_c 0.1)", styles=("topic",), prior_c=0.1),
    SelfVariant(label="topic only, no prior", styles=("topic",), prior_c=None),
    SelfVariant(label="all four, no prior", styles=STYLES, prior_c=None),
)
"""The self-calibration variants compared: styles, query counts, prior strengths."""


def choose(results: dict[str, Any]) -> dict[str, Any]:
    """The library default's pick (every collection with its nested prior), the nested
    score of self-calibration against the nested gate, and whether the defaults are it."""
    rows = results["collections"]
    labels = [v.label for v in VARIANTS]
    gains = {
        label: [
            (results["self_choice"][n]["auc_mix"][label] or 0.0)
            - (rows[n]["auc"][LOCO_GATE]["mix"] or 0.0)
            for n in rows
        ]
        for label in labels
    }
    pick = max(labels, key=lambda label: statistics.fmean(gains[label]))
    nested = {
        n: (rows[n]["auc"][SELF_GATE]["mix"] or 0.0) - (rows[n]["auc"][LOCO_GATE]["mix"] or 0.0)
        for n in rows
    }
    variant = next(v for v in VARIANTS if v.label == pick)
    library = (tuple(DEFAULT_SELF_STYLES), DEFAULT_SELF_QUERIES, DEFAULT_PRIOR_C)
    return {
        "rule": "the best mean gain in failure AUC over the nested gate",
        "pick": pick,
        "pick_mean_gain": statistics.fmean(gains[pick]),
        "mean_gain": {label: statistics.fmean(g) for label, g in gains.items()},
        "nested_gain": nested,
        "nested_mean_gain": statistics.fmean(nested.values()),
        "nested_at_or_above": sum(g >= 0 for g in nested.values()),
        "library_defaults": {
            "styles": list(DEFAULT_SELF_STYLES),
            "queries": DEFAULT_SELF_QUERIES,
            "prior_c": DEFAULT_PRIOR_C,
        },
        "defaults_match": (variant.styles, variant.queries, variant.prior_c) == library,
    }


def render(choice: dict[str, Any], results: dict[str, Any]) -> str:
    """The report's section on the variants: each one's gain, the pick, the nested gains."""
    rows = results["collections"]
    lines = [
        "",
        "## Self-calibration variants on each collection (prior: its nested gate)",
        "",
        "Every variant's AUC (mix) minus the nested gate's, per collection: a reference table "
        "(the library default is picked on it); the nested choice per collection is below.",
        "",
        *table_head("variant", *rows, "mean"),
    ]
    for label in choice["mean_gain"]:
        cells = [
            f"{(results['self_choice'][n]['auc_mix'][label] or 0.0) - gate:+.3f}"
            for n in rows
            for gate in [rows[n]["auc"][LOCO_GATE]["mix"] or 0.0]
        ]
        lines.append(
            f"| {label} | " + " | ".join(cells) + f" | {choice['mean_gain'][label]:+.3f} |"
        )
    lines += [
        "",
        f"Rule: {choice['rule']}. Pick: **{choice['pick']}** ({choice['pick_mean_gain']:+.3f}); "
        f"the library's defaults ({', '.join(choice['library_defaults']['styles'])}; "
        f"{choice['library_defaults']['queries']} queries; prior_c "
        f"{choice['library_defaults']['prior_c']}) "
        + ("are the pick." if choice["defaults_match"] else "are NOT the pick.")
        + " Nested (the variant chosen on the other collections, scored on the one left out):",
        "",
        "| collection | chosen on the others | self-calibrated AUC | nested gate AUC | gain |",
        "|---|---|---|---|---|",
    ]
    for n in rows:
        lines.append(
            f"| {n} | {results['self_choice'][n]['chosen']} | "
            f"{rows[n]['auc'][SELF_GATE]['mix']:.3f} | {rows[n]['auc'][LOCO_GATE]['mix']:.3f} | "
            f"{choice['nested_gain'][n]:+.3f} |"
        )
    lines += [
        "",
        f"Nested mean gain {choice['nested_mean_gain']:+.3f}, at or above the nested gate on "
        f"{choice['nested_at_or_above']} of {len(rows)}.",
    ]
    return "\n".join(lines) + "\n"


def run_self_calibration(
    data_root: str | Path,
    out: str | Path,
    *,
    cache_dir: str | Path | None = None,
    command: str = "",
) -> dict[str, Any]:
    """Nested LOCO over every collection under ``data_root`` with :data:`VARIANTS`.

    Args:
        data_root: the folder holding one BEIR folder per collection (at
            least three).
        out: where ``loco.md``, ``ledger.md`` and ``loco.json`` are written.
        cache_dir: the query vector cache (default ``out/cache``).
        command: the command line the report quotes.

    Returns:
        What ``loco.json`` holds: :func:`~.loco.run_loco`'s results and the
        variant :func:`choose` picks under ``choice``.

    Raises:
        InputError: fewer than three collections.
    """
    folder = Path(out)
    results = run_loco(
        [data_root],
        folder,
        self_variants=VARIANTS,
        cache_dir=cache_dir,
        command=command,
    )
    results["choice"] = choice = choose(results)
    (folder / "loco.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    with (folder / "loco.md").open("a", encoding="utf-8") as report:
        report.write(render(choice, results))
    return results
