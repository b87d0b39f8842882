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

The wrapper is built per call with ``structlog.wrap_logger``, which touches no
global configuration.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

__all__ = ["LOGGER_NAME", "get_logger"]

LOGGER_NAME = "crag_heuristic"

# Without a handler anywhere, stdlib logging prints WARNING records to stderr through
# logging.lastResort. A NullHandler keeps the library silent until the application
# configures logging (records still propagate to the application's handlers).
_library_logger = logging.getLogger(LOGGER_NAME)
if not any(isinstance(h, logging.NullHandler) for h in _library_logger.handlers):
    _library_logger.addHandler(logging.NullHandler())


def get_logger(name: str = LOGGER_NAME) -> Any:
    """A structlog bound logger writing to the stdlib logger ``name``."""
    return structlog.wrap_logger(
        logging.getLogger(name),
        wrapper_class=structlog.stdlib.BoundLogger,
        processors=[structlog.stdlib.filter_by_level, structlog.stdlib.render_to_log_kwargs],
        context_class=dict,
        cache_logger_on_first_use=True,
    )
