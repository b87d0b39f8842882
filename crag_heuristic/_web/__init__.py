"""The web fallback's modules; :mod:`crag_heuristic.web` lists their public names.

* ``keywords``: the keyword rewrite of a query for web search (no dependency);
* ``config``, ``circuit``, ``response``, ``clean``, ``urls``: the client's
  options, its circuit breaker, what a search returns and how web text and
  addresses are cleaned (no dependency);
* ``searxng`` and ``attempt``: the SearXNG client and what one HTTP attempt came
  to. They need httpx (the ``web`` extra): each imports it through
  :func:`~crag_heuristic._optional.requires`, which names the extra when it is
  missing.

Nothing is imported here, so the router can import the keyword rewrite
without httpx.
"""
