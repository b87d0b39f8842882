"""``crag-heuristic stats``: corpus statistics (and chunk analyses) of a docs file."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, TextIO

from .._exceptions import InputError
from .._text.corpus import CorpusStats
from .._text.engines import DaskEngine, LocalEngine
from .common import EPILOG, EXIT_OK, read_docs
from .progress import Progress, add_progress_option


def _stats(args: argparse.Namespace, out: TextIO) -> int:
    if args.scheduler and args.engine != "dask":
        raise InputError("--scheduler needs --engine dask")
    engine: Any = (
        LocalEngine()
        if args.engine == "local"
        else DaskEngine(args.scheduler, n_workers=args.workers)
    )
    started = time.perf_counter()
    counting = f"counting the documents ({args.engine} engine)"
    with Progress.for_command(args, "stats") as progress:
        if _is_json_array(args.docs):  # one JSON array: read here, then partitioned in memory
            with progress.stage("reading the documents"):
                docs = read_docs(args.docs)
            with progress.stage(counting):
                stats = CorpusStats.build(
                    [d.text for d in docs],
                    ids=[d.id for d in docs],
                    analyses=args.analyses,
                    engine=engine,
                )
        else:
            with progress.stage(counting):
                stats = CorpusStats.from_jsonl(
                    args.docs,
                    analyses=args.analyses,
                    engine=engine,
                    partition_bytes=args.partition_mb * (1 << 20),
                )
        seconds = time.perf_counter() - started
        with progress.stage(f"writing {args.out}"):
            path = stats.save(args.out)
    summary = {
        "out": str(path),
        "documents": stats.n_docs,
        "terms": stats.n_terms,
        "avg_doc_len": stats.avg_doc_len,
        "analyses": None if stats.analyses is None else len(stats.analyses),
        "bytes": path.stat().st_size,
        "engine": repr(engine),
        "seconds": round(seconds, 3),
        "fingerprint": stats.fingerprint(),
    }
    out.write(json.dumps(summary) + "\n")
    return EXIT_OK


def _is_json_array(path: str) -> bool:
    try:
        with Path(path).open("rb") as handle:
            head = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError as exc:
        raise InputError(f"cannot read {path!r}: {exc.strerror or exc}") from None
    return head.startswith(b"[")


def register(commands: Any) -> None:
    """Add the ``stats`` sub-command."""
    stats = commands.add_parser(
        "stats",
        help="build the corpus statistics (and chunk analyses) of a docs file",
        description=(
            "Count the document frequencies of a docs file (JSON Lines: id/_id, text, optional "
            "title; what retrieve --docs reads) and each document's analysis, and save them to "
            "one file for FaissRetriever(corpus_stats=FILE) or CorpusStats.load. --engine dask "
            "counts byte ranges of the file on a Dask cluster (a LocalCluster of --workers "
            "processes, or the scheduler at --scheduler, whose workers must see the file at the "
            "same path); the statistics are the same, bit for bit, on every engine."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    stats.add_argument("--docs", required=True, metavar="FILE.jsonl", help="the documents")
    stats.add_argument("--out", required=True, metavar="FILE.npz", help="where to save them")
    stats.add_argument("--engine", choices=["local", "dask"], default="local")
    stats.add_argument(
        "--scheduler", metavar="ADDRESS", help="a Dask scheduler (default: a LocalCluster)"
    )
    stats.add_argument(
        "--workers", type=int, default=2, help="processes of the LocalCluster (default 2)"
    )
    stats.add_argument(
        "--partition-mb", type=int, default=32, help="megabytes of the file per partition"
    )
    stats.add_argument(
        "--no-analyses",
        dest="analyses",
        action="store_false",
        help="document frequencies only, no per-document analyses",
    )
    add_progress_option(stats)
    stats.set_defaults(handler=_stats)
