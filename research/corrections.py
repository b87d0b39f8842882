"""Benchmark: which correction pays, chosen on training data across collections.

    python -m research.corrections [--data-root ../shared/data] [--collections a,b]
        [--latency-queries 100] [--profile NAME] [--reuse] [--out DIR]

For each collection every variant of :data:`~.route_variants.VARIANTS` runs on the
judged queries (SciFact: its train split too), with nDCG@10, Recall@100,
per-route deltas against the bare dense list and the corrected path's p50
latency over the bare retrieval's in the same run
(:func:`~.route_variants.run_variants`). Then the variants are chosen the way a
user without the test labels would:

* SciFact: on its train split, reported on its test split;
* every other collection (no train split): leave one collection out, chosen on
  SciFact's train split and the other collections' test splits (each weighing
  the same), reported on the held-out collection;
* a variant is eligible only where its corrected p50 stays within
  :data:`LATENCY_BOUND` x the bare retrieval's on every training set; among
  those the best mean nDCG@10 wins.

The shipped default is the variant most folds choose.
:func:`run_corrections` writes ``results.json``, ``report.md`` and
``corrections.png`` to ``--out`` (default benchmarks/results/corrections); per-collection
runs are kept under ``runs/`` and reused with ``--reuse``; :func:`main` is its command line.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from crag_heuristic import CRAG, load_config
from crag_heuristic.bench import BARE, HYBRID, SHARED_COLLECTIONS, prepare
from crag_heuristic.testing import ListRetriever

from .markdown import table_head
from .route_variants import VARIANTS, run_variants

LATENCY_BOUND = 2.5
"""A variant's corrected p50 over the bare retrieval's p50 may not exceed this."""


def _log(message: str) -> None:
    sys.stderr.write(f"[corrections] {message}\n")
    sys.stderr.flush()


def _runs(
    data_root: Path,
    out: Path,
    collections: Sequence[str],
    *,
    latency_queries: int,
    profile: str | None,
    cache_dir: Path | None,
    reuse: bool,
) -> dict[str, dict[str, Any]]:
    """``collection:split`` -> run_variants' result (computed, or read back with ``reuse``)."""
    runs: dict[str, dict[str, Any]] = {}
    folder = out / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    config = load_config(profile)
    for name in collections:
        splits = ("train", "test") if name == "scifact" else ("test",)
        prepared = None
        for split in splits:
            path = folder / f"{name}_{split}.json"
            if reuse and path.exists():
                runs[f"{name}:{split}"] = json.loads(path.read_text())
                continue
            if prepared is None:
                prepared = prepare(
                    data_root / name,
                    cache_dir=cache_dir / name if cache_dir else out / "cache",
                )
            _log(f"{name} {split}")
            started = time.perf_counter()
            result = run_variants(prepared, config, split, latency_queries=latency_queries)
            result["seconds"] = time.perf_counter() - started
            path.write_text(json.dumps(result, indent=1) + "\n")
            runs[f"{name}:{split}"] = result
    return runs


def _eligible(run: dict[str, Any], variant: str) -> bool:
    ratio = run["variants"][variant].get("latency", {}).get("corrected_over_bare_p50")
    return ratio is None or ratio <= LATENCY_BOUND


def _choose(runs: dict[str, dict[str, Any]], training: list[str]) -> dict[str, Any]:
    """The eligible variant with the best mean nDCG@10 over ``training`` (each weighs alike)."""
    names = [v.name for v in VARIANTS if v.lexical]  # the default for users with BM25
    means = {
        n: statistics.fmean(runs[t]["variants"][n]["ndcg@10"] for t in training) for n in names
    }
    eligible = [n for n in names if all(_eligible(runs[t], n) for t in training)]
    chosen = max(eligible or names, key=lambda n: (means[n], -names.index(n)))
    return {"training": training, "mean_ndcg@10": means, "eligible": eligible, "chosen": chosen}


