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
* :func:`calibrate_on_grader`: a gate refitted around the shipped one on your
  grader's labels (:func:`examples_from_grader`), with a set cascade's band
  chosen with a guarantee (``crag-heuristic calibrate --grader``);
  :func:`fit_on_grader` makes one refit and a band per target
  (:class:`GraderCalibration`).
* :func:`run_loco`: nested leave one collection out (``crag-heuristic bench --loco``).
* :func:`run_self_calibration`: the same with several self-calibration variants,
  and the one the library's defaults should be (``benchmarks/self_calibration.py``).
* :func:`run_corrections`: which correction pays, route variants chosen on
  training data across collections (``benchmarks/corrections.py``).
* :func:`run_evidence_probe`: candidate evidence for the gate, each alone and
  what it adds nested (``benchmarks/evidence_probe.py``).
* :func:`run_cost`: the evaluator warm and cold and the router against the bare
  retrieval on a folder's natural test retrievals (``benchmarks/evaluator_micro.py``).
* :data:`BASELINES`: the simple predictors every gate is held against in a
  report; :func:`seed_design` is the first of them, the project's seed design.
* :func:`alternated` and :func:`percentiles`: timing in one run (cases called
  in rotated order, so load drift hits each alike; p50 / p99);
  :func:`background_load`: a fixed load of busy processes while a block runs
  (every ratio is reported at each of :data:`LOADS`).
* :data:`SHARED_COLLECTIONS`: the folder names of the collections the committed
  reports were made from (``../shared/data``), in their reports' order.
* :class:`CalibrationWarning`: what a calibration issues when its profile cannot
  do what was asked (bands that miss their targets, no fast path).
"""

from ._bench.baselines import seed_design
from ._bench.calibration import CalibrationResult, GateExample, fit_gate
from ._bench.correction_choice import COLLECTIONS as SHARED_COLLECTIONS
from ._bench.correction_choice import run_corrections
from ._bench.cost import run_cost
from ._bench.evidence_probe import run_evidence_probe
from ._bench.failure import BASELINES
from ._bench.grader_calibration import (
    GraderCalibration,
    calibrate_on_grader,
    examples_from_grader,
    fit_on_grader,
)
from ._bench.harness import run_bench
from ._bench.loco import run_loco
from ._bench.pipeline import calibrate
from ._bench.self_calibration import calibrate_self
from ._bench.self_variants import run_self_calibration
from ._bench.simulation import QuerySimulator, SimulatedQuery
from ._bench.timing import LOADS, alternated, background_load, percentiles
from ._exceptions import CalibrationWarning

__all__ = [
    "BASELINES",
    "CalibrationResult",
    "CalibrationWarning",
    "GateExample",
    "GraderCalibration",
    "LOADS",
    "QuerySimulator",
    "SHARED_COLLECTIONS",
    "SimulatedQuery",
    "alternated",
    "background_load",
    "calibrate",
    "calibrate_on_grader",
    "calibrate_self",
    "examples_from_grader",
    "fit_gate",
    "fit_on_grader",
    "percentiles",
    "run_bench",
    "run_corrections",
    "run_cost",
    "run_evidence_probe",
    "run_loco",
    "run_self_calibration",
    "seed_design",
]
