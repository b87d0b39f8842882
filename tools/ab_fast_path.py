"""A/B timing of the fast path: two source trees of crag-heuristic, in the same run.

    python tools/ab_fast_path.py --base /tmp/crag-base [--rounds 8] [--calls 400]

``--base`` is another checkout of the repository (e.g. ``git archive cab6cc6 |
tar -x -C /tmp/crag-base``); the tree this script sits in is the other side.
Each round starts one worker process per tree (base first, then this tree;
the order alternates round by round, so drift in machine load hits both
alike). A worker imports ``crag_heuristic`` from its tree and times, call by
call with ``time.perf_counter_ns``:

* ``evaluator``: ``Evaluator().evaluate`` on 10 chunks of about 120 words,
  analysis warm (the same chunks every call);
* ``router fast path``: ``CRAG.retrieve`` over a list retriever returning
  those chunks, graded RELEVANT, no cache (the path of ``_bench/cost.py``);
* ``router cache hit``: the same with the default in-process cache, every call
  after the first a hit (the cached evaluation is read back and checked);
* ``router cache miss``: a new query each call (evaluated, then stored).

It prints p50 and p99 per tree in microseconds and the ratio this tree /
base; a ratio of 1.05 means 5 % slower.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
WORDS = (
    "solar panel efficiency temperature winter cell silicon light energy output heat loss "
    "voltage current module roof angle season cold sun power grid storage battery inverter "
    "the of and in to a is that for on with as by at from it this which are be was"
).split()
QUERY = "how does solar panel efficiency change with temperature in winter"


def _chunks(chunk_type: Any, seed: int = 0) -> list[Any]:
    rng = random.Random(seed)
    return [
        chunk_type(
            id=f"c{i}",
            text=" ".join(rng.choice(WORDS) for _ in range(120)),
            score=0.82 - 0.02 * i,
            score_kind="cosine",
            source=f"doc{i % 4}",
        )
        for i in range(10)
    ]


def _time(fn: Any, calls: int) -> list[float]:
    for _ in range(20):
        fn()
    samples = []
    for _ in range(calls):
        started = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - started) / 1000.0)
    return samples


def worker(tree: str, calls: int) -> dict[str, Any]:
    sys.path.insert(0, tree)
    import crag_heuristic
    from crag_heuristic import CRAG, Chunk, Evaluator
    from crag_heuristic.testing import ListRetriever

    assert Path(crag_heuristic.__file__).resolve().is_relative_to(Path(tree).resolve())
    chunks = _chunks(Chunk)
    evaluator = Evaluator()
    verdict = evaluator.evaluate(QUERY, chunks).verdict.value
    fast = CRAG(ListRetriever(chunks), evaluator, cache=False, config={"k": 10})
    cached = CRAG(ListRetriever(chunks), evaluator, config={"k": 10})
    assert fast.retrieve(QUERY).strategy.value == "none"
    queries = iter([f"{QUERY} {i}" for i in range(calls + 40)])
    return {
        "verdict": verdict,
        "evaluator": _time(lambda: evaluator.evaluate(QUERY, chunks), calls),
        "router fast path": _time(lambda: fast.retrieve(QUERY), calls),
        "router cache hit": _time(lambda: cached.retrieve(QUERY), calls),
        "router cache miss": _time(lambda: cached.retrieve(next(queries)), calls),
    }


def _run(tree: Path, calls: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", str(tree), "--calls", str(calls)],
        check=True,
        capture_output=True,
        text=True,
        cwd="/",
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def _p(samples: list[float], q: int) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, help="the other source tree")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        json.dump(worker(args.worker, args.calls), sys.stdout)
        return
    trees = {"base": args.base.resolve(), "this": HERE}
    samples: dict[str, dict[str, list[float]]] = {"base": {}, "this": {}}
    for round_ in range(args.rounds):
        order = ["base", "this"] if round_ % 2 == 0 else ["this", "base"]
        for side in order:
            result = _run(trees[side], args.calls)
            for name, values in result.items():
                if name != "verdict":
                    samples[side].setdefault(name, []).extend(values)
    print(
        f"{'measure':<20} {'base p50':>9} {'this p50':>9} {'ratio':>6}   "
        f"{'base p99':>9} {'this p99':>9} {'ratio':>6}   (us, {args.rounds} rounds x "
        f"{args.calls} calls)"
    )
    for name in samples["base"]:
        base, this = samples["base"][name], samples["this"][name]
        b50, t50, b99, t99 = _p(base, 50), _p(this, 50), _p(base, 99), _p(this, 99)
        print(
            f"{name:<20} {b50:9.1f} {t50:9.1f} {t50 / b50:6.3f}   "
            f"{b99:9.1f} {t99:9.1f} {t99 / b99:6.3f}"
        )


if __name__ == "__main__":
    main()
