"""``crag-heuristic index``: build an index directory of a docs file; and opening one
for the commands that take ``--index DIR``."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, TextIO

from .._exceptions import InputError
from .._index.directory import DEFAULT_BATCH, IndexDirectory
from .._index.manifest import METRICS
from .._optional import check_installed
from .._text.analyzer import Analyzer
from .common import EPILOG, EXIT_OK, read_docs, read_secret
from .progress import Progress, add_progress_option

INDEX_SECRET_VARIABLE = "CRAG_HEURISTIC_INDEX_SECRET"


def add_index_secret_option(parser: argparse.ArgumentParser, *, signs: bool = False) -> None:
    """``--index-secret-file``: the secret an index directory's manifest is signed with."""
    parser.add_argument(
        "--index-secret-file",
        metavar="FILE",
        help=(
            "sign the manifest with the secret in FILE (16 bytes or more): loading the "
            "directory then needs it"
            if signs
            else "an index directory signed with the secret in FILE (crag-heuristic index "
            "--index-secret-file): an unsigned one, or one signed otherwise, is refused"
        )
        + f" (default: the {INDEX_SECRET_VARIABLE} variable)",
    )


def add_trust_embedder_option(parser: argparse.ArgumentParser) -> None:
    """``--trust-embedder``: import the embedder spec an index directory names."""
    parser.add_argument(
        "--trust-embedder",
        action="store_true",
        help="with an index directory whose embedder is a spec (pkg.module:attribute): "
        "import whatever it names (code runs from it: only for a directory you built). "
        "Else name the same spec with --embedder",
    )


def open_index(
    path: str,
    progress: Progress,
    analyzer: Analyzer | None = None,
    args: argparse.Namespace | None = None,
) -> IndexDirectory:
    """The index directory at ``path``, checked against its manifest (a stage of
    ``progress``), with the options of ``args``: its secret (``--index-secret-file``,
    else ``CRAG_HEURISTIC_INDEX_SECRET``), the embedder spec named (``--embedder``)
    and ``--trust-embedder``."""
    secret = read_secret(getattr(args, "index_secret_file", None), INDEX_SECRET_VARIABLE)
    with progress.stage("loading the index"):
        return IndexDirectory.load(
            path,
            analyzer=analyzer,
            secret=secret,
            embedder=getattr(args, "embedder", None),
            trust_embedder=bool(getattr(args, "trust_embedder", False)),
        )


def is_index_dir(path: str | None) -> bool:
    """Whether ``--index`` names an index directory (``None``: not given).

    Raises:
        InputError: a path that does not exist (a mistyped ``--index``), named.
    """
    if path is None:
        return False
    if not Path(path).exists():
        raise InputError(f"--index {path}: no such file or directory")
    return Path(path).is_dir()


def _index(args: argparse.Namespace, out: TextIO) -> int:
    if str(args.out).endswith(".faiss"):
        raise InputError(
            f"--out {args.out}: index writes a directory now (the FAISS index, the documents, "
            "the statistics, the BM25 side and the embedder): give --out DIR, then "
            "retrieve --index DIR (a FAISS file of your own still works with "
            "retrieve --index FILE --docs FILE)"
        )
    if args.embedder == "lsa":  # fitting LSA takes scikit-learn: named before any work
        check_installed("calibrate", "crag-heuristic index --embedder lsa (fitting LSA)", "sklearn")
    started = time.perf_counter()
    with Progress.for_command(args, "index") as progress:
        with progress.stage("reading the documents"):
            docs = read_docs(args.docs)
        reading = time.perf_counter() - started
        built = IndexDirectory.build(
            docs,
            args.out,
            embedder=args.embedder,
            metric=args.metric,
            n_components=args.components,
            batch_size=args.batch_size,
            progress=progress,
            secret=read_secret(args.index_secret_file, INDEX_SECRET_VARIABLE),
        )
    manifest = built.manifest
    seconds = {"reading": round(reading, 3), **manifest.build_seconds}
    seconds["total"] = round(time.perf_counter() - started, 3)
    summary: dict[str, Any] = {
        "index": str(built.path),
        "documents": manifest.documents,
        "dimension": manifest.dimension,
        "metric": manifest.faiss["metric"],
        "embedder": args.embedder,
        "bytes": sum(int(entry["bytes"]) for entry in manifest.files.values()),
        "seconds": seconds,
        "signed": manifest.signed,
    }
    out.write(json.dumps(summary) + "\n")
    return EXIT_OK


def register(commands: Any) -> None:
    """Add the ``index`` sub-command."""
    index = commands.add_parser(
        "index",
        help="build an index directory of a docs file (for retrieve/evaluate/serve --index)",
        description=(
            "Analyse and embed a docs file once and write an index directory: the FAISS index "
            "(unit vectors), the documents, the corpus statistics with each document's "
            "analysis, the BM25 side, the embedder (the fitted LSA projection, or your "
            "embedder's spec) and a manifest of them all. retrieve, evaluate, calibrate and "
            "serve take it with --index DIR and load it in milliseconds, nothing refitted. "
            "An index directory already at --out is replaced whole; anything else there is "
            "refused. Needs the calibrate extra (scikit-learn fits the LSA embedder) unless "
            "--embedder names your own."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    index.add_argument(
        "--docs",
        required=True,
        metavar="FILE.jsonl",
        help="the documents: JSON Lines with id (or _id), text, optional title, source, "
        "metadata; line i = FAISS id i",
    )
    index.add_argument("--out", required=True, metavar="DIR", help="the index directory")
    index.add_argument(
        "--embedder",
        default="lsa",
        help="'lsa' (fitted on the docs, saved; needs the calibrate extra) or "
        "'pkg.module:attribute' (a str -> vector callable, or a class made with no "
        "arguments; batches through embed_many / embed_documents / encode when it has one; "
        "a loader imports it only when named again with --embedder, or --trust-embedder)",
    )
    index.add_argument("--metric", choices=METRICS, default="ip", help="FAISS metric")
    index.add_argument("--components", type=int, default=64, help="LSA dimensions (default 64)")
    index.add_argument(
        "--batch-size",
        type=int,
        default=DEFAULT_BATCH,
        help=f"texts per call of the embedder (default {DEFAULT_BATCH})",
    )
    add_index_secret_option(index, signs=True)
    add_progress_option(index)
    index.set_defaults(handler=_index)
