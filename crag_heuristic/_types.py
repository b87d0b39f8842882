"""The data model: chunks in, evaluations out.

Everything here is a frozen dataclass or an enum, validated on construction,
and converts to and from plain JSON-ready dicts (``to_dict`` / ``from_dict``).
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ._checks import as_real, as_text
from ._exceptions import CragError, InputError, InvalidChunkError, ScoreOrderError

# Float error allowed below zero for distances, and above 1 for probabilities,
# before a score is rejected (a distance a hair below 0 is stored as 0).
_NEGATIVE_TOLERANCE = 1e-6
# Float error allowed past the bounds of cosine-like scores: a float32 dot product
# of unit vectors can exceed 1 by a few units in the sixth decimal.
_COSINE_TOLERANCE = 1e-4


class ScoreKind(str, enum.Enum):
    """What a chunk's ``score`` means, so the evaluator can map it to [0, 1].

    The evaluator never guesses: each kind has one documented conversion to a
    similarity in [0, 1] (see ``crag_heuristic._scores``).

    ========================  =====================================================
    kind                      meaning and conversion
    ========================  =====================================================
    ``COSINE``                cosine similarity in [-1, 1]; negatives clip to 0
    ``INNER_PRODUCT``         unbounded dot product of unnormalised vectors;
                              squashed with a logistic (declare ``COSINE`` if your
                              vectors are unit-normalised: then IP *is* cosine)
    ``SQUARED_L2``            squared Euclidean distance between unit vectors, as
                              FAISS ``METRIC_L2`` returns it: cos = 1 - d / 2
    ``L2``                    plain Euclidean distance between unit vectors:
                              cos = 1 - d**2 / 2
    ``COSINE_DISTANCE``       cosine distance ``1 - cos`` in [0, 2], as Chroma's
                              ``cosine`` space returns it: cos = 1 - d
    ``DISTANCE``              any other non-negative distance: 1 / (1 + d)
    ``BM25``                  a BM25 score (>= 0): s / (s + saturation)
    ``PROBABILITY``           already a relevance probability in [0, 1]
    ``RRF``                   a reciprocal-rank-fusion score: rank evidence only
    ``WEB``                   a web engine's score: not comparable across queries
    ``UNKNOWN``               not declared
    ========================  =====================================================

    For ``RRF``, ``WEB`` and ``UNKNOWN`` the score-based signal (semantic
    coherence) is reported as unavailable and its weight is shared among the
    other signals; the evaluation says so in its reasoning.

    A ranking's scores go one way: a similarity's fall down the list, a
    distance's rise. A list of three or more scores of one kind that run the
    other way (every step up, for a similarity) is a distance declared as a
    similarity, or the reverse: :func:`check_ranking` refuses it with an
    :class:`~crag_heuristic.InvalidChunkError` naming the kind it likely is
    (Chroma's cosine space declared ``cosine`` would grade every retrieval
    excellent: its best chunk scores lowest).
    """

    COSINE = "cosine"
    INNER_PRODUCT = "inner_product"
    SQUARED_L2 = "squared_l2"
    L2 = "l2"
    COSINE_DISTANCE = "cosine_distance"
    DISTANCE = "distance"
    BM25 = "bm25"
    PROBABILITY = "probability"
    RRF = "rrf"
    WEB = "web"
    UNKNOWN = "unknown"

    @property
    def is_distance(self) -> bool:
        """True when lower scores mean more similar."""
        return self in _DISTANCE_KINDS

    @property
    def is_comparable(self) -> bool:
        """True when the score has a query-independent meaning the evaluator can use."""
        return self not in (ScoreKind.RRF, ScoreKind.WEB, ScoreKind.UNKNOWN)


_DISTANCE_KINDS = frozenset(
    {ScoreKind.SQUARED_L2, ScoreKind.L2, ScoreKind.COSINE_DISTANCE, ScoreKind.DISTANCE}
)
_SIMILARITY_KINDS = frozenset(
    {ScoreKind.COSINE, ScoreKind.INNER_PRODUCT, ScoreKind.PROBABILITY, ScoreKind.BM25}
)
_RANKING_MIN = 3  # scores of one kind needed before their direction says anything


class Verdict(str, enum.Enum):
    """The gate's decision on a retrieved set (or on one chunk).

    ``CORRECT``, ``AMBIGUOUS`` and ``INCORRECT`` are aliases in the vocabulary
    of the CRAG paper (Yan et al., 2024): ``Verdict.CORRECT is Verdict.RELEVANT``.
    """

    RELEVANT = "relevant"
    PARTIAL = "partial"
    IRRELEVANT = "irrelevant"
    CORRECT = "relevant"  # noqa: PIE796 - aliases by design
    AMBIGUOUS = "partial"  # noqa: PIE796
    INCORRECT = "irrelevant"  # noqa: PIE796

    @property
    def rank(self) -> int:
        """2 for RELEVANT, 1 for PARTIAL, 0 for IRRELEVANT (for comparisons)."""
        return _VERDICT_RANK[self.value]


_VERDICT_RANK = {"relevant": 2, "partial": 1, "irrelevant": 0}


_EMPTY_METADATA: Mapping[str, Any] = MappingProxyType({})  # for the typed signature only


def _check_optional_str(name: str, value: Any, chunk_id: str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise InvalidChunkError(name, value, "must be a string or None", chunk_id=chunk_id)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One retrieved passage.

    Args:
        id: unique id of the chunk within a result list (non-empty string).
        text: the passage text.
        score: the retriever's score for this chunk against the query, or
            ``None`` when there is none. Must be finite and within its
            kind's range (float error of 1e-4 allowed): a cosine in [-1, 1],
            a squared L2 distance between unit vectors in [0, 4], an L2 one
            in [0, 2], a probability in [0, 1]; distances, BM25 and RRF
            scores not negative. A "cosine" outside [-1, 1] is refused with
            the kind it likely is (a distance declared as a cosine would
            otherwise grade every retrieval as excellent).
        score_kind: what ``score`` means (see :class:`ScoreKind`). A string such
            as ``"cosine"`` is accepted and converted.
        source: where the chunk comes from: a file path, a URL or a document id.
            Chunks of one document should share it (used by source diversity).
        metadata: free JSON-serialisable data, carried through untouched.
        parent_id: the id of a larger enclosing chunk, for parent expansion.
        sentence_score: the cosine of the chunk's best sentence to the query
            (in [-1, 1]), from sentence vectors made at index time
            (:class:`~crag_heuristic.text.SentenceVectors`), or ``None``:
            the evaluator's ``sentence_similarity`` evidence.

    Raises:
        InvalidChunkError: on a field of the wrong type or value.
    """

    id: str
    text: str
    score: float | None = None
    score_kind: ScoreKind = ScoreKind.UNKNOWN
    source: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    parent_id: str | None = None
    sentence_score: float | None = None

    if TYPE_CHECKING:  # the constructor takes a kind's name too ("cosine"); it stores the kind

        def __init__(
            self,
            id: str,
            text: str,
            score: float | None = None,
            score_kind: ScoreKind | str = ScoreKind.UNKNOWN,
            source: str | None = None,
            metadata: Mapping[str, Any] = _EMPTY_METADATA,
            parent_id: str | None = None,
            sentence_score: float | None = None,
        ) -> None: ...

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise InvalidChunkError("id", self.id, "must be a non-empty string")
        text: Any = self.text  # typed str, but callers may pass anything
        if not isinstance(text, str):
            hint = "; decode bytes to str first" if isinstance(text, bytes | bytearray) else ""
            raise InvalidChunkError("text", text, "must be a string" + hint, chunk_id=self.id)
        try:
            kind = ScoreKind(self.score_kind)
        except ValueError:
            allowed = ", ".join(k.value for k in ScoreKind)
            raise InvalidChunkError(
                "score_kind", self.score_kind, f"must be one of: {allowed}", chunk_id=self.id
            ) from None
        object.__setattr__(self, "score_kind", kind)
        object.__setattr__(self, "score", _check_score(self.score, kind, self.id))
        _check_optional_str("source", self.source, self.id)
        _check_optional_str("parent_id", self.parent_id, self.id)
        if self.sentence_score is not None:
            object.__setattr__(
                self, "sentence_score", _check_sentence_score(self.sentence_score, self.id)
            )
        if not isinstance(self.metadata, Mapping):
            raise InvalidChunkError(
                "metadata", self.metadata, "must be a mapping", chunk_id=self.id
            )

    def __setstate__(self, state: Any) -> None:
        """Unpickling (and ``copy``) runs the constructor's checks: a pickle made
        elsewhere cannot smuggle in a chunk that was never validated."""
        if not isinstance(state, list | tuple) or len(state) != len(CHUNK_FIELDS):
            raise InvalidChunkError(
                "chunk", state, f"a pickled Chunk holds its {len(CHUNK_FIELDS)} fields in order"
            )
        Chunk.__init__(self, **dict(zip(CHUNK_FIELDS, state, strict=True)))

    @property
    def source_key(self) -> str:
        """The source used for diversity: ``source``, else ``parent_id``, else ``id``."""
        return self.source or self.parent_id or self.id

    def replace(self, **changes: Any) -> Chunk:
        """A copy with some fields changed (validated again)."""
        values = {name: getattr(self, name) for name in CHUNK_FIELDS}
        values.update(changes)
        return Chunk(**values)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reverses it."""
        return {
            "id": self.id,
            "text": self.text,
            "score": self.score,
            "score_kind": self.score_kind.value,
            "source": self.source,
            "metadata": dict(self.metadata),
            "parent_id": self.parent_id,
            "sentence_score": self.sentence_score,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Chunk:
        """Build a chunk from a dict with the keys of :meth:`to_dict`.

        ``_id`` is accepted for ``id`` (BEIR corpora), and a ``title`` is
        prefixed to the text when present. Unknown keys go into ``metadata``.

        Raises:
            InvalidChunkError: when a field is missing or invalid.
        """
        if not isinstance(data, Mapping):
            raise InvalidChunkError("chunk", data, "must be a JSON object / mapping")
        raw = dict(data)
        chunk_id = raw.pop("id", None)
        if chunk_id is None:
            chunk_id = raw.pop("_id", None)
        if isinstance(chunk_id, int) and not isinstance(chunk_id, bool):
            chunk_id = as_text(chunk_id) or chunk_id  # one too long to print is refused below
        if "text" not in raw:
            raise InvalidChunkError("text", None, "missing", chunk_id=chunk_id)
        text = raw.pop("text")
        title = raw.pop("title", None)
        if isinstance(title, str) and title.strip() and isinstance(text, str):
            text = f"{title.strip()}\n{text}"
        metadata = raw.pop("metadata", None) or {}
        known = {
            "score": raw.pop("score", None),
            "score_kind": raw.pop("score_kind", ScoreKind.UNKNOWN),
            "source": raw.pop("source", None),
            "parent_id": raw.pop("parent_id", None),
            "sentence_score": raw.pop("sentence_score", None),
        }
        if not isinstance(metadata, Mapping):
            raise InvalidChunkError("metadata", metadata, "must be a mapping", chunk_id=chunk_id)
        if raw:
            metadata = {**metadata, **raw}
        return cls(id=chunk_id, text=text, metadata=metadata, **known)


CHUNK_FIELDS = (
    "id",
    "text",
    "score",
    "score_kind",
    "source",
    "metadata",
    "parent_id",
    "sentence_score",
)

_NON_NEGATIVE_KINDS = frozenset(
    {
        ScoreKind.SQUARED_L2,
        ScoreKind.L2,
        ScoreKind.COSINE_DISTANCE,
        ScoreKind.DISTANCE,
        ScoreKind.BM25,
        ScoreKind.PROBABILITY,
        ScoreKind.RRF,
    }
)
_NO_BOUND = math.inf
# Each kind's natural range, float tolerance included: a score outside it is not of
# that kind (a "cosine" of 5 is a distance or a dot product declared wrongly).
_RANGES: dict[ScoreKind, tuple[float, float]] = {
    ScoreKind.COSINE: (-1 - _COSINE_TOLERANCE, 1 + _COSINE_TOLERANCE),
    ScoreKind.SQUARED_L2: (-_NEGATIVE_TOLERANCE, 4 + _COSINE_TOLERANCE),
    ScoreKind.L2: (-_NEGATIVE_TOLERANCE, 2 + _COSINE_TOLERANCE),
    ScoreKind.COSINE_DISTANCE: (-_NEGATIVE_TOLERANCE, 2 + _COSINE_TOLERANCE),
    ScoreKind.DISTANCE: (-_NEGATIVE_TOLERANCE, _NO_BOUND),
    ScoreKind.BM25: (-_NEGATIVE_TOLERANCE, _NO_BOUND),
    ScoreKind.PROBABILITY: (-_NEGATIVE_TOLERANCE, 1 + _NEGATIVE_TOLERANCE),
    ScoreKind.RRF: (-_NEGATIVE_TOLERANCE, _NO_BOUND),
    ScoreKind.INNER_PRODUCT: (-_NO_BOUND, _NO_BOUND),
    ScoreKind.WEB: (-_NO_BOUND, _NO_BOUND),
    ScoreKind.UNKNOWN: (-_NO_BOUND, _NO_BOUND),
}


def _check_score(score: Any, kind: ScoreKind, chunk_id: str) -> float | None:
    if score is None:
        return None
    value = as_real(score)
    if value is None:
        raise InvalidChunkError("score", score, "must be a real number or None", chunk_id=chunk_id)
    if not math.isfinite(value):
        raise InvalidChunkError(
            "score",
            score,
            "must be finite (not NaN, inf or beyond the float range)",
            chunk_id=chunk_id,
        )
    low, high = _RANGES[kind]
    if not low <= value <= high:
        raise InvalidChunkError("score", score, _range_reason(kind, value), chunk_id=chunk_id)
    return 0.0 if value < 0 and kind in _NON_NEGATIVE_KINDS else value


def _check_sentence_score(score: Any, chunk_id: str) -> float:
    """A best sentence's cosine: a finite real in [-1, 1] (1e-4 of float error allowed)."""
    value = as_real(score)
    if value is None or not math.isfinite(value):
        raise InvalidChunkError(
            "sentence_score", score, "must be a finite real number or None", chunk_id=chunk_id
        )
    low, high = _RANGES[ScoreKind.COSINE]
    if not low <= value <= high:
        raise InvalidChunkError(
            "sentence_score", score, "a cosine lies in [-1, 1]", chunk_id=chunk_id
        )
    return value


