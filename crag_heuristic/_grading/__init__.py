"""The cascade's expensive graders and its escalation policy (see ``crag_heuristic.grading``)."""

from .escalation import CascadeReport, Escalation, cascaded_evaluation, rank_uncertain, select
from .graders import (
    AsyncGrader,
    CallableGrader,
    CrossEncoderGrader,
    Grader,
    acall_grader,
    call_grader,
    checked_grades,
    grader_fingerprint,
)

__all__ = [
    "AsyncGrader",
    "CallableGrader",
    "CascadeReport",
    "CrossEncoderGrader",
    "Escalation",
    "Grader",
    "acall_grader",
    "call_grader",
    "cascaded_evaluation",
    "checked_grades",
    "grader_fingerprint",
    "rank_uncertain",
    "select",
]
