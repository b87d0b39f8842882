"""The ``crag-heuristic`` command line.

Exit codes: 0 success; 2 bad input, bad configuration or bad usage (the
message says what to fix); 3 a service the command needed failed (retriever,
web search); 1 an internal error (a bug: please report it with the traceback
that ``--debug`` prints).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from ._config import EvaluatorConfig, available_profiles, load_config
from ._evaluator import Evaluator
from ._exceptions import (
    ConfigError,
    CragError,
    InputError,
    InvalidChunkError,
    RetrieverError,
    WebSearchError,
)
from ._types import Chunk, ScoreKind
from ._version import __version__

__all__ = ["main", "read_chunks"]

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_SERVICE = 3

_EPILOG = """\
exit codes: 0 success, 2 bad input / config / usage, 3 a service failed
(retriever, web search), 1 internal error (run with --debug for the traceback)
"""

Handler = Callable[[argparse.Namespace, TextIO], int]


def read_chunks(path: str | Path, *, default_kind: ScoreKind | None = None) -> list[Chunk]:
    """Read chunks from a JSON Lines file (one chunk object per line; ``-`` = stdin).

    Each line holds the keys of :meth:`Chunk.to_dict` (``_id`` and ``title``
    are accepted too). ``default_kind`` is used for lines without
    ``score_kind``. A file holding one JSON array of objects also works.

    Raises:
        InputError: unreadable file, invalid UTF-8 or JSON, or a bad chunk;
            the message gives the line number.
    """
    if str(path) == "-":
        raw = sys.stdin.buffer.read()
        name = "<stdin>"
    else:
        try:
            raw = Path(path).read_bytes()
        except OSError as exc:
            raise InputError(
                f"cannot read chunks file {str(path)!r}: {exc.strerror or exc}"
            ) from exc
        name = str(path)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(
            f"{name}:{line}: not valid UTF-8 (byte {exc.start}); re-encode the file"
        ) from exc
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{name}:{exc.lineno}: invalid JSON: {exc.msg}") from exc
        numbered = list(enumerate(items, start=1))
    else:
        numbered = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                numbered.append((number, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise InputError(f"{name}:{number}: invalid JSON: {exc.msg}") from exc
    chunks = []
    for number, item in numbered:
        try:
            if default_kind is not None and isinstance(item, dict) and "score_kind" not in item:
                item = {**item, "score_kind": default_kind}
            chunks.append(Chunk.from_dict(item))
        except InvalidChunkError as exc:
            raise InputError(f"{name}:{number}: {exc}") from exc
    return chunks


def _config_from_args(args: argparse.Namespace) -> EvaluatorConfig:
    base = load_config(args.config) if args.config else EvaluatorConfig.from_profile(args.profile)
    overrides: dict[str, Any] = {}
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise InputError(f"--set expects key=value, got {item!r}")
        try:
            parsed: Any = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        node = overrides
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = parsed
    if not overrides:
        return base
    overrides.setdefault("name", f"{base.name}+overrides")
    return base.replace(**overrides)


def _add_config_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("configuration")
    group.add_argument(
        "--profile",
        default="synapse",
        help=f"named profile (default: synapse; known: {', '.join(available_profiles())})",
    )
    group.add_argument("--config", metavar="FILE", help="a TOML, JSON or YAML config file")
    group.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override one field, e.g. --set thresholds.relevant=0.8 (repeatable)",
    )


def _dump(data: Any, out: TextIO, pretty: bool) -> None:
    json.dump(data, out, indent=2 if pretty else None, ensure_ascii=False)
    out.write("\n")


def _cmd_evaluate(args: argparse.Namespace, out: TextIO) -> int:
    config = _config_from_args(args)
    kind = ScoreKind(args.score_kind) if args.score_kind else None
    chunks = read_chunks(args.chunks, default_kind=kind)
    evaluator = Evaluator(config)
    evaluation = evaluator.evaluate(args.query, chunks)
    payload = evaluation.to_dict()
    if args.refine:
        payload["refinement"] = evaluator.refine(
            args.query, chunks, token_budget=args.token_budget
        ).to_dict()
    _dump(payload, out, args.pretty)
    return EXIT_OK


def _cmd_profiles(args: argparse.Namespace, out: TextIO) -> int:
    if args.name:
        _dump(EvaluatorConfig.from_profile(args.name).to_dict(), out, True)
    else:
        for name in available_profiles():
            out.write(name + "\n")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crag-heuristic",
        description="An LLM-free Corrective RAG gate: grade retrieved chunks against a query.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true", help="print tracebacks of errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    evaluate = commands.add_parser(
        "evaluate",
        help="grade a list of retrieved chunks against a query",
        description=(
            "Grade retrieved chunks against a query and print the evaluation as JSON: the "
            "verdict (relevant / partial / irrelevant), the score, each signal, per-chunk "
            "grades and a short reasoning."
        ),
        epilog=(
            "chunks file: JSON Lines, one object per line with 'id' and 'text', and optionally "
            "'score', 'score_kind' (cosine, inner_product, squared_l2, l2, distance, bm25, "
            "probability, rrf, web, unknown), 'source', 'metadata', 'parent_id'.\n\n" + _EPILOG
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
    evaluate.add_argument("--refine", action="store_true", help="also run knowledge refinement")
    evaluate.add_argument("--token-budget", type=int, help="token budget for --refine")
    evaluate.add_argument("--pretty", action="store_true", help="indent the JSON")
    _add_config_options(evaluate)
    evaluate.set_defaults(handler=_cmd_evaluate)

    profiles = commands.add_parser("profiles", help="list profiles, or print one as JSON")
    profiles.add_argument("name", nargs="?", help="a profile to print")
    profiles.set_defaults(handler=_cmd_profiles)
    return parser


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """Run the command line; returns the exit code (see the module doc)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    out = out or sys.stdout
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return handler(args, out)
    except (InputError, ConfigError) as exc:
        _report(args, exc, "error")
        return EXIT_BAD_INPUT
    except (RetrieverError, WebSearchError) as exc:
        _report(args, exc, "service error")
        return EXIT_SERVICE
    except CragError as exc:
        _report(args, exc, "error")
        return EXIT_SERVICE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. piped into `head`: stop quietly, as shell tools do
        _silence_stdout()
        return 141
    except Exception as exc:  # noqa: BLE001 - the last line of defence of a CLI
        _report(args, exc, "internal error", always_trace=True)
        return EXIT_INTERNAL


def _silence_stdout() -> None:
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _report(
    args: argparse.Namespace, exc: BaseException, label: str, *, always_trace: bool = False
) -> None:
    if args.debug or always_trace:
        traceback.print_exception(exc, file=sys.stderr)
    sys.stderr.write(f"crag-heuristic: {label}: {exc}\n")
