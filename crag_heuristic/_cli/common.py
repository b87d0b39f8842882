"""Shared pieces of the command line: exit codes, input files, config options, output."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any, NoReturn, TextIO

from .._config import DEFAULT_PROFILE, EvaluatorConfig, available_profiles, load_config
from .._documents import to_chunk
from .._exceptions import InputError, InvalidChunkError
from .._types import Chunk, ScoreKind

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_SERVICE = 3

EPILOG = """\
exit codes: 0 success (everything asked for worked), 2 bad input / config /
usage, 3 a service failed: the retriever (nothing is printed), or the web
search or the cache (the degraded result is printed all the same, with
web_error / cache_error saying what failed), 1 internal error (run with
--debug for the traceback)
"""


MAX_NESTING = 64
"""The deepest nesting of arrays and objects an input record may have: deeper
is an input error, not a ``RecursionError`` in the parser or when the result
is written out."""

# a JSON string (skipped whole) or a bracket: enough to follow the nesting
_STRUCTURE = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def read_records(path: str | Path) -> list[tuple[int, Any]]:
    """Read JSON Lines (or one JSON array) as ``(line number, object)`` pairs.

    ``-`` reads standard input. Blank lines are skipped. Arrays and objects may
    nest :data:`MAX_NESTING` deep.

    Raises:
        InputError: unreadable file, invalid UTF-8 or invalid JSON, a number
            too long to read, or nesting too deep, with the line number.
    """
    if str(path) == "-":
        raw = sys.stdin.buffer.read()
        name = "<stdin>"
    else:
        try:
            raw = Path(path).read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from exc
        name = str(path)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(
            f"{name}:{line}: not valid UTF-8 (byte {exc.start}); re-encode the file"
        ) from exc
    if text.lstrip().startswith("["):
        items = _parse(text, name, 1)  # a list: the text starts with "["
        if any(_too_deep(item, MAX_NESTING - 1) for item in items):
            _nesting_error(text, name, 1, MAX_NESTING)
        return list(enumerate(items, start=1))
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        record = _parse(line, name, number)
        if _too_deep(record, MAX_NESTING):
            _nesting_error(line, name, number, MAX_NESTING)
        records.append((number, record))
    return records


def _parse(text: str, name: str, first_line: int) -> Any:
    """``json.loads(text)``; any failure an :class:`InputError` with its line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{name}:{first_line + exc.lineno - 1}: invalid JSON: {exc.msg}") from exc
    except RecursionError:
        _nesting_error(text, name, first_line, MAX_NESTING)
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise InputError(f"{name}:{first_line}: unreadable JSON: {exc}") from None


