"""Turning what users keep in their docstores into :class:`Chunk` objects.

A docstore entry may be a :class:`Chunk`, a mapping or a plain string:

* a ``Chunk`` is used as is (its score is replaced by the search score);
* a mapping may hold ``text`` (or ``page_content``, LangChain's name, or
  ``title`` + ``text`` as in BEIR corpora), ``id`` / ``_id``, ``source``,
  ``parent_id`` and ``metadata``; a ``source`` inside ``metadata`` is used when
  there is no top-level one (LangChain keeps it there);
* a string is the text;
* a document of a framework (LangChain's ``Document``: ``page_content`` and
  ``metadata``, its ``id`` when it has one) is read as the mapping would be.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._checks import as_text
from ._exceptions import RetrieverError
from ._types import Chunk, ScoreKind


def to_chunk(
    entry: Any,
    *,
    default_id: str,
    score: float | None,
    score_kind: ScoreKind,
    extra_metadata: Mapping[str, Any] | None = None,
    retriever: str,
) -> Chunk:
    """Build a chunk from a docstore entry, with the search score attached.

    Raises:
        RetrieverError: the entry is of an unusable type or has no text.
    """
    extra = dict(extra_metadata or {})
    if isinstance(entry, Chunk):
        return entry.replace(
            score=score, score_kind=score_kind, metadata={**entry.metadata, **extra}
        )
    if isinstance(entry, str):
        return Chunk(id=default_id, text=entry, score=score, score_kind=score_kind, metadata=extra)
    if not isinstance(entry, Mapping) and isinstance(getattr(entry, "page_content", None), str):
        metadata = getattr(entry, "metadata", None)
        metadata = metadata if isinstance(metadata, Mapping) else {}
        own_id = getattr(entry, "id", None) or metadata.get("id")  # as LangChain's adapter
        entry = {
            "page_content": entry.page_content,
            "metadata": metadata,
            "parent_id": None if metadata.get("parent_id") is None else str(metadata["parent_id"]),
            **({"id": own_id} if own_id not in (None, "") else {}),
        }
    if isinstance(entry, Mapping):
        text = entry.get("text", entry.get("page_content"))
        if not isinstance(text, str):
            raise RetrieverError(
                f"docstore entry {default_id!r} has no string 'text' or 'page_content'",
                retriever=retriever,
            )
        title = entry.get("title")
        if isinstance(title, str) and title.strip():
            text = f"{title.strip()}\n{text}"
        metadata = dict(entry.get("metadata") or {})
        source = entry.get("source", metadata.get("source"))
        chunk_id = entry.get("id", entry.get("_id", default_id))
        id_text, source_text = as_text(chunk_id), None if source is None else as_text(source)
        if id_text is None or (source is not None and source_text is None):
            raise RetrieverError(
                f"docstore entry {default_id!r}: its id or source cannot be written as text "
                f"({type(chunk_id if id_text is None else source).__name__})",
                retriever=retriever,
            )
        return Chunk(
            id=id_text,
            text=text,
            score=score,
            score_kind=score_kind,
            source=source_text,
            metadata={**metadata, **extra},
            parent_id=entry.get("parent_id"),
        )
    raise RetrieverError(
        f"docstore entry {default_id!r} is a {type(entry).__name__}; "
        "expected a Chunk, a mapping, a string or a document (page_content)",
        retriever=retriever,
    )
