"""The record of a load-and-faults run: its settings, its queries, what each got, when
Redis went down and came back. Written by ``load_faults.py`` (which drives the run) and
judged by ``load_faults_report.py``: both read it from here, neither from the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import testkit_path  # noqa: F401 - puts tests/support (crag_testkit) on sys.path
from crag_testkit import FAULT_KINDS, FaultyEngine

from crag_heuristic import CRAGResult
from crag_heuristic.testing import TracedCall

__all__ = ["LoadSettings", "Outcome", "Planned", "Run", "Timeline"]


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadSettings:
    """One run's parameters (every time in seconds)."""

    queries: int = 1000
    concurrency: int = 50
    failure_share: float = 0.25
    fault_kinds: tuple[str, ...] = FAULT_KINDS
    engine_timeout: float = 2.0
    slow_delay: float = 3.5
    client_timeout: float = 6.0
    client_retries: int = 1
    web_timeout: float = 13.0
    hang_margin: float = 5.0
    kill_at: float = 0.3
    restart_at: float = 0.6
    retry_interval: float = 0.25
    repeat_share: float = 0.15
    sample_share: float = 0.15
    k: int = 3
    breaker_threshold: int = 5
    breaker_cooldown: float = 1.0
    breaker_failure_rate: float | None = 0.5  # None: the consecutive mode
    seed: int = 0

    def __post_init__(self) -> None:
        if self.queries < 1 or self.concurrency < 1:
            raise ValueError("queries and concurrency must be >= 1")
        if not 0.0 < self.kill_at < self.restart_at < 1.0:
            raise ValueError("need 0 < kill_at < restart_at < 1")
        if self.slow_delay <= self.engine_timeout or self.client_timeout <= self.engine_timeout:
            raise ValueError("slow_delay and client_timeout must exceed engine_timeout")
        worst_web = (self.client_retries + 1) * self.client_timeout + self.client_retries
        if self.web_timeout < worst_web:
            raise ValueError(f"web_timeout must cover the client's retries ({worst_web} s)")

    @property
    def deadline(self) -> float:
        """The hard per-query bound: the router's web timeout plus the margin."""
        return self.web_timeout + self.hang_margin


@dataclass(frozen=True, slots=True)
class Planned:
    """One query of the run."""

    index: int
    text: str
    kind: str  # generated / repeat / sample-answered / sample-partial / sample-unanswered

    @property
    def tag(self) -> str:
        return f"q{self.index:05d}"


@dataclass
class Outcome:
    """What one query got."""

    planned: Planned
    status: str  # result / exception / hang
    started: float
    ended: float
    result: CRAGResult | None = None
    error: str | None = None

    @property
    def latency_ms(self) -> float:
        return (self.ended - self.started) * 1000.0


@dataclass
class Timeline:
    """When Redis went down and came back (clock seconds), and how far the run was."""

    started: float = 0.0
    ended: float = 0.0
    kill_started: float | None = None
    kill_done: float | None = None
    restart_started: float | None = None
    restart_ready: float | None = None
    completed_at_kill: int = 0
    completed_at_restart: int = 0
    error: str | None = None


@dataclass
class Run:
    """Everything a run leaves for the analysis."""

    settings: LoadSettings
    outcomes: list[Outcome]
    calls: list[TracedCall]
    engine: FaultyEngine
    timeline: Timeline
    breaker_events: list[dict[str, Any]]
    stragglers: int = 0
    children_left: list[int] = field(default_factory=list)
