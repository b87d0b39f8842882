"""Expensive graders for the cascade: two adapters, the calls, and the check of
what a grader answers (the protocols, :class:`Grader` and :class:`AsyncGrader`,
are with the other seams in :mod:`crag_heuristic._protocols`).

A grader turns ``(query, chunks)`` into one P(chunk relevant) in [0, 1] per
chunk, in order. The cheap gate decides where it is sure; a cascade (see
:mod:`crag_heuristic._grading.escalation`) asks a grader only about the chunks
it is unsure of. Anything can be a grader: a cross-encoder, an LLM prompt, a
lookup of labels. Each has a ``fingerprint``, a stable string that names it
and its settings in cache keys (two graders that may answer differently must
not share one).

What a grader answers is checked before anyone reads it
(:func:`checked_grades`): a sequence of exactly one real number per chunk,
each finite and within [0, 1] (a rounding excess of at most ``1e-6`` is
clipped). Anything else is a :class:`~crag_heuristic.GraderOutputError`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from .._checks import CheckedQuery, as_real
from .._deadline import Abandoned, Exhausted, Workers
from .._evaluator.model import sigmoid
from .._exceptions import ConfigError, GraderError, GraderOutputError, GraderTimeout
from .._types import Chunk

_TOLERANCE = 1e-6


def grader_fingerprint(grader: Any) -> str:
    """The grader's ``fingerprint`` (an attribute or a method), else its class name.

    Raises:
        ConfigError: a fingerprint that is not a non-empty string.
    """
    value = getattr(grader, "fingerprint", None)
    if callable(value):
        value = value()
    if value is None:
        return type(grader).__qualname__
    if not isinstance(value, str) or not value:
        raise ConfigError("grader.fingerprint", value, "must be a non-empty string")
    return value


def checked_grades(values: Any, n: int, *, grader: str | None = None) -> list[float]:
    """``values`` as ``n`` floats in [0, 1], or a :class:`GraderOutputError` saying why not.

    Accepts any sequence or array of real numbers (a NumPy array, a list of
    ``numpy.float32`` ...); a value above 1 or below 0 by at most ``1e-6``
    (float rounding in a sigmoid) is clipped.
    """
    if isinstance(values, str | bytes | bytearray) or values is None:
        raise GraderOutputError(
            f"the grader returned {type(values).__name__}, not a sequence of numbers",
            grader=grader,
        )
    try:
        items = list(values)
    except TypeError:
        raise GraderOutputError(
            f"the grader returned {type(values).__name__}, not a sequence of numbers",
            grader=grader,
        ) from None
    if len(items) != n:
        raise GraderOutputError(
            f"the grader returned {len(items)} grade(s) for {n} chunk(s)", grader=grader
        )
    out = []
    for position, item in enumerate(items):
        value = as_real(item)  # an integer beyond float is inf: not finite
        if value is None:
            raise GraderOutputError(
                f"grade {position} is {type(item).__name__}, not a number", grader=grader
            )
        if not math.isfinite(value):
            raise GraderOutputError(f"grade {position} is {value} (not finite)", grader=grader)
        if value < -_TOLERANCE or value > 1.0 + _TOLERANCE:
            raise GraderOutputError(f"grade {position} is {value}, outside [0, 1]", grader=grader)
        out.append(min(1.0, max(0.0, value)))
    return out


GradeFn = Callable[[str, list[str]], Sequence[float]]
AsyncGradeFn = Callable[[str, list[str]], Awaitable[Sequence[float]]]


class CallableGrader:
    """Any callable ``(query, texts) -> scores`` as a grader (an LLM prompt, say).

    Args:
        fn: ``fn(query, list_of_chunk_texts)`` returning one P(relevant) in
            [0, 1] per text. May be an ``async def``: then it serves
            ``agrade`` (the async router) and ``grade`` refuses.
        afn: an async twin of a sync ``fn``, for the async router.
        name: the fingerprint; put your model and prompt version in it
            (``"gpt-4o-mini:relevance-v3"``), since cached answers are keyed
            by it. Default: the function's module and qualified name, which
            is refused for lambdas and nested functions (they are not stable
            names).

    Raises:
        ConfigError: ``fn`` is not callable, or no stable name.
    """

    def __init__(
        self,
        fn: GradeFn | AsyncGradeFn,
        *,
        afn: AsyncGradeFn | None = None,
        name: str | None = None,
    ) -> None:
        if not callable(fn):
            raise ConfigError("fn", fn, "must be callable (query, texts) -> scores")
        if afn is not None and not inspect.iscoroutinefunction(afn):
            raise ConfigError("afn", afn, "must be an async function")
        if inspect.iscoroutinefunction(fn):
            if afn is not None:
                raise ConfigError("afn", afn, "fn is already async")
            self._fn: GradeFn | None = None
            self._afn: AsyncGradeFn | None = fn
        else:
            self._fn = fn  # type: ignore[assignment]
            self._afn = afn
        if name is None:
            qualname = getattr(fn, "__qualname__", type(fn).__qualname__)
            if "<" in qualname:
                raise ConfigError(
                    "name", None, f"{qualname} is not a stable name: give the grader a name"
                )
            name = f"callable:{getattr(fn, '__module__', '?')}.{qualname}"
        if not isinstance(name, str) or not name.strip():
            raise ConfigError("name", name, "must be a non-empty string")
        self._name = name

    def __repr__(self) -> str:
        return f"CallableGrader(name={self._name!r})"

    @property
    def fingerprint(self) -> str:
        """The grader's name (see the class doc)."""
        return self._name

    def grade(self, query: str, chunks: Sequence[Chunk]) -> Sequence[float]:
        """``fn(query, texts)``.

        Raises:
            GraderError: the callable is async-only (use the async router).
        """
        if self._fn is None:
            raise GraderError(
                "this grader is async-only: use aretrieve() / aevaluate()", grader=self._name
            )
        return self._fn(query, [chunk.text for chunk in chunks])

    async def agrade(self, query: str, chunks: Sequence[Chunk]) -> Sequence[float]:
        """``await afn(query, texts)``; a sync ``fn`` without ``afn`` runs in a thread."""
        texts = [chunk.text for chunk in chunks]
        if self._afn is not None:
            return await self._afn(query, texts)
        import asyncio

        assert self._fn is not None
        return await asyncio.to_thread(self._fn, query, texts)


