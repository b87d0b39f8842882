"""The benchmark harness and gate calibration (the ``bench`` extra for the benchmarks).

``import crag_heuristic`` does not import this module: it pulls in the
harness and, when called, scikit-learn.

* :func:`run_bench`: every benchmark on one BEIR-layout folder, written as a
  report (``crag-heuristic bench``).
* :func:`calibrate`: fit a gate profile on one split of such a folder
  (``crag-heuristic calibrate``).
* :func:`fit_gate`: fit a two-stage gate on your own labelled retrievals
  (:class:`GateExample`); returns a :class:`CalibrationResult`.
* :func:`calibrate_self` (also at the top level): fit a gate on your corpus
  through your retriever with no labels, from simulated queries
  (:class:`QuerySimulator`, :class:`SimulatedQuery`).
* :func:`run_loco`: nested leave one collection out (``crag-heuristic bench --loco``).
* :class:`CalibrationWarning`: what a calibration issues when its profile cannot
  do what was asked (bands that miss their targets, no fast path).
"""

from ._bench import calibrate, run_bench
from ._bench.loco import run_loco
from ._calibrate import CalibrationResult, GateExample, fit_gate
from ._exceptions import CalibrationWarning
from ._self_calibrate import calibrate_self
from ._simulate import QuerySimulator, SimulatedQuery

__all__ = [
    "CalibrationResult",
    "CalibrationWarning",
    "GateExample",
    "QuerySimulator",
    "SimulatedQuery",
    "calibrate",
    "calibrate_self",
    "fit_gate",
    "run_bench",
    "run_loco",
]
