#!/usr/bin/env bash
# Regenerate every committed benchmark report from the shared data.
#   pip install '.[bench]' && bash benchmarks/regenerate.sh [DATA_ROOT]
# DATA_ROOT defaults to ../shared/data (scifact/ and llmjudge/ in BEIR layout).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${1:-../shared/data}
crag-heuristic bench --data-dir "$DATA/scifact" --out benchmarks/results/scifact
crag-heuristic bench --data-dir "$DATA/llmjudge" --out benchmarks/results/llmjudge
python benchmarks/evaluator_micro.py --out benchmarks/results/evaluator_micro.json \
    > benchmarks/results/evaluator_micro.md
# about 15 minutes and 5 GB of memory: a million synthetic documents
nice -n 10 python benchmarks/scale.py --docs 1000000 --out benchmarks/results/scale \
    > /dev/null
