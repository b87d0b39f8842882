"""``crag-heuristic retrieve``: the router end to end."""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable
from typing import Any, TextIO

from .._evaluator.evaluator import Evaluator
from .._exceptions import InputError
from .._failures import FailureStage
from .._index.embedders import import_embedder
from .._logging import get_logger
from .._retrievers.bm25 import BM25Retriever
from .._retrievers.faiss import FaissRetriever
from .._router.events import Done
from .._router.result import CRAGResult
from .._router.router import CRAG
from .._sample import LsaEmbedder, load_sample_corpus, sample_retriever
from .._types import Chunk
from .common import (
    EPILOG,
    EXIT_OK,
    EXIT_SERVICE,
    add_cache_secret_option,
    add_config_options,
    config_from_args,
    dump,
    read_docs,
    redis_cache,
)
from .index import (
    add_index_secret_option,
    add_trust_embedder_option,
    is_index_dir,
    open_index,
)
from .progress import Progress, add_progress_option


def load_embedder(spec: str, docs: list[Chunk]) -> Callable[[str], Any]:
    """``lsa`` (fitted on the docs: deterministic) or ``package.module:attribute``."""
    if spec == "lsa":
        return LsaEmbedder([d.text for d in docs])
    return import_embedder(spec)  # type: ignore[no-any-return]


def faiss_retriever(
    index_path: str, docs_path: str, embedder: str, normalized: str
) -> tuple[FaissRetriever, list[Chunk]]:
    """A :class:`FaissRetriever` over an index file and its docs file (line i = id i)."""
    import faiss

    docs = read_docs(docs_path)
    try:
        index: Any = faiss.read_index(str(index_path))
    except RuntimeError as exc:
        raise InputError(f"cannot read FAISS index {index_path!r}: {exc}") from exc
    unit = {"auto": None, "yes": True, "no": False}[normalized]
    return FaissRetriever(index, docs, load_embedder(embedder, docs), normalized=unit), docs


def _retriever(args: argparse.Namespace, progress: Progress) -> tuple[Any, Any, Any]:
    """The retriever, the lexical one (``--lexical``) and the evaluator: over an index
    directory, over a FAISS file and its docs file (refitted and recounted on every
    call), or over the bundled sample."""
    evaluator = Evaluator(config_from_args(args))
    if is_index_dir(args.index):
        for option in ("docs", "normalized"):
            if getattr(args, option) is not None:
                raise InputError(
                    f"--{option} does not go with an index directory: {args.index} holds its "
                    "documents and vectors"
                )
        index = open_index(args.index, progress, evaluator.analyzer, args)
        with progress.stage("loading its parts"):
            retriever = index.retriever()
            lexical = index.lexical() if args.lexical else None
        return retriever, lexical, evaluator
    if (args.index is None) != (args.docs is None):
        raise InputError(
            "--index FILE.faiss goes with --docs (an index directory, --index DIR, alone; "
            "neither: the bundled sample)"
        )
    if args.index_secret_file is not None or args.trust_embedder:
        raise InputError("--index-secret-file and --trust-embedder go with --index DIR")
    if args.index is None:
        given = [f"--{o}" for o in ("embedder", "normalized") if getattr(args, o) is not None]
        if given:
            raise InputError(
                f"{' and '.join(given)} go(es) with --index FILE.faiss --docs FILE.jsonl: the "
                "bundled sample's embedder and vectors are fixed"
            )
        retriever, docs = sample_retriever(), load_sample_corpus()
    else:
        if not args.quiet:
            sys.stderr.write(
                "crag-heuristic: note: --index FILE --docs FILE refits the embedder and "
                "rebuilds BM25 and the statistics on every call; build an index directory "
                "once (crag-heuristic index --docs FILE --out DIR) and use --index DIR\n"
            )
        with progress.stage("reading the documents"):
            retriever, docs = faiss_retriever(
                args.index, args.docs, args.embedder or "lsa", args.normalized or "auto"
            )
    lexical = BM25Retriever(docs, analyzer=evaluator.analyzer) if args.lexical else None
    return retriever, lexical, evaluator


def _retrieve(args: argparse.Namespace, out: TextIO) -> int:
    with Progress.for_command(args, "retrieve") as progress:
        retriever, lexical, evaluator = _retriever(args, progress)
    router_config = {"k": args.k, "refine": args.refine, "max_retries": args.max_retries}
    if args.fetch_k:
        router_config["fetch_k"] = args.fetch_k
    web = None
    if args.searxng:
        from .._web.searxng import SearxngClient

        web = SearxngClient(args.searxng)
    cache: Any = redis_cache(args)  # None: the in-process default
    crag = CRAG(retriever, evaluator, lexical=lexical, web=web, cache=cache, config=router_config)
    if getattr(args, "verbose", False):
        log = get_logger()
        for event in crag.stream(args.query, args.k):  # each stage's fields as it ends
            log.debug("crag.stage", **event.summary())
        assert isinstance(event, Done)
        result = event.result
    else:
        result = crag.retrieve(args.query, args.k)
    if args.pretty:
        out.write(render_table(result, retriever.score_semantics) + "\n")
    else:
        dump(result.to_dict(), out, pretty=False)
    return _exit_code(result)


def _exit_code(result: CRAGResult) -> int:
    """0 when every service asked for worked; 3 when the web search or the cache failed
    (the router went on without it: the result printed above is degraded)."""
    last = {failure.stage: failure for failure in result.failures}
    failed = [
        f"{what} failed ({last[stage].text})"
        for what, stage in (("the web search", FailureStage.WEB), ("the cache", FailureStage.CACHE))
        if stage in last
    ]
    if not failed:
        return EXIT_OK
    sys.stderr.write(f"crag-heuristic: service error: {'; '.join(failed)}\n")
    return EXIT_SERVICE


