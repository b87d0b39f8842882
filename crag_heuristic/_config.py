"""Evaluator configuration: frozen, keyword-only, validated value objects.

A configuration is built once and never changes; a change is a new object
(:meth:`EvaluatorConfig.replace`). Every field is checked on construction and
a bad value raises :class:`~crag_heuristic.ConfigError` naming the field by
its dotted path (``"weights.keyword_overlap"``) and the value. Nothing here
reads the environment.

One default, stated once: :data:`DEFAULT_PROFILE` names it, and
``Evaluator()``, ``EvaluatorConfig()``, ``load_config(None)`` and
``EvaluatorConfig.from_dict({})`` are all that profile. Anything a caller
leaves out (a keyword of ``EvaluatorConfig(...)``, a key of a dict or of a
file without a ``profile`` key) comes from the default profile; a ``profile``
key names another base. TOML has no null, so a TOML file for a linear gate
(``model`` none) says ``profile = "synapse"``.

Named profiles:

``minilm-multi`` (the default, :data:`DEFAULT_PROFILE`)
    a two-stage logistic gate fitted by ``crag-heuristic calibrate`` on seven
    collections at once, each weighing the same (SciFact's train split and the
    test splits of llmjudge, NFCorpus, Cranfield, CACM, NPL and Medline:
    biomedical claims, web passages, nutrition questions, aeronautics,
    computing, electrical engineering, medicine), all-MiniLM-L6-v2 cosines,
    k = 10, natural retrievals and leave-relevant-out probes; its evidence was
    chosen by leave-one-collection-out. Its fast-path band was chosen for a
    precision of 0.90 on natural retrievals. It carries fallback gates for
    inputs without similarities or corpus statistics. For another embedding
    model, self-calibrate it on your corpus (``crag-heuristic calibrate --self``).
``minilm-scifact``
    the same gate fitted on the SciFact train split alone (809 claims).
``synapse``
    the linear gate: weights 0.30 keyword overlap / 0.40 semantic coherence /
    0.15 length adequacy / 0.15 source diversity; RELEVANT above 0.75, PARTIAL
    above 0.50 (the defaults of the section classes).
``crag``
    the same signals with the bands of the CRAG paper (Yan et al., 2024):
    CORRECT above 0.7, AMBIGUOUS above 0.3, INCORRECT otherwise.

More profiles are TOML files in ``crag_heuristic/profiles/`` (for instance
ones fitted by ``crag-heuristic calibrate``); :func:`available_profiles`
lists them all. A profile is a complete definition: what a built-in or
bundled profile leaves out takes the bare values (no model, chunk bands =
set bands, each section's own defaults), never the default profile's, so the
default profile does not depend on itself. A configuration loads from a dict,
a TOML, JSON or YAML file, or a profile name, and any field can be
overridden per call.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import json
import math
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from ._checks import MAX_K, as_real
from ._evidence import CHUNK_FEATURES, SET_FEATURES
from ._exceptions import ConfigError
from ._optional import requires

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


_WEIGHT_SUM_TOLERANCE = 1e-6
DEFAULT_PROFILE = "minilm-multi"


def _check_number(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    integer: bool = False,
) -> None:
    """Raise ConfigError unless ``value`` is a finite number within the bounds."""
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int if integer else int | float):
        raise ConfigError(name, value, f"must be {kind}")
    if not math.isfinite(as_real(value) or 0.0):  # an integer beyond float is inf there
        raise ConfigError(name, value, "must be finite (not NaN, inf or beyond the float range)")
    if low is not None and (value <= low if low_open else value < low):
        raise ConfigError(name, value, f"must be {'>' if low_open else '>='} {low}")
    if high is not None and (value >= high if high_open else value > high):
        raise ConfigError(name, value, f"must be {'<' if high_open else '<='} {high}")


def checked_band(band: Any) -> tuple[float, float] | None:
    """A policy's ``band``: ``(low, high)`` within [0, 1], ``low <= high``, as floats
    (a list is taken as a pair); ``None`` stays ``None``.

    Raises:
        ConfigError: anything else.
    """
    if band is None:
        return None
    if not isinstance(band, tuple | list) or len(band) != 2:
        raise ConfigError("band", band, "must be (low, high) or None")
    _check_number("band.low", band[0], low=0.0, high=1.0)
    _check_number("band.high", band[1], low=0.0, high=1.0)
    if band[0] > band[1]:
        raise ConfigError("band", band, "low must be <= high")
    return float(band[0]), float(band[1])


@dataclass(frozen=True, kw_only=True, slots=True)
class SignalWeights:
    """How much each signal counts in the weighted score.

    Weights are non-negative and sum to 1, so the score stays in [0, 1].
    """

    keyword_overlap: float = 0.30
    semantic_coherence: float = 0.40
    length_adequacy: float = 0.15
    source_diversity: float = 0.15

    def __post_init__(self) -> None:
        for name in _SIGNAL_NAMES:
            _check_number(name, getattr(self, name), low=0.0)
        total = sum(getattr(self, name) for name in _SIGNAL_NAMES)
        if abs(total - 1.0) > _WEIGHT_SUM_TOLERANCE:
            raise ConfigError("weights", self.as_dict(), f"must sum to 1 (they sum to {total:.6g})")

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in _SIGNAL_NAMES}


_SIGNAL_NAMES = ("keyword_overlap", "semantic_coherence", "length_adequacy", "source_diversity")


@dataclass(frozen=True, kw_only=True, slots=True)
class Thresholds:
    """Verdict bands: RELEVANT if score > ``relevant``, PARTIAL if > ``partial``.

    Both lie in [0, 1] with ``partial <= relevant``.
    """

    relevant: float = 0.75
    partial: float = 0.50

    def __post_init__(self) -> None:
        _check_number("relevant", self.relevant, low=0.0, high=1.0)
        _check_number("partial", self.partial, low=0.0, high=1.0)
        if self.partial > self.relevant:
            raise ConfigError("partial", self.partial, f"must be <= relevant ({self.relevant})")


@dataclass(frozen=True, kw_only=True, slots=True)
class KeywordConfig:
    """Keyword overlap: how query terms are weighted and pooled.

    Attributes:
        use_idf: weight query terms by inverse document frequency when corpus
            statistics are given (uniform weights otherwise).
        aggregate: the set-level value: ``"best"`` (the best single chunk's
            coverage: one chunk must hold the evidence) or ``"pooled"`` (the
            coverage of all chunks' terms together).
        bm25_k1, bm25_b: the BM25 parameters of the ``bm25`` and
            ``lexical_contrast`` features (see ``crag_heuristic._evidence``).
    """

    use_idf: bool = True
    aggregate: Literal["best", "pooled"] = "best"
    bm25_k1: float = 1.5
    bm25_b: float = 0.75

    def __post_init__(self) -> None:
        if not isinstance(self.use_idf, bool):
            raise ConfigError("use_idf", self.use_idf, "must be true or false")
        if self.aggregate not in ("best", "pooled"):
            raise ConfigError("aggregate", self.aggregate, "must be 'best' or 'pooled'")
        _check_number("bm25_k1", self.bm25_k1, low=0.0)
        _check_number("bm25_b", self.bm25_b, low=0.0, high=1.0)


@dataclass(frozen=True, kw_only=True, slots=True)
class CoherenceConfig:
    """Semantic coherence: from the retriever's scores mapped to [0, 1].

    With ``m`` the mean, ``t`` the top, ``g`` the head-tail gap and ``v`` the
    variance of the similarities::

        coherence = (mean*m + top*t + gap*g) / (mean + top + gap) * (1 - min(v, variance_cap))

    The defaults (mean 1, top 0, gap 0, cap 0.3) give ``m * (1 - min(v, 0.3))``:
    high mean and low dispersion.

    Attributes:
        mean, top, gap: non-negative weights of the three levels (not all 0).
        variance_cap: the most the variance can take off (in [0, 1]).
        cosine_floor, cosine_ceiling: the cosine band mapped onto [0, 1].
        bm25_saturation: the BM25 score that maps to 0.5.
    """

    mean: float = 1.0
    top: float = 0.0
    gap: float = 0.0
    variance_cap: float = 0.3
    cosine_floor: float = 0.0
    cosine_ceiling: float = 1.0
    bm25_saturation: float = 10.0

    def __post_init__(self) -> None:
        for name in ("mean", "top", "gap"):
            _check_number(name, getattr(self, name), low=0.0)
        if self.mean + self.top + self.gap <= 0:
            raise ConfigError("mean", self.mean, "mean, top and gap cannot all be 0")
        _check_number("variance_cap", self.variance_cap, low=0.0, high=1.0)
        _check_number("cosine_floor", self.cosine_floor, low=-1.0, high=1.0)
        _check_number("cosine_ceiling", self.cosine_ceiling, low=-1.0, high=1.0)
        if self.cosine_ceiling <= self.cosine_floor:
            raise ConfigError(
                "cosine_ceiling",
                self.cosine_ceiling,
                f"must be > cosine_floor ({self.cosine_floor})",
            )
        _check_number("bm25_saturation", self.bm25_saturation, low=0.0, low_open=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class LengthConfig:
    """Length adequacy: ``min(1, n_words * tokens_per_word / min_tokens)`` per chunk."""

    min_tokens: int = 100
    tokens_per_word: float = 1.3

    def __post_init__(self) -> None:
        _check_number("min_tokens", self.min_tokens, low=1, integer=True)
        _check_number("tokens_per_word", self.tokens_per_word, low=0.0, low_open=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class RefineConfig:
    """Knowledge refinement: which sentence strips to keep.

    Attributes:
        strip_threshold: keep strips whose score is at least this (in [0, 1]).
        token_budget: the most (estimated) tokens the refined text may hold.
    """

    strip_threshold: float = 0.2
    token_budget: int = 512

    def __post_init__(self) -> None:
        _check_number("strip_threshold", self.strip_threshold, low=0.0, high=1.0)
        _check_number("token_budget", self.token_budget, low=1, integer=True)


def _known_features() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The chunk and set feature names (``crag_heuristic._evidence`` defines each)."""
    return CHUNK_FEATURES, SET_FEATURES


EVIDENCE_GROUPS = ("corpus_stats", "sentences", "similarity")
"""What an input may lack: ``similarity`` (no chunk has a score with an absolute
meaning), ``corpus_stats`` (no document frequencies: IDF weights are uniform) and
``sentences`` (no chunk has a ``sentence_score``: opt-in evidence, missed only by a
gate that reads it)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelTerm:
    """One standardised term of a logistic stage: ``weight * (x - mean) / scale``."""

    feature: str
    weight: float
    mean: float = 0.0
    scale: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.feature, str):
            raise ConfigError("feature", self.feature, "must be a feature name")
        _check_number("weight", self.weight)
        _check_number("mean", self.mean)
        _check_number("scale", self.scale, low=0.0, low_open=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class LogisticStage:
    """``p = 1 / (1 + exp(-(intercept + sum of terms)))``."""

    intercept: float = 0.0
    terms: tuple[ModelTerm, ...] = ()

    def __post_init__(self) -> None:
        _check_number("intercept", self.intercept)
        if not isinstance(self.terms, tuple) or not all(
            isinstance(t, ModelTerm) for t in self.terms
        ):
            raise ConfigError("terms", self.terms, "must be a list of {feature, weight, ...}")


def _check_stages(chunk: Any, set_: Any) -> None:
    chunk_known, set_known = _known_features()
    for stage_name, stage, known in (("chunk", chunk, chunk_known), ("set", set_, set_known)):
        if not isinstance(stage, LogisticStage):
            raise ConfigError(stage_name, stage, "must be a logistic stage")
        for term in stage.terms:
            if term.feature not in known:
                raise ConfigError(
                    f"{stage_name}.terms",
                    term.feature,
                    f"unknown {stage_name} feature; known: {', '.join(known)}",
                )


@dataclass(frozen=True, kw_only=True, slots=True)
class FallbackModel:
    """A two-stage gate for inputs that lack some evidence.

    A model fitted with similarities and corpus statistics cannot simply drop
    them: its other weights assumed them. ``crag-heuristic calibrate`` also
    fits the gate without each group of evidence, and the evaluator uses the
    fallback whose ``missing`` matches what the input lacks.

    Attributes:
        missing: the evidence groups this model does without (see
            :data:`EVIDENCE_GROUPS`), e.g. ``["similarity"]``.
        chunk, set: its two stages.
        thresholds, chunk_thresholds: its own bands (``None``: the profile's).
    """

    missing: tuple[str, ...]
    chunk: LogisticStage = field(default_factory=LogisticStage)
    set: LogisticStage = field(default_factory=LogisticStage)
    thresholds: Thresholds | None = None
    chunk_thresholds: Thresholds | None = None

    def __post_init__(self) -> None:
        missing: Any = self.missing  # typed a tuple; a list from a parsed file is accepted
        if isinstance(missing, str) or not isinstance(missing, list | tuple) or not missing:
            raise ConfigError("missing", missing, "must be a non-empty list of evidence groups")
        for group in missing:
            if group not in EVIDENCE_GROUPS:
                raise ConfigError(
                    "missing", group, f"unknown evidence group; known: {', '.join(EVIDENCE_GROUPS)}"
                )
        object.__setattr__(self, "missing", tuple(sorted(set(missing))))
        _check_stages(self.chunk, self.set)
        for name in ("thresholds", "chunk_thresholds"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Thresholds):
                raise ConfigError(name, value, "must be a Thresholds section")


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelConfig:
    """A fitted two-stage logistic gate (see ``crag-heuristic calibrate``).

    ``chunk`` turns each chunk's features into the probability that the chunk
    is relevant (the per-document grading of CRAG); ``set`` turns set
    features, among them ``best_chunk`` (the highest chunk probability), into
    the probability that the retrieval holds an answer. The verdict bands then
    apply to these probabilities.

    Attributes:
        chunk, set: the two stages.
        fitted_on: where the coefficients come from (free text).
        fallbacks: gates for inputs without some evidence (see
            :class:`FallbackModel`); without a matching one, missing features
            sit at their training mean and the evaluation says so.
    """

    chunk: LogisticStage = field(default_factory=LogisticStage)
    set: LogisticStage = field(default_factory=LogisticStage)
    fitted_on: str = ""
    fallbacks: tuple[FallbackModel, ...] = ()

    def __post_init__(self) -> None:
        _check_stages(self.chunk, self.set)
        if not isinstance(self.fitted_on, str):
            raise ConfigError("fitted_on", self.fitted_on, "must be a string")
        if not isinstance(self.fallbacks, tuple) or not all(
            isinstance(f, FallbackModel) for f in self.fallbacks
        ):
            raise ConfigError("fallbacks", self.fallbacks, "must be a list of fallback models")
        seen = [f.missing for f in self.fallbacks]
        if len(set(seen)) != len(seen):
            raise ConfigError("fallbacks", seen, "two fallbacks lack the same evidence")

    def for_missing(self, missing: frozenset[str]) -> FallbackModel | None:
        """The fallback fitted without exactly ``missing``, if there is one."""
        key = tuple(sorted(missing))
        return next((f for f in self.fallbacks if f.missing == key), None)


@dataclass(frozen=True, kw_only=True, slots=True)
class Guarantee:
    """A set cascade's band with what it guarantees, as Learn-then-Test chose it
    (:func:`crag_heuristic.grading.guaranteed_band`, which documents the test).

    Attributes:
        target: ``"recall"`` (at most ``eps`` of the failed lists pass without the
            grader) or ``"agreement"`` (the gate's own decisions disagree with the
            grader's on at most ``eps`` of the lists).
        eps, delta: the bound and the probability it may fail: ``P(risk > eps) <= delta``.
        band: ``(low, high)``: lists whose set probability lies within it
            (inclusive) go to the grader.
        n: the labelled lists it was chosen on; ``counted``: those the risk
            counts over (the failed ones for ``recall``).
        violations, risk: the violations at ``band`` among them and their share.
        risk_bound: the exact (Clopper-Pearson) upper bound on the risk at
            ``1 - delta``.
        escalated: the share of the labelled lists inside ``band``.
        centre: the agreement path's centre (``None`` for ``recall``).
        window: the guarantee is on the realised risk over that many future lists
            counted (``None``: on the traffic's risk).
        grader: the fingerprint of the grader whose labels chose it.
        labels: how the labelled lists were made (free text).
    """

    target: str
    eps: float
    delta: float
    band: tuple[float, float]
    n: int
    counted: int
    violations: int
    risk: float
    risk_bound: float
    escalated: float
    centre: float | None = None
    window: int | None = None
    grader: str = ""
    labels: str = ""

    def __post_init__(self) -> None:
        if self.target not in ("recall", "agreement"):
            raise ConfigError("target", self.target, "must be 'recall' or 'agreement'")
        for name in ("eps", "delta"):
            _check_number(
                name, getattr(self, name), low=0.0, high=1.0, low_open=True, high_open=True
            )
        band = checked_band(self.band)
        if band is None:
            raise ConfigError("band", band, "must be (low, high)")
        object.__setattr__(self, "band", band)
        for name in ("n", "counted", "violations"):
            _check_number(name, getattr(self, name), low=0, integer=True)
        for name in ("risk", "risk_bound", "escalated"):
            _check_number(name, getattr(self, name), low=0.0, high=1.0)
        if self.centre is not None:
            _check_number("centre", self.centre, low=0.0, high=1.0)
        if self.window is not None:
            _check_number("window", self.window, low=1, integer=True)
        for name in ("grader", "labels"):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(name, getattr(self, name), "must be a string")

    @property
    def saved(self) -> float:
        """The share of the labelled lists the gate decided alone."""
        return 1.0 - self.escalated

    def describe(self) -> str:
        """One sentence: what is guaranteed, at what confidence, from how many labels."""
        what = (
            f"at most {self.eps:g} of failed lists pass without the grader"
            if self.target == "recall"
            else f"the gate's own decisions disagree with the grader's on at most {self.eps:g} "
            "of lists"
        )
        if self.window is not None:
            what += f" over the next {self.window} lists counted"
        return (
            f"{what}, with probability >= {1 - self.delta:g} (Learn-then-Test, exact binomial "
            f"bounds, {self.n} labelled lists, {self.counted} counted); band "
            f"[{self.band[0]:.4f}, {self.band[1]:.4f}]; expected share escalated "
            f"{self.escalated:.3f}"
        )


def _from_default(name: str) -> Callable[[], Any]:
    """A field's default factory: the default profile's value of ``name``."""
    return functools.partial(_default_value, name)


def _default_value(name: str) -> Any:
    return getattr(_default_config(DEFAULT_PROFILE), name)


@functools.lru_cache(maxsize=4)
def _default_config(profile: str) -> EvaluatorConfig:
    """The default profile, built once per name (configurations are immutable)."""
    return EvaluatorConfig.from_profile(profile)


@dataclass(frozen=True, kw_only=True, slots=True)
class EvaluatorConfig:
    """Everything the evaluator and refinement need. Frozen; keyword-only.

    Attributes:
        name: a label carried into each :class:`~crag_heuristic.Evaluation`.
        weights: signal weights (non-negative, summing to 1).
        thresholds: the verdict bands for the whole set.
        chunk_thresholds: the bands for single chunks (default: ``thresholds``).
        keyword, coherence, length, refine: per-signal settings.
        model: a fitted logistic gate; without one the score is the weighted
            sum of the four signals.
        description: free text (what a profile is for, what it was fitted on).
        guarantee: a set cascade's band chosen on a grader's labels, with what it
            guarantees (:class:`Guarantee`; ``crag-heuristic calibrate --grader
            ... --guarantee ...`` writes it); it does not change an evaluation.

    ``EvaluatorConfig()`` is the default profile (:data:`DEFAULT_PROFILE`);
    every field not given takes the default profile's value. Build one with
    keywords, from a profile (:meth:`from_profile`), from a dict
    (:meth:`from_dict`) or from a file (:meth:`from_file`). With a ``model``
    the score is the model's and ``weights`` are not used: for a linear gate
    start from ``EvaluatorConfig.from_profile("synapse")``.
    """

    name: str = field(default_factory=_from_default("name"))
    weights: SignalWeights = field(default_factory=_from_default("weights"))
    thresholds: Thresholds = field(default_factory=_from_default("thresholds"))
    chunk_thresholds: Thresholds | None = field(default_factory=_from_default("chunk_thresholds"))
    keyword: KeywordConfig = field(default_factory=_from_default("keyword"))
    coherence: CoherenceConfig = field(default_factory=_from_default("coherence"))
    length: LengthConfig = field(default_factory=_from_default("length"))
    refine: RefineConfig = field(default_factory=_from_default("refine"))
    model: ModelConfig | None = field(default_factory=_from_default("model"))
    description: str = field(default_factory=_from_default("description"))
    guarantee: Guarantee | None = field(default_factory=_from_default("guarantee"))
    # the fingerprint, made on first use (a digest of every setting costs more than an
    # evaluation): not a setting, so neither compared, hashed, shown nor exported
    _digest: list[str] = field(
        default_factory=list, init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError("name", self.name, "must be a non-empty string")
        if not isinstance(self.description, str):
            raise ConfigError("description", self.description, "must be a string")
        for name, cls in _SECTIONS.items():
            value = getattr(self, name)
            optional = name in ("chunk_thresholds", "model", "guarantee")
            if not isinstance(value, cls) and not (optional and value is None):
                raise ConfigError(name, value, f"must be a {cls.__name__}")

    @property
    def effective_chunk_thresholds(self) -> Thresholds:
        """``chunk_thresholds`` if set, else ``thresholds``."""
        return self.chunk_thresholds or self.thresholds

    # -- building -------------------------------------------------------------------------

    @classmethod
    def from_profile(cls, name: str) -> EvaluatorConfig:
        """A named profile: ``synapse``, ``crag``, or a bundled profile file.

        Raises:
            ConfigError: for an unknown name (the message lists the known ones).
        """
        if not isinstance(name, str):
            raise ConfigError("profile", name, "must be a string")
        if name in _BUILTIN_PROFILES:
            return _definition(name, _BUILTIN_PROFILES[name])
        shipped = _shipped(name) if _plain_name(name) else None
        if shipped is not None:
            return shipped
        bundled = _bundled_profile_files()
        if name in bundled:
            return _read_bundled(str(bundled[name]))
        known = ", ".join(available_profiles())
        raise ConfigError("profile", name, f"unknown profile; known: {known}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvaluatorConfig:
        """Build from a (nested) dict such as a parsed TOML file.

        A ``profile`` key names the profile the other keys override; without
        it the default profile (:data:`DEFAULT_PROFILE`) is the base. Nested
        sections merge (``{"thresholds": {"relevant": 0.8}}`` keeps the base's
        ``partial``). Unknown keys are errors.

        Raises:
            ConfigError: naming the first bad field by its dotted path.
        """
        if not isinstance(data, Mapping):
            raise ConfigError("<root>", data, "a configuration must be a mapping")
        data = dict(data)
        profile = data.pop("profile", None)
        if profile is None:
            profile = DEFAULT_PROFILE
        base = cls.from_profile(profile)
        if "name" not in data:
            data["name"] = profile if not data else f"{profile}+overrides"
        return base.replace(**data)

    @classmethod
    def from_file(cls, path: str | Path) -> EvaluatorConfig:
        """Load from a ``.toml``, ``.json``, ``.yaml`` or ``.yml`` file.

        Raises:
            ConfigError: unreadable file, unknown suffix, bad syntax or values.
        """
        return cls.from_dict(_read_file(Path(path)))

    def replace(self, **overrides: Any) -> EvaluatorConfig:
        """A copy with some fields replaced; nested sections merge from dicts.

        ``config.replace(thresholds={"relevant": 0.8})`` keeps
        ``thresholds.partial`` and changes only ``relevant``.
        """
        merged = _deep_merge(self.to_dict(), overrides, "")
        return _build(EvaluatorConfig, merged, "")

    def to_dict(self) -> dict[str, Any]:
        """A JSON/TOML-ready dict that :meth:`from_dict` turns back into this config."""
        return {name: _as_plain(getattr(self, name)) for name in _init_fields(EvaluatorConfig)}

    def fingerprint(self) -> str:
        """A stable hex digest of the settings (``name`` and ``description``
        excluded), for cache keys; computed once per configuration object."""
        if not self._digest:
            payload = self.to_dict()
            payload.pop("name")
            payload.pop("description")
            payload.pop("guarantee", None)  # it changes no evaluation
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
            self._digest.append(hashlib.sha256(text.encode("utf-8")).hexdigest()[:16])
        return self._digest[0]


@dataclass(frozen=True, kw_only=True, slots=True)
class RouterConfig:
    """How the CRAG router corrects a retrieval. Frozen; keyword-only.

    Attributes:
        k: chunks returned by default (at most ``MAX_K`` = 10,000, as
            ``gate_k`` and ``fetch_k``; a retriever that knows its size,
            ``len(retriever)``, is asked for no more than it holds, with a
            note).
        gate_k: how many of the top chunks the evaluator grades (``None``: all
            ``k``). Return 100 chunks but decide on the first 10, say.
        fetch_k: candidates fetched per ranking before fusion (at least ``k``;
            ``None`` means ``k``). Fusing deeper lists finds more.
        max_retries: correction rounds allowed per query: query expansion is
            one, a web search another, so 2 allows expansion then the web
            (``combined``); 0 turns correction off. The router never loops.
        rrf_k: the RRF constant.
        expansion_weight: RRF weight of each expanded-query ranking (the
            original ranking weighs 1).
        expand_on: which retrievers re-retrieve with the expanded queries:
            ``"primary"``, ``"lexical"`` or ``"both"`` (the lexical retriever
            always runs the original query too). Re-embedding an expanded query
            can drift from the question; lexical retrieval takes synonyms well.
        lexical_weight: RRF weight of each lexical (BM25) ranking.
        fusion_weights: how the lexical rankings' weight is set: ``"fixed"``
            (``lexical_weight``), ``"gate"`` (the default: ``lexical_weight * 2
            * (1 - p)``, ``p`` the gate's probability that the first retrieval
            holds an answer: equal to the dense ranking's at ``p = 0.5``, more
            where the gate doubts the dense list; chosen on training
            collections only, ``python -m research.corrections``) or
            ``"keywords"`` (``lexical_weight * 2 * (1 - o)``, ``o`` the first
            retrieval's keyword overlap with the query: more where the dense
            list misses the query's words).
        drop_irrelevant: on the fast path, drop chunks whose own verdict is
            IRRELEVANT (never all of them).
        expand_parents: with a parents lookup (``CRAG(parents=...)``), re-grade
            each final chunk graded PARTIAL as its parent and keep the parent
            where it grades better (parent expansion); ``False`` turns it off.
        parent_token_budget: the estimated tokens parents may add to the
            final chunks in all (a parent's tokens minus its children's);
            parents that grade better are taken best gain first while they fit.
        web_max_results: results asked from the web searcher.
        web_on_partial: also search the web when expansion leaves the set
            below RELEVANT (strategy ``combined``).
        expand_without_web: on IRRELEVANT, when there is no web searcher or
            the web search fails or finds nothing, try query expansion and
            fusion instead of returning the retrieval as it was.
        keep_partial_on_web: after a web search, keep the original chunks
            whose own verdict is at least PARTIAL behind the web results.
        web_timeout: seconds either router waits for the web searcher (30 by
            default, above what a ``SearxngClient`` takes with its default
            timeout and retries; ``None``: no limit). Past it the web search is
            a :class:`~crag_heuristic.WebSearchTimeout` on the result.
        retriever_timeout: seconds each search (the first retrieval, each
            re-retrieval, the lexical retriever's) and each parents lookup
            may take (10 by default; ``None`` for no limit). Past it the search
            is a :class:`~crag_heuristic.RetrieverError` whose ``timeout`` is
            set: raised for the first retrieval, a note for a re-retrieval.
        first_search_timeout: seconds the first search of each retriever may
            take, until it has answered once (120 by default, never less than
            ``retriever_timeout``; ``None``: no limit): its warm-up (an
            embedding model loading, a connection opening) is not failed by
            the bound that suits a warm store.
        cache_timeout: seconds a cache call may take (1 by default; ``None``:
            no limit). Past it the call is a ``CacheError`` of kind
            ``"timeout"`` on the result and the query goes on without it. The
            library's caches bound their own calls (``RedisCache`` has socket
            timeouts) and are called directly.
        expander_timeout: seconds the query expander may take (5 by default;
            ``None``: no limit). Past it the expansion is a failure on the
            result and the correction goes on without expanded queries.
        worker_threads: the most threads the router uses to wait on parts
            that may hang (8 by default; see :mod:`crag_heuristic._deadline`).
            The async router cancels a native ``asearch`` / ``aget`` past its
            timeout; a sync call (in either router) runs on one of these
            threads and is abandoned, not stopped, past its timeout: it runs
            on until the part returns, and its answer is dropped. No kind of
            call holds more than half of them, and a call that finds none free
            within its timeout gets its stage's typed error, so a hung part
            costs at most that many threads, never one per call. Parts that
            bound their own calls (``FaissRetriever``, ``BM25Retriever``,
            ``MemoryCache``, ``RedisCache``, the library's expanders, a
            ``dict`` of parents: a true ``bounded`` attribute) are called in
            the calling thread, at no cost. ``CRAG.close()`` ends the threads.
        refine: run knowledge refinement on the final chunks.
        cache_evaluations: cache evaluations (the web results are always cached
            when a cache is given).
        evaluation_ttl, web_ttl: cache lifetimes in seconds.
    """

    k: int = 10
    gate_k: int | None = None
    fetch_k: int | None = None
    max_retries: int = 2
    rrf_k: int = 60
    expansion_weight: float = 1.0
    lexical_weight: float = 1.0
    fusion_weights: Literal["fixed", "gate", "keywords"] = "gate"
    expand_on: Literal["primary", "lexical", "both"] = "both"
    drop_irrelevant: bool = False
    expand_parents: bool = True
    parent_token_budget: int = 512
    web_max_results: int = 5
    web_on_partial: bool = False
    expand_without_web: bool = True
    keep_partial_on_web: bool = True
    web_timeout: float | None = 30.0
    retriever_timeout: float | None = 10.0
    first_search_timeout: float | None = 120.0
    cache_timeout: float | None = 1.0
    expander_timeout: float | None = 5.0
    worker_threads: int = 8
    refine: bool = False
    cache_evaluations: bool = True
    evaluation_ttl: float = 3600.0
    web_ttl: float = 86400.0

    def __post_init__(self) -> None:
        _check_number("k", self.k, low=1, high=MAX_K, integer=True)
        if self.gate_k is not None:
            _check_number("gate_k", self.gate_k, low=1, high=MAX_K, integer=True)
        if self.expand_on not in ("primary", "lexical", "both"):
            raise ConfigError("expand_on", self.expand_on, "must be primary, lexical or both")
        if self.fusion_weights not in ("fixed", "gate", "keywords"):
            raise ConfigError(
                "fusion_weights", self.fusion_weights, "must be fixed, gate or keywords"
            )
        if self.fetch_k is not None:
            _check_number("fetch_k", self.fetch_k, low=1, high=MAX_K, integer=True)
        _check_number("max_retries", self.max_retries, low=0, high=10, integer=True)
        _check_number("rrf_k", self.rrf_k, low=0, integer=True)
        _check_number("expansion_weight", self.expansion_weight, low=0.0)
        _check_number("lexical_weight", self.lexical_weight, low=0.0)
        _check_number("parent_token_budget", self.parent_token_budget, low=0, integer=True)
        _check_number("web_max_results", self.web_max_results, low=1, high=100, integer=True)
        timeouts = ("web_timeout", "retriever_timeout", "first_search_timeout", "cache_timeout")
        for name in (*timeouts, "expander_timeout"):
            if getattr(self, name) is not None:
                _check_number(name, getattr(self, name), low=0.0, low_open=True)
        _check_number("worker_threads", self.worker_threads, low=1, high=256, integer=True)
        _check_number("evaluation_ttl", self.evaluation_ttl, low=0.0, low_open=True)
        _check_number("web_ttl", self.web_ttl, low=0.0, low_open=True)
        for name in (
            "drop_irrelevant",
            "expand_parents",
            "web_on_partial",
            "expand_without_web",
            "keep_partial_on_web",
            "refine",
            "cache_evaluations",
        ):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, getattr(self, name), "must be true or false")

    def depth(self, k: int) -> int:
        """Candidates to fetch per ranking for a final list of ``k``."""
        return max(k, self.fetch_k or k)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RouterConfig:
        """Build from a dict; unknown keys and bad values raise ConfigError."""
        return _build(cls, data, "router.")

    def replace(self, **overrides: Any) -> RouterConfig:
        """A copy with some fields replaced (validated again)."""
        return _build(RouterConfig, {**dataclasses.asdict(self), **overrides}, "router.")


_SECTIONS: dict[str, type] = {
    "weights": SignalWeights,
    "thresholds": Thresholds,
    "chunk_thresholds": Thresholds,
    "keyword": KeywordConfig,
    "coherence": CoherenceConfig,
    "length": LengthConfig,
    "refine": RefineConfig,
    "model": ModelConfig,
    "guarantee": Guarantee,
}

_BUILTIN_PROFILES: dict[str, dict[str, Any]] = {
    "synapse": {"description": "linear gate: weighted sum of the four signals"},
    "crag": {
        "thresholds": {"relevant": 0.7, "partial": 0.3},
        "description": "linear gate with the bands of the CRAG paper",
    },
}


def _bare_profile(name: str) -> dict[str, Any]:
    """Every field of a profile at its bare value: what a profile leaves out."""
    return {
        "name": name,
        "weights": dataclasses.asdict(SignalWeights()),
        "thresholds": dataclasses.asdict(Thresholds()),
        "chunk_thresholds": None,
        "keyword": dataclasses.asdict(KeywordConfig()),
        "coherence": dataclasses.asdict(CoherenceConfig()),
        "length": dataclasses.asdict(LengthConfig()),
        "refine": dataclasses.asdict(RefineConfig()),
        "model": None,
        "description": "",
        "guarantee": None,
    }


def _definition(name: str, data: Mapping[str, Any]) -> EvaluatorConfig:
    """A profile from its definition: complete over the bare values, or relative to
    the profile its ``profile`` key names."""
    if "profile" in data:
        return EvaluatorConfig.from_dict(data)
    return _build(EvaluatorConfig, _deep_merge(_bare_profile(name), data, ""), "")


@functools.cache
def _bundled_profile_files() -> dict[str, Path]:
    """The bundled profile files by name (listed once: package data does not change)."""
    folder = resources.files("crag_heuristic") / "profiles"
    if not folder.is_dir():
        return {}
    found = {}
    for entry in folder.iterdir():
        if entry.name.endswith(".toml"):
            found[entry.name[: -len(".toml")]] = Path(str(entry))
    return found


@functools.lru_cache(maxsize=16)
def _read_bundled(path: str) -> EvaluatorConfig:
    """A bundled profile, parsed once (configurations are immutable)."""
    return _definition(Path(path).stem, _read_file(Path(path)))


# -- the bundled profiles as shipped ---------------------------------------------------------
#
# Parsing a profile's TOML file and checking every field costs about 3 ms, more than ten
# evaluations: too much for the first ``Evaluator()`` of a process. Each bundled profile is
# also shipped as JSON beside it (``profiles/shipped/NAME.json``, written by ``python
# tools/ship_profiles.py`` from the TOML file, which stays the source) with its fingerprint, and
# built from it without checking its fields again (they were checked when it was written, and
# tests/test_config.py checks that each equals what its TOML file gives, fingerprint too): about
# 0.2 ms.

_SHIPPED = Path(__file__).parent / "profiles" / "shipped"


def _shipped_classes() -> dict[str, type]:
    """The configuration classes a shipped profile names, by name."""
    classes = (
        EvaluatorConfig, SignalWeights, Thresholds, KeywordConfig, CoherenceConfig,
        LengthConfig, RefineConfig, ModelConfig, LogisticStage, ModelTerm, FallbackModel,
        Guarantee,
    )  # fmt: skip
    return {cls.__name__: cls for cls in classes}


def shipped_form(config: EvaluatorConfig) -> dict[str, Any]:
    """``config`` as its shipped JSON holds it: ``{"fingerprint": ..., "config": ...}``, a
    section as an object of its fields with its class's name under the key ``""``, a tuple
    as an array (the configuration holds no list)."""

    def literal(value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = _init_fields(type(value))
            return {"": type(value).__name__, **{n: literal(getattr(value, n)) for n in fields}}
        if isinstance(value, tuple):
            return [literal(item) for item in value]
        return value

    return {"fingerprint": config.fingerprint(), "config": literal(config)}


def shipped_text(config: EvaluatorConfig) -> str:
    """The text of ``config``'s shipped JSON file (what ``tools/ship_profiles.py`` writes)."""
    return json.dumps(shipped_form(config), separators=(",", ":")) + "\n"


def _plain_name(name: str) -> bool:
    """Whether ``name`` can be a shipped profile's: ASCII letters, digits, ``-`` and ``_``
    (never a path)."""
    return name.isascii() and name.replace("-", "a").replace("_", "a").isalnum()


@functools.lru_cache(maxsize=16)
def _shipped(name: str) -> EvaluatorConfig | None:
    """The bundled profile ``name`` from its shipped JSON, built once; ``None`` when none
    is shipped (the TOML file is read then). Each section is made as the JSON parser
    meets it, without its checks (it was made checked)."""
    try:
        with open(f"{_SHIPPED}{os.sep}{name}.json", "rb") as file:  # no pathlib: 0.1 ms cold
            raw = file.read()
    except OSError:
        return None
    classes = _shipped_classes()
    setter, new = object.__setattr__, object.__new__

    def section(fields: dict[str, Any]) -> Any:
        kind = fields.pop("", None)
        if kind is None:  # the top level
            return fields
        made: Any = new(classes[kind])
        for field_name, value in fields.items():
            setter(made, field_name, tuple(value) if type(value) is list else value)
        return made

    shipped = json.loads(raw, object_hook=section)
    config: EvaluatorConfig = shipped["config"]
    setter(config, "_digest", [shipped["fingerprint"]])
    return config


def available_profiles() -> list[str]:
    """The names :meth:`EvaluatorConfig.from_profile` accepts, sorted."""
    return sorted({*_BUILTIN_PROFILES, *_bundled_profile_files()})


def load_config(
    source: EvaluatorConfig | Mapping[str, Any] | str | Path | None = None,
    **overrides: Any,
) -> EvaluatorConfig:
    """Resolve anything that names a configuration, then apply overrides.

    ``source`` may be a config (returned as is), a dict, a path to a
    TOML/JSON/YAML file, a profile name, or ``None`` for the default profile
    (:data:`DEFAULT_PROFILE`).
    """
    if source is None:  # the default profile, built once (configurations are immutable)
        config = _default_config(DEFAULT_PROFILE)
    elif isinstance(source, EvaluatorConfig):
        config = source
    elif isinstance(source, Mapping):
        config = EvaluatorConfig.from_dict(source)
    elif isinstance(source, Path) or (
        isinstance(source, str) and (source.endswith(_SUFFIXES) or "/" in source)
    ):
        config = EvaluatorConfig.from_file(source)
    elif isinstance(source, str):
        config = EvaluatorConfig.from_profile(source)
    else:
        raise ConfigError("<root>", source, "expected a config, dict, path or profile name")
    return config.replace(**overrides) if overrides else config


_SUFFIXES = (".toml", ".json", ".yaml", ".yml")


def _read_file(path: Path) -> Mapping[str, Any]:
    suffix = path.suffix.lower()
    if suffix not in _SUFFIXES:
        raise ConfigError("<file>", str(path), f"unknown suffix; use one of {', '.join(_SUFFIXES)}")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError("<file>", str(path), f"cannot read: {exc.strerror or exc}") from exc
    if suffix in (".yaml", ".yml"):
        with requires("yaml", "a YAML configuration file"):
            import yaml
    try:
        if suffix == ".toml":
            data: Any = tomllib.loads(raw.decode("utf-8"))
        elif suffix == ".json":
            data = json.loads(raw.decode("utf-8"))
        else:
            data = yaml.safe_load(raw.decode("utf-8"))
    except Exception as exc:
        raise ConfigError("<file>", str(path), f"cannot parse: {exc}") from exc
    if not isinstance(data, Mapping):
        raise ConfigError("<file>", str(path), "the file must hold a mapping at top level")
    return data


def _deep_merge(base: dict[str, Any], overrides: Mapping[str, Any], path: str) -> dict[str, Any]:
    out = dict(base)
    for key, value in overrides.items():
        here = f"{path}{key}"
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(dict(out[key]), value, here + ".")
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            out[key] = dataclasses.asdict(value)
        else:
            out[key] = value
    return out


_T = TypeVar("_T")


def _build(cls: type[_T], data: Mapping[str, Any], path: str) -> _T:
    """Build dataclass ``cls`` from ``data``, naming bad fields by dotted path."""
    if not isinstance(data, Mapping):
        raise ConfigError(path.rstrip(".") or "<root>", data, "must be a mapping")
    fields = _init_fields(cls)  # type: ignore[arg-type]  # a class is hashable
    hints = _type_hints(cls)  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key not in fields:
            close = difflib.get_close_matches(str(key), fields, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(fields)}"
            raise ConfigError(f"{path}{key}", value, "unknown field" + hint)
        section = _section_type(hints[key])
        if section is not None and isinstance(value, Mapping):
            value = _build(section, value, f"{path}{key}.")
        elif section is not None and isinstance(value, list | tuple) and _is_tuple(hints[key]):
            value = tuple(
                _build(section, item, f"{path}{key}[{i}].") if isinstance(item, Mapping) else item
                for i, item in enumerate(value)
            )
        kwargs[key] = value
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a section's required field missing (a guarantee's band ...)
        where = path.rstrip(".") or "<root>"
        raise ConfigError(where, dict(data), f"{cls.__name__}: {exc}") from None
    except ConfigError as exc:
        where = path.rstrip(".")
        if where and where.rsplit(".", 1)[-1] == exc.field:  # about the whole section
            raise ConfigError(where, exc.value, exc.reason) from None
        if path and not exc.field.startswith(path):
            raise ConfigError(f"{path}{exc.field}", exc.value, exc.reason) from None
        raise


def _as_plain(value: Any) -> Any:
    """A section as a dict (``dataclasses.asdict``); any other value as it is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


@functools.cache
def _init_fields(cls: type) -> dict[str, dataclasses.Field[Any]]:
    """The fields a configuration class takes (made once per class)."""
    return {f.name: f for f in dataclasses.fields(cls) if f.init}


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    """``get_type_hints(cls)``, resolved once per class (it evaluates every annotation)."""
    return get_type_hints(cls)


def _is_tuple(hint: Any) -> bool:
    return get_origin(hint) is tuple


def _section_type(hint: Any) -> type | None:
    candidates = [hint, *get_args(hint)]
    for candidate in candidates:
        if isinstance(candidate, type) and dataclasses.is_dataclass(candidate):
            return candidate
    return None
