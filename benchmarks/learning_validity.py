"""Does a learning cascade keep its guarantee? Many simulated streams, each band it put in
force checked against the traffic's true risk.

    python benchmarks/learning_validity.py [--streams 200] [--lists 1500]
        [--out benchmarks/results/stream/validity.json]

Synthetic traffic whose truth is known: each list fails with probability ``--failure``;
its evidence (top cosine, keyword coverage, and the rest of the refits' evidence) is
drawn around one mean for failed lists and another for good ones, with noise, so the
shipped gate ranks failures imperfectly and a refit can learn better. Each stream is
replayed through a ``LearningCascade`` (recall 0.90 at delta 0.1, the default
settings, refits in the same process) by ``crag_heuristic.calibration.replay``; every
(gate, band) the cascade put in force is scored on 20,000 fresh lists of the same
traffic: its true risk is the share of failed lists above the band. A stream breaks the
guarantee when any band it used has a true risk above eps; the guarantee says this
happens in at most delta of the streams (a union bound over every gate, so the share
may sit well below delta).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from crag_heuristic.calibration import Learning, LearningCascade, ListView, replay


def traffic(
    n: int, rng: np.random.Generator, failure: float
) -> tuple[list[ListView], list[dict[str, float]]]:
    views, grades = [], []
    for _ in range(n):
        failed = bool(rng.random() < failure)
        top = float(np.clip(rng.normal(0.55 if failed else 0.65, 0.1), 0.0, 1.0))
        coverage = float(np.clip(rng.normal(0.45 if failed else 0.7, 0.2), 0.0, 1.0))
        gap = float(np.clip(rng.normal(0.02 if failed else 0.06, 0.03), 0.0, 1.0))
        features = {
            "similarity_top": top,
            "similarity_mean": top - 0.1,
            "similarity_gap": gap,
            "bm25_top": 5.0 * coverage,
            "bm25_scaled_max": coverage,
            "keyword_coverage": coverage,
            "lexical_coherence": 0.08,
        }
        chunk = {"similarity": top, "keyword_overlap": coverage}
        query = f"{rng.integers(1 << 62):x}"
        views.append(ListView(query, 0.0, features, (), (("c0", chunk), ("c1", chunk))))
        grades.append({"c0": 0.0 if failed else 1.0, "c1": 0.0})
    return views, grades


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--lists", type=int, default=1500)
    parser.add_argument("--failure", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results/stream/validity.json")
    args = parser.parse_args()
    settings = Learning()
    rng = np.random.default_rng(args.seed)
    test_views, test_grades = traffic(20_000, np.random.default_rng(args.seed + 1), args.failure)
    failed_test = [i for i, g in enumerate(test_grades) if not any(g.values())]
    broken, used, calls = 0, 0, []
    for _ in range(args.streams):
        views, grades = traffic(args.lists, rng, args.failure)
        learner = LearningCascade(settings=settings, background=False)
        learner.bind("simulated")
        trace = replay(learner, views, grades, range(len(views)))
        deployed = {(m, b) for _, m, b in learner.history() if m is not None and b is not None}
        calls.append(trace.calls(last=400))
        worst = 0.0
        for model, band in deployed:
            scores = np.array([learner.score(test_views[i], model) for i in failed_test])
            worst = max(worst, float(np.mean(scores > band[1])))
        used += bool(deployed)
        broken += worst > settings.eps
    result = {
        "command": f"python benchmarks/learning_validity.py --streams {args.streams} "
        f"--lists {args.lists} --failure {args.failure} --seed {args.seed}",
        "streams": args.streams,
        "lists": args.lists,
        "failure": args.failure,
        "eps": settings.eps,
        "delta": settings.delta,
        "streams_with_a_band": used,
        "broken": broken,
        "broken_share": broken / args.streams,
        "calls_last_400": float(np.mean(calls)),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(json.dumps(result, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
