"""An LLM behind any OpenAI-compatible chat-completions API as a cascade's grader.

:class:`OpenAIGrader` sends ``POST {base_url}/chat/completions`` (OpenAI,
vLLM, Ollama, llama.cpp's server, LM Studio ...) and reads the grades out of
the model's answer (:mod:`crag_heuristic._grading.answers`).

* **One request per list** (``mode="list"``, the default): the passages go
  numbered in one prompt and the model answers one grade each. With
  ``mode="chunk"`` each passage is its own request (at most
  ``max_concurrency`` at a time).
* **Prompts**: ``"binary"`` (yes / no) or ``"rubric"`` (0 to 1), or your own
  :class:`~crag_heuristic.grading.Prompt` (:mod:`crag_heuristic._grading.prompts`).
* **Structured output** (``structured=True``, the default): the request asks for
  an answer under the prompt's JSON schema (``response_format`` of type
  ``json_schema``, OpenAI's shape, which llama.cpp, vLLM, Ollama and LM Studio
  read too), so a small model cannot wander into prose. A server that refuses
  the field (a 400, 422, 500 or 501 whose message names ``response_format``,
  a schema or a grammar, before any structured answer came back) is asked
  again without it, once; when that answers, the grader remembers it and sends
  no schema again (a ``crag.llm_grade.unstructured`` warning says so once).
  Not sent when ``extra_body`` sets its own (``response_format``, ``grammar``,
  ``json_schema``, ``guided_json`` ...) or the prompt has no ``grade_schema``.
* **Echoes are no grades**: the answer is read with the prompt beside it, and
  a line the model copied from it (a rubric line) is not a grade
  (:mod:`crag_heuristic._grading.answers`).
* **The model's name**: :meth:`OpenAIGrader.check_model` asks ``GET
  {base_url}/models`` and refuses a model the server does not list, naming the
  ones it does (a server without the route is taken at its word).
* **Settings from a spec**: :meth:`OpenAIGrader.from_spec` takes
  ``openai:MODEL@BASE_URL?timeout=60&max_tokens=64`` (the ``calibrate
  --grader`` spec; :data:`SPEC_SETTINGS`).
* **Failures are typed, never a silent 0**: a timeout is
  :class:`~crag_heuristic.grading.GraderTimeout`; an answer that cannot be read
  or holds the wrong number of grades, :class:`~crag_heuristic.grading.GraderOutputError`;
  an HTTP status, :class:`~crag_heuristic.grading.GraderHTTPError`; no
  connection, :class:`~crag_heuristic.grading.GraderConnectionError`. The
  cascade records them on its result and keeps the gate's verdict.
* **Retries**: 408, 429, 5xx and a refused or dropped connection are retried
  up to ``max_retries`` times, waiting ``backoff * 2**n`` seconds (at most
  ``backoff_max``) less a random share ``jitter`` of it, or longer when the
  server sends ``Retry-After`` / ``retry-after-ms`` (still at most
  ``backoff_max``; :mod:`crag_heuristic._retry`). A timeout is not retried
  (a slow model stays slow), nor is an unreadable answer (the same prompt at
  temperature 0 gets the same answer).
* **Concurrency**: at most ``max_concurrency`` requests in flight, across the
  threads that share the grader, and within each event loop.
* **Cost**: each answer is a :class:`~crag_heuristic.grading.Graded` whose
  :class:`~crag_heuristic.grading.GraderUsage` (requests, retries, tokens from
  the response's ``usage``, milliseconds) the cascade shows on its report;
  :attr:`OpenAIGrader.usage` adds up every call.
* **Secrets**: the API key is sent as the ``Authorization: Bearer`` header,
  never in the URL, and appears in no repr, error, event or fingerprint; a
  ``base_url`` holding credentials or a query string is refused. An error
  text the server sends back is cut short, with the key, any header value
  and the query text masked. httpx's own log line names the method, the URL
  and the status only.
* **Events**: ``crag.llm_grade`` per call at INFO (``url``, ``model``,
  ``prompt``, ``mode``, ``chunks``, ``requests``, ``retries``, ``status``,
  ``prompt_tokens``, ``completion_tokens``, ``duration_ms``, ``error``) and
  ``crag.llm_grade.retry`` per retry at DEBUG; never the query or the passages.

Grades are cached by the cascade (per fingerprint, query, chunk id and text
digest): the fingerprint holds the endpoint's host and path, the model, the
prompt's name, version and text digest, the mode, the answer's schema when
structured output is asked for, and every setting that changes an answer,
never the key.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import inspect
import json
import random
import ssl
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

from .._optional import requires

with requires("llm", "OpenAIGrader (the LLM grader)"):
    import httpx

from .._config import _check_number
from .._exceptions import (
    ConfigError,
    GraderConnectionError,
    GraderError,
    GraderHTTPError,
    GraderOutputError,
    GraderTimeout,
)
from .._logging import get_logger
from .._protocols import EventLogger
from .._retry import backoff_delay, retry_after_seconds
from .._types import Chunk
from .._usage import Graded, GraderUsage
from .._version import __version__
from .answers import read_grades
from .prompts import Prompt, prompt_of

EVENT = "crag.llm_grade"
Mode = Literal["list", "chunk"]
_HIDDEN = "<hidden>"
_MESSAGE_CHARS = 200
_MASK = "***"
_LISTED = 20  # models named at most in the error of a wrong model name
# fields by which a user's extra_body already says how the answer is shaped
_OWN_FORMAT = frozenset(
    {"response_format", "grammar", "json_schema", "guided_json", "guided_choice",
     "guided_regex", "guided_grammar", "structured_outputs", "format"}
)  # fmt: skip
# a refusal of the structured-output request: these statuses, a message naming it
_SCHEMA_REFUSED = frozenset({400, 422, 500, 501})
_SCHEMA_WORDS = ("response_format", "json_schema", "schema", "grammar", "structured")


def _retryable_status(status: int) -> bool:
    return status in (408, 429) or status >= 500


@dataclass(frozen=True, slots=True)
class _Step:
    """What one request came to: grades, or a typed error and whether to retry
    (``message``: the server's error text, masked)."""

    grades: list[float] | None = None
    error: GraderError | None = None
    retryable: bool = False
    retry_after: float | None = None
    status: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    message: str = ""


@dataclass(frozen=True, slots=True)
class _Sent:
    """One request as sent: what its answer is read against."""

    query: str
    n: int
    prompt: str  # the messages' text: an answer's line found in it is an echo
    structured: bool


class _Tally:
    """A call's requests, retries and tokens (its requests may run in threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started = time.perf_counter()
        self.final = GraderUsage()  # set when the call ends
        self.requests = 0
        self.retries = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.status: int | None = None

    def add(self, step: _Step) -> None:
        with self._lock:
            self.requests += 1
            self.prompt_tokens += step.prompt_tokens
            self.completion_tokens += step.completion_tokens
            self.status = step.status or self.status

    def retried(self) -> None:
        with self._lock:
            self.retries += 1

    def usage(self) -> GraderUsage:
        with self._lock:
            return GraderUsage(
                requests=self.requests,
                retries=self.retries,
                prompt_tokens=self.prompt_tokens,
                completion_tokens=self.completion_tokens,
                ms=round((time.perf_counter() - self.started) * 1000.0, 3),
            )


class OpenAIGrader:
    """A chat model behind an OpenAI-compatible API as a grader (module doc).

    Keyword-only, validated; the ``llm`` extra (httpx). Connections: the
    sync calls share one pooled ``httpx.Client`` (made on first use, closed
    by :meth:`close` or the end of a ``with`` block); the async calls share
    one inside ``async with grader:`` (bound to that event loop, closed at
    its end), and outside it each :meth:`agrade` opens and closes its own, so
    the grader works under any event loop (``asyncio.run`` per call
    included). Thread-safe.

    Args:
        base_url: the API's root, as the OpenAI SDKs take it
            (``https://api.openai.com/v1``, ``http://localhost:11434/v1`` for
            Ollama, ``http://localhost:8000/v1`` for vLLM,
            ``http://localhost:8080/v1`` for llama.cpp, ``http://localhost:1234/v1``
            for LM Studio); ``/chat/completions`` is appended unless it is
            there. No credentials or query string in it.
        model: the model name the server knows.
        api_key: sent as ``Authorization: Bearer <key>`` (``None``: no such
            header, for local servers). Never shown anywhere.
        prompt: ``"binary"`` (default), ``"rubric"`` or a
            :class:`~crag_heuristic.grading.Prompt`.
        mode: ``"list"`` (one request per list, default) or ``"chunk"`` (one
            per passage).
        timeout: seconds each request may take (connect, write, read, pool).
            A call takes at most about ``(max_retries + 1) * timeout`` plus the
            retry delays: keep that below the escalation's ``timeout``, or the
            cascade abandons the call (``GraderTimeout``, its cost unknown).
        max_retries: retries after a 408, 429, 5xx or connection failure.
        backoff, backoff_max, jitter: the retry delays (module doc).
        max_concurrency: requests in flight at most (per event loop, and
            across the threads of sync calls).
        temperature: sent as is (``None``: not sent; some reasoning models
            take only their default).
        max_tokens: the answer's token limit (``None``: not sent, the
            server's default; OpenAI's reasoning models refuse the field:
            give ``extra_body={"max_completion_tokens": ...}`` there).
        max_passage_chars: each passage is cut to this many characters.
        structured: ask for the answer under the prompt's JSON schema (module
            doc); ``False``: free text, read by the tolerant reader.
        extra_body: more fields for the request body (``seed``,
            ``response_format``, ``top_p`` ...); part of the fingerprint.
        headers: more request headers (e.g. ``{"api-key": ...}`` for Azure);
            their values are treated as secrets (not in the fingerprint:
            they must not change the answers).
        client: an ``httpx.Client`` for the sync calls (proxies, custom
            transports); not closed by :meth:`close`.
        async_client: an ``httpx.AsyncClient`` for every :meth:`agrade` (it
            belongs to one event loop); not closed by :meth:`aclose`.
        rng: the random source of the retry jitter (seed it for repeatable delays).
        logger: a structlog logger for the events.

    Raises:
        ConfigError: a bad value, naming the field (never showing a secret).
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        prompt: str | Prompt = "binary",
        mode: Mode = "list",
        timeout: float = 30.0,
        max_retries: int = 2,
        backoff: float = 0.5,
        backoff_max: float = 8.0,
        jitter: float = 0.5,
        max_concurrency: int = 4,
        temperature: float | None = 0.0,
        max_tokens: int | None = None,
        max_passage_chars: int = 4000,
        structured: bool = True,
        extra_body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        client: httpx.Client | None = None,
        async_client: httpx.AsyncClient | None = None,
        rng: random.Random | None = None,
        logger: EventLogger | None = None,
    ) -> None:
        self._address, self.url, where = _endpoint(base_url)
        if not isinstance(model, str) or not model.strip() or "|" in model:
            raise ConfigError("model", model, "must be a non-empty name (without '|')")
        self.model = model
        self.prompt = prompt_of(prompt)
        if mode not in ("list", "chunk"):
            raise ConfigError("mode", mode, "must be 'list' or 'chunk'")
        self.mode: Mode = mode
        _check_number("timeout", timeout, low=0.0, low_open=True)
        _check_number("max_retries", max_retries, low=0, integer=True)
        _check_number("backoff", backoff, low=0.0)
        _check_number("backoff_max", backoff_max, low=0.0)
        if backoff_max < backoff:
            raise ConfigError("backoff_max", backoff_max, f"must be >= backoff ({backoff})")
        _check_number("jitter", jitter, low=0.0, high=1.0)
        _check_number("max_concurrency", max_concurrency, low=1, integer=True)
        if temperature is not None:
            _check_number("temperature", temperature, low=0.0)
        if max_tokens is not None:
            _check_number("max_tokens", max_tokens, low=1, integer=True)
        _check_number("max_passage_chars", max_passage_chars, low=1, integer=True)
        if not isinstance(structured, bool):
            raise ConfigError("structured", structured, "must be True or False")
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.backoff, self.backoff_max, self.jitter = backoff, backoff_max, jitter
        self.max_concurrency = max_concurrency
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.max_passage_chars = max_passage_chars
        self._extra = _checked_extra(extra_body)
        self.structured = structured
        # None: not known yet; True: a structured answer came back; False: refused
        self._schema_taken: bool | None = None
        self._headers, self._secrets = _request_headers(api_key, headers)
        if client is not None and not isinstance(client, httpx.Client):
            raise ConfigError("client", type(client).__name__, "must be an httpx.Client")
        if async_client is not None and not isinstance(async_client, httpx.AsyncClient):
            raise ConfigError(
                "async_client", type(async_client).__name__, "must be an httpx.AsyncClient"
            )
        self._client = client
        self._owns_client = client is None
        self._async_client = async_client
        self._pooled: tuple[weakref.ref[asyncio.AbstractEventLoop], httpx.AsyncClient] | None
        self._pooled = None
        self._ssl: ssl.SSLContext | None = None
        self._ssl_lock = threading.Lock()
        self._rng = rng if rng is not None else random.Random()
        self._log: EventLogger = logger if logger is not None else get_logger()
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._async_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]
        self._async_slots = weakref.WeakKeyDictionary()
        self._total = GraderUsage()
        self._fingerprint = self._make_fingerprint(where)

    # -- identity ------------------------------------------------------------------------

    def _make_fingerprint(self, where: str) -> str:
        parts = [
            f"openai-chat:{where}",
            f"model={self.model}",
            f"prompt={self.prompt.id}:{self.prompt.digest}",
            f"mode={self.mode}",
            f"temperature={'default' if self.temperature is None else f'{self.temperature:g}'}",
            f"max_tokens={'default' if self.max_tokens is None else self.max_tokens}",
            f"passage_chars={self.max_passage_chars}",
        ]
        if self._extra:
            text = json.dumps(self._extra, sort_keys=True, ensure_ascii=False, default=str)
            parts.append(f"extra={hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}")
        schema = self._schema(None if self.mode == "chunk" else 1)
        if schema is not None:
            text = json.dumps(schema, sort_keys=True)
            parts.append(f"schema={hashlib.sha256(text.encode('utf-8')).hexdigest()[:12]}")
        return "|".join(parts)

    def _schema(self, n: int | None) -> dict[str, Any] | None:
        """The answer's JSON schema this grader asks for (``None``: none: structured
        output off, the prompt has no grade schema, or ``extra_body`` shapes it)."""
        if not self.structured or _OWN_FORMAT & set(self._extra):
            return None
        return self.prompt.response_schema(n)

    @property
    def structured_output(self) -> bool | None:
        """Whether the server takes the structured-output request: ``None`` before
        it answered one (or when none is sent), ``True`` once it answered one,
        ``False`` once it refused it (no schema is sent again)."""
        with self._lock:
            return self._schema_taken

    @property
    def fingerprint(self) -> str:
        """The endpoint's host and path, the model, the prompt (name, version, text
        digest), the mode and the settings that change answers; never a secret."""
        return self._fingerprint

    @property
    def usage(self) -> GraderUsage:
        """Every call's usage added up since the grader was made."""
        with self._lock:
            return self._total

    def __repr__(self) -> str:
        return (
            f"OpenAIGrader(base_url={self.url!r}, model={self.model!r}, "
            f"prompt={self.prompt.id!r}, mode={self.mode!r})"
        )

    @classmethod
    def from_spec(cls, spec: str, *, api_key: str | None = None, **settings: Any) -> OpenAIGrader:
        """The grader of a spec ``openai:MODEL@BASE_URL[?KEY=VALUE&...]`` (the
        ``openai:`` prefix may be left out), as ``crag-heuristic calibrate
        --grader`` takes it: the query string gives settings of
        :data:`SPEC_SETTINGS` (``?timeout=60&max_tokens=64&prompt=rubric``;
        ``none`` leaves ``max_tokens`` or ``temperature`` unsent; ``structured``
        is ``true`` or ``false``); ``settings`` gives any other keyword of the
        constructor (``extra_body``, ``headers`` ...), a ``prompt`` also as a dict
        of :class:`~crag_heuristic.grading.Prompt`'s fields. A setting given twice
        is refused.

        Raises:
            ConfigError: a spec that is not of that form, an unknown or repeated
                setting, or a bad value (naming it).
        """
        model, base_url, given = parse_spec(spec)
        known = _constructor_settings()
        for key in settings:
            if key not in known or key in ("base_url", "model", "api_key"):
                raise ConfigError(key, settings[key], _unknown(key, known))
        twice = sorted(set(given) & set(settings))
        if twice:
            raise ConfigError(twice[0], settings[twice[0]], "is given twice (spec and settings)")
        merged = {**given, **settings}
        if isinstance(merged.get("prompt"), Mapping):
            merged["prompt"] = _prompt_from(merged["prompt"])
        return cls(base_url=base_url, model=model, api_key=api_key, **merged)

    # -- the model's name --------------------------------------------------------------

    def check_model(self) -> tuple[str, ...] | None:
        """The models the server lists (``GET {base_url}/models``), once this
        grader's ``model`` is found among them (exactly, or with Ollama's
        ``:latest`` tag, or as the last part of a listed path: llama.cpp lists the
        model file's path); ``None`` when the server has no such list (any status
        but 200 and 401, or a body that is not OpenAI's ``{"data": [{"id": ...}]}``).

        Raises:
            ConfigError: the model is not listed (the error names those that are).
            GraderHTTPError: 401 (the key).
            GraderConnectionError, GraderTimeout: no answer.
        """
        client = self._sync_client()
        try:
            response = client.get(f"{self.url}/models", headers=self._headers, timeout=self.timeout)
        except Exception as exc:  # classified: a typed error (a bug is raised as it is)
            raise self._models_error(exc) from exc
        return self._listed(response)

    async def acheck_model(self) -> tuple[str, ...] | None:
        """The async :meth:`check_model` (same answers, same errors)."""
        client, temporary = self._loop_client()
        try:
            response = await client.get(
                f"{self.url}/models", headers=self._headers, timeout=self.timeout
            )
        except Exception as exc:  # classified: a typed error (a bug is raised as it is)
            raise self._models_error(exc) from exc
        finally:
            if temporary:
                await client.aclose()
        return self._listed(response)

    def _models_error(self, exc: Exception) -> GraderError:
        error = self._from_exception(exc, 0, "GET {url}/models").error
        assert error is not None  # _from_exception always makes one (or raises exc)
        return error

    def _listed(self, response: httpx.Response) -> tuple[str, ...] | None:
        """``check_model``'s reading of the answer to ``GET /models``."""
        if response.status_code == 401:
            raise GraderHTTPError(
                f"GET {self.url}/models answered 401: check api_key",
                status_code=401,
                grader=self._fingerprint,
            )
        ids = _model_ids(response) if response.status_code == 200 else None
        found = ids is not None and _lists_model(ids, self.model)
        self._log.info(
            f"{EVENT}.models",
            url=self.url,
            model=self.model,
            status=response.status_code,
            listed=None if ids is None else len(ids),
            found=found if ids is not None else None,
        )
        if ids is None or found:
            return ids
        names = ", ".join(repr(i) for i in ids[:_LISTED])
        more = f" and {len(ids) - _LISTED} more" if len(ids) > _LISTED else ""
        raise ConfigError(
            "model",
            self.model,
            f"the server at {self.url} does not list it (GET /models): give one of {names}{more}",
        )

    # -- grading -------------------------------------------------------------------------

    def grade(self, query: str, chunks: Sequence[Chunk]) -> Graded:
        """P(relevant) of each chunk, with what it cost.

        Raises:
            GraderError: a :class:`GraderTimeout`, :class:`GraderOutputError`,
                :class:`GraderHTTPError` or :class:`GraderConnectionError`
                (its ``usage`` says what the call cost).
        """
        texts = self._texts(chunks)
        with self._call(len(texts)) as tally:
            if not texts:
                grades: list[float] = []
            elif self.mode == "list":
                grades = self._ask(query, texts, tally)
            else:
                grades = self._ask_each(query, texts, tally)
        return Graded(grades, tally.final)

    async def agrade(self, query: str, chunks: Sequence[Chunk]) -> Graded:
        """The async :meth:`grade` (same answers, same errors)."""
        texts = self._texts(chunks)
        with self._call(len(texts)) as tally:
            if not texts:
                grades: list[float] = []
            elif self.mode == "list":
                grades = await self._aask(query, texts, tally)
            else:
                answers = await asyncio.gather(
                    *(self._aask(query, [text], tally) for text in texts), return_exceptions=True
                )
                failed = next((a for a in answers if isinstance(a, BaseException)), None)
                if failed is not None:
                    raise failed
                grades = [g for answer in answers for g in answer]  # type: ignore[union-attr]
        return Graded(grades, tally.final)

    @contextmanager
    def _call(self, chunks: int) -> Iterator[_Tally]:
        """One call's accounting: its usage added to the total and logged, and
        attached to the :class:`GraderError` it ends in (``tally.final`` after)."""
        tally = _Tally()
        try:
            yield tally
        except GraderError as error:
            self._done(tally, chunks, error)
            raise
        self._done(tally, chunks, None)

    def _texts(self, chunks: Sequence[Chunk]) -> list[str]:
        return [chunk.text[: self.max_passage_chars] for chunk in chunks]

    def _ask_each(self, query: str, texts: list[str], tally: _Tally) -> list[float]:
        """One request per passage, ``max_concurrency`` threads at most; the first
        failure (in the passages' order) is raised, the requests not yet sent
        are cancelled."""
        if len(texts) == 1 or self.max_concurrency == 1:
            return [g for text in texts for g in self._ask(query, [text], tally)]
        workers = min(len(texts), self.max_concurrency)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="crag-llm") as pool:
            futures: list[Future[list[float]]] = [
                pool.submit(self._ask, query, [text], tally) for text in texts
            ]
            try:
                return [g for future in futures for g in future.result()]
            except BaseException:
                for future in futures:
                    future.cancel()
                raise

    def _ask(self, query: str, texts: list[str], tally: _Tally) -> list[float]:
        client = self._sync_client()
        structured, fell_back, retry = self._asks_structured(), False, 0
        while True:
            request, sent = self._request(query, texts, structured)
            with self._slots:
                try:
                    response = client.post(**request)
                except Exception as exc:  # noqa: BLE001 - classified, never re-raised raw
                    step = self._from_exception(exc, retry)
                else:
                    step = self._from_response(response, sent, retry)
            if structured and self._refuses_schema(step):
                tally.add(step)  # the refused request, then the same one without the schema
                structured, fell_back = False, True
                continue
            self._learn_schema(step, sent, fell_back)
            delay = self._after(step, retry, tally)
            if delay is None:
                return step.grades or []
            time.sleep(delay)
            retry += 1

    async def _aask(self, query: str, texts: list[str], tally: _Tally) -> list[float]:
        client, temporary = self._loop_client()
        slots = self._loop_slots()
        structured, fell_back, retry = self._asks_structured(), False, 0
        try:
            while True:
                request, sent = self._request(query, texts, structured)
                async with slots:
                    try:
                        response = await client.post(**request)
                    except Exception as exc:  # noqa: BLE001 - classified, never re-raised raw
                        step = self._from_exception(exc, retry)
                    else:
                        step = self._from_response(response, sent, retry)
                if structured and self._refuses_schema(step):
                    tally.add(step)
                    structured, fell_back = False, True
                    continue
                self._learn_schema(step, sent, fell_back)
                delay = self._after(step, retry, tally)
                if delay is None:
                    return step.grades or []
                await asyncio.sleep(delay)
                retry += 1
        finally:
            if temporary:
                await client.aclose()

    def _asks_structured(self) -> bool:
        """Whether the next request asks for structured output (module doc)."""
        with self._lock:
            refused = self._schema_taken is False
        return not refused and self._schema(1) is not None

    def _refuses_schema(self, step: _Step) -> bool:
        """Whether a structured request's failure is the server refusing the schema
        (module doc): never once a structured answer came back."""
        with self._lock:
            taken = self._schema_taken
        said = step.message.lower()
        return (
            taken is not True
            and step.status in _SCHEMA_REFUSED
            and any(word in said for word in _SCHEMA_WORDS)
        )

    def _learn_schema(self, step: _Step, sent: _Sent, fell_back: bool) -> None:
        """Remember what an answered request says of structured output."""
        if not 200 <= step.status < 300 or not (sent.structured or fell_back):
            return
        with self._lock:
            before, self._schema_taken = self._schema_taken, sent.structured
        if fell_back and before is not False:
            self._log.warning(
                f"{EVENT}.unstructured",
                url=self.url,
                model=self.model,
                reason="the server refused response_format (json_schema); answers are free text",
            )

    def _request(
        self, query: str, texts: list[str], structured: bool
    ) -> tuple[dict[str, Any], _Sent]:
        single = self.mode == "chunk"
        messages = self.prompt.messages(query, texts, single=single)
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        schema = self._schema(None if single else len(texts)) if structured else None
        if schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "grades", "strict": True, "schema": schema},
            }
        body.update(self._extra)
        request = {
            "url": self._address,
            "content": json.dumps(body, ensure_ascii=False).encode("utf-8"),
            "headers": self._headers,
            "timeout": self.timeout,
        }
        prompt = "\n".join(m["content"] for m in messages)
        return request, _Sent(query, len(texts), prompt, schema is not None)

    def _after(self, step: _Step, retry: int, tally: _Tally) -> float | None:
        """After attempt number ``retry`` (0-based): ``None`` when it answered, else
        the delay before the next attempt (counted as a retry).

        Raises:
            GraderError: the attempt's error, when it may not be retried (or the
                retries are spent).
        """
        tally.add(step)
        if step.error is None:
            return None
        if not step.retryable or retry >= self.max_retries:
            raise step.error
        tally.retried()
        return self._delay(retry, step)

    def _delay(self, retry: int, step: _Step) -> float:
        delay = backoff_delay(
            retry,
            self._rng.random(),
            backoff=self.backoff,
            backoff_max=self.backoff_max,
            jitter=self.jitter,
            retry_after=step.retry_after,
        )
        self._log.debug(
            f"{EVENT}.retry",
            url=self.url,
            model=self.model,
            status=step.status or None,
            error=type(step.error).__name__,
            retry=retry + 1,
            delay_s=round(delay, 3),
        )
        return delay

    def _done(self, tally: _Tally, chunks: int, error: GraderError | None) -> GraderUsage:
        usage = tally.final = tally.usage()
        with self._lock:
            self._total = self._total + usage
        if error is not None:
            error.usage = usage
            if error.grader is None:
                error.grader = self._fingerprint
        self._log.info(
            EVENT,
            url=self.url,
            model=self.model,
            prompt=self.prompt.id,
            mode=self.mode,
            chunks=chunks,
            requests=usage.requests,
            retries=usage.retries,
            status=tally.status,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            duration_ms=usage.ms,
            error=None if error is None else type(error).__name__,
        )
        return usage

    # -- one request ---------------------------------------------------------------------

    def _from_response(self, response: httpx.Response, sent: _Sent, retry: int) -> _Step:
        status = response.status_code
        if 200 <= status < 300:
            return self._read_answer(response, sent)
        after = f" (after {retry} retries)" if retry else ""
        retry_after = retry_after_seconds(response.headers)
        hint = {
            401: ": check api_key",
            403: ": check api_key and the model's access",
            404: ": check base_url (it ends in /v1 for most servers) and model",
            429: " (rate limited)",
        }.get(status, "")
        if sent.structured and status in (400, 422):
            hint += " (it asked for structured output: structured=False turns that off)"
        message = self._scrub(_server_message(response), sent.query)[:_MESSAGE_CHARS]
        error = GraderHTTPError(
            f"POST {self.url}/chat/completions answered {status}{hint}{after}: {message}",
            status_code=status,
            retry_after=retry_after,
            grader=self._fingerprint,
        )
        return _Step(
            error=error,
            retryable=_retryable_status(status),
            retry_after=retry_after,
            status=status,
            message=message,
        )

    def _read_answer(self, response: httpx.Response, sent: _Sent) -> _Step:
        status = response.status_code
        try:
            payload = json.loads(response.content)
        except (ValueError, RecursionError):
            return self._output_error(status, "a body that is not JSON")
        if not isinstance(payload, dict):
            return self._output_error(status, f"a JSON {type(payload).__name__}, not an object")
        tokens = _tokens(payload.get("usage"))
        choices = payload.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        message = choice.get("message") if isinstance(choice, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        finish = choice.get("finish_reason") if isinstance(choice, dict) else None
        if not isinstance(content, str):
            return self._output_error(status, f"no answer text (finish_reason={finish!r})", tokens)
        try:
            grades = read_grades(
                content,
                sent.n,
                grader=self._fingerprint,
                truncated=finish == "length",
                prompt=sent.prompt,
            )
        except GraderOutputError as error:
            return _Step(
                error=error, status=status, prompt_tokens=tokens[0], completion_tokens=tokens[1]
            )
        return _Step(
            grades=grades, status=status, prompt_tokens=tokens[0], completion_tokens=tokens[1]
        )

    def _output_error(self, status: int, what: str, tokens: tuple[int, int] = (0, 0)) -> _Step:
        error = GraderOutputError(
            f"POST {self.url}/chat/completions answered {status} with {what}",
            grader=self._fingerprint,
        )
        return _Step(
            error=error, status=status, prompt_tokens=tokens[0], completion_tokens=tokens[1]
        )

    def _from_exception(
        self, exc: Exception, retry: int, where: str = "POST {url}/chat/completions"
    ) -> _Step:
        """A sending failure as a typed error (chained to it).

        Raises:
            Exception: ``exc`` itself when it is not an I/O failure (a bug).
        """
        where = where.format(url=self.url)
        after = f" (after {retry} retries)" if retry else ""
        kind = type(exc).__name__
        error: GraderError
        retryable = False
        if isinstance(exc, httpx.TimeoutException):
            error = GraderTimeout(
                f"{where}: no answer within {self.timeout:g} s ({kind})", grader=self._fingerprint
            )
        elif isinstance(exc, httpx.ConnectError | httpx.NetworkError | httpx.RemoteProtocolError):
            error = GraderConnectionError(
                f"{where}: connection failed{after} ({kind})", grader=self._fingerprint
            )
            retryable = True
        elif isinstance(exc, httpx.HTTPError | httpx.InvalidURL | httpx.StreamError | OSError):
            error = GraderConnectionError(f"{where} failed ({kind})", grader=self._fingerprint)
        else:
            raise exc
        error.__cause__ = exc
        return _Step(error=error, retryable=retryable)

    def _scrub(self, text: str, query: str) -> str:
        """``text`` with every secret, and the query, masked (white space runs
        count as one space: the server's message is read that way)."""
        for secret in (*self._secrets, " ".join(query.split())):
            if secret:
                text = text.replace(secret, _MASK)
        return text

    # -- clients -------------------------------------------------------------------------

    def _sync_client(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(verify=self._ssl_context(), follow_redirects=False)
            return self._client

    def _ssl_context(self) -> ssl.SSLContext:
        """One TLS context for every client this grader opens (making one takes
        tens of milliseconds: it reads the certificate store)."""
        with self._ssl_lock:
            if self._ssl is None:
                self._ssl = httpx.create_ssl_context()
            return self._ssl

    def _loop_client(self) -> tuple[httpx.AsyncClient, bool]:
        """The async client for the running loop, and whether it is this call's
        own (opened here, closed when the call ends)."""
        if self._async_client is not None:
            return self._async_client, False
        loop = asyncio.get_running_loop()
        with self._lock:
            pooled = self._pooled
            if pooled is not None and pooled[0]() is loop:
                return pooled[1], False
        return self._new_async_client(), True

    def _loop_slots(self) -> asyncio.Semaphore:
        """The running loop's ``max_concurrency`` slots."""
        loop = asyncio.get_running_loop()
        with self._lock:
            slots = self._async_slots.get(loop)
            if slots is None:
                slots = self._async_slots[loop] = asyncio.Semaphore(self.max_concurrency)
            return slots

    def _new_async_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(verify=self._ssl_context(), follow_redirects=False)

    def close(self) -> None:
        """Close the HTTP clients this grader opened (never injected ones); the
        pooled async client (``async with``) on its own event loop when that loop
        still runs (prefer :meth:`aclose` from async code)."""
        with self._lock:
            client = self._client if self._owns_client else None
            if self._owns_client:
                self._client = None
            pooled, self._pooled = self._pooled, None
        if client is not None:
            client.close()
        loop = None if pooled is None else pooled[0]()
        if pooled is not None and loop is not None and not loop.is_closed():
            if loop.is_running():
                asyncio.run_coroutine_threadsafe(pooled[1].aclose(), loop)
            elif not _in_a_loop():
                loop.run_until_complete(pooled[1].aclose())

    async def aclose(self) -> None:
        """Close the HTTP clients this grader opened, the async one on this loop."""
        with self._lock:
            pooled = self._pooled
            if pooled is not None and pooled[0]() is asyncio.get_running_loop():
                self._pooled = None
            else:
                pooled = None
        if pooled is not None:
            await pooled[1].aclose()
        self.close()

    def __enter__(self) -> OpenAIGrader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> OpenAIGrader:
        """Pool the async calls' connections on this event loop until the ``async with`` ends."""
        if self._async_client is None:
            loop = asyncio.get_running_loop()
            with self._lock:
                if self._pooled is None:
                    self._pooled = (weakref.ref(loop), self._new_async_client())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


SPEC_SETTINGS: dict[str, str] = {
    "prompt": "binary or rubric",
    "mode": "list or chunk",
    "structured": "true or false",
    "timeout": "seconds (a number > 0)",
    "max_retries": "an integer >= 0",
    "backoff": "seconds",
    "backoff_max": "seconds",
    "jitter": "a share in [0, 1]",
    "max_concurrency": "an integer >= 1",
    "temperature": "a number >= 0, or none",
    "max_tokens": "an integer >= 1, or none",
    "max_passage_chars": "an integer >= 1",
}
"""The settings a spec's query string may give (:meth:`OpenAIGrader.from_spec`), with
what each takes; the constructor checks the values."""

_TRUE, _FALSE = frozenset({"true", "yes", "1", "on"}), frozenset({"false", "no", "0", "off"})


def _spec_value(key: str, text: str) -> Any:
    """A spec setting's text as its value (the constructor checks the value).

    Raises:
        ConfigError: a text of the wrong kind.
    """
    word = text.strip().lower()
    try:
        if key in ("prompt", "mode"):
            return text.strip()
        if key == "structured":
            if word not in _TRUE | _FALSE:
                raise ValueError(text)
            return word in _TRUE
        if key in ("temperature", "max_tokens") and word == "none":
            return None
        if key in ("max_retries", "max_concurrency", "max_tokens", "max_passage_chars"):
            return int(word)
        return float(word)
    except ValueError:
        raise ConfigError(key, text, f"must be {SPEC_SETTINGS[key]}") from None


def parse_spec(spec: str) -> tuple[str, str, dict[str, Any]]:
    """``(model, base_url, settings)`` of ``openai:MODEL@BASE_URL[?KEY=VALUE&...]``
    (:meth:`OpenAIGrader.from_spec`).

    Raises:
        ConfigError: not of that form, an unknown or repeated key, a bad value.
    """
    if not isinstance(spec, str):
        raise ConfigError("spec", type(spec).__name__, "must be a string")
    text = spec.strip()
    text = text[len("openai:") :] if text.startswith("openai:") else text
    at = max(text.rfind("@http://"), text.rfind("@https://"))
    if at <= 0:
        raise ConfigError(
            "spec", _HIDDEN, "must be openai:MODEL@BASE_URL (an http(s) URL), with ?KEY=VALUE..."
        )
    model, url = text[:at], text[at + 1 :]
    url, _, query = url.partition("?")
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise ConfigError("spec", _HIDDEN, "its settings must be KEY=VALUE joined by &") from None
    settings: dict[str, Any] = {}
    for key, value in pairs:
        if key not in SPEC_SETTINGS:
            raise ConfigError(key, value, _unknown(key, SPEC_SETTINGS))
        if key in settings:
            raise ConfigError(key, value, "is given twice in the spec")
        settings[key] = _spec_value(key, value)
    return model, url, settings


def _unknown(key: str, known: Sequence[str] | Mapping[str, Any]) -> str:
    names = sorted(known)
    close = difflib.get_close_matches(key, names, n=1)
    return "unknown setting" + (
        f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(names)}"
    )


def _constructor_settings() -> tuple[str, ...]:
    return tuple(inspect.signature(OpenAIGrader.__init__).parameters)[1:]


def _prompt_from(fields: Mapping[str, Any]) -> Prompt:
    """A :class:`Prompt` from a dict of its fields (a settings file's ``[prompt]``).

    Raises:
        ConfigError: an unknown or missing field, or a bad value.
    """
    known = ("name", "version", "system", "list_template", "single_template", "grade_schema")
    for key in fields:
        if key not in known:
            raise ConfigError(f"prompt.{key}", fields[key], _unknown(str(key), known))
    missing = [k for k in known[:5] if k not in fields]
    if missing:
        raise ConfigError("prompt", sorted(fields), f"needs {', '.join(missing)}")
    return Prompt(**{str(k): v for k, v in fields.items()})


def _model_ids(response: httpx.Response) -> tuple[str, ...] | None:
    """The ids of an OpenAI models list (``{"data": [{"id": ...}, ...]}``), else ``None``."""
    try:
        data = json.loads(response.content)
    except (ValueError, RecursionError):
        return None
    rows = data.get("data") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        return None
    ids = tuple(r["id"] for r in rows if isinstance(r, dict) and isinstance(r.get("id"), str))
    return ids or None


def _lists_model(ids: Sequence[str], model: str) -> bool:
    """Whether ``model`` is one of ``ids``: the same, with Ollama's ``:latest`` added,
    or the last part of a listed path (llama.cpp lists the model file's path)."""
    for listed in ids:
        base = listed.replace("\\", "/").rsplit("/", 1)[-1]
        if model in (listed, base) or f"{model}:latest" == listed:
            return True
    return False


def _endpoint(base_url: Any) -> tuple[str, str, str]:
    """``(the chat-completions address, base_url as shown, host and path for the
    fingerprint)``.

    Raises:
        ConfigError: not an http(s) URL with a host, or one holding credentials,
            a query or a fragment (never shown: it may hold a key).
    """
    if not isinstance(base_url, str):
        raise ConfigError("base_url", type(base_url).__name__, "must be a string")
    url = base_url.strip().rstrip("/")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ConfigError("base_url", _HIDDEN, "is not a URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError("base_url", _HIDDEN, "must be an http(s) URL with a host")
    if "@" in parts.netloc or parts.query or parts.fragment:
        raise ConfigError(
            "base_url",
            _HIDDEN,
            "must hold no credentials, query or fragment: give the key as api_key "
            "(sent as a header), other headers as headers=",
        )
    suffix = "/chat/completions"
    root = url[: -len(suffix)] if url.endswith(suffix) else url
    host = parts.hostname + (f":{port}" if port is not None else "")
    path = urlsplit(root).path
    return root + suffix, root, f"{host}{path}"


def _checked_extra(extra: Any) -> dict[str, Any]:
    if extra is None:
        return {}
    if not isinstance(extra, Mapping) or not all(isinstance(k, str) for k in extra):
        raise ConfigError("extra_body", type(extra).__name__, "must be a dict with string keys")
    taken = sorted({"model", "messages"} & set(extra))
    if taken:
        raise ConfigError("extra_body", taken, "must not set model or messages")
    try:
        json.dumps(dict(extra))
    except (TypeError, ValueError) as exc:
        raise ConfigError("extra_body", _HIDDEN, f"must be JSON ({exc})") from None
    return dict(extra)


def _request_headers(api_key: Any, headers: Any) -> tuple[dict[str, str], tuple[str, ...]]:
    """The request's headers and the secrets among them (the key, every value
    given in ``headers``).

    Raises:
        ConfigError: a key or header that is not a non-empty string without
            line breaks (never shown).
    """
    out = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "User-Agent": f"crag-heuristic/{__version__}",
    }
    secrets: list[str] = []
    if api_key is not None:
        if not isinstance(api_key, str) or not api_key.strip() or _breaks(api_key):
            raise ConfigError(
                "api_key", _HIDDEN, "must be a non-empty string without spaces or line breaks"
            )
        out["Authorization"] = f"Bearer {api_key}"
        secrets.append(api_key)
    if headers is not None:
        if not isinstance(headers, Mapping):
            raise ConfigError("headers", type(headers).__name__, "must be a dict of strings")
        for name, value in headers.items():
            if not isinstance(name, str) or not name.strip() or _breaks(name):
                raise ConfigError("headers", _HIDDEN, "a header name must be a non-empty string")
            if not isinstance(value, str) or "\n" in value or "\r" in value:
                raise ConfigError(
                    f"headers[{name!r}]", _HIDDEN, "must be a string without line breaks"
                )
            out[name] = value
            if value.strip():
                secrets.append(value.strip())
    return out, tuple(secrets)


def _in_a_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _breaks(text: str) -> bool:
    return any(c.isspace() for c in text)


def _tokens(usage: Any) -> tuple[int, int]:
    """``(prompt_tokens, completion_tokens)`` of a response's ``usage`` (0 when absent)."""
    if not isinstance(usage, dict):
        return 0, 0
    out: list[int] = []
    for key in ("prompt_tokens", "completion_tokens"):
        value = usage.get(key)
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        out.append(value if ok and isinstance(value, int) else 0)
    return out[0], out[1]


def _server_message(response: httpx.Response) -> str:
    """The server's ``{"error": {"message": ...}}`` (or ``{"error": "..."}``, or
    ``{"message": ...}``), white space runs as one space, else a short account
    of the body (the caller masks secrets, then cuts it short)."""
    try:
        data = json.loads(response.content)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict):
        error = data.get("error", data)
        text = error.get("message") if isinstance(error, dict) else error
        if isinstance(text, str) and text.strip():
            return " ".join(text.split()[:_MESSAGE_CHARS])
    if "html" in response.headers.get("Content-Type", ""):
        return "an HTML page"
    body = response.content[: 4 * _MESSAGE_CHARS].decode("utf-8", "replace")
    return " ".join(body.split()) or "an empty body"