def _select(runs: dict[str, dict[str, Any]], collections: Sequence[str]) -> dict[str, Any]:
    folds = {}
    for name in collections:
        if name == "scifact":
            training = ["scifact:train"] if "scifact:train" in runs else []
        else:
            training = [f"{c}:test" for c in collections if c not in (name, "scifact")]
            if "scifact:train" in runs:
                training.insert(0, "scifact:train")
        if not training:
            continue
        fold = _choose(runs, training)
        test = runs[f"{name}:test"]
        chosen = test["variants"][fold["chosen"]]
        fold["test"] = {
            "variant_ndcg@10": chosen["ndcg@10"],
            "variant_recall@100": chosen["recall@100"],
            "hybrid_ndcg@10": test["references"][HYBRID]["ndcg@10"],
            "bare_ndcg@10": test["references"][BARE]["ndcg@10"],
            "corrected_over_bare_p50": chosen.get("latency", {}).get("corrected_over_bare_p50"),
        }
        fold["test"]["router_ge_hybrid"] = (
            fold["test"]["variant_ndcg@10"] >= fold["test"]["hybrid_ndcg@10"]
        )
        folds[name] = fold
    votes = Counter(f["chosen"] for f in folds.values())
    everything = sorted({t for f in folds.values() for t in f["training"]})
    overall = _choose(runs, everything) if everything else {"mean_ndcg@10": {}}
    shipped = max(
        votes, key=lambda n: (votes[n], overall["mean_ndcg@10"].get(n, 0.0)), default=None
    )
    return {"folds": folds, "votes": dict(votes), "shipped": shipped, "all_training": overall}


def _matches_defaults(variant_name: str) -> bool:
    """Whether ``CRAG(retriever, lexical=...)`` with no options runs this variant."""
    variant = next(v for v in VARIANTS if v.name == variant_name)
    crag = CRAG(ListRetriever([]))
    expander = "none" if crag.expander is None else "synonyms"
    keys = [k for k in variant.config if not (k == "expand_on" and variant.expander == "none")]
    return expander == variant.expander and all(
        getattr(crag.config, k) == variant.config[k] for k in keys
    )


