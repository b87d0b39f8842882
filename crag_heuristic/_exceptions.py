"""The exceptions crag-heuristic raises, all in one place.

Every error the library raises on purpose derives from :class:`CragError`, so a
caller can catch the whole family with one ``except``. The tree::

    CragError
    ├── ConfigError                  a configuration field has a bad value (also ValueError)
    ├── MissingDependencyError       a feature's extra is not installed (also ImportError;
    │                                module, extra, feature)
    ├── InputError                   the caller passed something unusable (also ValueError)
    │   ├── InvalidQueryError        empty, whitespace-only or non-string query
    │   ├── ScopeError               a part or filter that could reach outside a retriever's
    │   │                            scope (another tenant's documents): refused, not run
    │   ├── InvalidChunkError        a chunk with a bad field (id, text, score, kind)
    │   │   ├── DuplicateChunkError  two chunks share an id
    │   │   └── ScoreOrderError      scores that run the wrong way for their kind (likely)
    │   ├── SynonymFormatError       a bad line in a synonym file (path, line_number, line)
    │   ├── CorpusStatsFileError     an unusable statistics file (path, field, found, expected)
    │   └── IndexDirectoryError      an unusable index directory (path, field, found, expected)
    ├── RetrieverError               the wrapped retriever failed or answered nonsense
    ├── StatsEngineError             the engine counting corpus statistics failed (engine)
    ├── ParentLookupError            the parents lookup raised (parent_id; the chunk stays)
    ├── GraderError                  a cascade's grader failed (the gate's verdict stands)
    │   ├── GraderTimeout            no answer within the escalation's (or its own) timeout
    │   ├── GraderOutputError        NaN, the wrong number of grades, a value outside [0, 1],
    │   │                            an answer that cannot be read
    │   ├── GraderHTTPError          an LLM API's HTTP status it cannot use (status_code)
    │   └── GraderConnectionError    an LLM API could not be reached (refused, reset, DNS)
    ├── WebSearchError               the web fallback failed (the router records it, never hides it)
    │   ├── WebSearchTimeout         the search engine did not answer in time
    │   ├── WebSearchHTTPError       an HTTP status the client cannot use (status_code)
    │   │   ├── WebSearchRateLimited 429 after the bounded retries
    │   │   └── WebSearchFormatDisabled  403: the instance does not serve format=json
    │   ├── WebSearchConnectionError the engine could not be reached (refused, reset, DNS)
    │   ├── WebSearchResponseError   a 200 whose body is not the expected JSON
    │   ├── WebSearchEnginesFailed   no results and every engine failed (engines)
    │   └── CircuitOpenError         calls suspended after repeated failures (retry_after)
    ├── CacheError                   the cache backend failed (kind; the router records it, goes on)
    └── ServiceError                 the gate service refused or could not finish a request (status)
        ├── UnauthorizedError        401 no valid API key; 403 a remote client and no key configured
        ├── RequestTooLargeError     413 a body past the service's limit (limit)
        ├── OverloadedError          503 every slot and queue place taken (retry_after)
        └── RequestTimeoutError      504 no answer within the request's timeout (timeout)

Two warning categories, apart from the tree (Python's ``warnings``, not raised)::

    UserWarning
    ├── CalibrationWarning           a fitted profile could not do what was asked of it
    │                                (bands that missed their targets, no fast path)
    ├── UnknownScoresWarning         a retriever's scores are neither declared nor read
    │                                from its store: the gate grades without them
    └── UnsignedStoreWarning         a store others can write to was made without a secret
                                     (RedisCache, TieredCache, RedisGradeLog)

The project's own server-starting test kit (``tests/support/crag_testkit``, not
shipped) has its own tree, apart from this one: a test helper failing is not the
library failing.

Errors carry structured attributes (``field``, ``value``, ``chunk_id``,
``status_code`` ...) so that callers and logs need not parse messages. An
error the library made of a part's own exception keeps that exception as its
``__cause__``. What failed on the way without failing a query is on the
result as typed failures (``CRAGResult.failures``, :mod:`crag_heuristic._failures`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # a dataclass without imports: no circle
    from ._usage import GraderUsage


def _short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for error messages.

    An integer too long to print cheaply (Python refuses past 4,300 digits)
    is named by its size; a value whose ``repr`` fails, by its type.
    """
    if isinstance(value, int) and value.bit_length() > 256:
        digits = int(value.bit_length() * 0.30103) + 1  # log10(2)
        return f"<an integer of about {digits} digits>"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a message must never fail to build
        text = f"<{type(value).__name__} without a printable repr>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _rebuild(cls: type[BaseException], args: tuple[Any, ...]) -> BaseException:
    """An error of class ``cls`` with ``args``, its own ``__init__`` not called (its
    attributes follow as the pickled state): see :meth:`CragError.__reduce__`."""
    return cls.__new__(cls, *args)


