"""The ``crag-heuristic`` command line.

Exit codes: 0 success; 2 bad input, bad configuration or bad usage (the
message says what to fix); 3 a service the command needed failed (retriever,
web search, cache); 1 an internal error (a bug: please report it with the
traceback that ``--debug`` prints).

The command line is an application, so unlike the library it sets up
logging: warnings to stderr, and the library's events too with ``--verbose``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import TextIO

from .._exceptions import ConfigError, CragError, InputError
from .._version import __version__
from . import bench, evaluate, retrieve
from .common import (
    EPILOG,
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_SERVICE,
    read_chunks,
)

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_SERVICE",
    "build_parser",
    "main",
    "read_chunks",
]

Handler = Callable[[argparse.Namespace, TextIO], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crag-heuristic",
        description="An LLM-free Corrective RAG gate: grade retrieved chunks and correct them.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true", help="print tracebacks of errors")
    parser.add_argument(
        "--verbose", "-v", action="store_true", help="log the library's events to stderr"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    retrieve.register(commands)
    evaluate.register(commands)
    bench.register(commands)
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
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(levelname)s %(name)s %(message)s",
    )
    try:
        return handler(args, out)
    except (InputError, ConfigError) as exc:
        _report(args, exc, "error")
        return EXIT_BAD_INPUT
    except CragError as exc:
        _report(args, exc, "service error")
        return EXIT_SERVICE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. piped into `head`: stop quietly, as shell tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except Exception as exc:  # noqa: BLE001 - the last line of defence of a CLI
        _report(args, exc, "internal error", always_trace=True)
        return EXIT_INTERNAL


def _report(
    args: argparse.Namespace, exc: BaseException, label: str, *, always_trace: bool = False
) -> None:
    if args.debug or always_trace:
        traceback.print_exception(exc, file=sys.stderr)
    sys.stderr.write(f"crag-heuristic: {label}: {exc}\n")
