"""``crag-heuristic bench`` and ``crag-heuristic calibrate`` (need the ``bench`` extra)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any, TextIO

from .common import EPILOG, EXIT_OK

__all__ = ["register"]


def _command_line() -> str:
    return "crag-heuristic " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def _bench(args: argparse.Namespace, out: TextIO) -> int:
    from .._bench import run_bench

    sections = args.sections.split(",") if args.sections else None
    results = run_bench(
        args.data_dir,
        args.out or Path("benchmarks/results") / Path(args.data_dir).resolve().name,
        k=args.k,
        profile=args.profile,
        sections=sections or ("failure", "agreement", "quality", "cost"),
        cache_dir=args.cache_dir,
        encode=not args.no_encode,
        command=_command_line(),
        agreement_splits=args.agreement_splits,
    )
    from .._bench.harness import headline

    for measure, value, note in headline(results):
        out.write(f"{measure}: {value}" + (f"  ({note})" if note else "") + "\n")
    return EXIT_OK


def _calibrate(args: argparse.Namespace, out: TextIO) -> int:
    from .._bench import calibrate

    result = calibrate(
        args.data_dir,
        labels=args.labels,
        split=args.split,
        k=args.k,
        probes=not args.no_probes,
        base=args.base or "synapse",
        name=args.name,
        cache_dir=args.cache_dir,
        encode=not args.no_encode,
        target_precision=args.target_precision,
        min_failure_recall=args.min_failure_recall,
        max_good_irrelevant=args.max_good_irrelevant,
    )
    result.report["command"] = _command_line()
    path = result.write(args.out)
    out.write(json.dumps({"profile": str(path), **result.report}, indent=2) + "\n")
    return EXIT_OK


def register(commands: Any) -> None:
    """Add the ``bench`` and ``calibrate`` sub-commands."""
    bench = commands.add_parser(
        "bench",
        help="benchmark the gate on a BEIR-layout folder (report + plots)",
        description=(
            "Failure detection (natural + leave-relevant-out probes) against baselines, per-chunk "
            "agreement with people and LLM graders (when llm_judgments/ exists), retrieval "
            "quality of the router vs the bare retriever, and cost; writes report.md, "
            "results.json and PNG plots."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bench.add_argument("--data-dir", required=True, help="a folder in BEIR layout")
    bench.add_argument("--k", type=int, default=10, help="retrieval depth graded (default 10)")
    bench.add_argument("--profile", help="profile name or file (default: the library default)")
    bench.add_argument("--out", help="output folder (default benchmarks/results/<folder name>)")
    bench.add_argument("--sections", help="comma list of failure,agreement,quality,cost")
    bench.add_argument(
        "--agreement-splits",
        type=int,
        default=20,
        metavar="N",
        help="random 2-fold splits for the agreement kappas' spread (default 20, as in the "
        "committed reports; each refits the chunk stage twice)",
    )
    bench.add_argument("--cache-dir", help="where encoded query vectors are cached")
    bench.add_argument(
        "--no-encode", action="store_true", help="never load MiniLM: every query vector must ship"
    )
    bench.set_defaults(handler=_bench)

    calibrate = commands.add_parser(
        "calibrate",
        help="fit a gate profile from labels (scikit-learn)",
        description=(
            "Fit the two-stage logistic gate and its verdict bands on one split of a BEIR-layout "
            "folder, with cross-validation by query, and write a profile TOML file."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    calibrate.add_argument("--data-dir", required=True, help="a folder in BEIR layout")
    calibrate.add_argument(
        "--labels", default="qrels", help="'qrels' or 'llm:RUN' (llm_judgments/RUN.tsv)"
    )
    calibrate.add_argument("--split", default="train", help="qrels split to fit on (default train)")
    calibrate.add_argument("--k", type=int, default=10)
    calibrate.add_argument("--out", required=True, help="the profile file to write (.toml)")
    calibrate.add_argument("--name", default="fitted", help="the profile's name")
    calibrate.add_argument("--base", help="profile whose other settings the fitted one keeps")
    calibrate.add_argument("--target-precision", type=float, default=0.90)
    calibrate.add_argument("--min-failure-recall", type=float, default=0.80)
    calibrate.add_argument(
        "--max-good-irrelevant",
        type=float,
        default=0.15,
        help="share of good natural retrievals allowed into IRRELEVANT (default 0.15)",
    )
    calibrate.add_argument("--no-probes", action="store_true", help="natural retrievals only")
    calibrate.add_argument("--cache-dir", help="where encoded query vectors are cached")
    calibrate.add_argument(
        "--no-encode", action="store_true", help="never load MiniLM: every query vector must ship"
    )
    calibrate.set_defaults(handler=_calibrate)
