"""The command line as a benchmark starts it in a process of its own."""

from __future__ import annotations

import shutil
import sys


def crag_cli() -> list[str]:
    """``crag-heuristic``'s installed script, else this interpreter's ``-m crag_heuristic``
    (a checkout run without its virtual environment's ``bin`` on ``PATH``)."""
    script = shutil.which("crag-heuristic")
    return [script] if script else [sys.executable, "-m", "crag_heuristic"]
