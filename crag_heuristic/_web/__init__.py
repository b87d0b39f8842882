"""The web-search fallback: a SearXNG client, its options and a circuit breaker."""

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
