"""Typed failures: what failed on the way without failing the query.

A failed web search, cache call, cascade grader, parents lookup, query
expansion or re-retrieval never fails a query: the router goes on without it
and records a :class:`Failure` on the result (``CRAGResult.failures``, in the
order they happened): the :class:`FailureStage` and the
:class:`~crag_heuristic.CragError`. A part's own exception is wrapped in the
stage's error, kept as its ``__cause__``::

    for failure in result.failures:
        if isinstance(failure.error, WebSearchTimeout):
            ...
        log.warning("degraded", stage=failure.stage.value, error=failure.type_name)

The result's string flags (``web_error``, ``cache_error``, ``grader_error``,
``parent_error``) are views of its failures: :attr:`Failure.text` of the last
one of their stage.

Serialised (:meth:`Failure.to_dict`), a failure is its stage, its error's type
name, message and structured attributes; :meth:`Failure.from_dict` reads one
back as untrusted input: the type must name one of the library's errors, each
attribute one that error takes, every value a JSON scalar or a list of them.
"""

from __future__ import annotations

import enum
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, overload

from . import _exceptions
from ._exceptions import (
    CacheError,
    CragError,
    GraderError,
    InputError,
    ParentLookupError,
    RetrieverError,
    WebSearchError,
    _short,
)
from ._redact import redact


class FailureStage(str, enum.Enum):
    """The stages of a query that can fail without failing it."""

    WEB = "web"  # the web search (WebSearchError)
    CACHE = "cache"  # a cache read or write, or a cached value refused (CacheError)
    GRADER = "grader"  # a cascade's grader (GraderError)
    PARENTS = "parents"  # the parents lookup, or its unusable answer
    EXPANSION = "expansion"  # the query expander
    RE_RETRIEVAL = "re_retrieval"  # a re-retrieval (expanded query, lexical retriever)


# what raised, and the error a part's own exception becomes, per stage
_WRAPPERS: dict[FailureStage, tuple[str, Callable[[str], CragError]]] = {
    FailureStage.WEB: ("the web searcher", WebSearchError),
    FailureStage.CACHE: (
        "the cache",
        functools.partial(CacheError, backend="cache", operation="unknown"),
    ),
    FailureStage.GRADER: ("the grader", GraderError),
    FailureStage.PARENTS: ("the parents lookup", ParentLookupError),
    FailureStage.EXPANSION: ("the query expander", CragError),
    FailureStage.RE_RETRIEVAL: ("the retriever", RetrieverError),
}
_FIELDS = frozenset({"stage", "type", "message", "attributes"})


def wrap(stage: FailureStage, error: BaseException) -> CragError:
    """``error`` as a :class:`CragError` of ``stage``: itself when it is one, else a
    new one (``"the web searcher raised KeyError: ..."``) with ``error`` as its
    ``__cause__``. The drivers wrap what a part raises before the flow sees it,
    with more to say (the operation, the retriever's name); this is the flow's
    guarantee that every failure is typed."""
    if isinstance(error, CragError):
        return error
    part, make = _WRAPPERS[stage]
    wrapped = make(f"{part} raised {type(error).__name__}: {error}")
    wrapped.__cause__ = error
    return wrapped


