"""Recorded relevance labels as a grader: what an LLM (or a person) once answered.

:class:`RecordedGrader` answers from labels in the ``llm_judgments`` layout
(TREC-style TSV files, one label set per file)::

    query-id<TAB>corpus-id<TAB>score          (a header line, then one row per pair)
    q49<TAB>p3659<TAB>2

Scores are graded (0-3 for TREC / UMBRELA judges: 0 unrelated, 1 related,
2 highly relevant, 3 perfectly relevant). A pair is relevant from
``relevant_min`` (default 2, as the collections' qrels count it). The grade
a chunk gets is::

    output="binary"   1.0 if score >= relevant_min else 0.0                (default)
    output="graded"   min(1, max(0, score / scale))                        scale = 3

(some recorded sets hold scores beyond their scale, 5 or 10: binary counts
them relevant, graded clips them to 1). A query is found by its id, or by
its text through a ``queries`` mapping (id -> text, e.g. a collection's
``queries.jsonl``); a chunk by its id.

**Unjudged pairs.** A chunk the labels hold no score for, under a query they
know, is a :class:`~crag_heuristic.grading.GraderOutputError` by default
(the cascade records it and keeps the gate's verdict: never a silent 0);
``missing=0.0`` grades it 0.0 instead, as TREC evaluation counts unjudged
documents not relevant. A query the labels do not know is an error whatever
``missing`` says: a wrong ``queries`` mapping would otherwise grade every
chunk ``missing``.
"""

from __future__ import annotations

import csv
import hashlib
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from .._checks import check_query
from .._config import _check_number
from .._exceptions import ConfigError, GraderOutputError, InputError
from .._types import Chunk

Labels = dict[str, dict[str, float]]
Output = Literal["binary", "graded"]
HEADER = ("query-id", "corpus-id", "score")


def read_labels(path: str | Path) -> Labels:
    """``query id -> {corpus id: score}`` from a label file (module doc).

    Raises:
        InputError: no such file, no ``query-id corpus-id score`` header, a
            row without three fields or with a score that is not a finite
            number, or one pair scored twice differently (naming the line).
    """
    path = Path(path)
    labels: Labels = {}
    try:
        handle = path.open(encoding="utf-8", newline="")
    except OSError as exc:
        raise InputError(f"cannot read the label file {path}: {exc.strerror}") from exc
    with handle:
        rows = csv.reader(handle, delimiter="\t")
        header = next(rows, None)
        if header is None or tuple(field.strip().lower() for field in header[:3]) != HEADER:
            raise InputError(f"{path}:1: the header must be query-id<TAB>corpus-id<TAB>score")
        for number, row in enumerate(rows, start=2):
            if not row or not any(field.strip() for field in row):
                continue
            if len(row) < 3:
                raise InputError(f"{path}:{number}: {len(row)} field(s), expected 3")
            query_id, doc_id, text = row[0].strip(), row[1].strip(), row[2].strip()
            try:
                score = float(text)
            except ValueError:
                score = math.nan
            if not query_id or not doc_id or not math.isfinite(score):
                raise InputError(f"{path}:{number}: expected an id, an id and a finite score")
            known = labels.setdefault(query_id, {}).setdefault(doc_id, score)
            if known != score:
                raise InputError(
                    f"{path}:{number}: {query_id} / {doc_id} scored {score:g}, and {known:g} before"
                )
    return labels


