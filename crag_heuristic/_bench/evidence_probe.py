"""Benchmark: evidence the gate might read, tried one by one (the evidence probe).

On the failure benchmark's retrievals of every collection (natural test
retrievals + leave-relevant-out probes, k = 10), each candidate is computed per
retrieval and scored by failure ROC-AUC (natural + probes, and natural alone).
Then the question that matters for the gate: does it add anything, honestly? A
logistic regression on every subset of at most three of the
:data:`NESTED_BASE` candidates and a family (:data:`FAMILIES`) is chosen by an
inner leave-one-collection-out on the other collections and scored on the one
left out (nested, as :func:`~.loco.run_loco` chooses the gate), once without the
family and once with it.

Every candidate that reads the corpus beyond the list (centroids, the
neighbours of a document, the deeper ranking) is computed, for a probe, on the
corpus WITHOUT the query's relevant documents: a probe is a corpus gap, and a
feature computed on the whole corpus gives away what the probe lacks.

:func:`run_evidence_probe` writes ``evidence_probe.md`` and
``evidence_probe.json``; ``benchmarks/evidence_probe.py`` is its command line.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from .._calibration.auc import failure_auc
from .._calibration.logistic import weighted_standardizer
from .._text.analyzer import split_sentences
from .loco import collection_folders
from .markdown import table_head
from .pipeline import prepare
from .selection import CollectionData
from .sentences import SentenceCache

K1, B = 1.5, 0.75  # the evaluator's BM25 parameters
NESTED_BASE = ("top1", "mean_cos", "bm25_raw_max", "bm25_top_n", "kw_best", "gap", "lex_coh")
"""The base candidates every nested fit chooses among."""
FAMILIES: dict[str, tuple[str, ...]] = {
    "corpus centroid (WIG)": ("wig",),
    "passage-level lexical (best sentence's coverage)": ("best_sent_max", "best_sent_top1"),
    "deeper ranking (top-100)": ("top1_minus_100mean",),
    "query only (idf, length)": ("idf_mean", "log_terms"),
}
"""The families of evidence tried, each added to the base candidates in turn."""
SENTENCE_FAMILY = ("sent_max", "sent_top1")
"""The sentence-level cosine family (``sentences=True``)."""


class _Corpus:
    """One collection's corpus as arrays: vectors, BM25 weights, text analyses."""

    def __init__(self, data: CollectionData) -> None:
        import scipy.sparse as sp

        prepared = data.prepared
        collection = prepared.collection
        self.data = data
        self.vectors = np.asarray(collection.doc_vectors, dtype=np.float32)
        self.position = prepared.index.position
        self.total = self.vectors.astype(np.float64).sum(axis=0)
        vocab: dict[str, int] = {}
        rows, cols, values, lengths = [], [], [], []
        analyzer = prepared.analyzer
        self.terms: dict[str, list[str]] = {}
        for i, doc in enumerate(collection.doc_ids):
            terms = analyzer.terms(collection.doc_text(doc))
            self.terms[doc] = terms
            counts: dict[str, int] = {}
            for t in terms:
                counts[t] = counts.get(t, 0) + 1
            lengths.append(len(terms))
            for t, c in counts.items():
                rows.append(i)
                cols.append(vocab.setdefault(t, len(vocab)))
                values.append(c)
        lens = np.array(lengths, dtype=float)
        tf = sp.coo_matrix((values, (rows, cols)), shape=(len(lens), len(vocab)), dtype=float)
        norm = K1 * (1 - B + B * lens[tf.row] / max(lens.mean(), 1e-9))
        self.bm25 = sp.csc_matrix(
            (tf.data * (K1 + 1) / (tf.data + norm), (tf.row, tf.col)), shape=tf.shape
        )
        self.vocab = vocab
        self.dc = self.vectors.astype(np.float64) @ (self.total / len(lens))
        self.sentences: dict[str, list[set[str]]] = {}

    def sentence_terms(self, doc: str) -> list[set[str]]:
        if doc not in self.sentences:
            analyzer = self.data.prepared.analyzer
            text = self.data.prepared.collection.doc_text(doc)
            found = [set(analyzer.terms(s)) for s in split_sentences(text)]
            self.sentences[doc] = [s for s in found if s] or [set(self.terms[doc])]
        return self.sentences[doc]

    def removed(self, retrieval: Any) -> list[int]:
        """The documents a probe's corpus lacks (none for a natural retrieval)."""
        if retrieval.kind != "probe":
            return []
        return [self.position[d] for d in retrieval.relevant if d in self.position]


