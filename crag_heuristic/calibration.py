"""Fitting the gate, recalibrating it, and learning from a grader at run time.

``import crag_heuristic`` does not import this module; fitting imports scipy and
scikit-learn (the ``calibrate`` extra) when it starts.

The gate (``EvaluatorConfig.model``) has two logistic stages, one per chunk and
one per list, and verdict bands on their probabilities. This module fits them:

* from labelled retrievals: :func:`fit_gate` on :class:`GateExample` objects
  (the chunks of one retrieval and which are relevant), returning a
  :class:`CalibrationResult` (the profile and its cross-validated report);
  :func:`fit_chunk_stage` (a :class:`ChunkStage`) and :func:`evaluate_examples`
  let many fits on the same retrievals share their work;
* without labels, from the user's corpus and retriever: :func:`calibrate_self`
  (also top-level) simulates queries (:class:`QuerySimulator`,
  :class:`SimulatedQuery`, the :data:`STYLES`), runs them (:func:`simulate`, a
  :class:`Simulation`) and fits around the shipped gate (:func:`fit_simulation`);
* on the user's grader's labels: :func:`examples_from_grader` labels retrievals,
  :func:`calibrate_on_grader` refits the gate around the shipped one (the
  :data:`CANDIDATES`, each a :class:`Candidate`) and chooses a set cascade's band
  with a guarantee; :func:`fit_on_grader` makes one refit and a band per target
  (:class:`GraderCalibration`);
* a stage moved towards new labels: :func:`refit_stage` refits one fitted stage
  on new rows, starting from it and pulled towards it, with per-row sample
  weights (``1 / propensity`` for rows labelled with unequal probabilities);
* a cascade that learns from its grader while it serves: :class:`LearningCascade`
  (``CRAG(retriever, grader=..., learning=LearningCascade(...))``, ``crag-heuristic
  serve --grader ... --learn``) keeps every grader answer as a label in a grade log,
  refits the gate on them at checkpoints and certifies its escalation band again on
  the audited labels alone (anytime-valid: :class:`~crag_heuristic.grading.BettingCertificate`),
  never using a band without its certificate; its settings :class:`Learning`, its state
  :class:`LearningStatus`, a result's part :class:`LearningDecision`, a request's
  :class:`LearningSnapshot`; what it reads of a list :class:`ListView`, and
  :func:`fit_on_views` (a refit on lists a grader labelled, as the cascade refits);
* a stream of traffic replayed through a cascade (the ``stream`` benchmark section):
  :func:`replay`, :func:`replay_static`, :class:`StreamTrace`, :func:`stream_rows`;
* the fits underneath: :func:`fit_logistic` (L2-penalised logistic regression
  with sample weights, a prior centre and per-stratum intercepts; a
  :class:`LogisticFit`), :func:`fit_intercept`, :func:`shrink_towards` and
  :func:`weighted_standardizer`;
* the measure every choice is made by: :func:`auc` (ROC-AUC by ranks) and
  :func:`failure_auc` (a gate's AUC for telling failed retrievals from good ones).

A calibration whose profile cannot do what was asked issues a
:class:`CalibrationWarning`.
"""

from ._calibration.auc import auc, failure_auc
from ._calibration.gate import (
    DEFAULT_CHUNK_FEATURES,
    DEFAULT_SET_FEATURES,
    CalibrationResult,
    ChunkStage,
    GateExample,
    evaluate_examples,
    fit_chunk_stage,
    fit_gate,
)
from ._calibration.grader import (
    CANDIDATES,
    DEFAULT_MIN_REFIT,
    Candidate,
    GraderCalibration,
    calibrate_on_grader,
    examples_from_grader,
    fit_on_grader,
)
from ._calibration.learning import (
    LEARNED_FEATURES,
    Learning,
    LearningCascade,
    LearningDecision,
    LearningSnapshot,
    LearningStatus,
    ListView,
    fit_on_views,
)
from ._calibration.logistic import (
    LogisticFit,
    fit_intercept,
    fit_logistic,
    shrink_towards,
    weighted_standardizer,
)
from ._calibration.refit import DEFAULT_REFIT_C, refit_stage
from ._calibration.self_calibration import (
    DEFAULT_PRIOR_C,
    DEFAULT_SELF_QUERIES,
    DEFAULT_SELF_STYLES,
    Simulation,
    calibrate_self,
    fit_simulation,
    simulate,
)
from ._calibration.simulation import STYLES, QuerySimulator, SimulatedQuery
from ._calibration.stream import StreamTrace, replay, replay_static, stream_rows
from ._exceptions import CalibrationWarning

__all__ = [
    "CANDIDATES",
    "CalibrationResult",
    "CalibrationWarning",
    "Candidate",
    "ChunkStage",
    "DEFAULT_CHUNK_FEATURES",
    "DEFAULT_MIN_REFIT",
    "DEFAULT_PRIOR_C",
    "DEFAULT_REFIT_C",
    "DEFAULT_SELF_QUERIES",
    "DEFAULT_SELF_STYLES",
    "DEFAULT_SET_FEATURES",
    "GateExample",
    "GraderCalibration",
    "LEARNED_FEATURES",
    "Learning",
    "LearningCascade",
    "LearningDecision",
    "LearningSnapshot",
    "LearningStatus",
    "ListView",
    "LogisticFit",
    "QuerySimulator",
    "STYLES",
    "SimulatedQuery",
    "Simulation",
    "StreamTrace",
    "auc",
    "calibrate_on_grader",
    "calibrate_self",
    "evaluate_examples",
    "examples_from_grader",
    "failure_auc",
    "fit_chunk_stage",
    "fit_gate",
    "fit_intercept",
    "fit_logistic",
    "fit_on_grader",
    "fit_on_views",
    "fit_simulation",
    "refit_stage",
    "replay",
    "replay_static",
    "shrink_towards",
    "simulate",
    "stream_rows",
    "weighted_standardizer",
]
