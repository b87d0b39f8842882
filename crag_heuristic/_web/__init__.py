"""The web-search fallback: a SearXNG client, its options and a circuit breaker.

Its modules need httpx (the ``web`` extra), checked here, before any of them loads.
"""

from .._optional import requires

with requires("web", "the web search (crag_heuristic.web)"):
    import httpx  # noqa: F401 - the door: every module below imports it

from .circuit import CircuitBreaker, CircuitState
from .clean import clean_text
from .config import DEFAULT_HEADERS, SearxngConfig
from .response import WebResults, WebSearchInfo
from .searxng import SearxngClient
from .urls import normalize_url, web_chunk_id

__all__ = [
    "DEFAULT_HEADERS",
    "CircuitBreaker",
    "CircuitState",
    "SearxngClient",
    "SearxngConfig",
    "WebResults",
    "WebSearchInfo",
    "clean_text",
    "normalize_url",
    "web_chunk_id",
]