def _features(
    corpus: _Corpus, vectors: dict[str, np.ndarray], sentences: SentenceCache | None
) -> dict[str, np.ndarray]:
    data = corpus.data
    prepared = data.prepared
    stats = prepared.stats
    rows: list[dict[str, float]] = []
    deep = {}
    for kind in ("natural", "probe"):
        chosen = [r for r in data.retrievals if r.kind == kind]
        if not chosen:
            continue
        matrix = np.stack([vectors[r.group] for r in chosen])
        banned = [set(r.relevant) for r in chosen] if kind == "probe" else None
        for r, hits in zip(chosen, prepared.index.search(matrix, 100, exclude=banned), strict=True):
            deep[(kind, r.group)] = np.array([s for _, s in hits])
    # the gate's own evidence: each retrieval as CollectionData graded it (synapse, every feature)
    for r, evaluation in zip(data.retrievals, data.evaluations, strict=True):
        q = np.asarray(vectors[r.group], dtype=np.float64)
        cos = np.array([c.score or 0.0 for c in r.chunks])
        removed = corpus.removed(r)
        centroid = (corpus.total - corpus.vectors[removed].sum(axis=0)) / (
            len(corpus.vectors) - len(removed)
        )
        qc = float(q @ centroid)
        terms = prepared.analyzer.query_terms(r.query).terms
        idf = [stats.idf(t) for t in terms]
        mass = sum(idf) or 1.0
        docs = [corpus.position[c.id] for c in r.chunks]
        bm25 = np.zeros(len(docs))
        for weight, t in zip(idf, terms, strict=True):
            j = corpus.vocab.get(t)
            if j is not None:
                bm25 += weight * corpus.bm25[:, j].toarray().ravel()[docs]
        feats = evaluation.details["features"]
        weights = dict(zip(terms, idf, strict=True))
        best_sent = [
            max(sum(weights[t] for t in terms if t in s) for s in corpus.sentence_terms(c.id))
            / mass
            for c in r.chunks
        ]
        density = []
        for i in docs[:3]:  # the first three: the costliest feature, and enough to judge it
            row = corpus.vectors @ corpus.vectors[i]
            row[i] = -np.inf
            row[removed] = -np.inf
            density.append(float(np.sort(row)[::-1][:10].mean()))
        d100 = deep[(r.kind, r.group)]
        row_out = {
            "top1": cos[0],
            "mean_cos": cos.mean(),
            "wig": cos.mean() - qc,
            "top1_wig": cos[0] - qc,
            "nqc": cos.std() / abs(qc) if qc else cos.std(),
            "gap": cos[0] - cos[-1],
            "gap12": cos[0] - cos[1] if len(cos) > 1 else 0.0,
            "bm25_raw_top": bm25[0],
            "bm25_raw_max": bm25.max(),
            "bm25_top_n": bm25[0] / mass,
            "bm25_max_n": bm25.max() / mass,
            "bm25_mean_n": bm25.mean() / mass,
            "kw_cov": feats["keyword_coverage"],
            "kw_best": feats["keyword_overlap"],
            "lex_coh": feats["lexical_coherence"] or 0.0,
            "agreement": feats["agreement"] or 0.0,
            "bm25_margin": feats["bm25_margin"],
            "idf_mean": mass / max(len(idf), 1),
            "log_terms": float(np.log1p(len(idf))),
            "top1_minus_100mean": cos[0] - d100.mean(),
            "top1_minus_at100": cos[0] - d100[-1],
            "top1_hub": cos[0] - corpus.dc[docs[0]],
            "max_hub": float((cos - corpus.dc[docs]).max()),
            "max_density": float((cos[: len(density)] - np.array(density)).max()),
            "best_sent_max": max(best_sent),
            "best_sent_top1": best_sent[0],
        }
        if sentences is not None:  # the retrievals carry them (prepare(sentences=True))
            best = [c.sentence_score or 0.0 for c in r.chunks]
            row_out["sent_max"] = float(max(best))
            row_out["sent_top1"] = float(best[0])
        rows.append(row_out)
    return {name: np.array([row[name] for row in rows], dtype=float) for name in rows[0]}


def _fit_scores(train: list[tuple[np.ndarray, np.ndarray]], test: np.ndarray) -> np.ndarray:
    """LR on standardised features, each training collection weighing the same."""
    from sklearn.linear_model import LogisticRegression

    x = np.vstack([m for m, _ in train])
    y = np.concatenate([g for _, g in train])
    w = np.concatenate([np.full(len(g), 1.0 / len(g)) for _, g in train])
    mean, sd = weighted_standardizer(x, w)
    model = LogisticRegression(C=1.0, max_iter=2000)
    model.fit((x - mean) / sd, y, sample_weight=w * len(w) / w.sum())
    out: np.ndarray = model.decision_function((test - mean) / sd)
    return out


Fits = dict[tuple[tuple[str, ...], frozenset[str], str], float]
"""AUC of a subset fitted on some collections and scored on another: shared by every
family's nested run (the base candidates' subsets are fitted once)."""