class RecordedGrader:
    """Recorded labels as a grader (module doc).

    Args:
        labels: ``query id -> {chunk id: score}``.
        queries: ``query id -> query text``, so that a query may be given by
            its text (else by its id).
        relevant_min: the score from which a pair is relevant (``binary``).
        output: ``"binary"`` (1 / 0) or ``"graded"`` (score / scale).
        scale: the top of the scores' scale (``graded``).
        missing: the grade of an unjudged pair (``None``: an error).
        name: the label set's name, in the fingerprint (default ``"labels"``;
            :meth:`from_file` gives the file's stem).

    Raises:
        ConfigError: a bad option, or two query ids sharing one text.
    """

    def __init__(
        self,
        labels: Mapping[str, Mapping[str, float]],
        *,
        queries: Mapping[str, str] | None = None,
        relevant_min: float = 2,
        output: Output = "binary",
        scale: float = 3,
        missing: float | None = None,
        name: str = "labels",
    ) -> None:
        if not isinstance(labels, Mapping):
            raise ConfigError("labels", type(labels).__name__, "must be a dict of dicts")
        self._labels: Labels = {}
        for query_id, row in labels.items():
            if not isinstance(row, Mapping):
                raise ConfigError(f"labels[{query_id!r}]", type(row).__name__, "must be a dict")
            for doc_id, score in row.items():
                _check_number(f"labels[{query_id!r}][{doc_id!r}]", score)
            self._labels[str(query_id)] = {str(d): float(s) for d, s in row.items()}
        _check_number("relevant_min", relevant_min)
        if output not in ("binary", "graded"):
            raise ConfigError("output", output, "must be 'binary' or 'graded'")
        _check_number("scale", scale, low=0.0, low_open=True)
        if missing is not None:
            _check_number("missing", missing, low=0.0, high=1.0)
        if not isinstance(name, str) or not name.strip() or "|" in name:
            raise ConfigError("name", name, "must be a non-empty name (without '|')")
        self.relevant_min = float(relevant_min)
        self.output: Output = output
        self.scale = float(scale)
        self.missing = None if missing is None else float(missing)
        self.name = name
        self._by_text = _texts_to_ids(queries)
        self._fingerprint = (
            f"recorded:{name}|{output}|relevant_min={self.relevant_min:g}|scale={self.scale:g}"
            f"|missing={'error' if missing is None else f'{missing:g}'}|labels={self._digest()}"
        )

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        queries: Mapping[str, str] | None = None,
        relevant_min: float = 2,
        output: Output = "binary",
        scale: float = 3,
        missing: float | None = None,
        name: str | None = None,
    ) -> RecordedGrader:
        """The labels of one file (:func:`read_labels`); ``name`` defaults to its
        stem (``TREMA-CoT`` for ``llm_judgments/TREMA-CoT.tsv``); the other
        options are the constructor's.

        Raises:
            InputError: an unreadable file (see :func:`read_labels`).
        """
        path = Path(path)
        return cls(
            read_labels(path),
            queries=queries,
            relevant_min=relevant_min,
            output=output,
            scale=scale,
            missing=missing,
            name=name or path.stem,
        )

    def _digest(self) -> str:
        hasher = hashlib.sha256()
        for query_id in sorted(self._labels):
            for doc_id, score in sorted(self._labels[query_id].items()):
                hasher.update(f"{query_id}\t{doc_id}\t{score!r}\n".encode())
        return hasher.hexdigest()[:12]

    def __repr__(self) -> str:
        pairs = sum(len(row) for row in self._labels.values())
        return (
            f"RecordedGrader(name={self.name!r}, queries={len(self._labels)}, pairs={pairs}, "
            f"output={self.output!r}, missing={self.missing!r})"
        )

    @property
    def fingerprint(self) -> str:
        """The set's name, the reading (output, relevant_min, scale, missing) and a
        digest of every label."""
        return self._fingerprint

    def query_id(self, query: str) -> str:
        """The id of ``query`` (its text through ``queries``, or an id).

        Raises:
            GraderOutputError: the labels know no such query (the message does
                not repeat the query).
        """
        text = check_query(query).strip()
        found = self._by_text.get(text, text)
        if found not in self._labels:
            raise GraderOutputError(
                "the labels hold no query with this text or id", grader=self._fingerprint
            )
        return found

    def grade(self, query: str, chunks: Sequence[Chunk]) -> list[float]:
        """The recorded grade of each chunk (module doc).

        Raises:
            GraderOutputError: an unknown query, or an unjudged chunk without
                ``missing``.
        """
        row = self._labels[self.query_id(query)] if chunks else {}
        out = []
        for chunk in chunks:
            score = row.get(chunk.id)
            if score is None:
                if self.missing is None:
                    raise GraderOutputError(
                        f"no recorded label for chunk {chunk.id!r} under query "
                        f"{self.query_id(query)!r} (missing=0.0 counts unjudged pairs "
                        "not relevant)",
                        grader=self._fingerprint,
                    )
                out.append(self.missing)
            elif self.output == "binary":
                out.append(1.0 if score >= self.relevant_min else 0.0)
            else:
                out.append(min(1.0, max(0.0, score / self.scale)))
        return out

    async def agrade(self, query: str, chunks: Sequence[Chunk]) -> list[float]:
        """:meth:`grade` (a lookup: no I/O, no thread)."""
        return self.grade(query, chunks)


def _texts_to_ids(queries: Mapping[str, str] | None) -> dict[str, str]:
    if queries is None:
        return {}
    if not isinstance(queries, Mapping):
        raise ConfigError("queries", type(queries).__name__, "must be a dict of id -> text")
    out: dict[str, str] = {}
    for query_id, text in queries.items():
        if not isinstance(text, str):
            raise ConfigError(f"queries[{query_id!r}]", type(text).__name__, "must be a string")
        key = text.strip()
        if key in out and out[key] != str(query_id):
            raise ConfigError(
                "queries",
                f"ids {out[key]!r} and {str(query_id)!r}",
                "share one text: a text must name one query",
            )
        out[key] = str(query_id)
    return out
