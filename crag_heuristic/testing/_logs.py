"""Capture crag-heuristic's structured events in tests (cf. ``structlog.testing``).

The library emits its events through the stdlib logger ``"crag_heuristic"``
(see ``crag_heuristic._logging``); :func:`capture_events` turns them back into
dicts: ``{"event": "crag.cache", "log_level": "debug", "op": "get", ...}``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .._logging import LOGGER_NAME

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class _Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.events: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        fields = {k: v for k, v in vars(record).items() if k not in _STANDARD}
        self.events.append(
            {"event": record.getMessage(), "log_level": record.levelname.lower(), **fields}
        )


@contextmanager
def capture_events(level: int = logging.DEBUG) -> Iterator[list[dict[str, Any]]]:
    """Collect the events emitted inside the ``with`` block, in order."""
    logger = logging.getLogger(LOGGER_NAME)
    collector = _Collector()
    previous = logger.level
    logger.addHandler(collector)
    logger.setLevel(level)
    try:
        yield collector.events
    finally:
        logger.removeHandler(collector)
        logger.setLevel(previous)