def _nested(
    table: dict[str, dict[str, np.ndarray]],
    failed: dict[str, np.ndarray],
    candidates: tuple[str, ...],
    cache: Fits,
) -> dict[str, Any]:
    """Nested LOCO over LR on every subset of at most three candidates."""
    names = sorted(table)
    subsets = [c for r in (1, 2, 3) for c in itertools.combinations(candidates, r)]

    def auc(subset: tuple[str, ...], train: list[str], held: str) -> float:
        key = (subset, frozenset(train), held)
        if key not in cache:
            matrices = {n: np.column_stack([table[n][f] for f in subset]) for n in [*train, held]}
            scores = _fit_scores(
                [(matrices[n], (~failed[n]).astype(int)) for n in train], matrices[held]
            )
            value = failure_auc(failed[held], scores)
            cache[key] = float("nan") if value is None else value
        return cache[key]

    out: dict[str, Any] = {}
    for outer in names:
        others = [n for n in names if n != outer]
        inner = {
            s: float(np.nanmean([auc(s, [m for m in others if m != i], i) for i in others]))
            for s in subsets
        }
        pick = max(subsets, key=lambda s: inner[s])
        out[outer] = {"pick": list(pick), "auc": auc(pick, others, outer)}
    out["mean"] = float(np.mean([v["auc"] for k, v in out.items() if k != "mean"]))
    return out


def _f(v: float | None) -> str:
    return "n/a" if v is None or v != v else f"{v:.3f}"


def render(results: dict[str, Any]) -> str:
    """``evidence_probe.md`` from the results."""
    names = results["collections"]
    lines = [
        "# Evidence probe",
        "",
        f"Command: `{results['command']}` ({results['seconds']:.0f} s). Failure ROC-AUC of each "
        "candidate alone (natural + probes; natural alone in brackets, n/a below 5 failed), "
        "then what each family adds to a logistic regression chosen by nested "
        "leave-one-collection-out (see the script's docstring). Corpus-level candidates are "
        "computed on the probe's gap corpus.",
        "",
        *table_head("candidate", *names, "mean"),
    ]
    for f, per in results["single"].items():
        mix = [per[n][0] for n in names]
        cells = [f"{_f(per[n][0])} ({_f(per[n][1])})" for n in names]
        present = [v for v in mix if v is not None]
        lines.append(f"| {f} | " + " | ".join(cells) + f" | {_f(float(np.mean(present)))} |")
    lines += [
        "",
        "Nested LR (subsets of at most three; base candidates "
        + ", ".join(results["nested_base"])
        + "):",
        "",
        *table_head("added family", *names, "mean"),
    ]
    for family, per in results["nested"].items():
        cells = [f"{_f(per[n]['auc'])}" for n in names]
        lines.append(f"| {family} | " + " | ".join(cells) + f" | {_f(per['mean'])} |")
    return "\n".join(lines) + "\n"


def run_evidence_probe(
    data_root: str | Path,
    out: str | Path,
    *,
    sentences: bool = False,
    command: str = "",
) -> dict[str, Any]:
    """Score every candidate alone and every family nested (module doc) on the
    collections under ``data_root``.

    Args:
        data_root: the folder holding one BEIR folder per collection (or one
            BEIR folder).
        out: where ``evidence_probe.json`` and ``evidence_probe.md`` are
            written; the query and sentence vectors are cached under
            ``out/cache``.
        sentences: add the sentence-level cosine (MiniLM, :data:`SENTENCE_FAMILY`).
        command: the command line the report quotes.

    Returns:
        What ``evidence_probe.json`` holds.
    """
    started = time.perf_counter()
    folder_out = Path(out)
    table: dict[str, dict[str, np.ndarray]] = {}
    failed: dict[str, np.ndarray] = {}
    single: dict[str, dict[str, list[float | None]]] = {}
    for folder in collection_folders([data_root]):
        sys.stderr.write(f"[probe] {folder.name}\n")
        prepared = prepare(
            folder, cache_dir=folder_out / "cache" / folder.name, sentences=sentences
        )
        data = CollectionData.of(prepared, 10)
        corpus = _Corpus(data)
        vectors = data.prepared.vectors({r.group: r.query for r in data.retrievals})
        table[data.name] = _features(corpus, vectors, prepared.sentences)
        failed[data.name] = data.failed
        for feature, values in table[data.name].items():
            single.setdefault(feature, {})[data.name] = list(data.auc(values))
    names = sorted(table)
    single = {f: dict(sorted(by_name.items())) for f, by_name in single.items()}
    families = dict(FAMILIES)
    if sentences:
        families["sentence-level cosine (MiniLM)"] = SENTENCE_FAMILY
    fits: Fits = {}
    nested = {"none (the base candidates)": _nested(table, failed, NESTED_BASE, fits)}
    for family, added in families.items():
        sys.stderr.write(f"[probe] nested with {family}\n")
        nested[family] = _nested(table, failed, NESTED_BASE + added, fits)
    results = {
        "command": command,
        "collections": names,
        "single": single,
        "nested_base": list(NESTED_BASE),
        "families": {k: list(v) for k, v in families.items()},
        "nested": nested,
        "seconds": time.perf_counter() - started,
    }
    folder_out.mkdir(parents=True, exist_ok=True)
    (folder_out / "evidence_probe.json").write_text(json.dumps(results, indent=2) + "\n")
    (folder_out / "evidence_probe.md").write_text(render(results))
    return results
