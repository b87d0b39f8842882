"""The benchmark harness: what a user runs on a folder in BEIR layout (the ``bench`` extra).

``import crag_heuristic`` does not import this module: it pulls in the
harness and, when called, scikit-learn.

* :func:`run_bench`: every benchmark on one BEIR-layout folder (its
  :data:`SECTIONS`), written as a report (``crag-heuristic bench``);
  :func:`headline` reads its headline numbers.
* :func:`calibrate`: fit a gate profile on one split of such a folder, or on
  several (``crag-heuristic calibrate``; each folder ``DIR`` or ``DIR:SPLIT``,
  :func:`folder_and_split`).
* :func:`run_stream`: learning cascades' settings replayed on a folder's traffic in
  random orders (``benchmarks/stream_variants.py``).
* :func:`run_cost`: the evaluator warm and cold and the router against the bare
  retrieval on a folder's natural test retrievals (``benchmarks/evaluator_micro.py``).
* :func:`paired_bootstrap`: a 95 % interval for the difference of two failure AUCs on
  the same lists, the queries resampled (a query's lists together).
* :data:`BASELINES`: the simple predictors every gate is held against in a
  report; :func:`seed_design` is the first of them, the project's seed design.
* :func:`alternated` and :func:`percentiles`: timing in one run (cases called
  in rotated order, so load drift hits each alike; p50 / p99).
* :data:`SHARED_COLLECTIONS`: the folder names of the collections the committed
  reports were made from (``../shared/data``), in their reports' order.

The building blocks of the reports, for benchmarks of one's own (the model-selection
research in the repository's ``research/`` is built from them):

* a folder: :func:`prepare` loads one (a :class:`Prepared`: its documents and queries,
  dense index, corpus statistics); :class:`HarnessRetriever` searches it by query text
  and :class:`EncodingRetriever` encoding each query as a user's call would;
  :func:`chunks_of` makes its hits chunks; :func:`labels_for` reads a split's
  judgments (or an LLM's), :func:`retrievals_for` makes the labelled natural and
  leave-relevant-out retrievals of the failure benchmark; :class:`SplitRun` is a
  split's queries with a dense and a BM25 retriever;
* the failure benchmark's measures: :func:`baseline_scores` (every one of the
  :data:`BASELINES`, :func:`top1` the first), :func:`llm_gate_scores` (each LLM
  label set used as a gate), :func:`natural_auc` (none below
  :data:`MIN_NATURAL_FAILURES` failed natural retrievals), :func:`verdict_table`;
* :func:`set_cascade_section`: the set-level cascade's curves for a gate's scores;
* :func:`ranking_metrics`: nDCG@10 and Recall@100 per query; :data:`BARE` and
  :data:`HYBRID` name the reference runs of the reports.

Fitting the gate lives in :mod:`crag_heuristic.calibration`; its names that were
public here before it existed stay importable from here (:func:`fit_gate`,
:class:`GateExample`, :class:`CalibrationResult`, :func:`calibrate_self`,
:class:`QuerySimulator`, :class:`SimulatedQuery`, :func:`calibrate_on_grader`,
:func:`examples_from_grader`, :func:`fit_on_grader`, :class:`GraderCalibration`,
:class:`CalibrationWarning`).
"""

from ._bench.baselines import seed_design, top1
from ._bench.bootstrap import paired_bootstrap
from ._bench.cost import EncodingRetriever, run_cost
from ._bench.data import SHARED_COLLECTIONS
from ._bench.failure import (
    BASELINES,
    MIN_NATURAL_FAILURES,
    baseline_scores,
    llm_gate_scores,
    natural_auc,
    verdict_table,
)
from ._bench.harness import SECTIONS, headline, run_bench
from ._bench.pipeline import (
    HarnessRetriever,
    Prepared,
    SplitRun,
    calibrate,
    folder_and_split,
    labels_for,
    prepare,
    retrievals_for,
)
from ._bench.quality import BARE, HYBRID, ranking_metrics
from ._bench.retrievals import chunks_of
from ._bench.set_cascade import set_cascade_section
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
    "BARE",
    "BASELINES",
    "CalibrationResult",
    "CalibrationWarning",
    "EncodingRetriever",
    "GateExample",
    "GraderCalibration",
    "HYBRID",
    "HarnessRetriever",
    "MIN_NATURAL_FAILURES",
    "Prepared",
    "QuerySimulator",
    "SECTIONS",
    "SHARED_COLLECTIONS",
    "SimulatedQuery",
    "SplitRun",
    "alternated",
    "baseline_scores",
    "calibrate",
    "calibrate_on_grader",
    "calibrate_self",
    "chunks_of",
    "examples_from_grader",
    "fit_gate",
    "fit_on_grader",
    "folder_and_split",
    "headline",
    "labels_for",
    "llm_gate_scores",
    "natural_auc",
    "paired_bootstrap",
    "percentiles",
    "prepare",
    "ranking_metrics",
    "retrievals_for",
    "run_bench",
    "run_cost",
    "run_stream",
    "seed_design",
    "set_cascade_section",
    "top1",
    "verdict_table",
]