@dataclass(frozen=True, slots=True, eq=False)
class Failure:
    """One failure a query went on without.

    Attributes:
        stage: where it happened (a :class:`FailureStage`; its value is accepted).
        error: what happened: a :class:`~crag_heuristic.CragError` (``__cause__``:
            the part's own exception, when the library wrapped one).

    Two failures are equal when their stage, error type, message and
    attributes are (exceptions themselves compare by identity).

    Raises:
        InputError: an unknown stage, or an error that is not a ``CragError``.
    """

    stage: FailureStage
    error: CragError

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "stage", FailureStage(self.stage))
        except ValueError:
            raise InputError(
                f"unknown failure stage {_short(self.stage)}: expected one of "
                + ", ".join(s.value for s in FailureStage)
            ) from None
        if not isinstance(self.error, CragError):
            raise InputError(
                f"a failure's error must be a CragError, got {type(self.error).__name__} "
                "(wrap a part's own exception with its stage's error)"
            )

    @property
    def type_name(self) -> str:
        """The name the failure goes by: its error's class, or the class of the
        exception a parents lookup raised (:attr:`ParentLookupError.cause_type`)."""
        error = self.error
        if isinstance(error, ParentLookupError) and error.cause_type:
            return error.cause_type
        return type(error).__name__

    @property
    def message(self) -> str:
        """The error's message, credentials in any URL masked."""
        return redact(str(self.error))

    @property
    def text(self) -> str:
        """``"WebSearchTimeout: ..."``: the type name and the message, credentials
        masked (the form of the result's ``web_error``, ``cache_error`` ...)."""
        return redact(f"{self.type_name}: {self.error}")

    def __str__(self) -> str:
        return f"{self.stage.value}: {self.text}"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Failure):
            return NotImplemented
        return self is other or self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((self.stage, type(self.error), self.message))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``stage``, ``type`` (the error's class name),
        ``message`` and ``attributes`` (the error's structured attributes; a value
        that is not a JSON scalar or a list of them as its short ``repr``);
        :meth:`from_dict` reverses it."""
        error = self.error
        values = vars(error)
        return {
            "stage": self.stage.value,
            "type": type(error).__name__,
            "message": self.message,
            "attributes": {
                name: _json_value(values.get(name, default))
                for name, default in _attributes(type(error)).items()
                if name in values or default is not _REQUIRED
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Failure:
        """The failure :meth:`to_dict` made, its error rebuilt as the class its
        ``type`` names (its message and attributes as written, no ``__cause__``).

        Raises:
            InputError: not such a dict: another shape, an unknown stage, a type
                that names none of the library's errors, an attribute that
                error does not take (or not one it needs), a value that is not
                JSON data.
        """
        if not isinstance(data, Mapping) or not _FIELDS >= set(data) >= _FIELDS - {"attributes"}:
            found = sorted(data) if isinstance(data, Mapping) else type(data).__name__
            raise InputError(f"a failure is a dict of {sorted(_FIELDS)}, got {_short(found)}")
        type_name, message = data["type"], data["message"]
        error_type = _ERRORS.get(type_name) if isinstance(type_name, str) else None
        if error_type is None:
            raise InputError(
                f"unknown error type {_short(type_name)} in a failure: "
                "expected the name of one of crag_heuristic's errors"
            )
        if not isinstance(message, str):
            raise InputError(f"a failure's message must be a string, got {_short(message)}")
        attributes = data.get("attributes", {})
        if not isinstance(attributes, Mapping):
            raise InputError(f"a failure's attributes must be a dict, got {_short(attributes)}")
        known = _attributes(error_type)
        unknown = sorted(str(name) for name in attributes if name not in known)
        if unknown:
            raise InputError(f"{type_name} takes no attribute {', '.join(unknown)}")
        missing = [name for name, default in known.items() if default is _REQUIRED]
        missing = [name for name in missing if name not in attributes]
        if missing:
            raise InputError(f"{type_name} needs the attribute {', '.join(missing)}")
        error = error_type.__new__(error_type)
        BaseException.__init__(error, message)
        for name, default in known.items():
            setattr(error, name, _read_value(attributes.get(name, default), type_name, name))
        return cls(data["stage"], error)


def last_failure(failures: Iterable[Failure], stage: FailureStage) -> Failure | None:
    """The last of ``failures`` at ``stage``, or ``None``."""
    found = None
    for failure in failures:
        if failure.stage is stage:
            found = failure
    return found


class _HasFailures(Protocol):
    @property
    def failures(self) -> Sequence[Failure]: ...


class FailureText:
    """A read-only attribute of a result: the :attr:`Failure.text` of the last of
    its ``failures`` at ``stage``, or ``None`` (``CRAGResult.cache_error`` ...)."""

    def __init__(self, stage: FailureStage, doc: str) -> None:
        self.stage = stage
        self.__doc__ = doc

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> FailureText: ...
    @overload
    def __get__(self, obj: _HasFailures, owner: type | None = None) -> str | None: ...
    def __get__(
        self, obj: _HasFailures | None, owner: type | None = None
    ) -> FailureText | str | None:
        if obj is None:
            return self
        failure = last_failure(obj.failures, self.stage)
        return None if failure is None else failure.text


# the library's errors by name: what Failure.from_dict may rebuild
_ERRORS: dict[str, type[CragError]] = _exceptions.error_classes()


def _attributes(error_type: type[CragError]) -> dict[str, Any]:
    """The structured attributes an error type takes: those of the nearest of
    the library's errors among its classes (a subclass of a caller's own takes
    its base's)."""
    return _named_attributes(next(k.__name__ for k in error_type.__mro__ if k.__name__ in _ERRORS))


@functools.cache
def _named_attributes(type_name: str) -> dict[str, Any]:
    """The structured attributes the library's error ``type_name`` takes (its
    constructors' argument names but the message), each with its default
    (``_REQUIRED`` without one)."""
    names: dict[str, Any] = {}
    for klass in reversed(_ERRORS[type_name].__mro__):
        init = klass.__dict__.get("__init__")
        if not inspect.isfunction(init):
            continue
        for param in list(inspect.signature(init).parameters.values())[1:]:
            if param.name != "message" and param.kind is not param.VAR_KEYWORD:
                default = _REQUIRED if param.default is param.empty else param.default
                names[param.name] = default
    return names


_SCALARS = (str, int, float, bool, type(None))
_REQUIRED: Any = object()  # an attribute whose constructor argument has no default


def _json_value(value: Any) -> Any:
    """An attribute's value as JSON data: scalars as they are (strings with
    credentials masked), a list or tuple of scalars as a list, else a short repr."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, _SCALARS) for v in value):
        return [_json_value(v) for v in value]
    return redact(_short(value))


def _read_value(value: Any, type_name: str, name: str) -> Any:
    """An attribute's value read back (a list as a tuple), or :class:`InputError`."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, _SCALARS) for v in value):
        return tuple(value)
    raise InputError(
        f"{type_name}.{name} must be a JSON scalar or a list of them, got {_short(value)}"
    )
