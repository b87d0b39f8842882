"""Structured events through the standard library, silent unless an application listens.

crag-heuristic never configures logging. Its events are structlog events with
stable names (``crag.retrieve``, ``crag.evaluate``, ``crag.expand``,
``crag.web_search``, ``crag.cache``, ``crag.route``, ``crag.result``) and
key-value fields, emitted through the stdlib logger ``"crag_heuristic"``:

* with no logging configured, nothing is printed: the logger has a
  ``logging.NullHandler`` (what the stdlib's logging HOWTO asks of a library),
  so the warnings (a cache failing, say) do not reach the interpreter's
  last-resort handler on stderr, and DEBUG / INFO events are below the
  default WARNING level anyway;
* an application on stdlib logging sees the event name as the message and
  the fields in the record's ``extra`` (e.g. ``record.verdict``);
* an application on structlog renders them with its own processors through
  ``structlog.stdlib.ProcessorFormatter``, or passes its own structlog
  logger to the router (``CRAG(..., logger=structlog.get_logger())``).

The wrapper is built with ``structlog.wrap_logger``, which touches no global
configuration, and only when an event is at a level the stdlib logger lets
through: :func:`get_logger` gives an :class:`EventLog`, which asks
``logging.Logger.isEnabledFor`` first, so that a silent library costs one
level test per event and never imports structlog (with ``structlog.dev``
and, where installed, rich: about 0.3 s of a command line's start).
"""

from __future__ import annotations

import logging
from typing import Any

LOGGER_NAME = "crag_heuristic"

# Without a handler anywhere, stdlib logging prints WARNING records to stderr through
# logging.lastResort. A NullHandler keeps the library silent until the application
# configures logging (records still propagate to the application's handlers).
_library_logger = logging.getLogger(LOGGER_NAME)
if not any(isinstance(h, logging.NullHandler) for h in _library_logger.handlers):
    _library_logger.addHandler(logging.NullHandler())


class EventLog:
    """The library's event logger: structlog's stdlib ``BoundLogger``, made on the
    first event its stdlib logger would emit (see the module doc).

    ``bind`` returns a new one with the fields added, as structlog's does.
    """

    __slots__ = ("_bound", "_context", "_logger")

    def __init__(self, logger: logging.Logger, context: dict[str, Any] | None = None) -> None:
        self._logger = logger
        self._context = context or {}
        self._bound: Any = None

    def __repr__(self) -> str:
        return f"EventLog({self._logger.name!r}, {self._context!r})"

    def bind(self, **fields: Any) -> EventLog:
        return EventLog(self._logger, {**self._context, **fields})

    def _structlog(self) -> Any:
        if self._bound is None:
            import structlog

            self._bound = structlog.wrap_logger(
                self._logger,
                wrapper_class=structlog.stdlib.BoundLogger,
                processors=[
                    structlog.stdlib.filter_by_level,
                    structlog.stdlib.render_to_log_kwargs,
                ],
                context_class=dict,
            ).bind(**self._context)
        return self._bound

    def _emit(self, level: int, method: str, event: str, fields: dict[str, Any]) -> Any:
        if not self._logger.isEnabledFor(level):
            return None
        return getattr(self._structlog(), method)(event, **fields)

    def debug(self, event: str, **fields: Any) -> Any:
        return self._emit(logging.DEBUG, "debug", event, fields)

    def info(self, event: str, **fields: Any) -> Any:
        return self._emit(logging.INFO, "info", event, fields)

    def warning(self, event: str, **fields: Any) -> Any:
        return self._emit(logging.WARNING, "warning", event, fields)

    def error(self, event: str, **fields: Any) -> Any:
        return self._emit(logging.ERROR, "error", event, fields)


def get_logger(name: str = LOGGER_NAME) -> EventLog:
    """The library's event logger writing to the stdlib logger ``name``."""
    return EventLog(logging.getLogger(name))
