"""``crag-heuristic serve``: the gate as an HTTP service over an index directory."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from .._evaluator.evaluator import Evaluator
from .._exceptions import InputError, MissingDependencyError
from .._logging import LOGGER_NAME
from .._optional import check_installed
from .._router.router import CRAG
from .._sample import load_sample_corpus, sample_retriever
from .common import (
    CACHE_SECRET_VARIABLE,
    EPILOG,
    EXIT_OK,
    add_cache_secret_option,
    add_config_options,
    config_from_args,
    read_secret,
    redis_cache,
)
from .index import (
    add_index_secret_option,
    add_trust_embedder_option,
    is_index_dir,
    open_index,
)
from .progress import Progress, add_progress_option

KEYS_VARIABLE = "CRAG_HEURISTIC_API_KEYS"


def read_api_keys(path: str | None) -> tuple[str, ...]:
    """The API keys: one a line of ``path`` (blank lines and ``#`` comments skipped),
    and the comma-separated ones of the ``CRAG_HEURISTIC_API_KEYS`` variable.

    Raises:
        InputError: an unreadable file.
    """
    keys: list[str] = []
    if path is not None:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read the API key file {path!r}: {exc}") from None
        keys += [
            line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")
        ]
    keys += [key.strip() for key in os.environ.get(KEYS_VARIABLE, "").split(",") if key.strip()]
    return tuple(dict.fromkeys(keys))


def _router(args: argparse.Namespace, progress: Progress) -> tuple[CRAG, dict[str, Any]]:
    metrics: Any = None
    try:
        from .._metrics import PrometheusMetrics

        metrics = PrometheusMetrics()
    except MissingDependencyError:  # /metrics answers 501, naming the extra
        pass
    cache: Any = redis_cache(args)
    web = None
    if args.searxng:
        from .._web.searxng import SearxngClient

        web = SearxngClient(args.searxng)
    options: dict[str, Any] = {"web": web, "cache": cache, "metrics": metrics}
    index = None
    if args.index is None:
        if args.index_secret_file or args.embedder or args.trust_embedder:
            raise InputError(
                "--index-secret-file, --embedder and --trust-embedder go with --index DIR"
            )
    else:
        if not is_index_dir(args.index):
            raise InputError(f"--index {args.index}: not an index directory (crag-heuristic index)")
        analyzer = Evaluator(config_from_args(args)).analyzer  # what the directory is read with
        index = open_index(args.index, progress, analyzer, args)
    if index is None:
        evaluator = Evaluator(config_from_args(args))
    else:  # the directory's own gate, unless --profile / --config
        evaluator = Evaluator(config_from_args(args, index.gate), analyzer=index.analyzer)
    gate: Any = evaluator
    if args.grader is not None:
        gate, options = _cascade(args, evaluator, options)
    if index is None:
        crag = CRAG(sample_retriever(), gate, **options)
        return crag, {"index": "the bundled sample", "documents": len(load_sample_corpus())}
    with progress.stage("loading its parts"):
        crag = CRAG(index.retriever(), gate, lexical=index.lexical(), **options)
    info = {
        "documents": index.manifest.documents,
        "index_created": index.manifest.created,
        "gate": evaluator.config.name,  # the directory's own, unless --profile / --config
    }
    return crag, info


def _cascade(
    args: argparse.Namespace, evaluator: Evaluator, options: dict[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """The grader of ``--grader`` and the cascade around it: a learning cascade
    (``--learn``; its grade log ``--grade-log``) or a set cascade on the gate's
    PARTIAL band."""
    from .._grading.lists import SetEscalation
    from .grader import grader_from_spec, parse_guarantee

    grader = grader_from_spec(args.grader)
    options = {**options, "grader": grader}
    if not args.learn:
        if args.grade_log is not None or args.guarantee is not None:
            raise InputError("--grade-log and --guarantee go with --learn")
        return evaluator, {**options, "escalation": SetEscalation()}
    from .._calibration.learning import Learning, LearningCascade

    target, eps = parse_guarantee(args.guarantee) or ("recall", 0.1)
    # the labels are signed with the cache's secret: a grade log others can write to
    # would otherwise move the certified band (docs/production.md, stores others can write)
    secret = read_secret(args.cache_secret_file, CACHE_SECRET_VARIABLE)
    log: Any = None
    if args.grade_log == "redis":
        if not args.redis:
            raise InputError(
                "--grade-log redis keeps the labels in the --redis server: give --redis"
            )
        from redis import Redis

        from .._grading.monitor import RedisGradeLog

        log = RedisGradeLog(Redis.from_url(args.redis), stream="crag:learning", secret=secret)
    elif args.grade_log is not None:
        from .._grading.monitor import JsonlGradeLog

        log = JsonlGradeLog(args.grade_log, secret=secret)
    settings = Learning(target=target, eps=eps, delta=args.delta)  # type: ignore[arg-type]
    learner = LearningCascade(evaluator, settings=settings, log=log)
    return None, {**options, "learning": learner}


def _serve(args: argparse.Namespace, out: TextIO) -> int:
    check_installed("serve", "crag-heuristic serve", "starlette", "uvicorn")  # before any work
    from .._serve.server import check_address, run_server
    from .._serve.settings import ServeSettings

    settings = ServeSettings(
        api_keys=read_api_keys(args.api_key_file),
        max_body_bytes=args.max_body_bytes,
        max_k=args.max_k,
        max_query_chars=args.max_query_chars,
        max_concurrency=args.max_concurrency,
        max_queue=args.max_queue,
        request_timeout=args.timeout,
        header_timeout=args.header_timeout,
        max_connections=args.max_connections,
    )
    check_address(args.host, settings)  # before loading anything
    with Progress.for_command(args, "serve") as progress:
        crag, info = _router(args, progress)
    if not args.quiet:  # one access event a request (crag.http), as key=value lines
        library = logging.getLogger(LOGGER_NAME)
        library.setLevel(min(logging.INFO, library.getEffectiveLevel()))

    def listening(url: str) -> None:
        keys = f"{len(settings.api_keys)} API key(s)" if settings.api_keys else "no API key"
        sys.stderr.write(
            f"crag-heuristic serve: {info.get('documents')} documents on {url} ({keys}); "
            "Ctrl-C or SIGTERM stops it\n"
        )
        sys.stderr.flush()

    run_server(
        crag,
        host=args.host,
        port=args.port,
        settings=settings,
        info=info,
        graceful_timeout=args.graceful_timeout,
        on_listening=listening,
    )
    return EXIT_OK


def register(commands: Any) -> None:
    """Add the ``serve`` sub-command."""
    from .._serve.settings import REQUEST_OPTIONS, ServeSettings

    defaults = ServeSettings()
    serve = commands.add_parser(
        "serve",
        help="serve the gate over HTTP (the serve extra): retrieve, evaluate, stream",
        description=(
            "Serve the router over an index directory (crag-heuristic index) as an HTTP "
            "service: POST /v2/retrieve {query, k, options, view} -> the result as JSON, each "
            "chunk's text once (view grades: ids and grades only); POST /v2/evaluate {query, "
            "chunks} -> the evaluation of your own chunks; POST /v2/stream -> the stages as "
            "Server-Sent Events; /v1/... the same with everything the library's objects say; "
            "GET /healthz; GET /metrics (Prometheus, the "
            "metrics extra). Errors are JSON naming their type. Without an API key the "
            f"service listens on 127.0.0.1 only; keys come from --api-key-file and the "
            f"{KEYS_VARIABLE} variable (comma-separated), sent in the X-API-Key header. "
            f"Request options: {', '.join(REQUEST_OPTIONS)}. One crag.http event a request "
            "on stderr (never the query text); --quiet turns them off."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument(
        "--index", metavar="DIR", help="an index directory (default: the bundled sample)"
    )
    serve.add_argument(
        "--embedder",
        metavar="SPEC",
        help="the spec (pkg.module:attribute) of the --index directory's embedder, to import "
        "it: a directory's spec is never imported unless named, or --trust-embedder",
    )
    add_trust_embedder_option(serve)
    add_index_secret_option(serve)
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default loopback)"
    )
    serve.add_argument(
        "--port", type=int, default=8000, help="port (0: a free one, said on stderr)"
    )
    serve.add_argument("--api-key-file", metavar="FILE", help="API keys, one a line")
    serve.add_argument(
        "--max-body-bytes", type=int, default=defaults.max_body_bytes, help="largest request body"
    )
    serve.add_argument("--max-k", type=int, default=defaults.max_k, help="largest k a request asks")
    serve.add_argument(
        "--max-query-chars", type=int, default=defaults.max_query_chars, help="longest query"
    )
    serve.add_argument(
        "--max-concurrency",
        type=int,
        default=defaults.max_concurrency,
        help="requests worked on at once",
    )
    serve.add_argument(
        "--max-queue", type=int, default=defaults.max_queue, help="requests waiting for a slot"
    )
    serve.add_argument(
        "--timeout",
        type=float,
        default=defaults.request_timeout,
        help="seconds from a request's arrival to its answer (its body read included)",
    )
    serve.add_argument(
        "--header-timeout",
        type=float,
        default=defaults.header_timeout,
        help="seconds a connection has to send a request's headers (then it is closed)",
    )
    serve.add_argument(
        "--max-connections",
        type=int,
        default=defaults.max_connections,
        help="open connections at most (lowered to fit the file descriptor limit; at the "
        "limit the slowest waiting connection is closed first)",
    )
    serve.add_argument(
        "--graceful-timeout",
        type=float,
        default=10.0,
        help="seconds the requests in flight get to finish on SIGTERM",
    )
    serve.add_argument("--redis", metavar="URL", help="cache evaluations and web results here")
    serve.add_argument(
        "--grader",
        metavar="SPEC",
        help="an expensive grader for the lists the gate is unsure of: openai:MODEL@URL (an "
        "OpenAI-compatible chat API, key in CRAG_LLM_API_KEY) or MODULE:ATTRIBUTE",
    )
    serve.add_argument(
        "--learn",
        action="store_true",
        help="with --grader: a learning cascade (every answer a label; the gate refitted and "
        "its band certified again as labels come; GET /v1/learning says where it stands)",
    )
    serve.add_argument(
        "--grade-log",
        metavar="FILE|redis",
        help="with --learn: where the labels are kept (a JSON-lines file, or 'redis': a stream "
        "in the --redis server, shared by every process); without it they are lost on exit",
    )
    serve.add_argument(
        "--guarantee",
        metavar="TARGET:EPS",
        help="with --learn: recall:EPS (at most EPS of failed lists pass without the grader; "
        "default recall:0.1) or agreement:EPS",
    )
    serve.add_argument(
        "--delta",
        type=float,
        default=0.1,
        help="with --learn: the probability the guarantee may fail (default 0.1)",
    )
    add_cache_secret_option(serve)
    serve.add_argument("--searxng", metavar="URL", help="a SearXNG for the web fallback")
    add_config_options(serve)
    add_progress_option(serve)
    serve.set_defaults(handler=_serve)
