"""The benchmark harness and gate calibration (the ``bench`` extra for the benchmarks).

``import crag_heuristic`` does not import this module: it pulls in the
harness and, when called, scikit-learn.

* :func:`run_bench`: every benchmark on one BEIR-layout folder, written as a
  report (``crag-heuristic bench``).
* :func:`calibrate`: fit a gate profile on one split of such a folder
  (``crag-heuristic calibrate``).
* :func:`fit_gate`: fit a two-stage gate on your own labelled retrievals
  (:class:`GateExample`); returns a :class:`CalibrationResult`.
"""

from ._bench import calibrate, run_bench
from ._calibrate import CalibrationResult, GateExample, fit_gate

__all__ = [
    "CalibrationResult",
    "GateExample",
    "calibrate",
    "fit_gate",
    "run_bench",
]
