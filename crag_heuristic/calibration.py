"""Calibration at run time: a cascade that learns from its grader.

* :class:`LearningCascade`: give it to the router (``CRAG(retriever, grader=...,
  learning=LearningCascade(...))``) or to ``crag-heuristic serve --grader ... --learn``:
  every grader answer is kept as a label in a grade log, the gate is refitted on them at
  checkpoints, and the escalation band is certified again on the audited labels alone
  (anytime-valid, :class:`~crag_heuristic.grading.BettingCertificate`); a band is never
  used without its certificate.
* :class:`Learning`: its settings (the guarantee, exploration, audit share, refits).
* :class:`LearningStatus`: where it stands (labels, refits, the band in force and its
  guarantee); :class:`LearningDecision`: a result's part (``CRAGResult.learning``);
  :class:`LearningSnapshot`: the gate and policy of one request.
* :class:`ListView`, :func:`fit_on_views`: what it reads of a list, and a refit on
  lists a grader labelled.
* :func:`replay`, :func:`replay_static`, :class:`StreamTrace`, :func:`stream_rows`:
  a stream of traffic replayed through a cascade (the ``stream`` benchmark section).

``import crag_heuristic`` does not import this module; a learning cascade needs the
``calibrate`` extra (scikit-learn, SciPy) for its refits.
"""

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
from ._calibration.stream import StreamTrace, replay, replay_static, stream_rows

__all__ = [
    "LEARNED_FEATURES",
    "Learning",
    "LearningCascade",
    "LearningDecision",
    "LearningSnapshot",
    "LearningStatus",
    "ListView",
    "StreamTrace",
    "fit_on_views",
    "replay",
    "replay_static",
    "stream_rows",
]
