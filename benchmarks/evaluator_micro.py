"""Micro-benchmark of the evaluator: latency per call against k chunks.

    python benchmarks/evaluator_micro.py [--k 5 10 20 100 1000] [--words 200] [--iterations 2000]

For each k it times ``Evaluator.evaluate`` on k chunks of about ``--words``
words (synthetic English-like text from a fixed seed):

* warm: the same chunks every call (their analysis is cached by id and text);
* cold: new chunk texts every call, so every chunk is tokenised and stemmed
  (the word -> stem cache is warm, as it is in a running service);
* cold analyzer: a new Evaluator every call: nothing cached at all;
* cold, reference analyzer: the cold case with the analyzer as it was before
  its term cache (per-token stemming loop, regular-expression tokens for any
  non-ASCII text; :class:`ReferenceAnalyzer` below, kept for this ratio only),
  timed in the same loop as the cold case, call for call.

The baselines measured in the same run are the project's seed design
(substring keyword tests, see ``crag_heuristic._baselines``) on the same
chunks, and the reference analyzer, so the ratios compare like with like on
this machine. Timings are p50 / p99 in
microseconds of ``time.perf_counter_ns``; GC is left on.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from crag_heuristic import Chunk, Evaluator, ScoreKind
from crag_heuristic._baselines import seed_design
from crag_heuristic._bench.cost import percentiles
from crag_heuristic._text import _TOKEN_RE, DEFAULT_STOP_WORDS, Analyzer, TextStats

QUERY = "how does the solar panel efficiency change with temperature in winter"
_ASCII_SPLIT = str.maketrans(
    {chr(i): " " for i in range(128) if not (chr(i).isascii() and chr(i).isalnum())}
)


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
    stop = sorted(DEFAULT_STOP_WORDS)
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


def timed(fn: Callable[[int], object], iterations: int) -> list[float]:
    samples = []
    for i in range(iterations):
        start = time.perf_counter_ns()
        fn(i)
        samples.append((time.perf_counter_ns() - start) / 1000.0)
    return samples


def measure(
    rng: random.Random, vocabulary: list[str], k: int, n_words: int, iterations: int
) -> dict[str, object]:
    """Time one k: warm, cold, cold analyzer and the seed-design baseline."""
    n_iter = max(50, iterations * 10 // max(k, 10))
    warm_chunks = make_chunks(rng, vocabulary, k, n_words, "warm")
    cold_sets = [make_chunks(rng, vocabulary, k, n_words, f"cold{i}") for i in range(n_iter + 5)]
    evaluator = Evaluator(cache_size=max(4096, 2 * k))
    reference = Evaluator(cache_size=max(4096, 2 * k), analyzer=ReferenceAnalyzer())
    for _ in range(20):  # warm up the stem cache and the interpreter
        evaluator.evaluate(QUERY, warm_chunks)
        reference.evaluate(QUERY, warm_chunks)
    for chunks in cold_sets[:5]:
        evaluator.evaluate(QUERY, chunks)
        reference.evaluate(QUERY, chunks)

    warm = timed(lambda i: evaluator.evaluate(QUERY, warm_chunks), n_iter)
    cold: list[float] = []
    cold_reference: list[float] = []
    for i in range(5, n_iter + 5):  # alternate call for call: load drift hits both alike
        chunks = cold_sets[i]
        pair = [(evaluator, cold), (reference, cold_reference)][:: 1 if i % 2 else -1]
        for which, samples in pair:
            start = time.perf_counter_ns()
            which.evaluate(QUERY, chunks)
            samples.append((time.perf_counter_ns() - start) / 1000.0)
    fresh = timed(lambda i: Evaluator().evaluate(QUERY, cold_sets[i]), max(20, n_iter // 10))
    texts = [c.text for c in warm_chunks]
    sims = [c.score or 0.0 for c in warm_chunks]
    sources = [c.source or c.id for c in warm_chunks]
    seed_times = timed(lambda i: seed_design(QUERY, texts, sims, sources), n_iter)
    warm_p = percentiles(warm)
    seed_p = percentiles(seed_times)
    return {
        "k": k,
        "iterations": n_iter,
        "warm_us": warm_p,
        "cold_us": percentiles(cold),
        "cold_reference_us": percentiles(cold_reference),
        "cold_analyzer_us": percentiles(fresh),
        "seed_design_us": seed_p,
        "warm_over_seed_p50": warm_p["p50"] / seed_p["p50"],
        "reference_over_cold_p50": percentiles(cold_reference)["p50"] / percentiles(cold)["p50"],
    }


def run(ks: list[int], n_words: int, iterations: int, seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    vocabulary = make_vocabulary(rng)
    return {
        "benchmark": "evaluator_micro",
        "words_per_chunk": n_words,
        "seed": seed,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "processor": platform.processor() or "unknown",
        "results": [measure(rng, vocabulary, k, n_words, iterations) for k in ks],
    }


def _cell(row: dict[str, dict[str, float]], name: str) -> str:
    return f"{row[name]['p50']:.0f} / {row[name]['p99']:.0f}"


def to_markdown(report: dict[str, object]) -> str:
    lines = [
        f"Evaluator latency, chunks of ~{report['words_per_chunk']} words, microseconds (p50 / p99)",
        "",
        "| k | warm | cold (new texts) | cold, reference analyzer | reference / cold p50 "
        "| cold analyzer | seed design (baseline) | warm / seed p50 |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["results"]:  # type: ignore[attr-defined]
        cold = " | ".join(_cell(row, name) for name in ("warm_us", "cold_us", "cold_reference_us"))
        rest = " | ".join(_cell(row, name) for name in ("cold_analyzer_us", "seed_design_us"))
        lines.append(
            f"| {row['k']} | {cold} | {row['reference_over_cold_p50']:.2f} | {rest} "
            f"| {row['warm_over_seed_p50']:.2f} |"
        )
    return "\n".join(lines)


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
    parser.add_argument("--out", type=Path, help="also write the report as JSON here")
    args = parser.parse_args()
    report = run(args.k, args.words, args.iterations, args.seed)
    print(to_markdown(report))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
