"""The CRAG decision flow, written once, free of I/O.

The flow is a generator. Where it needs I/O (a search, a web call, a cache
read or write) it yields a list of requests and receives, in the same order,
one outcome per request: the value, or the exception the call raised. The
sync router runs the requests one after the other; the async router runs
them concurrently (e.g. the re-retrievals of several expanded queries). The
decisions, timings and notes are the same for both, by construction.

    retrieve -> evaluate [-> escalate: a cascade's grader on the uncertain chunks]
                         -> RELEVANT   -> keep (optionally drop IRRELEVANT chunks)
                         -> PARTIAL    -> expand -> re-retrieve -> RRF -> evaluate
                                          (-> web as well when still below the bar: combined)
                         -> IRRELEVANT -> keyword rewrite -> web search -> evaluate
                                          (no web, or it failed: expand as for PARTIAL)
             -> parents (optional: chunks graded PARTIAL re-graded as their parents)
             -> refine (optional) -> CRAGResult

When the context asks for it (``Context.stream``: :meth:`CRAG.stream` /
``astream``), the flow also yields each stage's event as it happens
(``[Emit(event)]``, see :mod:`crag_heuristic._router.events`): the retrieval
before it is graded, the evaluation before the route, and so on.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from .._cache.keys import grade_key, web_key
from .._checks import CheckedQuery, check_query
from .._config import RouterConfig
from .._exceptions import (
    CacheError,
    CragError,
    InputError,
    InvalidChunkError,
    RetrieverError,
    ScoreOrderError,
    WebSearchResponseError,
)
from .._expansion.fusion import reciprocal_rank_fusion
from .._failures import Failure, FailureStage
from .._grading.escalation import CascadeReport, Selection, cascaded_evaluation, select
from .._grading.graders import checked_grades
from .._grading.lists import SetEscalation, escalated_set_evaluation, select_list
from .._protocols import AsyncRetriever, Retriever
from .._redact import describe
from .._types import Chunk, Evaluation, Verdict, check_chunk, check_ranking
from .._usage import usage_of
from .._web.keywords import keyword_query
from .._web.urls import is_http_url
from .cached import is_bad_value, open_evaluation, open_grade, open_web_results, seal
from .context import Context
from .events import (
    Corrected,
    Evaluated,
    ParentsExpanded,
    Refined,
    Retrieved,
    StageEvent,
    WebSearched,
)
from .parents import ParentGet, expand_parents
from .result import CRAGResult, Strategy, WebOutcome


@dataclass(frozen=True, slots=True)
class Search:
    """Ask ``retriever`` for the ``k`` best chunks for ``query``."""

    retriever: Retriever | AsyncRetriever
    query: CheckedQuery
    k: int
    lexical: bool = False


@dataclass(frozen=True, slots=True)
class WebCall:
    """Ask the web searcher for ``max_results`` results for ``query``."""

    query: CheckedQuery
    max_results: int


@dataclass(frozen=True, slots=True)
class CacheGet:
    """Read ``key`` from the cache (the outcome is the JSON text or ``None``)."""

    key: str


@dataclass(frozen=True, slots=True)
class CacheSet:
    """Write ``value`` (JSON text) under ``key`` for ``ttl`` seconds."""

    key: str
    value: str
    ttl: float


@dataclass(frozen=True, slots=True)
class GradeCall:
    """Ask the cascade's grader for P(relevant) of each of ``chunks`` (the outcome:
    what it answered, checked by the flow, or the exception it raised)."""

    query: CheckedQuery
    chunks: tuple[Chunk, ...]


@dataclass(frozen=True, slots=True)
class Expand:
    """Ask the query expander for expanded queries of ``query`` given the first
    retrieval's ``chunks`` (the outcome: what ``expand`` returned, or the
    exception it came to). A request, not a call in the flow: the drivers bound
    it (``RouterConfig.expander_timeout``) and keep it off the event loop."""

    query: CheckedQuery
    chunks: tuple[Chunk, ...]


@dataclass(frozen=True, slots=True)
class Emit:
    """Hand a stage event to the caller (only when ``Context.stream``; always alone in
    its list; the outcome is ``None``)."""

    event: StageEvent


Request = Search | WebCall | CacheGet | CacheSet | GradeCall | ParentGet | Expand | Emit
_V = TypeVar("_V")
Flow = Generator[list[Request], list[Any], CRAGResult]


@dataclass
class _State:
    chunks: list[Chunk]
    evaluation: Evaluation
    strategy: Strategy = Strategy.NONE
    retries: int = 0
    expanded: tuple[str, ...] = ()
    web_query: str | None = None
    web_used: bool = False
    web_failure: Failure | None = None
    web_cache_hit: bool = False
    web_miss: str | None = None  # why the web gave nothing: "no web searcher configured" ...


def correct(ctx: Context, query: CheckedQuery, k: int) -> Flow:
    """Run the CRAG flow for ``query`` (see the module doc); returns the result.

    ``query`` was checked at the router's door; the flow trusts it, and checks
    the queries it makes (expanded, rewritten for the web) once each. What it
    returns holds plain strings.

    Raises :class:`RetrieverError` when the first retrieval fails: without it
    there is nothing to correct.
    """
    total_start = time.perf_counter()
    cfg = ctx.config
    size = ctx.retriever_size
    depth = cfg.depth(k)
    if size is not None and depth > size:  # a FAISS search allocates k slots, used or not
        capped = max(size, 1)
        if k > capped:
            ctx.notes.append(f"k = {k} is more than the retriever holds ({size}): capped")
            k = capped
        depth = capped

    started = time.perf_counter()
    [first] = yield [Search(ctx.retriever, query, depth)]
    ctx.timed("retrieve", started)
    if isinstance(first, BaseException):
        raise first
    first = _unique(ctx, first, ctx.retriever)
    retrieved = list(first[:k])
    ctx.counts["retrieved"] = len(retrieved)
    ctx.log("crag.retrieve", chunks=len(retrieved), depth=depth)
    if ctx.stream:
        yield [Emit(Retrieved(elapsed_ms=_ms(total_start), chunks=tuple(retrieved), depth=depth))]

    first_eval, cache_hit = yield from _first_evaluation(ctx, query, retrieved)
    cascade = None
    if ctx.escalation is not None:
        gated = retrieved[: cfg.gate_k] if cfg.gate_k else retrieved
        first_eval, cascade = yield from escalate(ctx, query, gated, first_eval)
    state = _State(chunks=retrieved, evaluation=first_eval)
    verdict = first_eval.verdict
    if ctx.stream:
        yield [
            Emit(
                Evaluated(
                    elapsed_ms=_ms(total_start),
                    evaluation=first_eval,
                    cache_hit=cache_hit,
                    cascade=cascade,
                )
            )
        ]

    if verdict is Verdict.RELEVANT:
        yield from _fast_path(ctx, query, state)
    elif cfg.max_retries == 0:
        ctx.notes.append("correction is off (max_retries = 0): the retrieval is returned as is")
    elif verdict is Verdict.PARTIAL:
        expanded = yield from _expand(ctx, query, k, depth, first, state)
        if expanded and ctx.stream:
            yield [Emit(_corrected(ctx, state, total_start))]
        after = state.evaluation.verdict
        wants_web = after is Verdict.IRRELEVANT or (
            cfg.web_on_partial and after is not Verdict.RELEVANT
        )
        if wants_web and state.retries < cfg.max_retries and ctx.has_web:
            yield from _web(ctx, query, retrieved, first_eval, state)
            if ctx.stream:
                yield [Emit(_web_searched(ctx, state, total_start))]
            if state.web_used and expanded:
                state.strategy = Strategy.COMBINED
            elif state.web_miss is not None:
                ctx.notes.append(f"{state.web_miss}: the chunks before it are kept")
    else:
        yield from _web(ctx, query, retrieved, first_eval, state)
        if ctx.stream:
            yield [Emit(_web_searched(ctx, state, total_start))]
        if state.web_miss is not None:
            expanded = False
            if cfg.expand_without_web and state.retries < cfg.max_retries:
                expanded = yield from _expand(
                    ctx, query, k, depth, first, state, fallback=state.web_miss
                )
                if expanded and ctx.stream:
                    yield [Emit(_corrected(ctx, state, total_start))]
            if not expanded:
                ctx.notes.append(f"{state.web_miss}: the original chunks are kept")

    if not state.chunks and retrieved:  # never hand back less than we had without a reason
        state.chunks = retrieved
        ctx.notes.append("the correction produced no chunks: the original chunks are kept")
    ctx.log(
        "crag.route",
        verdict=verdict.value,
        final_verdict=state.evaluation.verdict.value,
        strategy=state.strategy.value,
    )

    if ctx.parents is not None and cfg.expand_parents and state.chunks:
        state.chunks, state.evaluation = yield from expand_parents(
            ctx, query, state.chunks, state.evaluation
        )
        if ctx.stream:
            parents = ParentsExpanded(
                elapsed_ms=_ms(total_start),
                chunks=tuple(state.chunks),
                evaluation=state.evaluation,
                used=ctx.counts.get("parents_used", 0),
                failures=tuple(f for f in ctx.failures if f.stage is FailureStage.PARENTS),
            )
            yield [Emit(parents)]

    refinement = None
    if cfg.refine and state.chunks:
        started = time.perf_counter()
        refinement = ctx.evaluator.refine(query, state.chunks, ctx.corpus_stats)
        ctx.timed("refine", started)
        state.chunks = list(refinement.chunks)
        if refinement.cut and refinement.chunks:
            ctx.notes.append(
                "refinement kept no strip on its score: the chunks are cut to the "
                f"{refinement.token_budget}-token budget"
            )
        elif refinement.cut:
            ctx.notes.append(
                f"refinement: the {refinement.token_budget}-token budget holds not one word "
                "of the chunks: none is passed"
            )
        if ctx.stream:
            yield [Emit(Refined(elapsed_ms=_ms(total_start), refinement=refinement))]

    ctx.counts["final"] = len(state.chunks)
    ctx.timings["total"] = (time.perf_counter() - total_start) * 1000.0
    return CRAGResult(
        query=str(query),
        chunks=tuple(state.chunks),
        verdict=state.evaluation.verdict,
        evaluation=state.evaluation,
        initial_evaluation=first_eval,
        strategy=state.strategy,
        retrieved=tuple(retrieved),
        expanded_queries=state.expanded,
        web=_web_outcome(ctx, state),
        cache_hit=cache_hit,
        retries=state.retries,
        timings_ms=dict(ctx.timings),
        counts=dict(ctx.counts),
        notes=tuple(ctx.notes),
        refinement=refinement,
        cascade=cascade,
        failures=tuple(ctx.failures),
    )


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0


def _corrected(ctx: Context, state: _State, started: float) -> Corrected:
    """The ``corrected`` event of the correction just done."""
    return Corrected(
        elapsed_ms=_ms(started),
        strategy=state.strategy,
        chunks=tuple(state.chunks),
        evaluation=state.evaluation,
        expanded_queries=state.expanded,
        rankings=ctx.counts.get("expanded_rankings", 0),
    )


def _web_outcome(ctx: Context, state: _State) -> WebOutcome:
    """What the web stage did (all defaults when the route never went there)."""
    return WebOutcome(
        query=state.web_query,
        used=state.web_used,
        results=ctx.counts.get("web_results", 0),
        cache_hit=state.web_cache_hit,
        miss=state.web_miss,
        failure=state.web_failure,
    )


def _web_searched(ctx: Context, state: _State, started: float) -> WebSearched:
    """The ``web`` event of the web stage just done."""
    return WebSearched(
        elapsed_ms=_ms(started),
        web=_web_outcome(ctx, state),
        chunks=tuple(state.chunks),
        evaluation=state.evaluation,
    )


def _first_evaluation(
    ctx: Context, query: CheckedQuery, chunks: list[Chunk]
) -> Generator[list[Request], list[Any], tuple[Evaluation, bool]]:
    """The first evaluation, from the cache when it holds it; (evaluation, hit)."""
    return (yield from _evaluated(ctx, query, chunks, "evaluate"))


def _evaluated(
    ctx: Context, query: CheckedQuery, chunks: Sequence[Chunk], stage: str
) -> Generator[list[Request], list[Any], tuple[Evaluation, bool]]:
    """``ctx.evaluate`` of ``chunks`` (the first retrieval, or a corrected list), from
    the cache when it holds it; (evaluation, hit). A value read again as the same
    text is not opened again (``ctx.opened``). Lists the cascade's grader answered
    for (``ctx.grades``) are evaluated afresh: its answers are not in the key."""
    if not (ctx.has_cache and ctx.config.cache_evaluations) or ctx.grades:
        return ctx.evaluate(query, chunks, stage), False
    if ctx.config.gate_k:
        chunks = chunks[: ctx.config.gate_k]
    key = ctx.evaluation_key(query, chunks)
    started = time.perf_counter()
    [cached] = yield [CacheGet(key)]
    ctx.timed("cache", started)
    hit = ctx.opened.get(key, cached)
    if hit is not None and ctx.signer is not None and (ctx.signer.remaining(cached) or 0) < 0:
        hit = None  # opened before, expired since: opened again below, and refused
    writable = True
    if hit is None:
        opener = partial(
            open_evaluation, key=key, chunks=chunks, config=ctx.evaluator.config, signer=ctx.signer
        )
        hit, writable = _read(ctx, cached, "evaluation", opener)
        if hit is not None:
            ctx.opened.put(key, cached, hit)
    if hit is not None:
        ctx.log("crag.cache", op="get", what="evaluation", hit=True, stage=stage)
        return hit, True
    evaluation = ctx.evaluate(query, chunks, stage)
    if writable:
        ttl = ctx.config.evaluation_ttl
        stored = yield from _store(ctx, key, evaluation.to_dict(), ttl, "evaluation")
        if stored is not None:
            ctx.opened.put(key, stored, evaluation)
    return evaluation, False


def _read(
    ctx: Context, outcome: Any, what: str, open_value: Callable[[str], _V]
) -> tuple[_V | None, bool]:
    """A cache read's outcome opened (see :mod:`.cached`): (the value or ``None``,
    whether the cache may be written). A refused value is a recorded miss whose
    entry is overwritten; a failed read a recorded miss and no write (the
    cache is down)."""
    if outcome is not None and not isinstance(outcome, BaseException):
        try:
            return open_value(outcome), True
        except CacheError as exc:
            outcome = exc
    if is_bad_value(outcome):
        ctx.cache_failed(outcome, what, refused=True)
    elif isinstance(outcome, BaseException):
        ctx.cache_failed(outcome, f"{what} read")
        return None, False
    return None, True


def _store(
    ctx: Context, key: str, value: Any, ttl: float, what: str
) -> Generator[list[Request], list[Any], str | None]:
    """Store ``value`` sealed under ``key``; the text stored, or ``None`` when it was
    not (a failure is recorded, never raised)."""
    started = time.perf_counter()
    try:
        payload = seal(key, value, ctx.signer, ttl)
    except CacheError as exc:  # not JSON-serialisable (a web result's metadata, say)
        ctx.cache_failed(exc, f"{what} write")
        return None
    [stored] = yield [CacheSet(key, payload, ttl)]
    ctx.timed("cache", started)
    if isinstance(stored, BaseException):
        ctx.cache_failed(stored, f"{what} write")
        return None
    return payload


def escalate(
    ctx: Context, query: CheckedQuery, chunks: Sequence[Chunk], gate: Evaluation
) -> Generator[list[Request], list[Any], tuple[Evaluation, CascadeReport]]:
    """The cascade step: the chunks ``ctx.escalation`` picks go to the grader
    (their cached answers first); its answers replace the gate's probabilities
    (see :mod:`crag_heuristic._grading.escalation`), or, for a
    :class:`SetEscalation`, settle the set verdict of an uncertain list (see
    :mod:`crag_heuristic._grading.lists`). Any failure of the grader leaves
    ``gate`` as it is and is the report's ``error``."""
    assert ctx.escalation is not None
    policy = ctx.escalation
    started = time.perf_counter()
    choice: Selection = (
        select_list(gate, policy, query)
        if isinstance(policy, SetEscalation)
        else select(gate, policy, ctx.evaluator.config)
    )
    by_id = {chunk.id: chunk for chunk in chunks}
    grades: dict[str, float] = {}
    keys: dict[str, str] = {}
    if choice.chosen and ctx.has_cache and policy.cache_grades:
        fingerprint = ctx.grader_fingerprint
        keys = {
            i: grade_key(query, by_id[i], grader_fingerprint=fingerprint) for i in choice.chosen
        }
        read = time.perf_counter()
        outcomes = yield [CacheGet(keys[i]) for i in choice.chosen]
        ctx.timed("cache", read)
        for chunk_id, key, outcome in zip(
            choice.chosen, list(keys.values()), outcomes, strict=True
        ):
            opener = partial(open_grade, key=key, signer=ctx.signer)
            grade, writable = _read(ctx, outcome, "grade", opener)
            if grade is not None:
                grades[chunk_id] = grade
            if not writable:
                keys = {}  # the cache is down: no writes either
    hits = tuple(i for i in choice.chosen if i in grades)
    missing = [i for i in choice.chosen if i not in grades]
    failure = None
    usage = None
    if missing:
        asked = time.perf_counter()
        [outcome] = yield [GradeCall(query, tuple(by_id[i] for i in missing))]
        ctx.timed("grade", asked)
        usage = usage_of(outcome)  # what the call cost, when the grader says (answer or error)
        try:
            if isinstance(outcome, BaseException):
                raise outcome
            fresh = dict(zip(missing, checked_grades(outcome, len(missing)), strict=True))
        except CragError as exc:  # GraderError and its kinds, from the driver or the check
            failure = ctx.failed(FailureStage.GRADER, exc)
        else:
            grades.update(fresh)
            if keys:
                write = time.perf_counter()
                stored = yield [
                    CacheSet(
                        keys[i], seal(keys[i], p, ctx.signer, policy.grade_ttl), policy.grade_ttl
                    )
                    for i, p in fresh.items()
                ]
                ctx.timed("cache", write)
                failed = next((s for s in stored if isinstance(s, BaseException)), None)
                if failed is not None:
                    ctx.cache_failed(failed, "grade write")
    evaluation = gate
    if failure is None and grades:
        if isinstance(policy, SetEscalation) or policy.recompute_set:
            ctx.grades.update({(i, by_id[i].text): p for i, p in grades.items()})
        again = time.perf_counter()
        if isinstance(policy, SetEscalation):
            evaluation = escalated_set_evaluation(
                ctx.evaluator, query, chunks, ctx.corpus_stats, gate, grades, policy
            )
        else:
            evaluation = cascaded_evaluation(
                ctx.evaluator, query, chunks, ctx.corpus_stats, gate, grades, policy
            )
        ctx.timed("evaluate", again)
    elif failure is not None:
        ctx.notes.append("the grader failed: the gate's verdict stands")
    report = CascadeReport(
        level="set" if isinstance(policy, SetEscalation) else "chunk",
        grader=ctx.grader_fingerprint,
        band=choice.band,
        threshold=choice.threshold,
        candidates=choice.candidates,
        escalated=choice.chosen,
        share=len(choice.chosen) / choice.total if choice.total else 0.0,
        gate_scores=choice.gate_scores,
        grades=grades,
        cache_hits=hits,
        failure=failure,
        gate_verdict=gate.verdict,
        verdict=evaluation.verdict,
        ms=(time.perf_counter() - started) * 1000.0,
        audited=choice.audited,
        usage=usage,
    )
    ctx.log(
        "crag.grade",
        escalated=len(choice.chosen),
        candidates=choice.candidates,
        cache_hits=len(hits),
        error=None if failure is None else failure.type_name,
        gate_verdict=gate.verdict.value,
        verdict=evaluation.verdict.value,
        grader_requests=None if usage is None else usage.requests,
        grader_tokens=None if usage is None else usage.tokens,
    )
    return evaluation, report