class CragError(Exception):
    """Base class of every error raised by crag-heuristic.

    Every error pickles with its attributes (``field``, ``kind``, ``status_code``
    ...), so it crosses a process boundary (``ProcessPoolExecutor``,
    ``multiprocessing``) as it was raised: an exception's default pickling calls
    its class with the message alone, which the errors' keyword-only
    constructors refuse. ``__cause__`` and the traceback stay behind, as for
    any exception.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        state = dict(self.__dict__)
        if isinstance(self, ImportError):  # kept in the exception's own fields
            state["name"], state["path"] = self.name, self.path
        return _rebuild, (type(self), self.args), state


class ConfigError(CragError, ValueError):
    """A configuration value is invalid.

    Attributes:
        field: dotted path of the offending field, e.g. ``"weights.keyword_overlap"``.
        value: the rejected value.
        reason: what was expected.
    """

    def __init__(self, field: str, value: Any, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"invalid config field {field!r} = {_short(value)}: {reason}")


class MissingDependencyError(CragError, ImportError):
    """A feature needs a package the core install leaves out: its extra names it.

    Raised where the feature first imports the package (see
    ``crag_heuristic._optional``), so the core install runs the gate and the
    router while, say, ``RedisCache`` asks for ``pip install 'crag-heuristic[redis]'``.

    Attributes:
        module: the module that could not be imported (``name`` too, as on any
            ``ImportError``).
        extra: the extra that installs it.
        feature: what needed it.
    """

    def __init__(self, module: str, extra: str, feature: str) -> None:
        self.module = module
        self.extra = extra
        self.feature = feature
        super().__init__(
            f"{feature} needs {module!r}, which the {extra!r} extra installs: "
            f"pip install 'crag-heuristic[{extra}]'",
            name=module,
        )


class InputError(CragError, ValueError):
    """The caller passed an argument the library cannot use."""


class InvalidQueryError(InputError):
    """The query is not a non-empty string.

    Attributes:
        query: the rejected query (may be any type).
    """

    def __init__(self, query: Any, reason: str) -> None:
        self.query = query
        self.reason = reason
        super().__init__(f"invalid query {_short(query)}: {reason}")


class ScopeError(InputError):
    """A part or a filter that could bring in documents outside a retriever's scope (its
    filter: one tenant's documents), refused before anything is searched.

    Raised where the scope check cannot prove a combination safe: a filtered
    retriever beside a lexical retriever or a parents lookup that searches
    everything; a per-call filter a part cannot apply; a metadata filter that
    mixes ``$and`` / ``$or`` / ``$not`` with another key (stores read only one
    of them and drop the rest, the tenant's condition with it). See
    ``crag_heuristic._retrievers.scope``.
    """


class InvalidChunkError(InputError):
    """A chunk has a field the evaluator cannot use.

    Attributes:
        chunk_id: the id of the chunk, or ``None`` when the id itself is bad.
        field: the name of the offending field (``"id"``, ``"score"`` ...).
        value: the rejected value.
        index: position of the chunk in the list passed in, when known.
    """

    def __init__(
        self,
        field: str,
        value: Any,
        reason: str,
        *,
        chunk_id: str | None = None,
        index: int | None = None,
    ) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        self.chunk_id = chunk_id
        self.index = index
        where = []
        if index is not None:
            where.append(f"#{index}")
        if chunk_id is not None:
            where.append(f"id={_short(chunk_id)}")
        prefix = f"chunk {' '.join(where)}: " if where else "chunk: "
        super().__init__(f"{prefix}invalid {field} {_short(value)}: {reason}")


class DuplicateChunkError(InvalidChunkError):
    """Two chunks passed together share the same id."""

    def __init__(self, chunk_id: str, first_index: int, index: int) -> None:
        self.first_index = first_index
        super().__init__(
            "id",
            chunk_id,
            f"duplicate of chunk #{first_index}; chunk ids must be unique",
            chunk_id=chunk_id,
            index=index,
        )


class ScoreOrderError(InvalidChunkError):
    """A ranking whose scores run the wrong way for their declared kind.

    A similarity's scores fall down a ranking and a distance's rise: a list of
    three or more scores of a similarity kind that only rise (or of a distance
    kind that only fall) was declared the wrong way round, e.g. Chroma's cosine
    space (``1 - cos``) declared ``"cosine"``, which would grade its worst
    chunk best. Declare the kind it likely is; for a list reordered after
    scoring (a reranker), evaluate it with ``ranked=False``.

    Attributes:
        declared: the declared kind's name (``"cosine"``).
        likely: the kinds the scores likely are, most likely first.
        scores: the scores, in ranking order.
    """

    def __init__(
        self, declared: str, likely: tuple[str, ...], scores: tuple[float, ...], reason: str
    ) -> None:
        self.declared = declared
        self.likely = likely
        self.scores = scores
        super().__init__("score_kind", declared, reason)


class SynonymFormatError(InputError):
    """A synonym file (Solr/Elasticsearch format) has a line that cannot be parsed.

    Attributes:
        path: the file (or ``"<string>"`` for text passed in directly).
        line_number: 1-based number of the offending line.
        line: the offending line as written (without its line break).
        reason: what is wrong with it.
    """

    def __init__(self, path: str, line_number: int, line: str, reason: str) -> None:
        self.path = path
        self.line_number = line_number
        self.line = line
        self.reason = reason
        super().__init__(f"{path}:{line_number}: {reason}: {_short(line)}")


class CorpusStatsFileError(InputError):
    """A corpus statistics file that cannot be used: refused, never half-read.

    Attributes:
        path: the file.
        field: what does not fit: ``"file"`` (missing), ``"kind"`` (not a
            statistics file, or unreadable), ``"format_version"`` (written by
            another version of the format), ``"analyzer"`` (built with another
            analyzer), ``"content"`` or ``"fingerprint"`` (damaged).
        found: what the file has.
        expected: what this library and analyzer need.
    """

    _ADVICE: ClassVar[dict[str, str]] = {
        "file": "build the statistics and save them there",
        "kind": "it is not a file written by CorpusStats.save",
        "format_version": "rebuild the statistics with this version of crag-heuristic",
        "analyzer": "rebuild the statistics with the evaluator's analyzer, or pass that analyzer",
        "content": "the file is damaged: rebuild it",
        "fingerprint": "the file is damaged: rebuild it",
    }

    def __init__(self, path: str, field: str, found: Any, expected: Any, *, note: str = "") -> None:
        self.path = path
        self.field = field
        self.found = found
        self.expected = expected
        advice = note or self._ADVICE.get(field, "")
        super().__init__(
            f"corpus statistics file {path!r}: {field} is {_short(found)}, "
            f"expected {_short(expected)}" + (f" ({advice})" if advice else "")
        )


class InsufficientLabelsError(InputError):
    """Too few labelled examples for what was asked (a guarantee at a confidence).

    Attributes:
        needed: how many are needed at the least.
        have: how many there were.
    """

    def __init__(self, message: str, *, needed: int, have: int) -> None:
        self.needed = needed
        self.have = have
        super().__init__(message)


class IndexDirectoryError(InputError):
    """An index directory (``crag-heuristic index``) that cannot be used: refused whole.

    Attributes:
        path: the directory.
        field: what does not fit: ``"manifest"`` (missing or unreadable),
            ``"kind"`` (not an index directory), ``"format_version"`` (written in
            another format), ``"file"`` (a file the manifest lists is missing,
            or changed since: its size or SHA-256 differs), ``"analyzer"`` (built
            with another analyzer than the evaluator's), ``"content"`` (its
            parts do not agree, or one is not what the build wrote), ``"out"``
            (where an index is to be written holds something else),
            ``"embedder"`` (its embedder cannot be loaded, or is a spec of code
            the operator did not name nor trust), ``"signature"`` (its manifest
            is signed and no secret was given, or unsigned or signed otherwise
            where one was).
        found: what the directory has.
        expected: what this library needs.
    """

    _ADVICE: ClassVar[dict[str, str]] = {
        "manifest": "build it with crag-heuristic index --docs FILE --out DIR",
        "kind": "it is not a directory written by crag-heuristic index",
        "format_version": "rebuild it with this version of crag-heuristic",
        "file": "the directory changed since it was built: rebuild it",
        "analyzer": "use the analyzer it was built with, or rebuild it with yours",
        "content": "the directory is damaged: rebuild it",
        "out": "choose an empty or new directory, or an index directory to replace",
        "embedder": (
            "name its spec when loading (embedder=... / --embedder SPEC) or trust the "
            "directory (trust_embedder=True / --trust-embedder); install what it needs"
        ),
        "signature": (
            "give the secret its manifest was signed with (secret=... / --index-secret-file), "
            "or rebuild it"
        ),
    }

    def __init__(self, path: str, field: str, found: Any, expected: Any, *, note: str = "") -> None:
        self.path = path
        self.field = field
        self.found = found
        self.expected = expected
        self.note = note
        advice = note or self._ADVICE.get(field, "")
        super().__init__(
            f"index directory {path!r}: {field} is {_short(found)}, expected {_short(expected)}"
            + (f" ({advice})" if advice else "")
        )


class RetrieverError(CragError):
    """The wrapped retriever failed, or returned something unusable.

    Attributes:
        retriever: a short name of the retriever (its class name).
        timeout: the ``RouterConfig.retriever_timeout`` in seconds when the
            retriever gave no answer within it, else ``None``. The search is
            abandoned, not stopped: a sync retriever runs on in its worker
            thread until it returns, and its late answer is dropped.
    """

    def __init__(
        self, message: str, *, retriever: str | None = None, timeout: float | None = None
    ) -> None:
        self.retriever = retriever
        self.timeout = timeout
        super().__init__(message)


class ParentLookupError(CragError):
    """The parents lookup (``CRAG(parents=...)``) raised: the chunk whose parent it
    was asked for stays, and the failure is on the result (``parent_error``).

    Its message is the lookup's own; the lookup's exception is its
    ``__cause__``, and the result shows it under that exception's name
    (``"ConnectionError: store down"``), as the lookup raised it.

    Attributes:
        parent_id: the parent asked for, when known.
        cause_type: the class name of the lookup's exception, when there was one.
    """

    def __init__(
        self, message: str, *, parent_id: str | None = None, cause_type: str | None = None
    ) -> None:
        self.parent_id = parent_id
        self.cause_type = cause_type
        super().__init__(message)


class StatsEngineError(CragError):
    """The engine counting corpus statistics failed: its scheduler could not be
    reached, a worker died, or the cluster would not start (see
    :class:`~crag_heuristic.text.DaskEngine`). A bad text in the corpus is an
    :class:`InputError` instead, wherever it was counted.

    Attributes:
        engine: ``"dask"``, or the engine's name.
    """

    def __init__(self, message: str, *, engine: str) -> None:
        self.engine = engine
        super().__init__(message)


class GraderError(CragError):
    """The expensive grader of a cascade failed (see ``crag_heuristic.grading``).

    Neither :class:`~crag_heuristic.grading.Cascade` nor the router lets it
    escape: the gate's own verdict stands and the error is recorded on the
    result (``CRAGResult.grader_error``, ``CascadeReport.error``).

    Attributes:
        grader: the grader's fingerprint, when known.
        usage: what the failed call cost, when the grader measures it (a
            :class:`~crag_heuristic.grading.GraderUsage`: requests, retries,
            tokens; a malformed answer still cost its tokens), else ``None``.
    """

    usage: GraderUsage | None = None

    def __init__(self, message: str, *, grader: str | None = None) -> None:
        self.grader = grader
        super().__init__(message)


class GraderTimeout(GraderError):
    """The grader did not answer within ``Escalation.timeout``, or its own request
    timeout (an LLM API that answered too slowly)."""


class GraderOutputError(GraderError):
    """The grader answered something unusable: not a sequence of numbers, NaN or
    infinite values, values outside [0, 1], not one grade per chunk, or (an
    LLM) an answer that cannot be read as grades."""


class GraderHTTPError(GraderError):
    """An LLM API answered an HTTP status the grader cannot use (401, 404, 400 ...;
    429 and 5xx once the retries are spent).

    Attributes:
        status_code: the HTTP status.
        retry_after: the server's ``Retry-After`` in seconds, when it sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int = 0,
        retry_after: float | None = None,
        grader: str | None = None,
    ) -> None:
        self.status_code = status_code
        self.retry_after = retry_after
        super().__init__(message, grader=grader)


