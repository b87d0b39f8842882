"""The ``crag-heuristic`` command line.

Exit codes: 0 success (everything asked for worked); 2 bad input, bad
configuration or bad usage (the message says what to fix); 3 a service
failed: the retriever (nothing is printed), or the web search or the cache,
which the router works around (``retrieve`` prints the degraded result all the
same, with ``web_error`` / ``cache_error``, and names the failure on stderr);
1 an internal error (a bug: please report it with the traceback that
``--debug`` prints).

The command line is an application, so unlike the library it sets up
logging: warnings to stderr, and the library's events too with ``--verbose``
(given before or after the sub-command), each with its fields (redacted, see
``crag_heuristic._cli.verbose``); ``retrieve --verbose`` prints the router's
stage events as they happen. ``--verbose`` lowers only the library's logger:
the HTTP clients' loggers would print each request's URL, the query text with
it.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import TextIO

from .._exceptions import ConfigError, CragError, InputError, MissingDependencyError
from .._logging import LOGGER_NAME
from .._version import __version__
from . import bench, evaluate, index, retrieve, serve, stats
from .common import EPILOG, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_SERVICE
from .verbose import EventFormatter

Handler = Callable[[argparse.Namespace, TextIO], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crag-heuristic",
        description="An LLM-free Corrective RAG gate: grade retrieved chunks and correct them.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _add_global_options(parser, default=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    retrieve.register(commands)
    index.register(commands)
    serve.register(commands)
    evaluate.register(commands)
    bench.register(commands)
    stats.register(commands)
    for command in commands.choices.values():  # accepted after the sub-command too
        _add_global_options(command, default=argparse.SUPPRESS)
    return parser


def _add_global_options(parser: argparse.ArgumentParser, *, default: object) -> None:
    """``--debug`` and ``--verbose``: before the sub-command, or after it (where the
    default is SUPPRESS, so an option given before is not reset)."""
    parser.add_argument(
        "--debug", action="store_true", default=default, help="print tracebacks of errors"
    )
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        default=default,
        help="log the library's events (crag.*) with their fields to stderr; never other "
        "libraries' logs",
    )


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """Run the command line; returns the exit code (see the module doc)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    out = out or sys.stdout
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    _configure_logging(verbose=args.verbose)
    try:
        return handler(args, out)
    except (InputError, ConfigError, MissingDependencyError) as exc:
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


def _configure_logging(*, verbose: bool) -> None:
    """Warnings of every library to stderr; with ``verbose`` the library's own events
    too. Only the ``crag_heuristic`` logger is lowered to DEBUG: httpx and httpcore
    log each request's URL, query text included, which the library's events
    replace by a hash."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(EventFormatter())
    handler.addFilter(_warnings_or_ours)  # other libraries (Dask) lower their own loggers
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    if verbose:
        logging.getLogger(LOGGER_NAME).setLevel(logging.DEBUG)


def _warnings_or_ours(record: logging.LogRecord) -> bool:
    """Warnings and errors of any logger; lower levels of the library's only."""
    return record.levelno >= logging.WARNING or record.name.startswith(LOGGER_NAME)


def _report(
    args: argparse.Namespace, exc: BaseException, label: str, *, always_trace: bool = False
) -> None:
    if args.debug or always_trace:
        traceback.print_exception(exc, file=sys.stderr)
    sys.stderr.write(f"crag-heuristic: {label}: {exc}\n")