def _range_reason(kind: ScoreKind, value: float) -> str:
    """Why ``value`` is no ``kind`` score, with the kind it may be instead."""
    if kind is ScoreKind.COSINE:
        if 1 < value <= 4:
            return (
                "a cosine lies in [-1, 1]; this looks like a distance (LangChain's FAISS and "
                "Chroma return squared L2 distances): declare score_kind='squared_l2' "
                "(or 'l2' for a plain Euclidean distance)"
            )
        return (
            "a cosine lies in [-1, 1]; declare score_kind='inner_product' for a dot product "
            "of vectors that are not unit length, 'distance' for a distance, 'bm25' for BM25"
        )
    if value < 0:
        return f"a {kind.value} score cannot be negative"
    if kind is ScoreKind.PROBABILITY:
        return "a probability must be in [0, 1]"
    if kind is ScoreKind.SQUARED_L2:
        return (
            "a squared L2 distance between unit vectors lies in [0, 4]; "
            "declare score_kind='distance' for vectors that are not unit length"
        )
    if kind is ScoreKind.COSINE_DISTANCE:
        return (
            "a cosine distance (1 - cos) lies in [0, 2]; declare score_kind='squared_l2' "
            "for a squared L2 distance, 'distance' for another distance"
        )
    return (  # L2
        "an L2 distance between unit vectors lies in [0, 2]; "
        "declare score_kind='distance' for vectors that are not unit length"
    )


