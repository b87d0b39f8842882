#!/usr/bin/env bash
# The default gate's evaluation cost against another commit's, in instructions (callgrind
# counts instructions, not seconds: repeatable on a shared machine, unlike wall time).
#   bash benchmarks/evaluator_vs_ref.sh [REF]      (REF defaults to bc07431, where issue 9 began)
# Both trees grade the same 10 synthetic 200-word chunks (benchmarks/evaluator_micro.py's) 300
# times with Evaluator(), warm; the setup is subtracted by a run that stops before the loop.
# Writes benchmarks/results/evaluator_vs_ref.md.
set -euo pipefail
cd "$(dirname "$0")/.."
# the Python that has crag-heuristic's dependencies (PYTHON=..., else the first on PATH)
PYTHON=${PYTHON:-$(command -v python || command -v python3)}
"$PYTHON" -c "import numpy, Stemmer" 2>/dev/null || {
    echo "evaluator_vs_ref.sh: $PYTHON lacks the dependencies; activate the venv or set PYTHON" >&2
    exit 2
}
REF=${1:-bc07431}
WORK=$(mktemp -d)
trap 'git worktree remove --force "$WORK/ref" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
git worktree add -q --detach "$WORK/ref" "$REF"
cat > "$WORK/run.py" <<'PY'
import random, sys
sys.path.insert(0, sys.argv[2] + "/benchmarks")  # the tree's own inputs' maker (same draws)
import evaluator_micro as em
from crag_heuristic import Evaluator
rng = random.Random(0)
chunks = em.make_chunks(rng, em.make_vocabulary(rng), 10, 200, "a")
evaluator = Evaluator()
for _ in range(50):
    evaluator.evaluate(em.QUERY, chunks)
if sys.argv[1] == "loop":
    for _ in range(300):
        evaluator.evaluate(em.QUERY, chunks)
PY
count() {  # tree mode -> instructions
    PYTHONHASHSEED=0 PYTHONPATH="$1" valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        "$PYTHON" "$WORK/run.py" "$2" "$1" 2>&1 | awk '/Collected/ {print $4}'
}
per_call() { echo $(( ($(count "$1" loop) - $(count "$1" setup)) / 300 )); }
here=$(per_call "$PWD")
there=$(per_call "$WORK/ref")
ratio=$("$PYTHON" -c "print(f'{$here / $there:.3f}')")
{
    echo "# Evaluator cost against $REF (instructions per evaluation, warm, k = 10)"
    echo
    echo "Command: \`bash benchmarks/evaluator_vs_ref.sh $REF\`"
    echo
    echo "| tree | default profile | instructions per evaluation |"
    echo "|---|---|---|"
    echo "| $REF | $(cd "$WORK/ref" && "$PYTHON" -c 'import crag_heuristic as c; print(c.Evaluator().config.name)') | $there |"
    echo "| this tree | $("$PYTHON" -c 'import crag_heuristic as c; print(c.Evaluator().config.name)') | $here |"
    echo
    echo "Ratio: **$ratio x**."
} > benchmarks/results/evaluator_vs_ref.md
cat benchmarks/results/evaluator_vs_ref.md