Output = Literal["auto", "logits", "probabilities"]


class CrossEncoderGrader:
    """A sentence-transformers ``CrossEncoder`` as a grader (sentence-transformers >= 4).

    ``model.predict`` scores (query, text) pairs. What it returns depends on
    the model's activation (``model.activation_fn``): the default for a
    one-label model is a sigmoid (probabilities), but many re-rankers are
    saved with an identity (raw logits), and a two-label model gives a pair
    of logits per input. ``output`` says how to read the scores:

    * ``"auto"`` (default): read the activation. ``torch.nn.Sigmoid`` ->
      the scores are probabilities and are taken as they are;
      ``torch.nn.Identity`` (or none) -> they are logits and
      ``sigmoid(logit)`` is the probability; a two-label model's logits go
      through a softmax and the second label is "relevant". Any other
      activation is refused (its scale is unknown): say which it is.
    * ``"logits"``: the raw scores are always requested (the activation
      is bypassed) and mapped by the sigmoid (softmax for two labels).
    * ``"probabilities"``: the scores are taken as they come; they must be
      in [0, 1] (else :class:`~crag_heuristic.GraderOutputError`).

    Args:
        model: a loaded ``sentence_transformers.CrossEncoder``.
        batch_size: pairs per forward pass.
        output: see above.
        name: the fingerprint (default: ``cross-encoder:<the model's path or
            hub name>``; give one when that path is not stable).

    Raises:
        ConfigError: a model without ``predict``, a bad batch size, an
            activation ``"auto"`` cannot read, or more than two labels.
    """

    def __init__(
        self,
        model: Any,
        *,
        batch_size: int = 32,
        output: Output = "auto",
        name: str | None = None,
    ) -> None:
        if not callable(getattr(model, "predict", None)):
            raise ConfigError("model", model, "must be a CrossEncoder (with predict(pairs))")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError("batch_size", batch_size, "must be an integer >= 1")
        if output not in ("auto", "logits", "probabilities"):
            raise ConfigError("output", output, "must be auto, logits or probabilities")
        labels = int(getattr(model, "num_labels", 1) or 1)
        if labels > 2:
            raise ConfigError("model", labels, "a cross-encoder with more than 2 labels")
        self.model = model
        self.batch_size = batch_size
        self.labels = labels
        self.output: Literal["logits", "probabilities"] = (
            _read_activation(model) if output == "auto" else output
        )
        if name is None:
            name = f"cross-encoder:{_model_name(model)}"
        if not isinstance(name, str) or not name.strip():
            raise ConfigError("name", name, "must be a non-empty string")
        self._name = name

    def __repr__(self) -> str:
        return f"CrossEncoderGrader(name={self._name!r}, output={self.output!r})"

    @property
    def fingerprint(self) -> str:
        """The name, the score reading and the number of labels."""
        return f"{self._name}|{self.output}|labels={self.labels}"

    def grade(self, query: str, chunks: Sequence[Chunk]) -> Sequence[float]:
        """P(relevant) per chunk from one ``predict`` over all pairs."""
        if not chunks:
            return []
        pairs = [(query, chunk.text) for chunk in chunks]
        kwargs: dict[str, Any] = {"batch_size": self.batch_size, "show_progress_bar": False}
        if self.output == "logits":
            import torch

            kwargs["activation_fn"] = torch.nn.Identity()
        raw = self.model.predict(pairs, **kwargs)
        return self._to_probabilities(raw, len(pairs))

    def _to_probabilities(self, raw: Any, n: int) -> list[float]:
        rows = raw.tolist() if hasattr(raw, "tolist") else list(raw)
        if len(rows) != n:
            raise GraderOutputError(
                f"predict returned {len(rows)} score(s) for {n} pair(s)", grader=self.fingerprint
            )
        if self.labels == 2:
            if not all(isinstance(r, list | tuple) and len(r) == 2 for r in rows):
                raise GraderOutputError(
                    "a two-label model must give two scores per pair", grader=self.fingerprint
                )
            if self.output == "logits":
                # softmax over two labels = sigmoid of their difference
                return [sigmoid(float(b) - float(a)) for a, b in rows]
            return [float(b) for _, b in rows]
        values = [float(r[0]) if isinstance(r, list | tuple) else float(r) for r in rows]
        if self.output == "logits":
            return [sigmoid(v) if math.isfinite(v) else v for v in values]
        return values