@dataclass(frozen=True, slots=True)
class Signals:
    """The four named signals, each in [0, 1], or ``None`` when unavailable.

    Attributes:
        keyword_overlap: how much of the query's content the text covers.
        semantic_coherence: how strong and consistent the retriever's scores are.
        length_adequacy: whether there is enough text to hold an answer.
        source_diversity: distinct sources over chunks.
    """

    keyword_overlap: float | None
    semantic_coherence: float | None
    length_adequacy: float | None
    source_diversity: float | None

    NAMES = ("keyword_overlap", "semantic_coherence", "length_adequacy", "source_diversity")

    def as_dict(self) -> dict[str, float | None]:
        return {name: getattr(self, name) for name in self.NAMES}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Signals:
        """The signals of a dict of :meth:`as_dict` (a missing one is ``None``).

        Raises:
            InputError: not a mapping, or a value that is not a number.
        """
        with _reading("signals"):
            return cls(**{name: _opt_float(data.get(name)) for name in cls.NAMES})


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


@contextlib.contextmanager
def _reading(what: str) -> Iterator[None]:
    """Turn what reading a dict of ``what`` raised (a missing key, a value of the
    wrong type, a number too big) into an :class:`InputError` saying so."""
    try:
        yield
    except CragError:
        raise
    except KeyError as exc:
        raise InputError(f"not a dict of {what}: no {exc}") from None
    except (TypeError, ValueError, OverflowError, AttributeError, RecursionError) as exc:
        raise InputError(f"not a dict of {what}: {type(exc).__name__}: {exc}") from None


