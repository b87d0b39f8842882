"""Which correction pays? Route variants on every collection, chosen on training data.

    pip install '.[bench]' && python benchmarks/corrections.py [--data-root ../shared/data]

For each collection (``--collections``, default the nine of ``../shared/data``) every
route variant (:func:`crag_heuristic.bench.run_corrections`) runs on the judged queries
(SciFact: its train split too), with nDCG@10, Recall@100, per-route deltas against the
bare dense list and the corrected path's p50 latency over the bare retrieval's in the
same run. Then the variants are chosen the way a user without the test labels would:

* SciFact: on its train split, reported on its test split;
* every other collection (no train split): leave one collection out, chosen on SciFact's
  train split and the other collections' test splits (each weighing the same), reported
  on the held-out collection;
* a variant is eligible only where its corrected p50 stays within 2.5 x the bare
  retrieval's on every training set; among those the best mean nDCG@10 wins.

The shipped default is the variant most folds choose. Writes ``results.json``,
``report.md`` and ``corrections.png`` to ``--out`` (default benchmarks/results/corrections);
per-collection runs are kept under ``runs/`` and reused with ``--reuse``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys

from crag_heuristic.bench import run_corrections


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", default="../shared/data")
    parser.add_argument("--out", default="benchmarks/results/corrections")
    parser.add_argument(
        "--collections",
        default=None,
        help="comma-separated folder names (default: the nine of ../shared/data)",
    )
    parser.add_argument("--latency-queries", type=int, default=100)
    parser.add_argument("--profile", default=None, help="gate profile (default: the library's)")
    parser.add_argument("--cache-dir", default=None, help="query vector cache (default OUT/cache)")
    parser.add_argument("--reuse", action="store_true", help="reuse runs/ from a previous run")
    args = parser.parse_args(argv)
    results = run_corrections(
        args.data_root,
        args.out,
        collections=None
        if args.collections is None
        else [c for c in args.collections.split(",") if c],
        latency_queries=args.latency_queries,
        profile=args.profile,
        cache_dir=args.cache_dir,
        reuse=args.reuse,
        command="python benchmarks/corrections.py "
        + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])),
    )
    print(json.dumps({k: results["selection"][k] for k in ("votes", "shipped")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
