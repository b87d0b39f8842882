"""The web fallback: the SearXNG client, its options, the circuit breaker, what a
search returns, and the keyword rewrite the router sends to the web.

The top level re-exports :class:`SearxngClient`, :class:`SearxngConfig` and
:class:`CircuitBreaker`; the errors are in the top-level ``WebSearchError`` tree.
"""

from ._router.rewrite import keyword_query
from ._web import (
    CircuitBreaker,
    CircuitState,
    SearxngClient,
    SearxngConfig,
    WebResults,
    WebSearchInfo,
)

__all__ = [
    "CircuitBreaker",
    "CircuitState",
    "SearxngClient",
    "SearxngConfig",
    "WebResults",
    "WebSearchInfo",
    "keyword_query",
]
