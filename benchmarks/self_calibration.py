"""How to self-calibrate: query styles, how many queries, how strong the prior.

    pip install '.[bench]' && python benchmarks/self_calibration.py [--data-root ../shared/data]

Leave one collection out (``crag_heuristic._bench.loco``) with several
self-calibrated gates side by side: each collection's corpus simulates its own
queries (no qrels), the gate fitted on the OTHER collections is the prior, and
every variant is scored on the held-out collection's labelled retrievals.

The rule for :func:`crag_heuristic.calibrate_self`'s defaults (styles, queries,
prior_c): the variant with the best mean difference to the best simple baseline
over all collections. Since that choice sees every collection, the rule itself
is also scored honestly, nested: for each collection the variant is chosen on
the other collections alone and scored on the one left out. Writes ``loco.md``
(with the choice appended) and ``loco.json`` (with a ``choice`` key) to
``--out`` (default benchmarks/results/self_calibration).
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
from pathlib import Path
from typing import Any

from crag_heuristic._bench.loco import SelfVariant, run_loco
from crag_heuristic._self_calibrate import (
    DEFAULT_PRIOR_C,
    DEFAULT_SELF_QUERIES,
    DEFAULT_SELF_STYLES,
)
from crag_heuristic._simulate import STYLES

KNOWN_ITEM = ("title", "sentence", "terms")
VARIANTS = (
    SelfVariant(label="all four styles", styles=STYLES),
    SelfVariant(label="title, sentence, terms", styles=KNOWN_ITEM),
    SelfVariant(label="title + sentence", styles=("title", "sentence")),
    SelfVariant(label="terms only", styles=("terms",)),
    SelfVariant(label="topic only", styles=("topic",)),
    SelfVariant(label="topic only, 100 queries", styles=("topic",), queries=100),
    SelfVariant(label="topic only, 600 queries", styles=("topic",), queries=600),
    SelfVariant(label="all four, 100 queries", styles=STYLES, queries=100),
    SelfVariant(label="all four, 600 queries", styles=STYLES, queries=600),
    SelfVariant(label="all four, weaker prior (prior_c 0.1)", styles=STYLES, prior_c=0.1),
    SelfVariant(label="all four, no prior", styles=STYLES, prior_c=None),
)


def choose(results: dict[str, Any]) -> dict[str, Any]:
    """The rule's pick over all collections, the nested estimate, and whether the
    library's defaults are the pick."""
    rows = results["collections"]
    labels = [v.label for v in VARIANTS]

    def mean_gain(label: str, names: list[str]) -> float:
        return statistics.fmean(rows[n]["gates"][label]["over_best_baseline"] for n in names)

    everything = list(rows)
    pick = max(labels, key=lambda label: mean_gain(label, everything))
    nested = {}
    for name in everything:
        others = [n for n in everything if n != name]
        chosen = max(labels, key=lambda label: mean_gain(label, others))
        nested[name] = {
            "chosen": chosen,
            "auc_mix": rows[name]["gates"][chosen]["auc_mix"],
            "over_best_baseline": rows[name]["gates"][chosen]["over_best_baseline"],
        }
    diffs = [n["over_best_baseline"] for n in nested.values()]
    variant = next(v for v in VARIANTS if v.label == pick)
    library = (tuple(DEFAULT_SELF_STYLES), DEFAULT_SELF_QUERIES, DEFAULT_PRIOR_C)
    return {
        "rule": "best mean difference to the best simple baseline over the collections",
        "pick": pick,
        "pick_mean_over_best_baseline": mean_gain(pick, everything),
        "nested": nested,
        "nested_mean_over_best_baseline": statistics.fmean(diffs),
        "nested_min_over_best_baseline": min(diffs),
        "nested_at_or_above_best_baseline": sum(d >= 0 for d in diffs),
        "library_defaults": {
            "styles": list(DEFAULT_SELF_STYLES),
            "queries": DEFAULT_SELF_QUERIES,
            "prior_c": DEFAULT_PRIOR_C,
        },
        "defaults_match": (variant.styles, variant.queries, variant.prior_c) == library,
    }


def render(choice: dict[str, Any]) -> str:
    lines = [
        "",
        "## Choosing the defaults",
        "",
        f"Rule: {choice['rule']}. Pick: **{choice['pick']}** "
        f"({choice['pick_mean_over_best_baseline']:+.3f}); the library's defaults "
        f"({', '.join(choice['library_defaults']['styles'])}; "
        f"{choice['library_defaults']['queries']} queries; prior_c "
        f"{choice['library_defaults']['prior_c']}) "
        + ("are the pick." if choice["defaults_match"] else "are NOT the pick.")
        + " The rule scored nested (chosen on the other collections, scored on the one "
        "left out):",
        "",
        "| collection | chosen on the others | AUC | vs best baseline |",
        "|---|---|---|---|",
    ]
    for name, n in choice["nested"].items():
        lines.append(
            f"| {name} | {n['chosen']} | {n['auc_mix']:.3f} | {n['over_best_baseline']:+.3f} |"
        )
    lines += [
        "",
        f"Nested: mean {choice['nested_mean_over_best_baseline']:+.3f}, worst "
        f"{choice['nested_min_over_best_baseline']:+.3f}, at or above the best baseline on "
        f"{choice['nested_at_or_above_best_baseline']} of {len(choice['nested'])}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--data-root", default="../shared/data")
    parser.add_argument("--out", default="benchmarks/results/self_calibration")
    parser.add_argument("--cache-dir", default=None, help="query vector cache (default OUT/cache)")
    args = parser.parse_args(argv)
    command = "python benchmarks/self_calibration.py" + "".join(
        f" {flag} {shlex.quote(value)}"
        for flag, value in (("--data-root", args.data_root), ("--out", args.out))
    )
    out = Path(args.out)
    results = run_loco(
        [args.data_root],
        out,
        self_variants=VARIANTS,
        cache_dir=args.cache_dir,
        command=command,
    )
    results["choice"] = choice = choose(results)
    (out / "loco.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    with (out / "loco.md").open("a", encoding="utf-8") as report:
        report.write(render(choice))
    sys.stdout.write(
        f"pick: {choice['pick']} (library defaults "
        f"{'match' if choice['defaults_match'] else 'DO NOT match'})\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