class GraderConnectionError(GraderError):
    """An LLM API could not be reached, or dropped the connection (after the retries)."""


class WebSearchError(CragError):
    """The web search fallback failed.

    The router never lets this escape a query: it keeps the original chunks and
    records the error on the result (``CRAGResult.web_error``).

    Attributes:
        query: the web query that failed, when known.
        url: the endpoint that was called, when known (never with credentials).
        detail: what the server wrote, when it answered (its error text, the
            start of a body that is not JSON, a redirect's target): kept out of
            the message, which goes to logs and results, because the server
            may echo the query in it.
    """

    def __init__(
        self,
        message: str,
        *,
        query: str | None = None,
        url: str | None = None,
        detail: str | None = None,
    ) -> None:
        self.query = query
        self.url = url
        self.detail = detail
        super().__init__(message)


class WebSearchTimeout(WebSearchError):
    """The search engine did not answer within the client's timeout."""


class WebSearchHTTPError(WebSearchError):
    """The search engine answered with an unusable HTTP status.

    Attributes:
        status_code: the HTTP status.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        query: str | None = None,
        url: str | None = None,
        detail: str | None = None,
    ) -> None:
        self.status_code = status_code
        super().__init__(message, query=query, url=url, detail=detail)


class WebSearchRateLimited(WebSearchHTTPError):
    """HTTP 429, still there after the bounded retries."""


class WebSearchFormatDisabled(WebSearchHTTPError):
    """HTTP 403 on ``format=json``: the instance does not serve JSON.

    Enable it in the instance's ``settings.yml``::

        search:
          formats: [html, json]
    """


class WebSearchConnectionError(WebSearchError):
    """The search engine could not be reached: connection refused or reset, DNS failure."""


class WebSearchResponseError(WebSearchError):
    """A successful status whose body is not the JSON a search API returns."""


class WebSearchEnginesFailed(WebSearchError):
    """The metasearch answered, but with no results and failing engines.

    SearXNG answers HTTP 200 when its engines fail, listing them in
    ``unresponsive_engines``; with no results at all that is a failure, not an
    empty answer. (With some results, the client returns them and records the
    failing engines instead.)

    Attributes:
        engines: the names of the engines that failed, in the order given.
        reasons: the instance's message for each engine (translated text: show
            it, do not parse it).
    """

    def __init__(
        self,
        message: str,
        *,
        engines: tuple[str, ...],
        reasons: tuple[str, ...] = (),
        query: str | None = None,
        url: str | None = None,
    ) -> None:
        self.engines = engines
        self.reasons = reasons
        super().__init__(message, query=query, url=url)


class CircuitOpenError(WebSearchError):
    """Calls are suspended after repeated failures.

    Attributes:
        retry_after: seconds until the next call is allowed through.
    """

    def __init__(self, message: str, *, retry_after: float, url: str | None = None) -> None:
        self.retry_after = retry_after
        super().__init__(message, url=url)


class CacheError(CragError):
    """The cache backend failed (connection, timeout, memory, bad payload).

    The router treats the cache as optional: it records the error on the
    result (``CRAGResult.cache_error``) and carries on without it.

    Attributes:
        backend: a short name of the backend (``"redis"``, ``"memory"``).
        operation: ``"get"``, ``"set"``, ``"delete"``, ``"clear"`` or ``"ping"``.
        kind: what went wrong, a stable short string: ``"connection"``,
            ``"timeout"``, ``"auth"``, ``"loading"``, ``"oom"`` (server out of
            memory), ``"readonly"``, ``"cluster"``, ``"response"`` (another
            error reply), ``"payload"`` (a value that is not JSON text),
            ``"invalid"`` (JSON text, but not the value the reader expects:
            the wrong shape, a number out of range, made for another entry;
            the router recomputes it and overwrites it), ``"signature"`` (a
            value read back unsigned or badly signed where a secret signs
            them: refused, recomputed and overwritten as well), ``"down"`` (skipped:
            the backend failed moments ago and is not retried yet),
            ``"unsupported"`` (no client for this call), or ``"error"``
            (anything else).
        retry_after: for ``kind="down"``, seconds until the backend is tried
            again; ``None`` otherwise.
    """

    def __init__(
        self,
        message: str,
        *,
        backend: str,
        operation: str,
        kind: str = "error",
        retry_after: float | None = None,
    ) -> None:
        self.backend = backend
        self.operation = operation
        self.kind = kind
        self.retry_after = retry_after
        super().__init__(message)


class ServiceError(CragError):
    """The gate service (``crag-heuristic serve``, :mod:`crag_heuristic.serve`) refused a
    request or could not finish it; its JSON error names the subclass.

    Attributes:
        status: the HTTP status it is answered with.
    """

    default_status: ClassVar[int] = 500

    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = self.default_status if status is None else status
        super().__init__(message)


class UnauthorizedError(ServiceError):
    """No valid API key (401), or a client from another host while the service has no
    key configured and so answers loopback clients only (403)."""

    default_status = 401


class RequestTooLargeError(ServiceError):
    """A request body past the service's limit.

    Attributes:
        limit: the limit, in bytes.
    """

    default_status = 413

    def __init__(self, message: str, *, limit: int | None = None, status: int | None = None):
        self.limit = limit
        super().__init__(message, status=status)


class OverloadedError(ServiceError):
    """Every request slot is busy and every queue place taken: try again later.

    Attributes:
        retry_after: seconds to wait before retrying (the ``Retry-After`` header).
    """

    default_status = 503

    def __init__(
        self, message: str, *, retry_after: float | None = None, status: int | None = None
    ) -> None:
        self.retry_after = retry_after
        super().__init__(message, status=status)


class RequestTimeoutError(ServiceError):
    """No answer within the request's timeout (the work is abandoned, not the service).

    Attributes:
        timeout: the timeout, in seconds.
    """

    default_status = 504

    def __init__(
        self, message: str, *, timeout: float | None = None, status: int | None = None
    ) -> None:
        self.timeout = timeout
        super().__init__(message, status=status)


class CalibrationWarning(UserWarning):
    """A calibration produced a profile that does not do what was asked of it.

    Issued by :func:`crag_heuristic.calibrate_self` when its bands miss their
    targets on the simulated queries (the prior's bands are then kept) or the
    gate would take no fast path; ``CalibrationResult.warnings`` and the
    profile's header say the same. ``calibrate --self --strict`` makes it an
    error.
    """


class UnknownScoresWarning(UserWarning):
    """A retriever's scores mean nothing known: neither declared nor read from the store.

    The gate then grades without similarity evidence (the scores are kept as
    ``ScoreKind.UNKNOWN``, the documented default), which changes its verdicts.
    Issued once per retriever (or grading node, or postprocessor), where it is
    made or first finds its documents without scores; the message names the
    fix (the ``score_kind`` to declare, the store to pass instead of a
    retriever that drops the scores). Silence it once the default is what you
    want: ``warnings.filterwarnings("ignore", category=UnknownScoresWarning)``.
    """


class UnsignedStoreWarning(UserWarning):
    """A store that other processes (or people) can write to was made without a secret.

    Issued once per store, when it is made, by :class:`~crag_heuristic.RedisCache`,
    :class:`~crag_heuristic.cache.TieredCache` (in front of a shared tier of your own)
    and :class:`~crag_heuristic.grading.RedisGradeLog` given no ``secret``, with a
    ``crag.store.unsigned`` event (``store``: the class's name): anyone who can
    write to the store can plant values they hand out as their own. Their
    ``unsigned`` setting says what to do instead: ``"refuse"`` (a
    :class:`ConfigError`) or ``"allow"`` (nothing: nobody else can write to the
    store, or a layer above signs, as ``CRAG(cache_secret=...)`` does).
    ``warnings.simplefilter("error", UnsignedStoreWarning)`` makes every such
    store an error.
    """


def error_classes() -> dict[str, type[CragError]]:
    """Every error class defined in this module, by name (the tree drawn above)."""
    return {
        value.__name__: value
        for value in globals().values()
        if isinstance(value, type) and issubclass(value, CragError) and value.__module__ == __name__
    }
