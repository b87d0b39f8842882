"""The benchmark harness: what a user runs on a folder in BEIR layout (the ``bench`` extra).

``import crag_heuristic`` does not import this module: it pulls in the
harness and, when called, scikit-learn.

* :func:`run_bench`: every benchmark on one BEIR-layout folder (its
  :data:`SECTIONS`), written as a report (``crag-heuristic bench``);
  :func:`headline` reads its headline numbers.
* :func:`calibrate`: fit a gate profile on one split of such a folder, or on
  several (``crag-heuristic calibrate``; each folder ``DIR`` or ``DIR:SPLIT``,
  :func:`folder_and_split`).
* :func:`prepare`: a folder loaded for benchmarking (a :class:`Prepared`: its
  documents and queries, dense index, corpus statistics);
  :class:`HarnessRetriever` searches it by query text, :func:`chunks_of` makes
  its hits chunks.
* :func:`run_loco`: nested leave one collection out (``crag-heuristic bench --loco``).
* :func:`run_self_calibration`: the same with several self-calibration variants,
  and the one the library's defaults should be (``benchmarks/self_calibration.py``).
* :func:`run_corrections`: which correction pays, route variants chosen on
  training data across collections (``benchmarks/corrections.py``).
* :func:`run_evidence_probe`: candidate evidence for the gate, each alone and
  what it adds nested (``benchmarks/evidence_probe.py``).
* :func:`run_stream`: learning cascades' settings replayed on a folder's traffic in
  random orders (``benchmarks/stream_variants.py``).
* :func:`run_cost`: the evaluator warm and cold and the router against the bare
  retrieval on a folder's natural test retrievals (``benchmarks/evaluator_micro.py``).
* :data:`BASELINES`: the simple predictors every gate is held against in a
  report; :func:`seed_design` is the first of them, the project's seed design.
* :func:`alternated` and :func:`percentiles`: timing in one run (cases called
  in rotated order, so load drift hits each alike; p50 / p99).
* :data:`SHARED_COLLECTIONS`: the folder names of the collections the committed
  reports were made from (``../shared/data``), in their reports' order.

Fitting the gate lives in :mod:`crag_heuristic.calibration`; its names that were
public here before it existed stay importable from here (:func:`fit_gate`,
:class:`GateExample`, :class:`CalibrationResult`, :func:`calibrate_self`,
:class:`QuerySimulator`, :class:`SimulatedQuery`, :func:`calibrate_on_grader`,
:func:`examples_from_grader`, :func:`fit_on_grader`, :class:`GraderCalibration`,
:class:`CalibrationWarning`).
"""

from ._bench.baselines import seed_design
from ._bench.correction_choice import COLLECTIONS as SHARED_COLLECTIONS
from ._bench.correction_choice import run_corrections
from ._bench.cost import run_cost
from ._bench.evidence_probe import run_evidence_probe
from ._bench.failure import BASELINES
from ._bench.harness import SECTIONS, headline, run_bench
from ._bench.loco import run_loco
from ._bench.pipeline import HarnessRetriever, Prepared, calibrate, folder_and_split, prepare
from ._bench.retrievals import chunks_of
from ._bench.self_variants import run_self_calibration
from ._bench.stream_section import run_stream
from ._bench.timing import alternated, percentiles
from .calibration import (
    CalibrationResult,
    CalibrationWarning,
    GateExample,
    GraderCalibration,
    QuerySimulator,
    SimulatedQuery,
    calibrate_on_grader,
    calibrate_self,
    examples_from_grader,
    fit_gate,
    fit_on_grader,
)

__all__ = [
    "BASELINES",
    "CalibrationResult",
    "CalibrationWarning",
    "GateExample",
    "GraderCalibration",
    "HarnessRetriever",
    "Prepared",
    "QuerySimulator",
    "SECTIONS",
    "SHARED_COLLECTIONS",
    "SimulatedQuery",
    "alternated",
    "calibrate",
    "calibrate_on_grader",
    "calibrate_self",
    "chunks_of",
    "examples_from_grader",
    "fit_gate",
    "fit_on_grader",
    "folder_and_split",
    "headline",
    "percentiles",
    "prepare",
    "run_bench",
    "run_corrections",
    "run_cost",
    "run_evidence_probe",
    "run_loco",
    "run_self_calibration",
    "run_stream",
    "seed_design",
]
