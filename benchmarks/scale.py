"""Cost at scale: corpus statistics, lexical search, FAISS indexes and the evaluator on
a synthetic corpus of a million documents (the test of cost, not of quality).

    nice -n 10 python benchmarks/scale.py [--docs 1000000] [--dim 128] [--workers 2]
                                          [--queries 200] [--out benchmarks/results/scale]

``--docs 20000`` runs in about a minute. The corpus is seeded and made here:

* a vocabulary of ``--vocab`` (2,000,000) pseudo-words of 3 to 11 letters
  drawn with English letter frequencies, and the library's stop words;
* documents of 10 to 120 words (uniform): each word is a stop word with
  probability 0.35, else a vocabulary word of Zipf rank ``r`` with
  probability proportional to ``r ** -1.1`` (truncated at the vocabulary);
* one random unit vector (``--dim``) per document, and a query encoder
  stand-in that maps a query's BLAKE2b digest to a seeded random unit vector;
* ``--queries`` queries of 2 to 6 words drawn like the documents' words.

It measures, in one process and one run (``time.perf_counter``; memory as
the exact bytes of the structure's arrays where it has them, and the
resident-set growth of the process from ``/proc/self/statm`` otherwise):

1. corpus statistics: :meth:`CorpusStats.build` in one process, without and
   with each document's analysis (``analyses=True``), and on a local Dask
   cluster of ``--workers`` worker processes (one thread each; the cluster
   started beforehand and timed apart), without and with analyses: every
   build must equal the one-process build bit for bit (fingerprint, mean
   length, analyses digest). The counting throughput of one partition in
   this process (documents a second) says how the build scales with workers;
   the time the client spends merging the partitions is logged by the build
   (``merge_seconds``). The analyzer before its term cache
   (:class:`evaluator_micro.ReferenceAnalyzer`) with the pre-scale
   ``from_texts`` counting loop on a sample of ``--reference-docs`` documents,
   extrapolated linearly (labelled so); the size of the :class:`TermTable`
   against a ``dict`` of the same counts (``tracemalloc``); the analyses'
   arrays; ``save`` and ``load`` times and the file's size, with and without
   analyses;
2. lexical search: :class:`BM25Retriever` with the sparse backend on the whole
   corpus (build, bytes, query p50 / p99, first query against later ones);
   rank-bm25 (``backend="rank-bm25"``) on the first ``--rank-bm25-docs``
   documents, with its query time extrapolated linearly to the corpus (its
   scoring loops over every document for every query term); and the
   ``bm25s`` package (if installed) on the whole corpus, fed the same
   analyzer's terms (its "lucene" scores are ours divided by ``k1 + 1``);
3. dense search through :class:`FaissRetriever` (the score conversion and the
   docstore lookups included): ``IndexFlatIP``, ``IndexIVFFlat``
   (``nlist = 4 sqrt(N)`` rounded to a power of two, ``nprobe`` 1 / 8 / 32
   via ``SearchParametersIVF``) and ``IndexHNSWFlat`` (``M = 32``,
   ``efConstruction = 40``, ``efSearch`` 16 / 64 / 128 via
   ``SearchParametersHNSW``): build, memory, p50 / p99, recall@10 against the
   flat index, and the retriever's construction with statistics loaded from
   the file, then its first query against later ones;
4. per query stage: the encoder stand-in, each search, the lexical search and
   the evaluator on the flat index's top 10 (with the corpus statistics):
   warm, cold from the analyses and cold tokenised (alternated), and cold
   from the analyses at k = 1000.

The machine is shared: the load average is recorded at the start and the end.

Percentiles are ``statistics.quantiles(method="inclusive")``.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import hashlib
import importlib
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from crag_heuristic import BM25Retriever, Evaluator, FaissRetriever
from crag_heuristic.testing import capture_events
from crag_heuristic.text import Analyzer, CorpusStats, DaskEngine

sys.path.insert(0, str(Path(__file__).resolve().parent))
from evaluator_micro import ReferenceAnalyzer

LETTERS = b"etaoinshrdlcumwfgypbvkjxqz"
LETTER_WEIGHTS = [12.0, 9.1, 8.2, 7.5, 7.0, 6.7, 6.3, 6.1, 6.0, 4.3, 4.0, 2.8, 2.8, 2.4, 2.4,
                  2.2, 2.0, 2.0, 1.9, 1.5, 1.0, 0.8, 0.2, 0.2, 0.1, 0.1]  # fmt: skip
PAGE = os.sysconf("SC_PAGE_SIZE")
FAISS: Any = faiss  # its stubs lack SearchParametersHNSW and SearchParametersIVF's keywords


# -- the synthetic corpus ---------------------------------------------------------------------


def vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    letters = np.frombuffer(LETTERS, dtype=np.uint8)
    p = np.asarray(LETTER_WEIGHTS) / sum(LETTER_WEIGHTS)
    words: dict[str, None] = {}
    while len(words) < size:
        lengths = rng.integers(3, 12, size=(size - len(words)) * 11 // 10 + 10)
        blob = rng.choice(letters, size=int(lengths.sum()), p=p).tobytes().decode("ascii")
        position = 0
        for length in lengths.tolist():
            words[blob[position : position + length]] = None
            position += length
    return list(words)[:size]


class Corpus:
    """Seeded texts, vectors and queries (see the module doc)."""

    def __init__(self, n_docs: int, dim: int, n_queries: int, vocab_size: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.vocab = vocabulary(rng, vocab_size)
        stops = sorted(Analyzer().stop_words)  # the default stop words
        ranks = np.arange(1, vocab_size + 1, dtype=np.float64)
        self.cdf = np.cumsum(ranks**-1.1)
        self.cdf /= self.cdf[-1]
        words = np.asarray(self.vocab + stops, dtype=object)
        self.texts: list[str] = []
        for start in range(0, n_docs, 50_000):
            m = min(50_000, n_docs - start)
            lengths = rng.integers(10, 121, size=m)
            total = int(lengths.sum())
            ids = np.searchsorted(self.cdf, rng.random(total))
            stop = rng.random(total) < 0.35
            ids[stop] = vocab_size + rng.integers(0, len(stops), size=int(stop.sum()))
            tokens = words[ids].tolist()
            position = 0
            for length in lengths.tolist():
                self.texts.append(" ".join(tokens[position : position + length]))
                position += length
        self.vectors = rng.standard_normal((n_docs, dim), dtype=np.float32)
        faiss.normalize_L2(self.vectors)
        self.dim = dim
        self.queries = []
        for _ in range(n_queries):
            n = int(rng.integers(2, 7))
            ids = np.searchsorted(self.cdf, rng.random(n))
            self.queries.append(" ".join(self.vocab[i] for i in ids.tolist()))

    def encode(self, query: str) -> np.ndarray:
        """The encoder stand-in: a unit vector seeded by the query's digest."""
        seed = int.from_bytes(hashlib.blake2b(query.encode(), digest_size=8).digest(), "little")
        vector = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
        unit: np.ndarray = vector / np.linalg.norm(vector)
        return unit


