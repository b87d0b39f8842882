"""The model-selection research (``research/`` at the repository's root) is tested, not
shipped: the root goes last on the import path, after the installed package, so
``crag_heuristic`` stays the installed one (with its C extension) and ``research`` is
found beside it."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.append(ROOT)