def _too_deep(value: Any, limit: int) -> bool:
    """Whether arrays and objects in ``value`` nest more than ``limit`` deep."""
    if not isinstance(value, dict | list):
        return False
    stack: list[tuple[dict[str, Any] | list[Any], int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def _nesting_error(text: str, name: str, first_line: int, limit: int) -> NoReturn:
    """Raise the :class:`InputError` for ``text`` nesting deeper than ``limit``, at the
    line where it goes past it."""
    depth = 0
    line = first_line
    for match in _STRUCTURE.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                line = first_line + text.count("\n", 0, match.start())
                break
        elif token in "]}":
            depth -= 1
    raise InputError(f"{name}:{line}: arrays and objects nest deeper than {limit} levels")


def read_chunks(path: str | Path, *, default_kind: ScoreKind | None = None) -> list[Chunk]:
    """Read chunks from a JSON Lines file (one chunk object per line; ``-`` = stdin).

    Each line holds the keys of :meth:`Chunk.to_dict` (``_id`` and ``title``
    are accepted too). ``default_kind`` is used for lines without
    ``score_kind``. A file holding one JSON array of objects also works.

    Raises:
        InputError: unreadable file, invalid UTF-8 or JSON, or a bad chunk;
            the message gives the line number.
    """
    name = "<stdin>" if str(path) == "-" else str(path)
    chunks = []
    for number, item in read_records(path):
        try:
            if default_kind is not None and isinstance(item, dict) and "score_kind" not in item:
                item = {**item, "score_kind": default_kind}
            chunks.append(Chunk.from_dict(item))
        except InvalidChunkError as exc:
            raise InputError(f"{name}:{number}: {exc}") from exc
    return chunks


def config_from_args(args: argparse.Namespace) -> EvaluatorConfig:
    base = load_config(args.config) if args.config else load_config(args.profile)
    overrides: dict[str, Any] = {}
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise InputError(f"--set expects key=value, got {item!r}")
        try:
            parsed: Any = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        except (ValueError, RecursionError) as exc:  # 4,301 digits; 1,000 nested brackets
            raise InputError(f"--set {key}: unreadable value ({type(exc).__name__})") from None
        node = overrides
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = parsed
    if not overrides:
        return base
    overrides.setdefault("name", f"{base.name}+overrides")
    return base.replace(**overrides)


def add_config_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("configuration")
    group.add_argument(
        "--profile",
        help=f"named profile (default {DEFAULT_PROFILE}; known: {', '.join(available_profiles())})",
    )
    group.add_argument("--config", metavar="FILE", help="a TOML, JSON or YAML config file")
    group.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override one field, e.g. --set thresholds.relevant=0.8 (repeatable)",
    )


def dump(data: Any, out: TextIO, pretty: bool) -> None:
    json.dump(data, out, indent=2 if pretty else None, ensure_ascii=False)
    out.write("\n")


def read_docs(path: str | Path) -> list[Chunk]:
    """A docs file (JSON Lines: ``id``/``_id``, ``text``, optional ``title``,
    ``source``, ``metadata``) as chunks; line ``i`` is FAISS id ``i``."""
    chunks = []
    for position, (number, record) in enumerate(read_records(path)):
        try:
            chunks.append(
                to_chunk(
                    record,
                    default_id=str(position),
                    score=None,
                    score_kind=ScoreKind.UNKNOWN,
                    retriever="docs",
                )
            )
        except Exception as exc:
            raise InputError(f"{path}:{number}: {exc}") from exc
    if not chunks:
        raise InputError(f"{path}: no documents")
    return chunks


CACHE_SECRET_VARIABLE = "CRAG_HEURISTIC_CACHE_SECRET"


def read_secret(path: str | None, variable: str | None = None) -> str | None:
    """A secret: the text of the file at ``path`` (surrounding white space stripped: a
    trailing newline), else the environment ``variable`` (read now, by the command
    line only), else ``None``. The secret is never shown in a message.

    Raises:
        InputError: an unreadable or empty file.
    """
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise InputError(f"cannot read the secret file {path!r}: {reason}") from None
        if not text:
            raise InputError(f"the secret file {path!r} is empty")
        return text
    if variable is not None:
        return os.environ.get(variable, "").strip() or None
    return None


def add_cache_secret_option(parser: argparse.ArgumentParser) -> None:
    """``--cache-secret-file``: the secret that signs the values of ``--redis``."""
    parser.add_argument(
        "--cache-secret-file",
        metavar="FILE",
        help="with --redis: sign every cached value with the secret in FILE (16 bytes or "
        f"more; default: the {CACHE_SECRET_VARIABLE} variable), the same in every process "
        "sharing the Redis; without one, anyone who can write to the Redis can plant "
        "values that are served as ours (a warning says so)",
    )


def redis_cache(args: argparse.Namespace) -> Any:
    """The ``RedisCache`` of ``--redis`` (``None`` without it), signed with the secret of
    ``--cache-secret-file`` or ``CRAG_HEURISTIC_CACHE_SECRET``; without a secret, a
    warning on stderr (and the library's ``crag.store.unsigned`` event).

    Raises:
        InputError: ``--cache-secret-file`` without ``--redis``, or an unreadable file.
        ConfigError: a secret shorter than 16 bytes (never shown).
    """
    if not args.redis:
        if args.cache_secret_file is not None:
            raise InputError(
                "--cache-secret-file goes with --redis (it signs what is stored there)"
            )
        return None
    from .._cache.redis import RedisCache
    from .._exceptions import UnsignedStoreWarning

    secret = read_secret(args.cache_secret_file, CACHE_SECRET_VARIABLE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnsignedStoreWarning)
        cache = RedisCache(url=args.redis, secret=secret)
    if any(issubclass(warning.category, UnsignedStoreWarning) for warning in caught):
        sys.stderr.write(
            "crag-heuristic: warning: --redis without a secret: anyone who can write to this "
            "Redis can plant evaluations and web text that are served as ours; give "
            f"--cache-secret-file FILE or {CACHE_SECRET_VARIABLE}\n"
        )
    return cache
