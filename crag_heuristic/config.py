"""Configuration: the evaluator's (with its nested sections) and the router's.

Every class is a frozen, keyword-only, validated value object; a bad value
raises :class:`~crag_heuristic.ConfigError` naming the field. The top level
re-exports :class:`EvaluatorConfig`, :class:`RouterConfig`,
:data:`DEFAULT_PROFILE`, :func:`available_profiles` and :func:`load_config`;
the sections (:class:`SignalWeights`, :class:`Thresholds`, ...) and the
fitted model's parts (:class:`ModelConfig`, :class:`LogisticStage`,
:class:`ModelTerm`) and a set cascade's :class:`Guarantee` live here.
"""

from ._config import (
    DEFAULT_PROFILE,
    EVIDENCE_GROUPS,
    CoherenceConfig,
    EvaluatorConfig,
    FallbackModel,
    Guarantee,
    KeywordConfig,
    LengthConfig,
    LogisticStage,
    ModelConfig,
    ModelTerm,
    RefineConfig,
    RouterConfig,
    SignalWeights,
    Thresholds,
    available_profiles,
    load_config,
)

__all__ = [
    "CoherenceConfig",
    "DEFAULT_PROFILE",
    "EVIDENCE_GROUPS",
    "EvaluatorConfig",
    "FallbackModel",
    "Guarantee",
    "KeywordConfig",
    "LengthConfig",
    "LogisticStage",
    "ModelConfig",
    "ModelTerm",
    "RefineConfig",
    "RouterConfig",
    "SignalWeights",
    "Thresholds",
    "available_profiles",
    "load_config",
]
