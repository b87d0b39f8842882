"""Put the project's test kit on ``sys.path`` for the benchmark scripts that start servers.

The kit (``tests/support/crag_testkit``: a real Redis, a real SearXNG, fault
engines) is dev tooling and does not ship in the wheel; a script imports this
module before ``crag_testkit``. The test run has the folder on its path already
(``pythonpath`` in setup.cfg), and mypy too (``mypy_path``).
"""

from __future__ import annotations

import sys
from pathlib import Path

SUPPORT = Path(__file__).resolve().parents[1] / "tests" / "support"

if str(SUPPORT) not in sys.path:
    sys.path.insert(0, str(SUPPORT))