# -- measuring --------------------------------------------------------------------------------


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE / 1e6


def cpu_s() -> tuple[float, float]:
    """CPU seconds (user + system) of this process and of its finished children."""
    import resource

    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, children.ru_utime + children.ru_stime


def pct(samples_ms: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    q = (
        statistics.quantiles(ordered, n=100, method="inclusive")
        if len(ordered) > 1
        else list(ordered) * 99
    )
    return {"p50": q[49], "p99": q[98], "n": len(ordered)}


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


def per_query(fn: Callable[[str], Any], queries: Sequence[str]) -> list[float]:
    samples = []
    for query in queries:
        started = time.perf_counter()
        fn(query)
        samples.append((time.perf_counter() - started) * 1e3)
    return samples


def first_and_later(fn: Callable[[str], Any], queries: Sequence[str]) -> dict[str, float]:
    first = per_query(fn, queries[:1])[0]
    later = pct(per_query(fn, queries[1:]))
    return {"first_ms": first, "later_p50_ms": later["p50"], "ratio": first / later["p50"]}


def top10(retriever: Any) -> Callable[[str], Any]:
    return lambda query: retriever.search(query, 10)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- the sections -----------------------------------------------------------------------------


def reference_from_texts(texts: Sequence[str]) -> dict[str, int]:
    """The pre-scale ``CorpusStats.from_texts`` loop with the pre-cache analyzer."""
    analyzer = ReferenceAnalyzer()
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(analyzer.analyze(text).term_set)
    return dict(counts)


def _process_cpu_s() -> float:
    """CPU seconds (user + system) of the calling process (run on each Dask worker)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _workers_cpu_s(client: Any) -> float:
    return sum(client.run(_process_cpu_s).values()) if client is not None else 0.0


def _build(
    texts: Sequence[str], client: Any = None, **options: Any
) -> tuple[CorpusStats, dict[str, Any]]:
    """One timed build, with its CPU seconds (this process, and the Dask workers' when
    ``client`` is given) and what its ``crag.corpus_stats`` event says (partitions,
    merge seconds)."""
    gc.collect()
    before = rss_mb()
    cpu, workers = cpu_s()[0], _workers_cpu_s(client)
    with capture_events() as events:
        stats, seconds = timed(lambda: CorpusStats.build(texts, **options))
    after, workers_after = cpu_s()[0], _workers_cpu_s(client)
    [event] = [e for e in events if e["event"] == "crag.corpus_stats"]
    return stats, {
        "s": seconds,
        "cpu_s": {"parent": after - cpu, "children": workers_after - workers},
        "rss_growth_mb": rss_mb() - before,
        "partitions": event["partitions"],
        "merge_s": event["merge_seconds"],
    }


def _same(a: CorpusStats, b: CorpusStats) -> bool:
    """Bit for bit: the counts' fingerprint, the mean length and the analyses' digest."""
    return (
        a.fingerprint() == b.fingerprint()
        and a.avg_doc_len == b.avg_doc_len
        and (a.analyses.digest() if a.analyses else None)
        == (b.analyses.digest() if b.analyses else None)
    )


class _TimedEngine:
    """A :class:`~crag_heuristic.protocols.StatsEngine` that counts in this process and
    times each partition's counting alone (not the merge)."""

    name = "timed"

    def __init__(self) -> None:
        self.seconds: list[float] = []

    def map_unordered(
        self, function: Callable[[Any], Any], partitions: Iterable[Any]
    ) -> Iterator[Any]:
        for partition in partitions:
            started = time.perf_counter()
            part = function(partition)
            self.seconds.append(time.perf_counter() - started)
            yield part


def _partition_seconds(texts: Sequence[str], *, analyses: bool = False) -> float:
    """Seconds to count ``texts`` as one partition in this process, with a fresh
    analyzer (as a worker counts one)."""
    engine = _TimedEngine()
    CorpusStats.build(texts, analyses=analyses, engine=engine, partition_size=len(texts))
    [seconds] = engine.seconds
    return seconds


def stats_section(corpus: Corpus, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    distributed: Any = importlib.import_module("dask.distributed")  # the dask extra

    texts = corpus.texts
    n = len(texts)
    out: dict[str, Any] = {"workers": args.workers}
    single, out["local"] = _build(texts)
    log(f"stats: one process {out['local']['s']:.1f} s")
    out["n_terms"] = single.n_terms
    out["table_mb"] = (single.nbytes or 0) / 1e6
    stored, out["local_analyses"] = _build(texts, analyses=True)
    assert stored.analyses is not None
    assert _same(single, dataclasses.replace(stored, analyses=None))
    out["analyses_mb"] = stored.analyses.nbytes / 1e6
    out["analyses_bytes_per_doc"] = stored.analyses.nbytes / n
    log(f"stats: one process with analyses {out['local_analyses']['s']:.1f} s")
    first = texts[:25_000]
    seconds = _partition_seconds(first)
    out["partition"] = {
        "docs": len(first),
        "s": seconds,
        "docs_per_s": len(first) / seconds,
    }
    seconds = _partition_seconds(first, analyses=True)
    out["partition"]["analyses_docs_per_s"] = len(first) / seconds
    started = time.perf_counter()
    cluster = distributed.LocalCluster(
        n_workers=args.workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
        worker_dashboard_address="127.0.0.1:0",
    )
    client = distributed.Client(cluster)
    out["dask_cluster_start_s"] = time.perf_counter() - started
    engine = DaskEngine(client=client)
    on_dask, out["dask"] = _build(texts, client, engine=engine)
    out["dask_equal"] = _same(on_dask, single)
    log(
        f"stats: Dask, {args.workers} workers {out['dask']['s']:.1f} s (equal: {out['dask_equal']})"
    )
    del on_dask
    on_dask, out["dask_analyses"] = _build(texts, client, engine=engine, analyses=True)
    out["dask_analyses_equal"] = _same(on_dask, stored)
    log(f"stats: Dask with analyses {out['dask_analyses']['s']:.1f} s")
    del on_dask
    client.close()
    cluster.close()
    sample = texts[: min(n, args.reference_docs)]
    _, seconds = timed(lambda: reference_from_texts(sample))
    out["reference_sample_docs"] = len(sample)
    out["reference_sample_s"] = seconds
    out["reference_extrapolated_s"] = seconds * n / len(sample)
    tracemalloc.start()
    as_dict = dict(single.doc_freq.items())
    out["dict_mb"] = tracemalloc.get_traced_memory()[0] / 1e6
    tracemalloc.stop()
    del as_dict
    path = folder / "stats.npz"
    _, out["save_s"] = timed(lambda: single.save(path))
    out["file_mb"] = path.stat().st_size / 1e6
    loaded, out["load_s"] = timed(lambda: CorpusStats.load(path))
    assert loaded.fingerprint() == single.fingerprint()
    full = folder / "stats_analyses.npz"
    started = time.perf_counter()
    stored.save(full)
    out["save_analyses_s"] = time.perf_counter() - started
    out["file_analyses_mb"] = full.stat().st_size / 1e6
    loaded, out["load_analyses_s"] = timed(lambda: CorpusStats.load(full))
    assert _same(loaded, stored)
    del loaded, stored
    terms = [t for q in corpus.queries for t in Analyzer().terms(q)]
    fresh = CorpusStats.load(path)
    out["idf_lookup_us"] = pct([x * 1e3 for x in per_query(fresh.idf, terms)])
    log(f"stats: save {out['save_s']:.2f} s, load {out['load_s']:.2f} s")
    return out


def lexical_section(corpus: Corpus, args: argparse.Namespace) -> tuple[dict[str, Any], Any]:
    texts, queries = corpus.texts, corpus.queries
    out: dict[str, Any] = {}
    gc.collect()
    before = rss_mb()
    sparse, seconds = timed(lambda: BM25Retriever(texts, chunk_analyses=False))
    out["sparse"] = {
        "docs": len(texts),
        "build_s": seconds,
        "arrays_mb": (sparse.nbytes or 0) / 1e6,
        "rss_growth_mb": rss_mb() - before,
        "first_query": first_and_later(lambda q: sparse.search(q, 10), queries),
        "search_ms": pct(per_query(lambda q: sparse.search(q, 10), queries)),
    }
    log(f"lexical: sparse BM25 built in {seconds:.1f} s")
    n_small = min(len(texts), args.rank_bm25_docs)
    small = texts[:n_small]
    gc.collect()
    before = rss_mb()
    started = time.perf_counter()
    reference = BM25Retriever(small, backend="rank-bm25", chunk_analyses=False)
    seconds = time.perf_counter() - started
    small_queries = queries[: args.rank_bm25_queries]
    samples = per_query(top10(reference), small_queries)
    sparse_small = BM25Retriever(small, chunk_analyses=False)
    same = sum(
        [c.id for c in reference.search(q, 10)] == [c.id for c in sparse_small.search(q, 10)]
        for q in small_queries
    )
    out["rank_bm25"] = {
        "docs": n_small,
        "build_s": seconds,
        "rss_growth_mb": rss_mb() - before,
        "search_ms": pct(samples),
        "search_p50_extrapolated_ms": pct(samples)["p50"] * len(texts) / n_small,
        "same_top10_as_sparse": f"{same}/{len(small_queries)}",
    }
    del reference, sparse_small
    log(f"lexical: rank-bm25 on {n_small} docs built in {seconds:.1f} s")
    out["bm25s"] = bm25s_section(sparse, texts, queries)
    return out, sparse


def bm25s_section(sparse: BM25Retriever, texts: Sequence[str], queries: Sequence[str]) -> Any:
    try:
        import bm25s  # the bench extra; measured only when installed
    except ImportError:
        return "not installed"
    analyzer = sparse.analyzer
    gc.collect()
    before = rss_mb()
    started = time.perf_counter()
    tokens = [analyzer.terms(t) or ["\x00"] for t in texts]
    tokenise_s = time.perf_counter() - started
    model = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    started = time.perf_counter()
    model.index(tokens, show_progress=False)
    index_s = time.perf_counter() - started
    del tokens
    gc.collect()

    def search(query: str) -> Any:
        terms = [[t for t in analyzer.terms(query) if t in model.vocab_dict]]
        if not terms[0]:
            return None
        return model.retrieve(terms, k=10, show_progress=False, n_threads=1)

    scores = model.scores
    arrays = sum(scores[k].nbytes for k in ("data", "indices", "indptr"))
    return {
        "docs": len(texts),
        "tokenise_s": tokenise_s,
        "index_s": index_s,
        "arrays_mb": arrays / 1e6,
        "rss_growth_mb": rss_mb() - before,
        "search_ms": pct(per_query(search, queries)),
    }


def dense_section(
    corpus: Corpus, args: argparse.Namespace, stats_path: Path
) -> tuple[dict[str, Any], FaissRetriever]:
    """FAISS through FaissRetriever; the flat one loads the statistics (with analyses)
    from the file, the others share what it loaded."""
    x, texts, queries = corpus.vectors, corpus.texts, corpus.queries
    n, dim = x.shape
    out: dict[str, Any] = {"dim": dim, "faiss_threads": faiss.omp_get_max_threads()}
    qvecs = {q: corpus.encode(q) for q in queries}
    out["encode_ms"] = pct(per_query(corpus.encode, queries))

    def embed(query: str) -> np.ndarray:
        return qvecs[query]

    before = rss_mb()
    flat, seconds = timed(lambda: _flat(x))
    out["flat"] = {"build_s": seconds, "rss_growth_mb": rss_mb() - before}
    retriever, seconds = timed(
        lambda: FaissRetriever(flat, texts, embed, normalized=True, corpus_stats=stats_path)
    )
    out["retriever_construction_s"] = seconds
    stats = retriever.corpus_stats()
    out["first_query"] = first_and_later(lambda q: retriever.search(q, 10), queries)
    truth = {q: [c.id for c in retriever.search(q, 10)] for q in queries}
    out["flat"]["search_ms"] = pct(per_query(lambda q: retriever.search(q, 10), queries))
    log("dense: flat done")

    nlist = 2 ** round(math.log2(4 * math.sqrt(n)))
    before = rss_mb()
    ivf, seconds = timed(lambda: _ivf(x, nlist, args.seed))
    out["ivf"] = {"nlist": nlist, "build_s": seconds, "rss_growth_mb": rss_mb() - before}
    for nprobe in (1, 8, 32):
        params = FAISS.SearchParametersIVF(nprobe=nprobe)
        ivf_retriever = FaissRetriever(
            ivf, texts, embed, normalized=True, search_params=params, corpus_stats=stats
        )
        out["ivf"][f"nprobe={nprobe}"] = _searched(ivf_retriever, queries, truth)
    log(f"dense: IVF{nlist} done in {seconds:.1f} s")
    del ivf

    before = rss_mb()
    hnsw, seconds = timed(lambda: _hnsw(x))
    out["hnsw"] = {"M": 32, "efConstruction": 40, "build_s": seconds}
    out["hnsw"]["rss_growth_mb"] = rss_mb() - before
    for ef in (16, 64, 128):
        params = FAISS.SearchParametersHNSW(efSearch=ef)
        hnsw_retriever = FaissRetriever(
            hnsw, texts, embed, normalized=True, search_params=params, corpus_stats=stats
        )
        out["hnsw"][f"efSearch={ef}"] = _searched(hnsw_retriever, queries, truth)
    log(f"dense: HNSW done in {seconds:.1f} s")
    del hnsw
    return out, retriever


def _flat(x: np.ndarray) -> Any:
    index = faiss.IndexFlatIP(x.shape[1])
    index.add(x)
    return index


def _ivf(x: np.ndarray, nlist: int, seed: int) -> Any:
    index = faiss.IndexIVFFlat(
        faiss.IndexFlatIP(x.shape[1]), x.shape[1], nlist, faiss.METRIC_INNER_PRODUCT
    )
    rng = np.random.default_rng(seed)
    sample = x[rng.choice(len(x), size=min(len(x), 64 * nlist), replace=False)]
    index.train(sample)
    index.add(x)
    return index


def _hnsw(x: np.ndarray) -> Any:
    index = faiss.IndexHNSWFlat(x.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = 40
    index.add(x)
    return index


def _searched(
    retriever: FaissRetriever, queries: Sequence[str], truth: dict[str, list[str]]
) -> dict[str, Any]:
    samples = per_query(lambda q: retriever.search(q, 10), queries)
    found = sum(len(set(truth[q]) & {c.id for c in retriever.search(q, 10)}) for q in queries)
    return {"search_ms": pct(samples), "recall_at_10": found / (10 * len(queries))}


def evaluator_section(retriever: FaissRetriever, queries: Sequence[str]) -> dict[str, Any]:
    """The evaluator on the flat index's results, with the statistics it loaded (and
    their analyses): warm, cold from the analyses, cold tokenised, alternated."""
    stats = retriever.corpus_stats()
    assert stats is not None
    assert stats.analyses is not None
    plain = dataclasses.replace(stats, analyses=None)
    retrieved = {q: retriever.search(q, 10) for q in queries}
    # each of its own cache (a shared one would serve the cold ones what the warm one read)
    warm, stored, tokenised = (Evaluator(shared_cache=False) for _ in range(3))
    for query in queries:
        warm.evaluate(query, retrieved[query], stats)
    cases = [
        ("warm_ms", warm, stats),
        ("cold_corpus_ms", stored, stats),
        ("cold_ms", tokenised, plain),
    ]
    samples: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    for i, query in enumerate(queries):
        stored.clear_cache()
        tokenised.clear_cache()
        for name, evaluator, given in cases[i % 3 :] + cases[: i % 3]:  # order rotated
            started = time.perf_counter()
            evaluator.evaluate(query, retrieved[query], given)
            samples[name].append((time.perf_counter() - started) * 1e3)
    out: dict[str, Any] = {"k": 10, **{name: pct(values) for name, values in samples.items()}}
    out["cold_corpus_over_warm_p50"] = out["cold_corpus_ms"]["p50"] / out["warm_ms"]["p50"]
    out["cold_over_cold_corpus_p50"] = out["cold_ms"]["p50"] / out["cold_corpus_ms"]["p50"]
    deep = {q: retriever.search(q, 1000) for q in queries[:20]}
    big: list[float] = []
    for query in queries[:20]:
        stored.clear_cache()
        started = time.perf_counter()
        stored.evaluate(query, deep[query], stats)
        big.append((time.perf_counter() - started) * 1e3)
    out["k1000_cold_corpus_ms"] = pct(big)
    return out


# -- report -----------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {
        "benchmark": "scale",
        "docs": args.docs,
        "vocab": args.vocab,
        "dim": args.dim,
        "queries": args.queries,
        "workers": args.workers,
        "seed": args.seed,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "faiss": faiss.__version__,
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_start": os.getloadavg(),
    }
    started = time.perf_counter()
    corpus, seconds = timed(
        lambda: Corpus(args.docs, args.dim, args.queries, args.vocab, args.seed)
    )
    report["corpus"] = {
        "make_s": seconds,
        "text_mb": sum(map(len, corpus.texts)) / 1e6,
        "words_mean": statistics.fmean(t.count(" ") + 1 for t in corpus.texts),
        "vectors_mb": corpus.vectors.nbytes / 1e6,
    }
    log(f"corpus of {args.docs} made in {seconds:.1f} s")
    with tempfile.TemporaryDirectory(prefix="crag-scale-") as tmp:
        folder = Path(tmp)
        report["stats"] = stats_section(corpus, args, folder)
        report["lexical"], sparse = lexical_section(corpus, args)
        report["lexical_first_query_s"] = report["lexical"]["sparse"]["first_query"]
        del sparse
        gc.collect()
        report["dense"], retriever = dense_section(corpus, args, folder / "stats_analyses.npz")
        report["evaluator"] = evaluator_section(retriever, corpus.queries)
    report["load_average_end"] = os.getloadavg()
    report["peak_rss_mb"] = _peak_rss_mb()
    report["total_s"] = time.perf_counter() - started
    return report


def _peak_rss_mb() -> dict[str, float]:
    import resource

    return {
        "self": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "children": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def _ms(cell: dict[str, float]) -> str:
    return f"{cell['p50']:.2f} / {cell['p99']:.2f}"


def _same_text(ok: bool) -> str:
    return "equal" if ok else "**different**"


def goal(ok: bool) -> str:
    return "met" if ok else "**not met**"


def to_markdown(r: dict[str, Any]) -> str:
    s, lx, d, e = r["stats"], r["lexical"], r["dense"], r["evaluator"]
    sp, rb = lx["sparse"], lx["rank_bm25"]
    lines = [
        f"# Cost at scale: {r['docs']:,} synthetic documents",
        "",
        f"`python benchmarks/scale.py --docs {r['docs']} --dim {r['dim']} "
        f"--workers {r['workers']}` (seed {r['seed']}); {r['cpus']} CPUs, Python {r['python']}, "
        f"numpy {r['numpy']}, FAISS {r['faiss']}. Zipfian vocabulary of {r['vocab']:,} "
        f"pseudo-words, {r['corpus']['words_mean']:.0f} words a document on average "
        f"({r['corpus']['text_mb']:.0f} MB of text), random unit vectors: the test of cost, "
        "not of quality. Times are wall clock on a machine shared with other jobs (load "
        f"average {r['load_average_start'][0]:.1f} at the start, {r['load_average_end'][0]:.1f} "
        "at the end); latencies are p50 / p99 in milliseconds over "
        f"{r['queries']} queries.",
        "",
        "## Goals",
        "",
        "| goal | measured | |",
        "|---|---:|---|",
        f"| statistics on a {s['workers']}-worker local Dask cluster equal the one-process "
        f"build bit for bit | {_same_text(s['dask_equal'])} (with analyses: "
        f"{_same_text(s['dask_analyses_equal'])}) | {goal(s['dask_equal'] and s['dask_analyses_equal'])} |",
        f"| statistics on it <= 60 s | {s['dask']['s']:.1f} s ({s['local']['s']:.1f} s in one "
        f"process) | {goal(s['dask']['s'] <= 60)} |",
        f"| statistics in memory <= 100 MB | {s['table_mb']:.1f} MB ({s['n_terms']:,} terms) "
        f"| {goal(s['table_mb'] <= 100)} |",
        f"| statistics load <= 5 s | {s['load_s']:.2f} s ({s['load_analyses_s']:.2f} s with "
        f"analyses) | {goal(s['load_analyses_s'] <= 5)} |",
        f"| lexical search p50 <= 50 ms | {sp['search_ms']['p50']:.1f} ms (sparse BM25) "
        f"| {goal(sp['search_ms']['p50'] <= 50)} |",
        f"| first query <= 2x a later one (FAISS flat) | {d['first_query']['ratio']:.2f}x "
        f"| {goal(d['first_query']['ratio'] <= 2)} |",
        f"| first query <= 2x a later one (BM25) | {sp['first_query']['ratio']:.2f}x "
        f"| {goal(sp['first_query']['ratio'] <= 2)} |",
        f"| evaluator, k = 10, cold corpus chunks within 1.5x of warm | "
        f"{e['cold_corpus_over_warm_p50']:.2f}x | {goal(e['cold_corpus_over_warm_p50'] <= 1.5)} |",
        f"| evaluator, k = 1000, cold corpus chunks <= 20 ms | "
        f"{e['k1000_cold_corpus_ms']['p50']:.1f} ms | {goal(e['k1000_cold_corpus_ms']['p50'] <= 20)} |",
        "",
        "## Corpus statistics",
        "",
        "| what | wall | CPU (this process + worker processes) | partitions | merging |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {label} | {b['s']:.1f} s | {b['cpu_s']['parent']:.1f} + "
            f"{b['cpu_s']['children']:.1f} s | {b['partitions']} | {b['merge_s']:.1f} s |"
            for label, b in (
                ("one process", s["local"]),
                ("one process, with analyses", s["local_analyses"]),
                (f"Dask, {s['workers']} worker processes", s["dask"]),
                (f"Dask, {s['workers']} worker processes, with analyses", s["dask_analyses"]),
            )
        ),
        "",
        f"The local cluster took {s['dask_cluster_start_s']:.1f} s to start (not in the Dask "
        f"rows). One partition of {s['partition']['docs']:,} documents is counted at "
        f"{s['partition']['docs_per_s']:,.0f} documents a second in one process "
        f"({s['partition']['analyses_docs_per_s']:,.0f} with analyses): {s['workers']} workers "
        f"that each counted as fast would take {r['docs'] / s['partition']['docs_per_s'] / s['workers']:.1f} s "
        "plus the merging in the client; what the Dask rows take beyond that is the "
        "workers' share of two busy cores, the texts' trip to them and the partial counts' trip back.",
        "",
        "| what | value |",
        "|---|---:|",
        f"| before (the pre-cache analyzer and `from_texts` loop), {s['reference_sample_docs']:,}"
        f" docs | {s['reference_sample_s']:.1f} s |",
        f"| before, extrapolated linearly to {r['docs']:,} docs | "
        f"{s['reference_extrapolated_s']:.0f} s "
        f"({s['reference_extrapolated_s'] / s['local']['s']:.1f}x the one-process build) |",
        f"| distinct terms | {s['n_terms']:,} |",
        f"| TermTable arrays | {s['table_mb']:.1f} MB |",
        f"| the same counts as a dict (tracemalloc) | {s['dict_mb']:.1f} MB |",
        f"| chunk analyses (arrays) | {s['analyses_mb']:.0f} MB ({s['analyses_bytes_per_doc']:.0f} "
        "bytes a document) |",
        f"| process RSS growth during the one-process build | {s['local']['rss_growth_mb']:.0f} MB |",
        f"| save / load | {s['save_s']:.2f} s / {s['load_s']:.2f} s ({s['file_mb']:.1f} MB file) |",
        f"| save / load with analyses | {s['save_analyses_s']:.2f} s / {s['load_analyses_s']:.2f} s "
        f"({s['file_analyses_mb']:.0f} MB file) |",
        f"| idf lookup, cold table (us) | {_ms(s['idf_lookup_us'])} |",
        "",
        "## Lexical search (BM25, k = 10)",
        "",
        "| backend | docs | build | memory | search p50 / p99 ms | first / later p50 |",
        "|---|---:|---:|---:|---:|---:|",
        f"| sparse (default) | {sp['docs']:,} | {sp['build_s']:.1f} s | {sp['arrays_mb']:.0f} MB "
        f"arrays, RSS +{sp['rss_growth_mb']:.0f} MB | {_ms(sp['search_ms'])} | "
        f"{sp['first_query']['first_ms']:.1f} / {sp['first_query']['later_p50_ms']:.1f} ms |",
        f"| rank-bm25 | {rb['docs']:,} | {rb['build_s']:.1f} s | RSS +{rb['rss_growth_mb']:.0f} MB "
        f"| {_ms(rb['search_ms'])} | |",
        f"| rank-bm25, p50 extrapolated to {r['docs']:,} | | | | "
        f"{rb['search_p50_extrapolated_ms']:.0f} | |",
    ]
    bs = lx["bm25s"]
    if isinstance(bs, dict):
        lines.append(
            f"| bm25s (our terms) | {bs['docs']:,} | {bs['index_s']:.1f} s "
            f"(+{bs['tokenise_s']:.1f} s terms) | {bs['arrays_mb']:.0f} MB arrays, RSS "
            f"+{bs['rss_growth_mb']:.0f} MB | {_ms(bs['search_ms'])} | |"
        )
    else:
        lines.append(f"| bm25s | {bs} | | | | |")
    lines += [
        "",
        f"rank-bm25 and the sparse backend agree on the top 10 of "
        f"{rb['same_top10_as_sparse']} queries on the rank-bm25 sample.",
        "",
        f"## Dense search (FaissRetriever, d = {d['dim']}, {d['faiss_threads']} FAISS threads)",
        "",
        "| index | build | RSS growth | search p50 / p99 ms | recall@10 vs flat |",
        "|---|---:|---:|---:|---:|",
        f"| flat (IP) | {d['flat']['build_s']:.1f} s | {d['flat']['rss_growth_mb']:.0f} MB | "
        f"{_ms(d['flat']['search_ms'])} | 1.00 |",
    ]
    iv = d["ivf"]
    for nprobe in (1, 8, 32):
        cell = iv[f"nprobe={nprobe}"]
        build = f"{iv['build_s']:.1f} s" if nprobe == 1 else ""
        rss = f"{iv['rss_growth_mb']:.0f} MB" if nprobe == 1 else ""
        lines.append(
            f"| IVF{iv['nlist']}, nprobe {nprobe} | {build} | {rss} | {_ms(cell['search_ms'])} "
            f"| {cell['recall_at_10']:.2f} |"
        )
    hn = d["hnsw"]
    for ef in (16, 64, 128):
        cell = hn[f"efSearch={ef}"]
        build = f"{hn['build_s']:.1f} s" if ef == 16 else ""
        rss = f"{hn['rss_growth_mb']:.0f} MB" if ef == 16 else ""
        lines.append(
            f"| HNSW32, efSearch {ef} | {build} | {rss} | {_ms(cell['search_ms'])} "
            f"| {cell['recall_at_10']:.2f} |"
        )
    fq = d["first_query"]
    lines += [
        "",
        "Random unit vectors have no cluster structure: the recall of IVF and HNSW here is a "
        "floor, not what real embeddings get.",
        "",
        "## Per query stage (p50 / p99 ms)",
        "",
        "| stage | latency |",
        "|---|---:|",
        f"| encode (stand-in) | {_ms(d['encode_ms'])} |",
        f"| FAISS flat search | {_ms(d['flat']['search_ms'])} |",
        f"| FAISS IVF, nprobe 8 | {_ms(iv['nprobe=8']['search_ms'])} |",
        f"| FAISS HNSW, efSearch 64 | {_ms(hn['efSearch=64']['search_ms'])} |",
        f"| lexical (sparse BM25) | {_ms(sp['search_ms'])} |",
        f"| evaluator, k = 10, warm | {_ms(e['warm_ms'])} |",
        f"| evaluator, k = 10, cold, from the analyses | {_ms(e['cold_corpus_ms'])} |",
        f"| evaluator, k = 10, cold, tokenised | {_ms(e['cold_ms'])} |",
        f"| evaluator, k = 1000, cold, from the analyses | {_ms(e['k1000_cold_corpus_ms'])} |",
        "",
        f"FaissRetriever construction with the statistics and analyses loaded from the file: "
        f"{d['retriever_construction_s']:.2f} s; its first query {fq['first_ms']:.1f} ms against "
        f"{fq['later_p50_ms']:.1f} ms later (p50).",
        "",
        f"Peak RSS: {r['peak_rss_mb']['self']:.0f} MB (this process), "
        f"{r['peak_rss_mb']['children']:.0f} MB (largest worker). Total {r['total_s']:.0f} s.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--vocab", type=int, default=2_000_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2, help="Dask worker processes")
    parser.add_argument("--reference-docs", type=int, default=50_000)
    parser.add_argument("--rank-bm25-docs", type=int, default=100_000)
    parser.add_argument("--rank-bm25-queries", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", type=Path, help="write OUT.md and OUT.json (e.g. benchmarks/results/scale)"
    )
    args = parser.parse_args()
    report = run(args)
    markdown = to_markdown(report)
    print(markdown)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
        args.out.with_suffix(".md").write_text(markdown)


if __name__ == "__main__":
    main()
