"""The web fallback: the SearXNG client, its options, the circuit breaker, what a
search returns, and the keyword rewrite the router sends to the web.

The top level re-exports :class:`SearxngClient`, :class:`SearxngConfig` and
:class:`CircuitBreaker`; the errors are in the top-level ``WebSearchError`` tree.
"""

from ._web.circuit import CircuitBreaker, CircuitState
from ._web.config import SearxngConfig
from ._web.keywords import keyword_query
from ._web.response import WebResults, WebSearchInfo
from ._web.searxng import SearxngClient

__all__ = [
    "CircuitBreaker",
    "CircuitState",
    "SearxngClient",
    "SearxngConfig",
    "WebResults",
    "WebSearchInfo",
    "keyword_query",
]