@dataclass(frozen=True, slots=True)
class ChunkEvaluation:
    """The grade of one chunk (the per-document grading of CRAG).

    Attributes:
        chunk_id: the chunk's id.
        score: the weighted score in [0, 1].
        verdict: the chunk's own verdict against the chunk thresholds.
        signals: the chunk's signal values.
        similarity: the chunk's retriever score mapped to [0, 1], or ``None``.
        features: the evidence a fitted gate reads (see
            ``crag_heuristic._evidence``).
    """

    chunk_id: str
    score: float
    verdict: Verdict
    signals: Signals
    similarity: float | None = None
    features: Mapping[str, float | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "chunk_id": self.chunk_id,
            "score": self.score,
            "verdict": self.verdict.value,
            "signals": self.signals.as_dict(),
            "similarity": self.similarity,
            "features": dict(self.features),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChunkEvaluation:
        """The grade of a dict of :meth:`to_dict`.

        Raises:
            InputError: a missing field or a value of the wrong type.
        """
        with _reading("a chunk grade"):
            return cls(
                chunk_id=str(data["chunk_id"]),
                score=float(data["score"]),
                verdict=Verdict(data["verdict"]),
                signals=Signals.from_dict(data["signals"]),
                similarity=_opt_float(data.get("similarity")),
                features={k: _opt_float(v) for k, v in (data.get("features") or {}).items()},
            )


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The evaluator's decision on a retrieved set, with its evidence.

    Attributes:
        verdict: RELEVANT, PARTIAL or IRRELEVANT for the whole set.
        score: the weighted score in [0, 1] that the verdict thresholds.
        signals: the set-level value of each signal.
        chunks: one :class:`ChunkEvaluation` per input chunk, in input order.
        reasoning: a short human-readable explanation.
        profile: the name of the configuration that produced it.
        details: extra evidence (coherence parts, score kinds, query terms,
            warnings), JSON-ready.
    """

    verdict: Verdict
    score: float
    signals: Signals
    chunks: tuple[ChunkEvaluation, ...]
    reasoning: str
    profile: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def chunk(self, chunk_id: str) -> ChunkEvaluation:
        """The grade of the chunk with this id (``KeyError`` if absent)."""
        for grade in self.chunks:
            if grade.chunk_id == chunk_id:
                return grade
        raise KeyError(chunk_id)

    def kept_ids(self, minimum: Verdict = Verdict.PARTIAL) -> list[str]:
        """Ids of the chunks whose own verdict is at least ``minimum``, in order."""
        return [grade.chunk_id for grade in self.chunks if grade.verdict.rank >= minimum.rank]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reverses it."""
        return {
            "verdict": self.verdict.value,
            "score": self.score,
            "signals": self.signals.as_dict(),
            "chunks": [grade.to_dict() for grade in self.chunks],
            "reasoning": self.reasoning,
            "profile": self.profile,
            "details": dict(self.details),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Evaluation:
        """The evaluation of a dict of :meth:`to_dict` (a cached one is read by the
        router with more checks: ``crag_heuristic._router.cached``).

        Raises:
            InputError: a missing field or a value of the wrong type.
        """
        with _reading("an evaluation"):
            return cls(
                verdict=Verdict(data["verdict"]),
                score=float(data["score"]),
                signals=Signals.from_dict(data["signals"]),
                chunks=tuple(ChunkEvaluation.from_dict(item) for item in data["chunks"]),
                reasoning=str(data["reasoning"]),
                profile=str(data["profile"]),
                details=dict(data.get("details") or {}),
            )


def check_chunk(chunk: Chunk, index: int | None = None) -> None:
    """Check that ``chunk`` still holds what its constructor let through.

    A frozen dataclass can still be changed with ``object.__setattr__``, or
    built with ``object.__new__`` and never initialised; this catches such a
    chunk at a door (the evaluator's, the router's). The common case is a
    handful of type tests (well under a microsecond); only a chunk that fails
    them is examined again for the precise error.

    Raises:
        InvalidChunkError: a field is missing, or holds a value the constructor
            rejects or never stores (a string score kind, an int score).
    """
    try:
        cid, text, score, kind = chunk.id, chunk.text, chunk.score, chunk.score_kind
        source, metadata, parent = chunk.source, chunk.metadata, chunk.parent_id
        sentence = chunk.sentence_score
    except AttributeError:
        missing = next(name for name in CHUNK_FIELDS if not hasattr(chunk, name))
        raise InvalidChunkError(
            missing, None, "not set: the chunk was made without its constructor", index=index
        ) from None
    if (
        type(cid) is str
        and type(text) is str
        and type(kind) is ScoreKind
        and (
            score is None
            or (
                type(score) is float
                and score - score == 0.0  # finite: inf - inf and nan - nan are nan
                and (bounds := _RANGES[kind])[0] <= score <= bounds[1]
            )
        )
        and (source is None or type(source) is str)
        and (parent is None or type(parent) is str)
        and (type(metadata) is dict or isinstance(metadata, Mapping))
        and (
            sentence is None
            or (  # NaN fails the comparison too
                type(sentence) is float
                and (cosine := _RANGES[ScoreKind.COSINE])[0] <= sentence <= cosine[1]
            )
        )
        and cid.strip()
    ):
        return
    state = (cid, text, score, kind, source, metadata, parent, sentence)
    values = dict(zip(CHUNK_FIELDS, state, strict=True))
    problem = _state_problem(values)
    if problem is not None:
        name, value, reason = problem
        chunk_id = cid if isinstance(cid, str) else None
        raise InvalidChunkError(name, value, reason, chunk_id=chunk_id, index=index)


def _state_problem(values: dict[str, Any]) -> tuple[str, Any, str] | None:
    """Why a chunk's field values are not a valid chunk's state, or ``None``."""
    try:
        Chunk(**values)
    except InvalidChunkError as exc:
        return exc.field, exc.value, exc.reason
    kind, score = values["score_kind"], values["score"]
    if not isinstance(kind, ScoreKind):
        return "score_kind", kind, "must be a ScoreKind (set after construction?)"
    if score is not None and not isinstance(score, float):
        return "score", score, "must be a float (set after construction?)"
    return None  # a subclass of str or float, or a distance a hair below 0: harmless


def check_chunks(chunks: Any) -> Sequence[Chunk]:
    """Validate a chunk list: a sequence of valid :class:`Chunk` with unique ids.

    Each chunk's state is checked again (:func:`check_chunk`): a chunk
    changed or built around its constructor is rejected here, at the door.

    Raises:
        InvalidChunkError: an element is not a Chunk, or holds a bad field.
        DuplicateChunkError: two chunks share an id.
    """
    from ._exceptions import DuplicateChunkError, InputError

    if isinstance(chunks, str | bytes) or not isinstance(chunks, Sequence):
        raise InputError(f"chunks must be a sequence of Chunk, got {type(chunks).__name__}")
    seen: dict[str, int] = {}
    for index, chunk in enumerate(chunks):
        if not isinstance(chunk, Chunk):
            raise InvalidChunkError(
                "chunk", chunk, f"must be a Chunk, got {type(chunk).__name__}", index=index
            )
        check_chunk(chunk, index)
        first = seen.setdefault(chunk.id, index)
        if first != index:
            raise DuplicateChunkError(chunk.id, first, index)
    return chunks


def check_ranking(chunks: Sequence[Chunk]) -> None:
    """Refuse a ranking whose scores run the wrong way for their declared kind.

    ``chunks`` are best first. For each similarity kind (cosine, inner product,
    probability, BM25) among them, the scores of that kind, in order, must not
    only rise; for each distance kind (squared L2, L2, cosine distance,
    distance), not only fall. Three scores at least are needed: two point the
    wrong way by chance as often as not in a list reordered after scoring.

    Raises:
        ScoreOrderError: the scores of one kind all run the wrong way (naming the
            kind they likely are).
    """
    kinds = {chunk.score_kind for chunk in chunks if chunk.score is not None}
    for kind in kinds & (_SIMILARITY_KINDS | _DISTANCE_KINDS):
        scores = [c.score for c in chunks if c.score_kind is kind and c.score is not None]
        if len(scores) < _RANKING_MIN:
            continue
        rising = all(b >= a for a, b in itertools.pairwise(scores))
        falling = all(b <= a for a, b in itertools.pairwise(scores))
        distance = kind in _DISTANCE_KINDS
        if distance and falling and scores[-1] < scores[0]:
            likely: tuple[str, ...] = ("cosine",) if max(scores) <= 1.0 else ("inner_product",)
            how = "fall down the ranking, as a similarity's do; a distance's rise"
        elif not distance and rising and scores[-1] > scores[0]:
            if min(scores) >= -_COSINE_TOLERANCE and max(scores) <= 2.0 + _COSINE_TOLERANCE:
                likely = ("cosine_distance", "squared_l2")
            else:
                likely = ("squared_l2", "distance")
            how = "rise down the ranking, as a distance's do; a similarity's fall"
        else:
            continue
        shown = ", ".join(f"{score:.4g}" for score in scores[:5])
        named = " or ".join(repr(name) for name in likely)
        raise ScoreOrderError(
            kind.value,
            likely,
            tuple(scores),
            f"the {kind.value} scores ({shown}{' ...' if len(scores) > 5 else ''}) {how}: "
            f"declare score_kind={named} ('cosine_distance' is 1 - cos, Chroma's cosine "
            "space; 'squared_l2' is FAISS IndexFlatL2 and Chroma's l2 space); for a list "
            "reordered after scoring (a reranker), evaluate it with ranked=False",
        )
