#!/usr/bin/env bash
# The README's first command in a clean virtual environment, with the core install only
# (`pip install .`, no extras; pip's cache is used): the demo runs; the venv holds the core
# distributions and what they need, nothing else; a feature whose extra is missing names it.
# Run from anywhere: `bash tools/check_core_install.sh` (about a minute; .ci/run runs it).
set -euo pipefail
cd "$(dirname "$0")/.."

FIRST=$(grep -m1 '^pip install \. && crag-heuristic ' README.md) || {
    echo "README.md has no line 'pip install . && crag-heuristic ...'" >&2
    exit 1
}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
python3 -m venv "$WORK/venv"
# shellcheck disable=SC1091
. "$WORK/venv/bin/activate"
python -m pip install --quiet --upgrade pip

echo "== $FIRST"
eval "$FIRST" > "$WORK/demo.txt"
grep -q '^ 1  honeybees-3 ' "$WORK/demo.txt" || {
    cat "$WORK/demo.txt" >&2
    echo "the demo did not put the waggle dance first" >&2
    exit 1
}

cd "$WORK"  # away from the source tree: the installed package, not ./crag_heuristic
echo "== what the core install holds"
python - <<'PY'
import sys
from importlib import metadata

tools = {"pip", "setuptools", "wheel"}
installed = sorted(
    d.metadata["Name"] for d in metadata.distributions() if d.metadata["Name"] not in tools
)
print(" ".join(installed))
others = [name for name in installed if name != "crag-heuristic"]
# numpy, structlog, PyStemmer, faiss-cpu and faiss's packaging; tomli and structlog's
# typing-extensions on Python 3.10
bound = 5 if sys.version_info >= (3, 11) else 7
assert len(others) <= bound, f"the core install brought {len(others)} distributions: {others}"
PY

echo "== a feature without its extra names it"
python - <<'PY'
import crag_heuristic

try:
    crag_heuristic.RedisCache(url="redis://127.0.0.1:1")
except crag_heuristic.MissingDependencyError as error:
    assert "pip install 'crag-heuristic[redis]'" in str(error), error
    print(error)
else:
    raise AssertionError("RedisCache ran without redis")
PY
echo "core install: ok"