def _read_activation(model: Any) -> Literal["logits", "probabilities"]:
    """What ``predict`` returns by default: ``"probabilities"`` behind a sigmoid,
    ``"logits"`` behind an identity (or none, or a two-label model)."""
    activation = getattr(model, "activation_fn", None)
    if activation is None:
        return "logits"
    kind = type(activation).__name__
    module = type(activation).__module__
    if module.startswith("torch") and kind == "Sigmoid":
        return "probabilities"
    if module.startswith("torch") and kind == "Identity":
        return "logits"
    raise ConfigError(
        "output",
        "auto",
        f"the model's activation is {module}.{kind}, whose scale is unknown: "
        "pass output='logits' (bypass it) or output='probabilities'",
    )


def _model_name(model: Any) -> str:
    for owner in (getattr(model, "model", None), getattr(model, "config", None), model):
        config = getattr(owner, "config", owner)
        name = getattr(config, "name_or_path", None) or getattr(config, "_name_or_path", None)
        if isinstance(name, str) and name:
            return name
    return type(model).__qualname__


def call_grader(
    grader: Any,
    query: CheckedQuery,
    chunks: Sequence[Chunk],
    fingerprint: str,
    timeout: float | None = None,
    workers: Workers | None = None,
) -> Any:
    """``grader.grade(query, chunks)``, or the :class:`GraderError` it came to
    (a grader may raise anything; an async-only grader cannot answer here).

    With a ``timeout`` the call runs on one of ``workers``' threads (the
    router's; a pool of one made for the call when none is given) and is
    abandoned after ``timeout`` seconds (:class:`GraderTimeout`; the thread
    cannot be stopped, its late answer is dropped).
    """
    grade = getattr(grader, "grade", None)
    if grade is None:
        return GraderError(
            f"{type(grader).__name__} is async-only: use the async call", grader=fingerprint
        )
    if timeout is None:
        try:
            return grade(query, list(chunks))
        except Exception as exc:  # noqa: BLE001 - a user's grader may raise anything
            return _grader_error(exc, fingerprint)
    pool = workers if workers is not None else Workers(1, name="crag-grader")
    outcome = pool.call(lambda: grade(query, list(chunks)), timeout, "grader")
    if isinstance(outcome, Abandoned | Exhausted):
        return _late(outcome, timeout, fingerprint)
    return _grader_error(outcome, fingerprint) if isinstance(outcome, BaseException) else outcome