def render_table(result: CRAGResult, score_semantics: str = "") -> str:
    """A readable summary of a result: the decision, then one row per chunk."""
    first = result.initial_evaluation
    lines = [
        f"query      {result.query}",
        f"verdict    {first.verdict.value} ({first.score:.2f})"
        + (
            f" -> {result.verdict.value} ({result.evaluation.score:.2f})"
            if result.corrected
            else ""
        ),
        f"strategy   {result.strategy.value}",
        f"reasoning  {first.reasoning}",
    ]
    if score_semantics:
        lines.append(f"retriever  {score_semantics}")
    if result.expanded_queries:
        lines.append("expanded   " + " | ".join(result.expanded_queries))
    if result.web_query is not None:
        lines.append(f"web query  {result.web_query}")
    if result.web.failure is not None:
        lines.append(f"web error  {result.web.failure.text}")
    for note in result.notes:
        lines.append(f"note       {note}")
    timings = ", ".join(f"{k} {v:.2f}" for k, v in result.timings_ms.items())
    lines.append(f"timings ms {timings}")
    # The rows are in the final order; say what that order is, and after fusion show
    # the fused (RRF) score it follows beside each chunk's own retriever score.
    fused = not result.web_search_used and any("rrf_score" in c.metadata for c in result.chunks)
    if result.web_search_used:
        order = "web results first (the engine's order), then the retrieval's chunks kept"
    elif fused:
        order = "fused ranking (RRF): rrf is the fused score, score the retriever's own"
    else:
        order = "the retriever's ranking (score: the retriever's own)"
    lines.append(f"order      {order}")
    grades = {g.chunk_id: g for g in result.evaluation.chunks}
    rrf_header = f" {'rrf':>7}" if fused else ""
    lines += [
        "",
        f"{'#':>2}  {'chunk':<16}{rrf_header} {'score':>7} {'kind':<8} {'grade':<10} text",
    ]
    for rank, chunk in enumerate(result.chunks, 1):
        grade = grades.get(chunk.id)
        rrf = chunk.metadata.get("rrf_score")
        rrf_cell = (f" {rrf:7.4f}" if isinstance(rrf, float) else f" {'':>7}") if fused else ""
        verdict = grade.verdict.value if grade else ""
        lines.append(f"{rank:>2}  {chunk.id[:16]:<16}{rrf_cell} {chunk_row(chunk, verdict)}")
    return "\n".join(lines)


ROW_HEADER = f"{'score':>7} {'kind':<8} {'grade':<10} text"


def chunk_row(chunk: Chunk, verdict: str) -> str:
    """A chunk's score, labelled by its kind (a BM25 score is no cosine), grade and text."""
    score = "" if chunk.score is None else f"{chunk.score:7.3f}"
    text = textwrap.shorten(" ".join(chunk.text.split()), 70, placeholder=" ...")
    return f"{score:>7} {chunk.score_kind.value:<8} {verdict:<10} {text}"


def register(commands: Any) -> None:
    """Add the ``retrieve`` sub-command."""
    retrieve = commands.add_parser(
        "retrieve",
        help="retrieve, grade and correct (the bundled sample by default)",
        description=(
            "Run the CRAG router: retrieve from a FAISS index, grade the chunks, correct the "
            "retrieval (query expansion + RRF on PARTIAL, web search on IRRELEVANT) and print "
            "the result as JSON, or as a table with --pretty. --index DIR loads an index directory "
            "(crag-heuristic index); without --index it runs on the bundled sample corpus with "
            "LSA embeddings: no model, no network."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    retrieve.add_argument("--query", "-q", required=True, help="the query")
    retrieve.add_argument("--k", type=int, default=5, help="chunks to return (default 5)")
    retrieve.add_argument(
        "--index",
        metavar="DIR|FILE.faiss",
        help="an index directory (crag-heuristic index), or a FAISS index file of your own "
        "with --docs",
    )
    retrieve.add_argument(
        "--docs", metavar="FILE.jsonl", help="with --index FILE.faiss: its documents, line i = id i"
    )
    retrieve.add_argument(
        "--embedder",
        help="with --index FILE.faiss: 'lsa' (fitted on --docs, the default) or "
        "'pkg.module:attribute' (str -> vector); with --index DIR: the spec its embedder "
        "is, to import it (a directory's spec is never imported unless named, or "
        "--trust-embedder)",
    )
    add_trust_embedder_option(retrieve)
    add_index_secret_option(retrieve)
    retrieve.add_argument(
        "--normalized",
        choices=["auto", "yes", "no"],
        help="with --index FILE.faiss: are its vectors unit length? (default: detect)",
    )
    retrieve.add_argument(
        "--no-lexical",
        dest="lexical",
        action="store_false",
        help="do not fuse a BM25 ranking of the docs into corrections",
    )
    retrieve.add_argument("--fetch-k", type=int, help="candidates per ranking before fusion")
    retrieve.add_argument("--max-retries", type=int, default=2, help="correction rounds (0: off)")
    retrieve.add_argument("--refine", action="store_true", help="refine the final chunks")
    retrieve.add_argument(
        "--searxng", metavar="URL", help="a SearXNG instance for the web fallback (JSON enabled)"
    )
    retrieve.add_argument(
        "--redis", metavar="URL", help="cache evaluations and web results in this Redis"
    )
    add_cache_secret_option(retrieve)
    retrieve.add_argument("--pretty", action="store_true", help="a readable table instead of JSON")
    add_config_options(retrieve)
    add_progress_option(retrieve)
    retrieve.set_defaults(handler=_retrieve)
