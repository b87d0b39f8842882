"""How to self-calibrate: query styles, how many queries, how strong the prior.

    pip install '.[bench]' && python benchmarks/self_calibration.py [--data-root ../shared/data]

Leave one collection out (``crag_heuristic._bench.loco``) with several
self-calibrated gates side by side: each collection's corpus simulates its own
queries (no qrels), the gate fitted on the OTHER collections is the prior, and
every variant is scored on the held-out collection's labelled retrievals. The
defaults of :func:`crag_heuristic.calibrate_self` (styles, queries, prior_c)
are the variant with the best mean failure AUC over the collections left out.
Writes ``loco.md`` and ``loco.json`` to ``--out`` (default
benchmarks/results/self_calibration).
"""

from __future__ import annotations

import argparse
import shlex
import sys

from crag_heuristic._bench.loco import SelfVariant, run_loco
from crag_heuristic._simulate import STYLES

VARIANTS = (
    SelfVariant(label="default (4 styles, 300 queries)"),
    SelfVariant(label="no topic queries", styles=("title", "sentence", "terms")),
    SelfVariant(label="title + sentence", styles=("title", "sentence")),
    SelfVariant(label="terms only", styles=("terms",)),
    SelfVariant(label="topic only", styles=("topic",)),
    SelfVariant(label="100 queries", queries=100),
    SelfVariant(label="600 queries", queries=600),
    SelfVariant(label="weaker prior (prior_c 0.1)", prior_c=0.1),
    SelfVariant(label="no prior", prior_c=None),
)
assert set(VARIANTS[0].styles) == set(STYLES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-root", default="../shared/data")
    parser.add_argument("--out", default="benchmarks/results/self_calibration")
    parser.add_argument("--cache-dir", default=None, help="query vector cache (default OUT/cache)")
    args = parser.parse_args(argv)
    command = "python benchmarks/self_calibration.py" + "".join(
        f" {flag} {shlex.quote(value)}"
        for flag, value in (("--data-root", args.data_root), ("--out", args.out))
    )
    results = run_loco(
        [args.data_root],
        args.out,
        self_variants=VARIANTS,
        cache_dir=args.cache_dir,
        command=command,
    )
    summary = results["summary"]
    best = max((v.label for v in VARIANTS), key=lambda label: summary[label]["mean_auc_mix"])
    sys.stdout.write(f"best mean failure AUC left out: {best}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
