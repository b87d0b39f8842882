"""The benchmark harness and the data pipeline calibration shares with it.

Heavy dependencies (matplotlib, pytrec_eval, torch via MiniLM) are imported only
where they are used; install them with the ``bench`` extra.
"""

from .harness import SECTIONS, run_bench
from .pipeline import calibrate, labels_for, prepare, retrievals_for

__all__ = [
    "SECTIONS",
    "calibrate",
    "labels_for",
    "prepare",
    "retrievals_for",
    "run_bench",
]
