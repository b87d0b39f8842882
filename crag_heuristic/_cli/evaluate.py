"""``crag-heuristic evaluate`` and ``crag-heuristic profiles``."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence
from typing import Any, TextIO

from .._config import DEFAULT_PROFILE, EvaluatorConfig, available_profiles
from .._evaluator.evaluator import Evaluator
from .._evaluator.refine import Refinement
from .._exceptions import InputError
from .._types import Chunk, Evaluation, ScoreKind
from .common import EPILOG, EXIT_OK, add_config_options, config_from_args, dump, read_chunks
from .index import add_index_secret_option, is_index_dir, open_index
from .progress import Progress, add_progress_option
from .retrieve import ROW_HEADER, chunk_row


def _evaluate(args: argparse.Namespace, out: TextIO) -> int:
    config = config_from_args(args)
    kind = ScoreKind(args.score_kind) if args.score_kind else None
    chunks = read_chunks(args.chunks, default_kind=kind)
    evaluator = Evaluator(config)
    stats = None
    if args.index is not None:  # the corpus's statistics: IDF, and its chunks' analyses
        if not is_index_dir(args.index):
            raise InputError(f"--index {args.index}: not an index directory (crag-heuristic index)")
        with Progress.for_command(args, "evaluate") as progress:
            stats = open_index(args.index, progress, evaluator.analyzer, args).corpus_stats
    evaluation = evaluator.evaluate(args.query, chunks, stats)
    refinement = None
    if args.refine:
        refinement = evaluator.refine(args.query, chunks, stats, token_budget=args.token_budget)
    if args.pretty:
        out.write(render_evaluation(args.query, chunks, evaluation, refinement) + "\n")
        return EXIT_OK
    payload = evaluation.to_dict()
    if refinement is not None:
        payload["refinement"] = refinement.to_dict()
    dump(payload, out, pretty=False)
    return EXIT_OK


def render_evaluation(
    query: str, chunks: Sequence[Chunk], evaluation: Evaluation, refinement: Refinement | None
) -> str:
    """A readable summary of an evaluation, as ``retrieve --pretty`` shows a result."""
    lines = [
        f"query      {query}",
        f"verdict    {evaluation.verdict.value} ({evaluation.score:.2f})",
        f"reasoning  {evaluation.reasoning}",
    ]
    if refinement is not None:
        how = "cut to fit: no strip passed" if refinement.cut else f"{len(refinement.kept)} strips"
        lines.append(
            f"refined    {how}, {refinement.tokens:.0f} of {refinement.token_budget} tokens: "
            + textwrap.shorten(refinement.text, 200, placeholder=" ...")
        )
    grades = {g.chunk_id: g for g in evaluation.chunks}
    lines += ["", f"{'#':>2}  {'chunk':<16} {ROW_HEADER}"]
    for rank, chunk in enumerate(chunks, 1):
        grade = grades.get(chunk.id)
        verdict = grade.verdict.value if grade else ""
        lines.append(f"{rank:>2}  {chunk.id[:16]:<16} {chunk_row(chunk, verdict)}")
    return "\n".join(lines)


def _profiles(args: argparse.Namespace, out: TextIO) -> int:
    if args.name:
        dump(EvaluatorConfig.from_profile(args.name).to_dict(), out, True)
    else:
        for name in available_profiles():
            out.write(f"{name}  (the default)\n" if name == DEFAULT_PROFILE else name + "\n")
    return EXIT_OK


def register(commands: Any) -> None:
    """Add the ``evaluate`` and ``profiles`` sub-commands."""
    evaluate = commands.add_parser(
        "evaluate",
        help="grade a list of retrieved chunks against a query",
        description=(
            "Grade retrieved chunks against a query and print the evaluation as JSON (a "
            "table with --pretty): the verdict (relevant / partial / irrelevant), the score, "
            "each signal, per-chunk grades and a short reasoning."
        ),
        epilog=(
            "chunks file: JSON Lines, one object per line with 'id' and 'text', and optionally "
            "'score', 'score_kind' (cosine, inner_product, squared_l2, l2, distance, bm25, "
            "probability, rrf, web, unknown), 'source', 'metadata', 'parent_id'.\n\n" + EPILOG
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    evaluate.add_argument("--query", "-q", required=True, help="the query")
    evaluate.add_argument(
        "--chunks",
        "-c",
        required=True,
        metavar="FILE",
        help="JSON Lines file of chunks (- = stdin)",
    )
    evaluate.add_argument(
        "--score-kind",
        choices=[k.value for k in ScoreKind],
        help="score kind for chunks that do not declare one",
    )
    evaluate.add_argument(
        "--index",
        metavar="DIR",
        help="an index directory (crag-heuristic index): its corpus statistics weight the "
        "query terms (IDF) and its documents' analyses are read instead of tokenising",
    )
    add_index_secret_option(evaluate)
    evaluate.add_argument("--refine", action="store_true", help="also run knowledge refinement")
    evaluate.add_argument("--token-budget", type=int, help="token budget for --refine")
    evaluate.add_argument("--pretty", action="store_true", help="a readable table instead of JSON")
    add_config_options(evaluate)
    add_progress_option(evaluate)
    evaluate.set_defaults(handler=_evaluate)

    profiles = commands.add_parser(
        "profiles",
        help="list profiles, or print one as JSON",
        description=(
            "List the shipped gate profiles (the default marked), or print the one NAME names "
            "as JSON: its thresholds, weights and how it was fitted. A profile is what "
            "--profile NAME, EvaluatorConfig.from_profile(NAME) and Evaluator(NAME) take."
        ),
    )
    profiles.add_argument("name", nargs="?", help="a profile to print")
    profiles.set_defaults(handler=_profiles)
