"""How to self-calibrate: query styles, how many queries, how strong the prior.

    pip install '.[bench]' && python benchmarks/self_calibration.py [--data-root ../shared/data]

Nested leave-one-collection-out (``crag-heuristic bench --loco``,
:func:`crag_heuristic.bench.run_self_calibration`) with several self-calibration variants:
each collection's corpus simulates its own queries (no qrels), the nested
gate (chosen and fitted without it) is the prior, and the variant is chosen
on the other collections by its mean gain over the nested gate there, each
inner collection self-calibrated with a prior fitted without the outer one.
That nested number is the estimate of what self-calibration is worth; it
keeps its place as a recommendation only where it beats the fixed gate.

The library's default (``DEFAULT_SELF_STYLES``, ``DEFAULT_SELF_QUERIES``,
``DEFAULT_PRIOR_C``) is the variant with the best mean gain when every
collection is self-calibrated with its own nested prior (the same rule on all
seven collections; not a result: the nested number is). Writes ``loco.md``,
``ledger.md`` and ``loco.json`` (with a ``choice`` key) to ``--out``
(default benchmarks/results/self_calibration).
"""

from __future__ import annotations

import argparse
import shlex
import sys

from crag_heuristic.bench import run_self_calibration


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
    results = run_self_calibration(
        args.data_root, args.out, cache_dir=args.cache_dir, command=command
    )
    choice = results["choice"]
    sys.stdout.write(
        f"pick: {choice['pick']} (library defaults "
        f"{'match' if choice['defaults_match'] else 'DO NOT match'}); nested mean gain "
        f"{choice['nested_mean_gain']:+.3f}\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
