"""Benchmark 4: what does the gate cost, next to the retrieval it guards?

All in the same run, on the same machine, with ``time.perf_counter``:

* bare retrieval: encode the query with MiniLM (when the ``bench`` extra is
  installed) and search the FAISS index for 10 documents (nothing else: no
  chunk is built);
* the evaluator alone on those 10 chunks, per query and per passage (chunk
  analysis warm: the chunks were graded once before, as in a service whose
  chunks recur; and cold: a fresh evaluator each time);
* the router on the fast path (RELEVANT) and on the corrected path (PARTIAL
  and, web off, IRRELEVANT: its correction, BM25 re-retrieval, fusion,
  re-evaluation), each including its own query encoding and search, so the
  overhead is router minus bare; twice: as this benchmark builds it (a
  retriever of its own that encodes and searches, the harness's analyzer, no
  cache) and as the README writes it (``FaissRetriever(index, docstore, embed)``
  with a plain function as ``embed``, so each search runs on the router's worker
  thread within ``retriever_timeout``, and ``CRAG(retriever,
  lexical=BM25Retriever(docstore))`` with every default, its in-process cache
  among them: each query is asked once, a miss). Bare and router calls
  alternate query by query, the order rotating too (a call right after an
  encode runs on colder caches), so load drift and ordering hit all alike.
  torch runs on one thread for the section (``torch.set_num_threads(1)``,
  restored after): its default of one thread a core made encoding on two busy
  cores seven times slower and the ratio noise.

Ratios are against the bare retrieval's median measured in this run; a route's against the
bare retrieval of the same queries (each route's queries are not the others': their length,
and so the query encoder's time, differs), the ratio to every query's bare median kept beside
it (``over_all_bare_p50``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .._calibration.gate import GateExample
from .._config import EvaluatorConfig, load_config
from .._evaluator.evaluator import Evaluator
from .._exceptions import InputError
from .._retrievers.bm25 import BM25Retriever
from .._retrievers.faiss import FaissRetriever
from .._router.router import CRAG
from .._text.corpus import CorpusStats
from .._types import Chunk
from .pipeline import Prepared, labels_for, prepare, retrievals_for
from .retrievals import chunks_of
from .timing import alternated, percentiles


def _timed(fn: Callable[..., object], *args: Any) -> float:
    started = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - started) * 1e3


TORCH_THREADS = 1  # torch's threads while the cost section times (None: not pinned)


@contextlib.contextmanager
def pinned_torch_threads(threads: int | None) -> Iterator[int | None]:
    """torch on ``threads`` threads while the block runs (restored after); yields the
    number in use, ``None`` when torch is not loaded (no encoder) or not pinned."""
    torch: Any = sys.modules.get("torch")
    if torch is None or threads is None:
        yield None
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(before)


def _routed(crag: CRAG, query: str) -> tuple[float, Any]:
    """One routed call: its time (ms) and its result."""
    started = time.perf_counter()
    result = crag.retrieve(query, 10)
    return (time.perf_counter() - started) * 1e3, result


class EncodingRetriever:
    """A folder's dense index as a retriever that encodes each query as it searches
    (MiniLM when the :class:`Prepared` folder has loaded it, else the query's vector in
    ``known``, text -> vector): what a timed call costs a user."""

    def __init__(self, prepared: Prepared, known: dict[str, Any]) -> None:
        self.prepared = prepared
        self.known = known
        self.encoder = prepared.encoder

    def embed(self, query: str) -> Any:
        if self.encoder is not None:
            return self.encoder(query)
        return self.known[query]

    def search(self, query: str, k: int) -> list[Chunk]:
        vector = self.embed(query)
        [hits] = self.prepared.index.search(np.asarray(vector)[None, :], k)
        return list(chunks_of(self.prepared.collection, hits))

    def corpus_stats(self) -> Any:
        return self.prepared.stats


def cost_section(
    prepared: Prepared,
    profile: EvaluatorConfig,
    retrievals: list[GateExample],
    *,
    limit: int = 300,
) -> dict[str, Any]:
    """Latencies (ms) and ratios to the bare retrieval, on natural retrievals; torch
    pinned to :data:`TORCH_THREADS` threads throughout (the model's warm-up included)."""
    prepared.load_encoder()
    with pinned_torch_threads(TORCH_THREADS) as threads:
        out = _cost(prepared, profile, [r for r in retrievals if r.kind == "natural"][:limit])
    return {"torch_threads": threads, **out}


def _cost(
    prepared: Prepared, profile: EvaluatorConfig, natural: list[GateExample]
) -> dict[str, Any]:
    by_qid = prepared.vectors({r.group: r.query for r in natural})
    known = {r.query: by_qid[r.group] for r in natural}
    retriever = EncodingRetriever(prepared, known)
    for r in natural[:5]:  # warm up the model and the index
        retriever.search(r.query, 10)

    evaluator = Evaluator(profile, analyzer=prepared.analyzer, shared_cache=False)
    for r in natural:
        evaluator.evaluate(r.query, r.chunks, prepared.stats)
    warm = [_timed(evaluator.evaluate, r.query, r.chunks, prepared.stats) for r in natural]
    cold = []
    for r in natural:
        evaluator.clear_cache()
        cold.append(_timed(evaluator.evaluate, r.query, r.chunks, prepared.stats))
    k = max(len(natural[0].chunks), 1)

    collection = prepared.collection
    bm25 = BM25Retriever(
        [Chunk(id=d, text=collection.doc_text(d), source=d) for d in collection.doc_ids],
        analyzer=prepared.analyzer,
    )
    crag = CRAG(retriever, evaluator, lexical=bm25, cache=False, config={"k": 10})
    readme, bare_search = _readme_router(prepared, retriever.embed)
    for r in natural[:5]:  # its first calls (see benchmarks/evaluator_micro.py), then forgotten
        readme.retrieve(r.query, 10)
    readme.cache.clear()  # type: ignore[union-attr]  # a MemoryCache
    routers: dict[str, Callable[[str], tuple[float, Any]]] = {
        "router": lambda query: _routed(crag, query),
        "readme": lambda query: _routed(readme, query),
    }
    routes = ("fast path", "corrected")
    by_route = {name: {route: list[float]() for route in routes} for name in routers}
    bare_by_route = {name: {route: list[float]() for route in routes} for name in routers}
    bare = []
    for i, r in enumerate(natural):  # interleaved: the order rotates query by query
        cases = ["bare", *routers]
        times: dict[str, float] = {}
        taken: dict[str, str] = {}
        for name in cases[i % 3 :] + cases[: i % 3]:
            if name == "bare":
                times[name] = _timed(bare_search, r.query)
            else:
                times[name], result = routers[name](r.query)
                taken[name] = routes[0] if result.strategy.value == "none" else routes[1]
        bare.append(times["bare"])
        for name, route in taken.items():
            by_route[name][route].append(times[name])
            bare_by_route[name][route].append(times["bare"])

    base = percentiles(bare)["p50"]
    out: dict[str, Any] = {
        "queries": len(natural),
        "query_encoder": prepared.query_encoder,
        "bare_retrieval_ms": percentiles(bare),
        "evaluator_warm_ms": percentiles(warm),
        "evaluator_cold_ms": percentiles(cold),
        "evaluator_per_passage_warm_ms": percentiles([t / k for t in warm]),
        "evaluator_warm_over_bare_p50": percentiles(warm)["p50"] / base,
    }
    for name, key in (("router", "router_ms"), ("readme", "readme_router_ms")):
        out[key] = {}
        for route in routes:
            samples = by_route[name][route]
            if not samples:
                continue
            stats = percentiles(samples)
            # against the bare retrieval of the same queries (a route's queries differ from
            # the others, in length for one: the query encoder's time follows it)
            paired = percentiles(bare_by_route[name][route])["p50"]
            stats["bare_same_queries_p50_ms"] = paired
            stats["over_bare_p50"] = stats["p50"] / paired
            stats["overhead_p50_ms"] = stats["p50"] - paired
            stats["over_all_bare_p50"] = stats["p50"] / base
            out[key][route] = stats
    readme.close()
    out["samples_ms"] = {
        "bare": bare,
        "evaluator_warm": warm,
        "evaluator_cold": cold,
        **by_route["router"],
        **{f"readme {route}": values for route, values in by_route["readme"].items()},
    }
    return out


def _readme_router(
    prepared: Prepared, embed: Callable[[str], Any]
) -> tuple[CRAG, Callable[[str], object]]:
    """The router as the README writes it, over the collection's FAISS index: a
    ``FaissRetriever(index, docstore, embed)`` (its documents by FAISS position, its
    statistics built from them; ``embed`` a plain function, so each search runs on
    the router's worker thread within ``retriever_timeout``) and ``CRAG(retriever,
    lexical=BM25Retriever(docstore))`` with every default (the in-process cache
    among them); and the bare retrieval it is measured against: ``embed`` and the
    FAISS search alone, at the depth the router asks for (10)."""
    collection = prepared.collection
    index = prepared.index.index
    docstore = [{"id": d, "text": collection.doc_text(d)} for d in collection.doc_ids]

    def encode(query: str) -> Any:  # the user's embedder: a plain function
        return embed(query)

    retriever = FaissRetriever(index, docstore, encode)
    readme = CRAG(retriever, lexical=BM25Retriever(docstore), config={"k": 10})

    def bare(query: str) -> object:
        return index.search(np.asarray(encode(query), dtype=np.float32)[None, :], 10)

    return readme, bare


def run_cost(data_dir: str | Path, *, limit: int = 300) -> dict[str, Any]:
    """The evaluator and the router on one BEIR folder's natural test retrievals (k = 10).

    The evaluator warm (the chunks graded before), cold from the analyses the
    corpus statistics were built with, cold by tokenising (statistics without
    analyses), and the README's call, a new ``Evaluator()`` each time, against
    one ``Evaluator()`` reused, alternated call by call over three rounds; then
    :func:`cost_section` (the router's fast and corrected paths against the
    bare retrieval, alternated query by query) without its samples.
    Milliseconds; ``limit`` retrievals at most.

    Raises:
        InputError: the folder is not a BEIR folder with a test split, or ``limit``
            leaves no retrieval to time.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InputError(f"limit must be an integer >= 1, got {limit!r}")
    started = time.perf_counter()
    prepared = prepare(data_dir)
    prepare_s = time.perf_counter() - started
    collection = prepared.collection
    natural = [
        r
        for r in retrievals_for(prepared, labels_for(collection, "qrels", "test"), 10, probes=False)
        if r.kind == "natural"
    ][:limit]
    with_store = prepared.stats
    without = dataclasses.replace(with_store, analyses=None)
    profile = load_config(None)
    # each of its own cache: a cold one's clear_cache() must not empty the warm one's
    warm_evaluator = Evaluator(profile, analyzer=prepared.analyzer, shared_cache=False)
    for r in natural:
        warm_evaluator.evaluate(r.query, r.chunks, with_store)
    stored = Evaluator(profile, shared_cache=False)
    tokenised = Evaluator(profile, shared_cache=False)
    reused = Evaluator(profile)  # the README's call, a new Evaluator each time, shares its cache
    for r in natural:
        reused.evaluate(r.query, r.chunks, with_store)

    def cold(evaluator: Evaluator, stats: CorpusStats) -> Callable[[int], object]:
        def run(i: int) -> object:
            evaluator.clear_cache()
            return evaluator.evaluate(natural[i].query, natural[i].chunks, stats)

        return run

    cold_corpus, cold_tokenised = cold(stored, with_store), cold(tokenised, without)
    rounds = 3
    samples = alternated(
        {
            "warm_ms": lambda i: warm_evaluator.evaluate(
                natural[i % len(natural)].query, natural[i % len(natural)].chunks, with_store
            ),
            "cold_corpus_ms": lambda i: cold_corpus(i % len(natural)),
            "cold_tokenised_ms": lambda i: cold_tokenised(i % len(natural)),
            "reused_ms": lambda i: reused.evaluate(
                natural[i % len(natural)].query, natural[i % len(natural)].chunks, with_store
            ),
            "fresh_ms": lambda i: Evaluator(profile).evaluate(
                natural[i % len(natural)].query, natural[i % len(natural)].chunks, with_store
            ),
        },
        rounds * len(natural),
    )
    out: dict[str, Any] = {
        "collection": collection.path.name,
        "retrievals": len(natural),
        "rounds": rounds,
        "prepare_s": prepare_s,
        "non_ascii_share": sum(not collection.doc_text(d).isascii() for d in collection.doc_ids)
        / len(collection.doc_ids),
    }
    for name, values in samples.items():
        out[name] = percentiles([v / 1000.0 for v in values])
    out["cold_corpus_over_warm_p50"] = out["cold_corpus_ms"]["p50"] / out["warm_ms"]["p50"]
    out["cold_tokenised_over_cold_corpus_p50"] = (
        out["cold_tokenised_ms"]["p50"] / out["cold_corpus_ms"]["p50"]
    )
    out["fresh_over_reused_p50"] = out["fresh_ms"]["p50"] / out["reused_ms"]["p50"]
    cost = cost_section(prepared, profile, natural, limit=limit)
    cost.pop("samples_ms", None)
    out["cost"] = cost
    return out