def _f(value: Any, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _measure_table(
    runs: dict[str, Any], tests: list[str], names: list[str], measure: str
) -> list[str]:
    """One measure (``nDCG@10``, ``Recall@100``) of the references and every variant,
    a column per test split."""
    key = measure.lower()
    lines = [
        "",
        f"## {measure} on each test split",
        "",
        *table_head("run", *(t.split(":")[0] for t in tests)),
    ]
    rows = [(ref, "references") for ref in (BARE, HYBRID)] + [(n, "variants") for n in names]
    for name, group in rows:
        lines.append(
            f"| {name} | " + " | ".join(_f(runs[t][group][name][key]) for t in tests) + " |"
        )
    return lines


def _report(results: dict[str, Any]) -> str:
    runs = results["runs"]
    tests = [f"{c}:test" for c in results["collections"]]
    names = [v.name for v in VARIANTS]
    sel = results["selection"]
    lines = [
        "# Corrections that pay: route variants per collection",
        "",
        f"Command: `{results['command']}`",
        "",
        f"Profile `{results['profile']}`; web search off (IRRELEVANT falls back to the PARTIAL "
        "correction); 100-deep retrieval, the gate grades the top 10; fusion depth 100. "
        "Latency: each router call and a bare retrieval (MiniLM query encoding + FAISS, top "
        f"10) alternate query by query on up to {results['latency_queries']} queries per set; "
        "the ratio is the corrected queries' p50 over the bare p50 in the same run.",
        "",
        f"**Shipped default: {sel['shipped']}** (chosen by {sel['votes'].get(sel['shipped'], 0)} "
        f"of {len(sel['folds'])} folds); the library's defaults run it: "
        f"{_f(results['defaults_match'])}.",
    ]
    for measure in ("nDCG@10", "Recall@100"):
        lines += _measure_table(runs, tests, names, measure)
    lines += [
        "",
        "## Corrected path p50 / bare retrieval p50 (same run)",
        "",
        *table_head("variant", *(t.split(":")[0] for t in tests)),
    ]
    for n in names:
        cells = [
            _f(runs[t]["variants"][n].get("latency", {}).get("corrected_over_bare_p50"), 2)
            for t in tests
        ]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    bare_ms = [
        _f(runs[t]["variants"][names[0]].get("latency", {}).get("bare_p50_ms"), 1) for t in tests
    ]
    lines.append("| (bare p50, ms) | " + " | ".join(bare_ms) + " |")
    lines += [
        "",
        "## Chosen on training data, reported on the held-out test split",
        "",
        *table_head(
            "held out",
            "chosen on",
            "chosen variant",
            "nDCG@10 chosen",
            "always-hybrid",
            "bare",
            ">= hybrid",
            "corrected p50 / bare",
        ),
    ]
    for name, fold in sel["folds"].items():
        t = fold["test"]
        on = (
            "scifact train"
            if fold["training"] == ["scifact:train"]
            else (f"{len(fold['training'])} sets (scifact train + the others' test)")
        )
        lines.append(
            f"| {name} | {on} | {fold['chosen']} | {_f(t['variant_ndcg@10'])} | "
            f"{_f(t['hybrid_ndcg@10'])} | {_f(t['bare_ndcg@10'])} | {_f(t['router_ge_hybrid'])} "
            f"| {_f(t['corrected_over_bare_p50'], 2)} |"
        )
    shipped = sel["shipped"]
    if shipped is not None:
        lines += [
            "",
            f"## Per route: {shipped} against the bare dense list (test splits)",
            "",
            "Route = the gate's first verdict. Fast path (relevant): the list must stay the bare "
            "one. Each cell: queries; nDCG@10 bare -> router (always-hybrid on the same queries).",
            "",
            *table_head("collection", "relevant (identical to bare)", "partial", "irrelevant"),
        ]

        def cell(route: dict[str, Any]) -> str:
            return (
                f"{route['queries']}; {_f(route['ndcg@10_bare'])} -> {_f(route['ndcg@10'])} "
                f"({_f(route.get('ndcg@10_hybrid'))})"
            )

        for t in tests:
            r = runs[t]["variants"][shipped]["routes"]
            rel = r["relevant"]
            lines.append(
                f"| {t.split(':')[0]} | {cell(rel)}, {rel['identical_to_bare']} identical | "
                f"{cell(r['partial'])} | {cell(r['irrelevant'])} |"
            )
    syn = "synonyms, BM25 only (expand_on=lexical)"
    plain = "no expansion (dense + BM25 of the query)"
    alone = "synonyms, dense only (no lexical retriever)"
    lines += [
        "",
        "## Does synonym expansion help?",
        "",
        f"With BM25: nDCG@10 (Recall@100) of `{syn}` minus `{plain}` (the same fusion, the "
        f"expanded queries added). Without a lexical retriever: `{alone}` (the expanded "
        "queries re-embedded and fused with the dense list, the only correction there is) "
        "minus the bare dense list.",
        "",
        *table_head(
            "set",
            "with BM25: delta nDCG@10",
            "delta Recall@100",
            "without: delta nDCG@10",
            "delta Recall@100",
        ),
    ]
    for key in [*(["scifact:train"] if "scifact:train" in runs else []), *tests]:
        v = runs[key]["variants"]
        ref = runs[key]["references"][BARE]
        lines.append(
            f"| {key} | {v[syn]['ndcg@10'] - v[plain]['ndcg@10']:+.4f} | "
            f"{v[syn]['recall@100'] - v[plain]['recall@100']:+.4f} | "
            f"{v[alone]['ndcg@10'] - ref['ndcg@10']:+.4f} | "
            f"{v[alone]['recall@100'] - ref['recall@100']:+.4f} |"
        )
    lines += ["", "![nDCG@10 against always-hybrid](corrections.png)", ""]
    return "\n".join(lines)


def _plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # headless
    import matplotlib.pyplot as plt

    runs = results["runs"]
    tests = [f"{c}:test" for c in results["collections"]]
    fig, ax = plt.subplots(figsize=(9, 5))
    xs = range(len(tests))
    markers = "osv^<>Dph"
    for index, variant in enumerate(VARIANTS):
        ys = [
            runs[t]["variants"][variant.name]["ndcg@10"] - runs[t]["references"][HYBRID]["ndcg@10"]
            for t in tests
        ]
        ax.plot(xs, ys, markers[index % len(markers)] + "-", label=variant.name, alpha=0.8)
    ys = [
        runs[t]["references"][BARE]["ndcg@10"] - runs[t]["references"][HYBRID]["ndcg@10"]
        for t in tests
    ]
    ax.plot(xs, ys, "k:", label=BARE)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_xticks(list(xs), [t.split(":")[0] for t in tests])
    ax.set(
        ylabel="nDCG@10 minus always-hybrid",
        title="route variants against dense + BM25 RRF on every query",
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_corrections(
    data_root: str | Path,
    out: str | Path,
    *,
    collections: Sequence[str] | None = None,
    latency_queries: int = 100,
    profile: str | None = None,
    cache_dir: str | Path | None = None,
    reuse: bool = False,
    command: str = "",
) -> dict[str, Any]:
    """Every route variant on each collection, chosen on training data (module doc).

    Args:
        data_root: the folder holding one BEIR folder per collection.
        out: where ``results.json``, ``report.md`` and ``corrections.png`` are
            written; each collection's run is kept under ``out/runs``.
        collections: the collections' folder names under ``data_root``
            (default :data:`crag_heuristic.bench.SHARED_COLLECTIONS`).
        latency_queries: queries timed per variant and set (0: none).
        profile: the gate profile (``None``: the library's).
        cache_dir: the query vector cache (default ``out/cache``).
        reuse: read back the runs ``out/runs`` holds instead of running them.
        command: the command line the report quotes.

    Returns:
        What ``results.json`` holds: the runs, the selection (``folds``,
        ``votes``, ``shipped``) and whether the library's defaults run the
        shipped variant.
    """
    folder = Path(out)
    names = list(SHARED_COLLECTIONS if collections is None else collections)
    runs = _runs(
        Path(data_root),
        folder,
        names,
        latency_queries=latency_queries,
        profile=profile,
        cache_dir=Path(cache_dir) if cache_dir else None,
        reuse=reuse,
    )
    selection = _select(runs, names)
    results = {
        "command": command,
        "profile": load_config(profile).name,
        "collections": names,
        "latency_queries": latency_queries,
        "latency_bound": LATENCY_BOUND,
        "selection": selection,
        "defaults_match": None
        if selection["shipped"] is None
        else _matches_defaults(selection["shipped"]),
        "runs": runs,
    }
    (folder / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    _plot(results, folder / "corrections.png")
    (folder / "report.md").write_text(_report(results) + "\n")
    _log(f"wrote {folder / 'report.md'}")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m research.corrections``: :func:`run_corrections` from the command line;
    prints the votes and the shipped variant."""
    parser = argparse.ArgumentParser(
        prog="python -m research.corrections", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--data-root", default="../shared/data")
    parser.add_argument("--out", default="benchmarks/results/corrections")
    parser.add_argument(
        "--collections",
        default=None,
        help="comma-separated folder names (default: the nine of ../shared/data)",
    )
    parser.add_argument("--latency-queries", type=int, default=100)
    parser.add_argument("--profile", default=None, help="gate profile (default: the library's)")
    parser.add_argument("--cache-dir", default=None, help="query vector cache (default OUT/cache)")
    parser.add_argument("--reuse", action="store_true", help="reuse runs/ from a previous run")
    args = parser.parse_args(argv)
    given = sys.argv[1:] if argv is None else list(argv)
    results = run_corrections(
        args.data_root,
        args.out,
        collections=None
        if args.collections is None
        else [c for c in args.collections.split(",") if c],
        latency_queries=args.latency_queries,
        profile=args.profile,
        cache_dir=args.cache_dir,
        reuse=args.reuse,
        command=" ".join(["python -m research.corrections", *map(shlex.quote, given)]),
    )
    sys.stdout.write(json.dumps({k: results["selection"][k] for k in ("votes", "shipped")}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
