"""From a SearXNG JSON answer to web chunks, with what the answer said about itself.

A ``GET /search?format=json`` answer is an object with ``query``, ``results``,
``answers``, ``corrections``, ``infoboxes``, ``suggestions`` and
``unresponsive_engines`` (``number_of_results`` is gone in current SearXNG,
older versions send it). Each result has ``url``, ``title``, ``content``,
``engine``, ``engines``, ``score``, ``category`` and ``publishedDate`` (missing,
``null`` or ISO text); any of them may be missing.

:func:`parse_answer` keeps the results in the instance's order and turns each
usable one into a :class:`~crag_heuristic.Chunk`:

* ``id`` = :func:`~crag_heuristic._web.urls.web_chunk_id` of the URL (stable);
* ``text`` = cleaned title, a newline, cleaned content (either may be absent);
* ``score`` = the instance's score (``None`` if missing), kind ``WEB``;
* ``source`` = the URL exactly as the instance gave it;
* ``metadata`` = ``engine``, ``engines``, ``published_date``, ``position``
  (1-based, among the returned chunks), ``title``, ``category``, ``query``.

A result is skipped when it is not an object, has no absolute URL, or has no
text left after cleaning; one whose URL is not ``http(s)`` (``file://``,
``ftp://``, ``javascript:`` ...) is dropped and counted apart
(:attr:`WebSearchInfo.non_http`): a web chunk's source is a page a reader can
open; a later result whose normalised URL
(:func:`~crag_heuristic._web.urls.normalize_url`) was already kept is dropped
as a duplicate. No results and failing engines is an error
(:class:`~crag_heuristic.WebSearchEnginesFailed`); some results and failing
engines is a partial answer, recorded on :attr:`WebResults.info`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .._checks import is_finite_number
from .._exceptions import WebSearchEnginesFailed, WebSearchResponseError
from .._types import Chunk, ScoreKind
from .clean import clean_text
from .config import SearxngConfig
from .urls import normalize_url, web_chunk_id


@dataclass(frozen=True, kw_only=True, slots=True)
class WebSearchInfo:
    """What one web search call saw, beside the chunks.

    Attributes:
        query: the query sent.
        url: the endpoint called.
        status_code: the final HTTP status.
        received: results in the answer.
        returned: chunks returned (after skipping, dedupe and ``max_results``).
        duplicates: results dropped as another spelling of an earlier URL.
        skipped: results dropped as unusable (no URL, no text, not an object).
        non_http: results dropped because their URL is not http(s) (``file://``,
            ``ftp://``, ``javascript:`` ...).
        unresponsive_engines: ``(engine, message)`` for each engine that failed;
            non-empty with results means a partial answer.
        suggestions: query suggestions from the instance.
        corrections: spelling corrections from the instance.
        number_of_results: the instance's estimate, when it sends one.
        retries: retries made before the answer (429, 5xx, dropped connection).
        duration_ms: wall time of the whole call, retries included.
    """

    query: str
    url: str
    status_code: int
    received: int = 0
    returned: int = 0
    duplicates: int = 0
    skipped: int = 0
    non_http: int = 0
    unresponsive_engines: tuple[tuple[str, str], ...] = ()
    suggestions: tuple[str, ...] = ()
    corrections: tuple[str, ...] = ()
    number_of_results: int | None = None
    retries: int = 0
    duration_ms: float = 0.0

    @property
    def partial(self) -> bool:
        """True when some engines failed (the chunks come from the others)."""
        return bool(self.unresponsive_engines)

    def replace(self, **changes: Any) -> WebSearchInfo:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        data = dataclasses.asdict(self)
        data["unresponsive_engines"] = [list(pair) for pair in self.unresponsive_engines]
        data["suggestions"] = list(self.suggestions)
        data["corrections"] = list(self.corrections)
        return data


class WebResults(list[Chunk]):
    """The chunks of one web search (a plain ``list``), with :attr:`info` attached.

    ``WebSearcher.search`` returns ``list[Chunk]``; this subclass is one, so
    callers that only want chunks see a list, and those that care (was the
    answer partial? how many retries?) read ``results.info``. Copies made with
    ``list(results)`` or slicing are plain lists without it.
    """

    info: WebSearchInfo

    def __init__(self, chunks: Iterable[Chunk], info: WebSearchInfo) -> None:
        super().__init__(chunks)
        self.info = info


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _optional_text(value: Any) -> str | None:
    """Stripped text, or ``None`` for a missing, empty or non-string value."""
    return (value.strip() or None) if isinstance(value, str) else None


def _score(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if is_finite_number(value) else None


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(item for item in value if isinstance(item, str) and item)


def _unresponsive(value: Any) -> tuple[tuple[str, str], ...]:
    """``[[engine, message], ...]``, tolerating bare names and odd shapes."""
    if not isinstance(value, list):
        return ()
    pairs = []
    for item in value:
        if isinstance(item, str) and item:
            pairs.append((item, ""))
        elif isinstance(item, list | tuple) and item and isinstance(item[0], str):
            message = item[1] if len(item) > 1 and isinstance(item[1], str) else ""
            pairs.append((item[0], message))
    return tuple(pairs)


def _url_kind(url: str) -> str:
    """``"http"`` for an absolute http(s) URL with a host, ``"other"`` for any other
    scheme (``file:``, ``ftp:``, ``javascript:`` ...), ``"bad"`` for no URL at all."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "bad"
    if not parts.scheme:
        return "bad"
    if parts.scheme.lower() in ("http", "https"):
        return "http" if parts.netloc else "bad"
    return "other"


def _chunk(
    item: dict[str, Any], url: str, position: int, query: str, config: SearxngConfig
) -> Chunk | None:
    title = clean_text(_text(item.get("title")), config.max_title_chars)
    content = clean_text(_text(item.get("content")), config.max_content_chars)
    text = "\n".join(part for part in (title, content) if part)
    if not text:
        return None
    engine = item.get("engine")
    published = item.get("publishedDate")
    return Chunk(
        id=web_chunk_id(url),
        text=text,
        score=_score(item.get("score")),
        score_kind=ScoreKind.WEB,
        source=url,
        metadata={
            "engine": engine if isinstance(engine, str) else None,
            "engines": list(_strings(item.get("engines"))),
            "published_date": _optional_text(published),
            "position": position,
            "title": title,
            "category": _optional_text(item.get("category")),
            "query": query,
        },
    )


def parse_answer(
    payload: Any,
    *,
    query: str,
    url: str,
    status_code: int,
    max_results: int,
    config: SearxngConfig,
) -> WebResults:
    """Chunks from a decoded SearXNG answer (see the module docstring).

    Raises:
        WebSearchResponseError: the payload is not a search answer (not an
            object, or no ``results`` list).
        WebSearchEnginesFailed: no results, and engines reported failing.
    """
    if not isinstance(payload, dict):
        raise WebSearchResponseError(
            f"{url} answered JSON {type(payload).__name__}, not an object: "
            "not a SearXNG search answer",
            query=query,
            url=url,
        )
    results = payload.get("results")
    if not isinstance(results, list):
        raise WebSearchResponseError(
            f"{url} answered JSON without a 'results' list: not a SearXNG search answer",
            query=query,
            url=url,
        )
    unresponsive = _unresponsive(payload.get("unresponsive_engines"))
    if not results and unresponsive:
        names = tuple(name for name, _ in unresponsive)
        raise WebSearchEnginesFailed(
            f"{url} found nothing and engines failed: "
            + ", ".join(f"{name} ({reason or 'no reason given'})" for name, reason in unresponsive),
            engines=names,
            reasons=tuple(reason for _, reason in unresponsive),
            query=query,
            url=url,
        )
    chunks: list[Chunk] = []
    seen: set[str] = set()
    duplicates = skipped = non_http = 0
    for item in results:
        if len(chunks) >= max_results:
            break
        raw = item.get("url") if isinstance(item, dict) else None
        link = raw.strip() if isinstance(raw, str) else ""
        kind = _url_kind(link)
        if kind != "http":
            if kind == "other":
                non_http += 1
            else:
                skipped += 1
            continue
        key = normalize_url(link)
        if key in seen:
            duplicates += 1
            continue
        chunk = _chunk(item, link, len(chunks) + 1, query, config)
        if chunk is None:
            skipped += 1
            continue
        seen.add(key)
        chunks.append(chunk)
    estimate = payload.get("number_of_results")
    info = WebSearchInfo(
        query=query,
        url=url,
        status_code=status_code,
        received=len(results),
        returned=len(chunks),
        duplicates=duplicates,
        skipped=skipped,
        non_http=non_http,
        unresponsive_engines=unresponsive,
        suggestions=_strings(payload.get("suggestions")),
        corrections=_strings(payload.get("corrections")),
        number_of_results=estimate
        if isinstance(estimate, int) and not isinstance(estimate, bool)
        else None,
        retries=0,
    )
    return WebResults(chunks, info)
