"""The cascade: the cheap gate decides where it is sure, an expensive grader
(a cross-encoder, an LLM prompt) settles the chunks it is unsure of.

* :class:`Grader` / :class:`AsyncGrader`: ``grade(query, chunks)`` ->
  P(relevant) per chunk in [0, 1], with a ``fingerprint`` for cache keys;
* :class:`CallableGrader` (any ``(query, texts) -> scores`` callable, sync or
  async) and :class:`CrossEncoderGrader` (a sentence-transformers
  ``CrossEncoder``);
* :class:`OpenAIGrader`: an LLM behind any OpenAI-compatible chat-completions
  API (OpenAI, vLLM, Ollama, llama.cpp, LM Studio), one request per list, a
  yes / no or a 0-1 :class:`Prompt`, typed failures, retries, a concurrency
  limit and its cost (:class:`GraderUsage`) on the cascade's report; the
  ``llm`` extra (httpx), imported on first use;
* :class:`RecordedGrader`: recorded labels (``llm_judgments/*.tsv``) as a grader;
* :class:`Escalation`: which chunks go to the grader (the uncertain band), how
  many (the budget), how long (the timeout), whether the set verdict is
  recomputed;
* :class:`SetEscalation`: the same for whole lists: when the set probability
  is uncertain, the grader grades the list and the set verdict is recomputed
  from its answers;
* :func:`guaranteed_band`: a set cascade's band chosen on the grader's labels
  by Learn-then-Test, with what it guarantees (a
  :class:`~crag_heuristic.config.Guarantee`: failure recall or agreement with
  the grader at a confidence); too few labels are refused
  (:class:`InsufficientLabelsError`); ``SetEscalation.guaranteed(...)`` uses it;
* :class:`BettingCertificate`: a band certified as labels arrive, read after every
  one (Learn-then-Test with anytime-valid tests by betting): what a learning cascade
  (:mod:`crag_heuristic.calibration`) certifies its bands with;
* :func:`label_lists`: a grader's labels of retrieved lists for a calibration,
  each kept in a grade log as it arrives and reused by the next run, a failed
  list skipped and counted (:class:`Labelling`, :class:`LabelFailure`);
  :func:`label_budget`: how many labelled lists a band with a guarantee needs,
  from the gate's probabilities, before any is paid for (:class:`LabelBudget`);
* :class:`GuaranteeMonitor`: checks a guarantee at run time on an audit sample
  (``SetEscalation(audit=...)``) and logs the grader's answers to a
  :class:`JsonlGradeLog` or :class:`RedisGradeLog`;
* :class:`Cascade`: the gate plus a grader without the router
  (``evaluate`` / ``aevaluate`` -> :class:`CascadeResult`); with the router,
  ``CRAG(retriever, grader=..., escalation=...)`` and the result's
  ``cascade`` (a :class:`CascadeReport`) and ``grader_error``.

The graders and the policies live in ``crag_heuristic._grading``; ``Cascade`` is
a second driver of the router's decision flow (it runs the flow's escalation
step, with the router's context, cache calls and failures), so it lives beside
the router's driver in ``crag_heuristic._router.cascade``: the router imports
the grading, never the other way round.

A grader that raises, times out, or answers NaN, the wrong number of grades
or values outside [0, 1] never fails a call: the gate's verdict stands and
the failure is a :class:`GraderError` (:class:`GraderTimeout`,
:class:`GraderOutputError`, :class:`GraderHTTPError`,
:class:`GraderConnectionError`) named on the result. A grader may report what
a call cost by returning a :class:`Graded` (the grades with a
:class:`GraderUsage`); the report's ``usage`` shows it.
"""

import importlib
from typing import TYPE_CHECKING, Any

from ._exceptions import (
    GraderConnectionError,
    GraderError,
    GraderHTTPError,
    GraderOutputError,
    GraderTimeout,
    InsufficientLabelsError,
)
from ._grading.betting import BettingCertificate, BettingStatus
from ._grading.escalation import CascadeReport, Escalation
from ._grading.graders import CallableGrader, CrossEncoderGrader
from ._grading.guarantee import binomial_cdf, binomial_lower, binomial_upper, guaranteed_band
from ._grading.labelling import LabelBudget, LabelFailure, Labelling, label_budget, label_lists
from ._grading.lists import SetEscalation
from ._grading.monitor import (
    GradeLog,
    GuaranteeMonitor,
    JsonlGradeLog,
    MonitorStatus,
    RedisGradeLog,
    audited_labels,
)
from ._grading.prompts import Prompt
from ._grading.recorded import RecordedGrader
from ._protocols import AsyncGrader, Grader
from ._router.cascade import Cascade, CascadeResult
from ._usage import Graded, GraderUsage

if TYPE_CHECKING:  # imported on first use (the ``llm`` extra: httpx)
    from ._grading.llm import OpenAIGrader

__all__ = [
    "AsyncGrader",
    "BettingCertificate",
    "BettingStatus",
    "CallableGrader",
    "Cascade",
    "CascadeReport",
    "CascadeResult",
    "CrossEncoderGrader",
    "Escalation",
    "GradeLog",
    "Graded",
    "Grader",
    "GraderConnectionError",
    "GraderError",
    "GraderHTTPError",
    "GraderOutputError",
    "GraderTimeout",
    "GraderUsage",
    "GuaranteeMonitor",
    "InsufficientLabelsError",
    "JsonlGradeLog",
    "LabelBudget",
    "LabelFailure",
    "Labelling",
    "MonitorStatus",
    "OpenAIGrader",
    "Prompt",
    "RecordedGrader",
    "RedisGradeLog",
    "SetEscalation",
    "audited_labels",
    "binomial_cdf",
    "binomial_lower",
    "binomial_upper",
    "guaranteed_band",
    "label_budget",
    "label_lists",
]

# Names whose module needs an extra: imported on first use (the module's import names the extra).
_LAZY = {"OpenAIGrader": "._grading.llm"}


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def __getattr__(name: str) -> Any:
    """A name whose extra is imported now.

    Raises:
        MissingDependencyError: its extra (``llm``) is not installed.
    """
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'crag_heuristic.grading' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, "crag_heuristic"), name)
    globals()[name] = value
    return value
