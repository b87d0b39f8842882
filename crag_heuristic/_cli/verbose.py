"""``--verbose``: the library's events on stderr, each with its fields, as they happen.

A library event is a structlog event sent through the stdlib logger
``crag_heuristic`` (``crag_heuristic._logging``): its name is the record's
message and its key-values are the record's extra attributes.
:class:`EventFormatter` prints both (``DEBUG crag_heuristic crag.retrieve
chunks=5 depth=5 query_id=...``), every line through the same
:func:`~crag_heuristic._redact.redact` the library applies to what it logs, so a
credential in a URL shows as ``***``. ``retrieve --verbose`` adds the router's
stage events (``crag.stage stage=evaluated verdict=relevant ...``), from their
:meth:`~crag_heuristic.events.StageEvent.summary`: ids, verdicts, scores,
counts and error types, never a text or the query.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping
from typing import Any

from .._redact import redact

# What every LogRecord has; anything else on a record is an event's field.
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
    "taskName",
}


def _value(value: Any) -> str:
    kind = type(value)
    if kind is str:
        safe = value and _UNSAFE.search(value) is None
        return value if safe else json.dumps(value, ensure_ascii=False)
    if kind is int or (kind is float and math.isfinite(value)):
        return repr(value)  # what json.dumps writes, at a tenth of its cost (the access log)
    if value is None or kind is bool:
        return _JSON_CONSTANTS[value]
    return json.dumps(value, ensure_ascii=False, default=str)


_JSON_CONSTANTS = {None: "null", True: "true", False: "false"}
_UNSAFE = re.compile(r"[\s\"'=]")  # what a bare value cannot hold: it is quoted


def fields_text(fields: Mapping[str, Any]) -> str:
    """``key=value`` pairs in order (strings with spaces quoted), credentials masked."""
    return redact(" ".join(f"{key}={_value(value)}" for key, value in fields.items()))


class EventFormatter(logging.Formatter):
    """``LEVEL logger event key=value ...``: the event's fields after its name, redacted."""

    def __init__(self) -> None:
        super().__init__("%(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = {k: v for k, v in record.__dict__.items() if k not in _STANDARD}
        return redact(line) + (" " + fields_text(fields) if fields else "")