def _fast_path(
    ctx: Context, query: CheckedQuery, state: _State
) -> Generator[list[Request], list[Any], None]:
    """RELEVANT: keep the chunks; optionally drop the ones graded IRRELEVANT."""
    if not ctx.config.drop_irrelevant:
        return
    graded = {grade.chunk_id for grade in state.evaluation.chunks}
    kept = set(state.evaluation.kept_ids(Verdict.PARTIAL))
    if kept and len(kept) < len(graded):
        dropped = len(graded) - len(kept)
        state.chunks = [c for c in state.chunks if c.id in kept or c.id not in graded]
        ctx.counts["dropped"] = dropped
        ctx.notes.append(f"dropped {dropped} chunk(s) graded irrelevant on their own")
        state.evaluation, _ = yield from _evaluated(ctx, query, state.chunks, "re_evaluate")


def _expand(
    ctx: Context,
    query: CheckedQuery,
    k: int,
    depth: int,
    first: list[Chunk],
    state: _State,
    *,
    fallback: str | None = None,
) -> Generator[list[Request], list[Any], bool]:
    """PARTIAL: expand the query, re-retrieve, fuse with RRF, evaluate again.

    With ``fallback`` (IRRELEVANT without web results; why, e.g. "the web search
    failed") it only takes over the strategy when there is something to expand
    with, and notes why it runs. Returns whether it re-retrieved.
    """
    cfg = ctx.config
    started = time.perf_counter()
    checked: tuple[CheckedQuery, ...] = ()
    if ctx.get_expander() is not None:
        [expansion] = yield [Expand(query, tuple(state.chunks))]
        try:
            if isinstance(expansion, BaseException):
                raise expansion
            checked = _expanded_queries(expansion, query)
        except Exception as exc:  # noqa: BLE001 - a user's expander may answer anything
            failure = ctx.failed(FailureStage.EXPANSION, exc)
            ctx.notes.append(f"query expansion failed ({failure.text})")
    ctx.timed("expand", started)
    queries = tuple(map(str.__str__, checked))  # plain strings, for the result

    on = cfg.expand_on
    primary = on in ("primary", "both") or ctx.lexical is None
    requests = [Search(ctx.retriever, q, depth) for q in checked] if primary else []
    if ctx.lexical is not None:
        lexical_queries = (query, *checked) if on in ("lexical", "both") else (query,)
        requests += [Search(ctx.lexical, q, depth, lexical=True) for q in lexical_queries]
    if not requests:  # no lexical retriever and no expanded query: nothing to correct with
        if fallback is None:
            why = "no expander" if ctx.get_expander() is None else "the expander gave no query"
            ctx.notes.append(
                f"no correction was possible ({why} and no lexical retriever: give the router "
                "lexical= or an expander): the retrieval is kept"
            )
        return False
    state.strategy = Strategy.QUERY_EXPANSION
    state.retries += 1
    state.expanded = queries
    ctx.log("crag.expand", queries=len(queries), fallback=fallback is not None)
    if fallback is not None:
        ctx.notes.append(f"{fallback}: trying query expansion instead")

    started = time.perf_counter()
    outcomes = yield list(requests)
    ctx.timed("re_retrieve", started)
    lexical_weight = _lexical_weight(cfg, state.evaluation)
    rankings: list[Sequence[Chunk]] = [first]
    weights = [1.0]
    found: list[tuple[Search, list[Chunk]]] = []
    for request, outcome in zip(requests, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            failure = ctx.failed(FailureStage.RE_RETRIEVAL, outcome)
            ctx.notes.append(f"re-retrieval for {request.query!r} failed ({failure.text})")
            continue
        found.append((request, outcome))
    store = _by_text([first] + [chunks for request, chunks in found if not request.lexical])
    lexical = [chunks for request, chunks in found if request.lexical]
    # another retriever may name the store's documents otherwise: when no id of its
    # rankings is one of the store's, its results take the store's id for the same text
    disjoint = not any(chunk.id in store[1] for chunks in lexical for chunk in chunks)
    for request, chunks in found:
        if request.lexical and disjoint:
            chunks = _reconciled(ctx, chunks, store)
        rankings.append(_unique(ctx, chunks, request.retriever))
        weights.append(lexical_weight if request.lexical else cfg.expansion_weight)
    ctx.counts["expanded_rankings"] = len(rankings) - 1
    if len(rankings) == 1:
        ctx.notes.append("every re-retrieval failed: the retrieval is kept")
        return True

    started = time.perf_counter()
    fused = reciprocal_rank_fusion(rankings, k=cfg.rrf_k, weights=weights, keep_scores=True)[:k]
    ctx.timed("fuse", started)
    ctx.counts["fused"] = len(fused)
    state.chunks = fused
    state.evaluation, _ = yield from _evaluated(ctx, query, fused, "re_evaluate")
    return True


def _expanded_queries(expansion: Any, query: str) -> tuple[CheckedQuery, ...]:
    """The expander's queries other than ``query``, each checked once, here.

    Raises:
        InvalidQueryError: a query that is not a non-empty string.
        InputError: an answer without a sequence of ``queries``.
    """
    queries = getattr(expansion, "queries", None)
    if isinstance(queries, str | bytes) or not isinstance(queries, Sequence):
        raise InputError(
            f"the expander returned {type(expansion).__name__} without a sequence of queries"
        )
    kept = [q for q in queries if not isinstance(q, str) or (q.strip() and q != query)]
    return tuple(map(check_query, kept))


def _lexical_weight(cfg: RouterConfig, evaluation: Evaluation) -> float:
    """The RRF weight of each lexical ranking (see ``RouterConfig.fusion_weights``)."""
    if cfg.fusion_weights == "gate":
        return cfg.lexical_weight * 2.0 * (1.0 - evaluation.score)
    overlap = evaluation.signals.keyword_overlap
    if cfg.fusion_weights == "keywords" and overlap is not None:
        return cfg.lexical_weight * 2.0 * (1.0 - overlap)
    return cfg.lexical_weight


def _web(
    ctx: Context,
    query: CheckedQuery,
    retrieved: list[Chunk],
    first_eval: Evaluation,
    state: _State,
) -> Generator[list[Request], list[Any], None]:
    """IRRELEVANT (or still short after expansion): keyword rewrite, then the web.

    When the web gives nothing, ``state.web_miss`` says why; the caller notes
    what happens instead."""
    started = time.perf_counter()
    state.web_query = keyword_query(
        query, analyzer=ctx.evaluator.analyzer, corpus_stats=ctx.corpus_stats
    )
    ctx.timed("rewrite", started)
    if not ctx.has_web:  # the query shows what would be asked; nothing was: no web strategy
        state.web_miss = "no web searcher configured"
        return
    if state.strategy is Strategy.NONE:
        state.strategy = Strategy.WEB_SEARCH
    state.retries += 1
    outcome = yield from _cached_web(ctx, state, check_query(state.web_query))
    if isinstance(outcome, BaseException):
        state.web_failure = ctx.failed(FailureStage.WEB, outcome)
        state.web_miss = "the web search failed"
        ctx.log("crag.web_search", ok=False, error=state.web_failure.type_name)
        return
    results = outcome
    ctx.counts["web_results"] = len(results)
    ctx.log("crag.web_search", ok=True, results=len(results))
    if not results:
        state.web_miss = "the web search found nothing"
        return
    final, _ = _dedupe(results)
    if ctx.config.keep_partial_on_web:
        keep = set(first_eval.kept_ids(Verdict.PARTIAL))
        seen = {chunk.id for chunk in final}
        final += [c for c in retrieved if c.id in keep and c.id not in seen]
    state.chunks = final
    state.web_used = True
    state.evaluation, _ = yield from _evaluated(ctx, query, final, "re_evaluate")


def _cached_web(
    ctx: Context, state: _State, web_query: CheckedQuery
) -> Generator[list[Request], list[Any], Any]:
    """Web results for ``web_query`` (``state.web_query`` checked): from the cache,
    else the searcher (then stored)."""
    max_results = ctx.config.web_max_results
    key = None
    if ctx.has_cache:
        key = web_key(web_query, max_results, searcher_fingerprint=ctx.web_fingerprint)
        started = time.perf_counter()
        [cached] = yield [CacheGet(key)]
        ctx.timed("cache", started)
        opener = partial(open_web_results, key=key, max_results=max_results, signer=ctx.signer)
        chunks, writable = _read(ctx, cached, "web results", opener)
        if chunks is not None:
            state.web_cache_hit = True
            ctx.log("crag.cache", op="get", what="web", hit=True)
            return chunks
        if not writable:
            key = None
    started = time.perf_counter()
    [outcome] = yield [WebCall(web_query, max_results)]
    ctx.timed("web_search", started)
    if isinstance(outcome, BaseException):
        return outcome
    results = _usable_web(ctx, outcome, max_results)
    if key is not None and results:  # what is stored is what a read accepts
        value = [c.to_dict() for c in results]  # checked chunks (web_chunks)
        yield from _store(ctx, key, value, ctx.config.web_ttl, "web results")
    return results


def _usable_web(ctx: Context, outcome: list[Chunk], max_results: int) -> list[Chunk]:
    """A searcher's answer as the flow uses it (and the cache holds it): results
    from http(s) URLs only, at most ``max_results`` of them (what was asked)."""
    results = [chunk for chunk in outcome if is_http_url(chunk.source)]
    if len(results) < len(outcome):
        dropped = len(outcome) - len(results)
        ctx.counts["web_dropped"] = dropped
        ctx.notes.append(f"dropped {dropped} web result(s) whose source is not an http(s) URL")
    if len(results) > max_results:
        ctx.notes.append(
            f"the web searcher returned {len(results)} results for {max_results} asked: "
            f"the first {max_results} are kept"
        )
        results = results[:max_results]
    return results


def _dedupe(chunks: Sequence[Chunk]) -> tuple[list[Chunk], list[str]]:
    """``chunks`` with each id once (its first, best-ranked copy), and the ids repeated."""
    seen: set[str] = set()
    out = []
    repeated = []
    for chunk in chunks:
        if chunk.id not in seen:
            seen.add(chunk.id)
            out.append(chunk)
        else:
            repeated.append(chunk.id)
    return out, repeated


def _unique(ctx: Context, chunks: list[Chunk], retriever: object) -> list[Chunk]:
    """What ``retriever`` returned with each chunk id once (the best-ranked copy): a
    repeated id is the retriever's fault, not the query's. A note names the
    retriever (once per retriever and query); ``counts["duplicates"]`` adds them up."""
    unique, repeated = _dedupe(chunks)
    if repeated:
        name = type(retriever).__name__
        ctx.counts["duplicates"] = ctx.counts.get("duplicates", 0) + len(repeated)
        said = f"{name} returned "
        if not any(note.startswith(said) and "duplicate chunk id" in note for note in ctx.notes):
            shown = ", ".join(map(repr, dict.fromkeys(repeated[:3])))
            more = ", ..." if len(set(repeated)) > 3 else ""
            ctx.notes.append(
                f"{said}{len(repeated)} duplicate chunk id(s) ({shown}{more}): the best-ranked "
                "copy of each is kept"
            )
    return unique


def text_digest(text: str) -> bytes:
    """What identifies a document's text across retrievers: SHA-256 of its words
    (whitespace runs folded into one space)."""
    return hashlib.sha256(" ".join(text.split()).encode("utf-8", "surrogatepass")).digest()


def _by_text(rankings: Iterable[Sequence[Chunk]]) -> tuple[dict[bytes, str], set[str]]:
    """The id each text has in ``rankings`` (its first, by :func:`text_digest`), and
    every id they hold."""
    known: dict[bytes, str] = {}
    ids: set[str] = set()
    for ranking in rankings:
        for chunk in ranking:
            known.setdefault(text_digest(chunk.text), chunk.id)
            ids.add(chunk.id)
    return known, ids


def _reconciled(
    ctx: Context, chunks: list[Chunk], store: tuple[dict[bytes, str], set[str]]
) -> list[Chunk]:
    """A lexical ranking with the store's ids, for a lexical retriever whose rankings
    share no id with the store's (they name documents otherwise: a store keyed by
    uuids, a lexical retriever by the corpus's ids): a chunk whose text the store's
    rankings hold takes the id it has there (one document, fused once; see
    :func:`_by_text`). ``counts["reconciled"]`` adds them up. Retrievers that share
    ids are left alone: two ids for one text are then two documents of the corpus."""
    known, _ = store
    out = []
    for chunk in chunks:
        same = known.get(text_digest(chunk.text))
        if same is not None:
            chunk = chunk.replace(id=same)
            ctx.counts["reconciled"] = ctx.counts.get("reconciled", 0) + 1
        out.append(chunk)
    return out


def _chunk_list(value: Any) -> tuple[list[Chunk], str | None]:
    """``value`` as a list of chunks, or what is wrong with it.

    A list of chunks is returned as it is (a ``WebResults`` keeps its ``info``);
    any other iterable is materialised once. Whatever iterating raises (a
    generator's own failure) propagates.
    """
    if isinstance(value, str | bytes | bytearray | Mapping) or not isinstance(value, Iterable):
        return [], f"{type(value).__name__}, not an iterable of Chunk"
    items = value if isinstance(value, list) else list(value)
    for position, item in enumerate(items):
        if not isinstance(item, Chunk):
            return [], f"{type(item).__name__} at position {position}, not a Chunk"
        try:
            check_chunk(item)
        except InvalidChunkError as exc:
            return [], f"an invalid chunk at position {position}: {exc}"
    return items, None


def retrieved_chunks(value: Any, retriever: Any, method: str = "search") -> list[Chunk]:
    """What ``retriever.<method>`` returned, checked: any iterable of :class:`Chunk`,
    a ranking whose scores run the way their kind does (see
    :func:`~crag_heuristic._types.check_ranking`).

    Raises:
        RetrieverError: anything else (``None``, a number, a string, a mapping, an
            element that is not a chunk, a similarity's scores that only rise),
            naming the retriever (a :class:`ScoreOrderError` its cause, naming
            the kind the scores likely are).
    """
    chunks, problem = _chunk_list(value)
    name = type(retriever).__name__
    if problem is not None:
        raise RetrieverError(f"{name}.{method} returned {problem}", retriever=name)
    try:
        check_ranking(chunks)
    except ScoreOrderError as exc:
        raise RetrieverError(f"{name}.{method} returned {exc}", retriever=name) from exc
    return chunks


def web_chunks(value: Any, searcher: Any, method: str = "search") -> list[Chunk]:
    """What a web searcher returned, checked as :func:`retrieved_chunks` does.

    Raises:
        WebSearchResponseError: not an iterable of chunks (the router records it
            as ``web_error``).
    """
    chunks, problem = _chunk_list(value)
    if problem is not None:
        raise WebSearchResponseError(f"{type(searcher).__name__}.{method} returned {problem}")
    return chunks


def retriever_error(error: BaseException, retriever: Any) -> RetrieverError:
    """Wrap a foreign exception from a user's retriever."""
    if isinstance(error, RetrieverError):
        return error
    name = type(retriever).__name__
    wrapped = RetrieverError(f"{name}.search failed: {describe(error)}", retriever=name)
    wrapped.__cause__ = error
    return wrapped
