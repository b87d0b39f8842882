"""A fixture engine that fails a share of the queries it is asked, and remembers which.

:class:`FaultyEngine` is a :class:`~crag_testkit.FixtureEngine` for
load tests: every query text is either answered with a few results or failed,
and the choice is a pure function of the text (and a seed)::

    u(q)    = first 8 bytes of sha256(seed NUL q), big-endian, / 2**64   in [0, 1)
    fails   = u(q) < failure_share
    kind(q) = kinds[byte 8 of the digest mod len(kinds)]          (when it fails)

so the same text fails the same way on every request, from any thread or
process, and about ``failure_share`` of distinct texts fail. The failure
kinds are what a real engine does wrong:

* ``"http_500"``: HTTP 500 (SearXNG lists the engine as unresponsive);
* ``"garbage"``: HTTP 200 with a body that is not JSON (a parsing error);
* ``"slow"``: the answer comes after ``slow_delay`` seconds, beyond the
  SearXNG engine timeout (an engine timeout).

It records, per query text, the outcome of every request it served
(:attr:`FaultyEngine.served`): the engine-side truth a test compares the
client's errors with.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from urllib.parse import quote

from crag_heuristic import ConfigError

from ._fixture_engine import FixtureEngine, FixtureReply, fixture_item

__all__ = ["FAULT_KINDS", "OK", "FaultyEngine"]

OK = "ok"
"""The outcome recorded for a request answered with results."""

FAULT_KINDS: tuple[str, ...] = ("http_500", "garbage", "slow")
"""The ways :class:`FaultyEngine` fails a request."""

_GARBAGE = b"<html><body>this is not JSON {"


class FaultyEngine(FixtureEngine):
    """A loopback engine failing a deterministic share of query texts (see the module doc).

    Args:
        failure_share: the share of distinct query texts that fail, in [0, 1].
        kinds: the failure kinds to draw from (a subset of :data:`FAULT_KINDS`).
        slow_delay: seconds a ``"slow"`` failure waits before answering; make it
            longer than the SearXNG engine timeout.
        results: results in a successful answer (each with a link unique to the text).
        seed: changes which texts fail.
        host, port: where to listen (a free loopback port by default).

    Raises:
        ConfigError: a bad argument, naming it.
    """

    def __init__(
        self,
        *,
        failure_share: float = 0.25,
        kinds: Sequence[str] = FAULT_KINDS,
        slow_delay: float = 3.0,
        results: int = 3,
        seed: str = "",
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if (
            isinstance(failure_share, bool)
            or not isinstance(failure_share, int | float)
            or not 0.0 <= failure_share <= 1.0
        ):
            raise ConfigError("failure_share", failure_share, "must be a number in [0, 1]")
        kinds = tuple(kinds)
        if not kinds or any(kind not in FAULT_KINDS for kind in kinds):
            raise ConfigError("kinds", kinds, f"must be a non-empty subset of {FAULT_KINDS}")
        if (
            isinstance(slow_delay, bool)
            or not isinstance(slow_delay, int | float)
            or not math.isfinite(slow_delay)
            or slow_delay <= 0
        ):
            raise ConfigError("slow_delay", slow_delay, "must be a finite number of seconds > 0")
        if isinstance(results, bool) or not isinstance(results, int) or results < 1:
            raise ConfigError("results", results, "must be an integer >= 1")
        if not isinstance(seed, str):
            raise ConfigError("seed", seed, "must be a string")
        super().__init__(host=host, port=port)
        self.failure_share = float(failure_share)
        self.kinds = kinds
        self.slow_delay = float(slow_delay)
        self.results = results
        self.seed = seed
        self.served: dict[str, list[str]] = {}

    def planned(self, query: str) -> str:
        """What every request for ``query`` gets: :data:`OK` or a failure kind."""
        digest = hashlib.sha256(f"{self.seed}\x00{query}".encode("utf-8", "surrogatepass")).digest()
        if int.from_bytes(digest[:8], "big") / 2.0**64 >= self.failure_share:
            return OK
        return self.kinds[digest[8] % len(self.kinds)]

    def reply_for(self, engine: str, query: str) -> FixtureReply:
        """Record the request and answer it as :meth:`planned` says."""
        outcome = self.planned(query)
        with self._lock:
            self.requests.append((engine, query))
            self.served.setdefault(query, []).append(outcome)
        if outcome == "http_500":
            return FixtureReply(status=500, body=b'{"error": "injected failure"}')
        if outcome == "garbage":
            return FixtureReply(body=_GARBAGE)
        if outcome == "slow":
            return FixtureReply(items=self._items(query), delay=self.slow_delay)
        return FixtureReply(items=self._items(query))

    def _items(self, query: str) -> list[dict[str, str]]:
        slug = quote(query.casefold().replace(" ", "-"), safe="-")
        return [
            fixture_item(
                f"https://load.example.org/{slug}/{rank}",
                f"{query} ({rank})",
                f"Result {rank} for {query}: a page written about exactly this subject.",
            )
            for rank in range(1, self.results + 1)
        ]

    def failed_texts(self) -> dict[str, str]:
        """Each query text served at least one failing reply, with its failure kind."""
        with self._lock:
            return {
                query: next(o for o in outcomes if o != OK)
                for query, outcomes in self.served.items()
                if any(o != OK for o in outcomes)
            }

    def served_counts(self) -> dict[str, int]:
        """Requests served per outcome (``ok``, ``http_500`` ...), in a stable order."""
        counts = dict.fromkeys((OK, *FAULT_KINDS), 0)
        with self._lock:
            for outcomes in self.served.values():
                for outcome in outcomes:
                    counts[outcome] += 1
        return counts

    def __enter__(self) -> FaultyEngine:
        self.start()
        return self

    def reset(self) -> None:
        """Forget the recorded requests and outcomes (and programmed replies)."""
        super().reset()
        with self._lock:
            self.served.clear()