def _late(outcome: Abandoned | Exhausted, timeout: float | None, fingerprint: str) -> GraderTimeout:
    if isinstance(outcome, Exhausted):
        return GraderTimeout(
            f"no worker thread came free for the grader within {timeout} s (the router's "
            "threads are held by calls that have not returned)",
            grader=fingerprint,
        )
    return GraderTimeout(f"no grades within {timeout} s (escalation timeout)", grader=fingerprint)


async def acall_grader(
    grader: Any,
    query: CheckedQuery,
    chunks: Sequence[Chunk],
    fingerprint: str,
    timeout: float | None,
    workers: Workers | None = None,
) -> Any:
    """``await grader.agrade(query, chunks)`` (``grade`` on one of ``workers``'
    threads without it, never on the event loop's executor) within ``timeout``
    seconds, or the :class:`GraderError` it came to (:class:`GraderTimeout` past
    the timeout; a worker thread cannot be stopped, its late answer is dropped)."""
    import asyncio

    native = getattr(grader, "agrade", None)
    if isinstance(grader, CallableGrader) and grader._afn is None:
        native = None  # its agrade is grade in asyncio's executor: the router's threads instead
    try:
        if native is None:
            pool = workers if workers is not None else Workers(1, name="crag-grader")
            outcome = await pool.acall(lambda: grader.grade(query, list(chunks)), timeout, "grader")
            if isinstance(outcome, Abandoned | Exhausted):
                return _late(outcome, timeout, fingerprint)
            if isinstance(outcome, BaseException):
                return _grader_error(outcome, fingerprint)
            return outcome
        call: Awaitable[Any] = native(query, list(chunks))
        if timeout is None:
            return await call
        try:
            return await asyncio.wait_for(call, timeout)
        except asyncio.TimeoutError:  # TimeoutError on 3.11+, distinct on 3.10
            return _late(Abandoned(), timeout, fingerprint)
    except Exception as exc:  # noqa: BLE001 - a user's grader may raise anything
        return _grader_error(exc, fingerprint)


def _grader_error(error: BaseException, fingerprint: str) -> GraderError:
    """A grader's exception as a :class:`GraderError` (the exception its
    ``__cause__``): a timeout of its own
    (``TimeoutError``, or a class named ``...Timeout...`` such as
    ``httpx.TimeoutException``) as :class:`GraderTimeout`."""
    if isinstance(error, GraderError):
        return error
    name = type(error).__name__
    wrapped: GraderError
    if isinstance(error, TimeoutError) or any("Timeout" in k.__name__ for k in type(error).__mro__):
        wrapped = GraderTimeout(f"the grader timed out ({name}: {error})", grader=fingerprint)
    else:
        wrapped = GraderError(f"the grader raised {name}: {error}", grader=fingerprint)
    wrapped.__cause__ = error
    return wrapped
