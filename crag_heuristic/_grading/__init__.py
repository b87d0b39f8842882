"""The cascade's expensive graders and its escalation policy (see ``crag_heuristic.grading``)."""

from .escalation import (
    CascadeReport,
    Escalation,
    Selection,
    cascaded_evaluation,
    rank_uncertain,
    select,
)
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
from .lists import SetEscalation, escalated_set_evaluation, escalation_policy, select_list

__all__ = [
    "AsyncGrader",
    "CallableGrader",
    "CascadeReport",
    "CrossEncoderGrader",
    "Escalation",
    "Grader",
    "Selection",
    "SetEscalation",
    "acall_grader",
    "call_grader",
    "cascaded_evaluation",
    "checked_grades",
    "escalated_set_evaluation",
    "escalation_policy",
    "grader_fingerprint",
    "rank_uncertain",
    "select",
    "select_list",
]
