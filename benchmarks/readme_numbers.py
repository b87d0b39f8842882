"""Every number the README quotes, and the committed result file it comes from.

    python benchmarks/readme_numbers.py       # exit 1 (and a list) when a quote is stale

Each :class:`Quote` renders a phrase of the README from a results file under
``benchmarks/results/`` (``bash benchmarks/regenerate.sh`` rewrites them all,
then runs this check); the phrase must appear in the README verbatim (white
space aside). After a regeneration, a stale quote is printed with the text it
should now read. tests/test_readme_numbers.py runs the same check, so a README
number can neither drift from its report nor be typed in by hand.

Not covered: the numbers that describe the default profile's own fitting
(``809 claims``, its bands' targets), which come from the header of the
profile file that ``crag-heuristic calibrate`` wrote
(``crag_heuristic/profiles/<name>.toml``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
FILES = {
    "scifact": RESULTS / "scifact" / "results.json",
    "llmjudge": RESULTS / "llmjudge" / "results.json",
    "micro": RESULTS / "evaluator_micro.json",
    "load": RESULTS / "load_faults" / "load_faults.json",
    "cascade": RESULTS / "llmjudge-cascade" / "results.json",
}


def f(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}f}"


def thousands(value: int) -> str:
    return f"{value:,}"


@dataclass(frozen=True)
class Quote:
    """A README phrase made from one results file."""

    source: str  # a key of FILES
    render: Callable[[dict[str, Any]], str]

    def text(self, data: dict[str, Any]) -> str:
        return self.render(data)


def _s(r: dict[str, Any]) -> dict[str, Any]:
    sections: dict[str, Any] = r["sections"]
    return sections


def _auc(r: dict[str, Any], name: str, which: str = "natural+probes") -> str:
    return f(_s(r)["failure"]["auc"][name][which])


def _verdict(r: dict[str, Any], name: str, measure: str) -> str:
    return f(_s(r)["failure"]["verdicts"][name][measure])


def _ndcg(r: dict[str, Any], name: str, measure: str = "ndcg@10") -> str:
    return f(_s(r)["quality"]["overall"][name][measure], 4 if measure == "ndcg@10" else 3)


def _micro(r: dict[str, Any], k: int, column: str) -> float:
    row = next(row for row in r["results"] if row["k"] == k)
    return float(row[column]["p50"]) / 1000.0


def _llm_share(r: dict[str, Any]) -> str:
    a = _s(r)["agreement"]
    return f(a["kappa_vs_human"]["fitted"]["random_splits_mean"])


def _best_grader(r: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    graders: dict[str, Any] = _s(r)["cascade"]["graders"]
    name = max(graders, key=lambda n: graders[n]["kappa_alone"])
    return name, graders[name]


def _pct(value: float | None) -> str:
    return "never" if value is None else f"{round(100 * value)} %"


def _cascade_curve(r: dict[str, Any]) -> str:
    c = _s(r)["cascade"]
    name, g = _best_grader(r)
    strong = c["goal"]["graders_at_or_above_goal_alone"]
    only = "the only label set" if strong == [name] else f"one of {len(strong)} label sets"
    at = g["at"]["band"]
    return (
        f"with {name} (kappa {f(g['kappa_alone'])} alone, {only} at or above "
        f"{c['goal']['kappa']:.2f}) the gate (kappa {f(c['gate_kappa'])} alone) reaches kappa "
        + " / ".join(f(at[k]) for k in ("0.10", "0.20", "0.30", "0.50"))
        + " with 10 / 20 / 30 / 50 % of the pairs escalated, and "
        f"{c['goal']['kappa']:.2f} at {_pct(g['share_for_goal']['band'])} (band policy; "
        f"{_pct(g['share_for_goal']['budget'])} with a per-list budget). **Goal (kappa >= "
        f"{c['goal']['kappa']:.2f} with <= {round(100 * c['goal']['max_share'])} % escalated) "
        f"{'met' if c['goal']['met'] else 'not met'}.** Escalating the gate's actual errors first "
        f"would reach {c['goal']['kappa']:.2f} at {_pct(g['share_for_goal']['oracle'])}"
    )


QUOTES: list[Quote] = [
    # the SciFact headline
    Quote(
        "scifact",
        lambda r: (
            f"SciFact test ({_s(r)['quality']['queries']} claims; k = {r['k']}; "
            f"{_s(r)['failure']['natural']} natural retrievals, {_s(r)['failure']['natural_failed']} "
            f"of them failed, plus {_s(r)['failure']['probes']} leave-relevant-out probes"
        ),
    ),
    Quote("scifact", lambda r: f"| crag-heuristic (`{r['profile']}`) |"),
    Quote(
        "scifact",
        lambda r: (
            f"**{_auc(r, r['profile'])}** (natural only "
            f"{_auc(r, r['profile'], 'natural')}) | seed design "
            f"{_auc(r, 'seed design (as written)')}, score gap "
            f"{_auc(r, 'score gap (top-1 - top-k)')}, `synapse` {_auc(r, 'synapse')}, top-1 "
            f"{_auc(r, 'top-1 score')}, NQC {_auc(r, 'NQC')} |"
        ),
    ),
    Quote(
        "scifact",
        lambda r: (
            f"| fast-path precision (RELEVANT and not failed) | "
            f"**{_verdict(r, r['profile'], 'fast_path_precision')}** | `synapse` "
            f"{_verdict(r, 'synapse', 'fast_path_precision')} |"
        ),
    ),
    Quote(
        "scifact",
        lambda r: (
            f"| failure recall (failed and not RELEVANT) | "
            f"**{_verdict(r, r['profile'], 'failure_recall')}** | `synapse` "
            f"{_verdict(r, 'synapse', 'failure_recall')} |"
        ),
    ),
    Quote(
        "scifact",
        lambda r: (
            f"| probes sent to IRRELEVANT | "
            f"**{_verdict(r, r['profile'], 'probes_in_irrelevant')}** | `synapse` "
            f"{_verdict(r, 'synapse', 'probes_in_irrelevant')} |"
        ),
    ),
    Quote(
        "scifact",
        lambda r: (
            f"**{_ndcg(r, 'dense (bare)')} -> {_ndcg(r, 'CRAG router')}** | BM25 "
            f"{_ndcg(r, 'BM25')}; dense + BM25 RRF on every query "
            f"{_ndcg(r, 'dense + BM25 RRF, every query')} |"
        ),
    ),
    Quote(
        "scifact",
        lambda r: (
            f"| Recall@100, bare dense -> router | "
            f"{_ndcg(r, 'dense (bare)', 'recall@100')} -> {_ndcg(r, 'CRAG router', 'recall@100')} |"
        ),
    ),
    Quote(
        "scifact",
        lambda r: (
            f"| fast-path queries changed by the router | "
            f"{_s(r)['quality']['fast_path']['queries'] - _s(r)['quality']['fast_path']['identical_to_bare']}"
            f" of {_s(r)['quality']['fast_path']['queries']} (identical lists) |"
        ),
    ),
    Quote(
        "scifact",
        lambda r: (
            f"**{f(_s(r)['cost']['evaluator_warm_ms']['p50'], 2)} / "
            f"{f(_s(r)['cost']['evaluator_warm_ms']['p99'], 2)} ms** = "
            f"{f(_s(r)['cost']['evaluator_warm_over_bare_p50'])} x the bare retrieval | bare: "
            f"MiniLM encode + FAISS, {f(_s(r)['cost']['bare_retrieval_ms']['p50'], 1)} ms p50 |"
        ),
    ),
    Quote(
        "scifact",
        lambda r: (
            f"| {f(_s(r)['cost']['router_ms']['fast path']['over_bare_p50'], 2)} x / "
            f"{f(_s(r)['cost']['router_ms']['corrected']['over_bare_p50'], 1)} x the bare "
            "retrieval (p50) |"
        ),
    ),
    Quote(
        "scifact",
        lambda r: (
            "Cold chunk analysis (new texts, not yet tokenised) costs "
            f"{f(_s(r)['cost']['evaluator_cold_ms']['p50'], 1)} ms for {r['k']} chunks"
        ),
    ),
    Quote(
        "scifact",
        lambda r: (
            "with no expansion at all it reaches nDCG@10 "
            f"{_ndcg(r, 'CRAG router, no expansion (BM25 of the query only)')}, with the shipped "
            f"synonym expansion {_ndcg(r, 'CRAG router')}, with PRF "
            f"{_ndcg(r, 'CRAG router, PRF expansion')} (PRF has the best Recall@100, "
            f"{_ndcg(r, 'CRAG router, PRF expansion', 'recall@100')})"
        ),
    ),
    # per-chunk agreement and the transfer to llmjudge
    Quote(
        "llmjudge",
        lambda r: (
            f"llmjudge ({thousands(_s(r)['agreement']['pairs'])} judged MS MARCO passages, "
            f"{_s(r)['agreement']['queries']} queries; 2-fold by query)"
        ),
    ),
    Quote(
        "llmjudge",
        lambda r: (
            "Cohen's kappa vs people "
            f"**{f(_s(r)['agreement']['kappa_vs_human']['fitted']['fixed_split'])}** (the gate's "
            f"chunk stage fitted on the other half; random splits {_llm_share(r)} ± "
            f"{f(_s(r)['agreement']['kappa_vs_human']['fitted']['random_splits_sd'])}), MiniLM "
            f"cosine alone {f(_s(r)['agreement']['kappa_vs_human']['cosine']['fixed_split'])}, the "
            f"{len(_s(r)['agreement']['llm_graders'])} LLM graders median "
            f"{f(_s(r)['agreement']['llm_kappa_median'])} and best "
            f"{f(_s(r)['agreement']['llm_kappa_best'])}, at "
            f"{f(_s(r)['agreement']['evaluator_ms_per_passage'])} ms per passage"
        ),
    ),
    Quote(
        "llmjudge",
        lambda r: (
            f"per-query calibration that {_s(r)['agreement']['queries'] // 2} training "
            "queries cannot teach"
        ),
    ),
    Quote(
        "llmjudge",
        lambda r: (
            f"(failure AUC {_auc(r, r['profile'])[:4]} on "
            f"{_s(r)['failure']['retrievals']} retrievals)"
        ),
    ),
    Quote(
        "llmjudge",
        lambda r: (
            f"(nDCG@10 {_ndcg(r, 'dense (bare)')} -> {_ndcg(r, 'CRAG router')}, BM25 "
            f"alone {f(_s(r)['quality']['overall']['BM25']['ndcg@10'])})"
        ),
    ),
    # the evaluator micro-benchmark
    Quote(
        "micro",
        lambda r: (
            f"(synthetic {r['words_per_chunk']}-word chunks) gives "
            f"{f(_micro(r, 10, 'warm_us'), 2)} ms warm / {f(_micro(r, 10, 'cold_us'), 2)} ms cold at "
            f"k = 10 and {f(_micro(r, 100, 'warm_us'), 1)} ms warm at k = 100"
        ),
    ),
    # the cascade on llmjudge
    Quote("cascade", _cascade_curve),
    # load with faults
    Quote(
        "load",
        lambda r: f"runs {thousands(r['queries'])} async queries, {r['concurrency']} at a time",
    ),
    Quote(
        "load",
        lambda r: (
            f"Last run: {thousands(r['results'])} results, "
            f"{r['web']['flagged'] + r['cache']['flagged']} failures flagged "
            f"({r['web']['flagged']} web, {r['cache']['flagged']} cache), "
            f"{r['unflagged_failures']} unflagged, {r['hangs']} hangs"
        ),
    ),
    Quote(
        "load",
        lambda r: (
            f"{sum(r['web']['calls_that_met_an_injected_fault'].values())} web calls met "
            f"an injected fault and {r['web']['circuit_refusals']} were refused by the open "
            f"circuit ({r['web']['circuit_opens']} openings)"
        ),
    ),
    Quote(
        "load",
        lambda r: (
            f"p50 {round(r['latency_ms']['overall']['p50'])} ms, p99 "
            f"{f(r['latency_ms']['overall']['p99'] / 1000.0, 2)} s"
        ),
    ),
]


def check(readme: str | None = None) -> list[tuple[Quote, str]]:
    """The quotes missing from the README, each with the text it should read."""
    text = " ".join((readme or (ROOT / "README.md").read_text(encoding="utf-8")).split())
    loaded = {name: json.loads(path.read_text(encoding="utf-8")) for name, path in FILES.items()}
    missing = []
    for quote in QUOTES:
        expected = " ".join(quote.text(loaded[quote.source]).split())
        if expected not in text:
            missing.append((quote, expected))
    return missing


def main() -> int:
    missing = check()
    for quote, expected in missing:
        print(f"README is stale ({FILES[quote.source].relative_to(ROOT)}): {expected}")
    if not missing:
        print(f"every README number ({len(QUOTES)} quotes) matches its results file")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
