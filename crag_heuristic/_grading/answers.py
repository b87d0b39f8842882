"""Reading an LLM's answer as grades: strict JSON first, then a tolerant fallback.

The prompts (:mod:`crag_heuristic._grading.prompts`) ask for JSON:
``{"grades": [g1, ..., gn]}`` for a list of ``n`` passages, ``{"grade": g}``
for one. Models drift from it, so :func:`read_grades` reads, in order:

1. **JSON**: the whole answer (``<think>...</think>`` blocks of reasoning
   models removed), else the first block fenced with three backticks
   (```` ```json ... ``` ````). If it decodes, it is the answer, fitting or
   not; if it starts as JSON does (``{``, or ``[`` that is no ``[1] ...``
   list marker) but does not decode, the answer was cut short or is
   malformed: an error, no guessing past it;
2. **JSON inside text**: the first ``{...}`` or ``[...]`` that decodes to
   exactly ``n`` grades, anywhere in the text ("Here are the grades: {...}");
3. **plain text**: one verdict per line (``1. Yes``, ``Passage 2: no.``,
   ``**No**``), lines whose first word is no verdict ("Here are my
   answers:") skipped; or a single line of comma- or semicolon-separated
   verdicts (``yes, no, yes``); for one passage, the first line's first
   word (``No, because ...``).

**Echoes are not answers.** Small models often repeat their instructions. In
plain text, a line that defines a value (``1.0 = it answers the question``: a
number followed by ``=``) is never a grade, nor is a line found word for word
in the prompt the model was sent (``prompt``: a line of the rubric, a
passage's sentence), so a rubric echoed back is an error, not four grades.

Known JSON shapes: ``{"grades": [...]}`` (or ``scores``, ``relevance``,
``results``, ``answers``; any key when it holds the object's only list), a
bare list, ``{"grade": g}`` (or ``score``, ``binary_score``, ``relevant``,
``relevance``, ``answer``, ``label``: one passage), an object keyed by the
passages' numbers (``{"1": "yes", "2": "no"}``, ``{"passage 1": ...}``), and
a list of objects with a grade field under one of those names (ordered by
their ``id`` / ``index`` / ``passage`` / ``n`` / ``number`` field when every
one has an integer there).

A verdict is one grade (its first word decides; any case, with quotes,
markdown and punctuation around it):

* ``true``, ``yes``, ``y``, ``relevant``: 1.0;
* ``false``, ``no``, ``n``, ``not`` (``not relevant``), ``irrelevant``,
  ``unrelated``, ``none``: 0.0;
* a number in [0, 1] (``0.7``, ``"0.7"``, ``1``): the number;
* the integers of a 0-3 scale (TREC / UMBRELA judges: 0 unrelated ... 3
  perfectly relevant), when an answer's numbers exceed 1 and all of them are
  integers from 0 to 3: ``g / 3`` (``[3, 0, 2]`` is ``[1, 0, 2/3]``).

Any other number (``7``, ``2.5``, ``-1``), an unreadable answer, or a count
of grades that is not the count of passages is a
:class:`~crag_heuristic.grading.GraderOutputError`, never a silent 0. Its
message describes the answer's shape and length, never its text (a model
may quote the question).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .._exceptions import GraderOutputError

YES = frozenset({"true", "yes", "y", "relevant"})
NO = frozenset({"false", "no", "n", "not", "irrelevant", "unrelated", "none"})
_LIST_KEYS = ("grades", "scores", "relevance", "results", "answers")
_GRADE_KEYS = ("grade", "score", "binary_score", "relevant", "relevance", "answer", "label")
_INDEX_KEYS = ("id", "index", "passage", "n", "number")
_SCALE_TOP = 3

_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.S)
# a line's list marker: "- ", "* ", then "1.", "1)", "1:", "[1]", "(1)", "#1", "Passage 1:"
# ("0.7" is a number, not the marker "0." before a 7)
_MARKER = re.compile(
    r"^\s*(?:[-*\u2022]\s+)?"
    r"(?:(?:(?:passage|document|doc|chunk|item)\s*#?\s*\d+|\[\s*\d+\s*\]|\(\s*\d+\s*\)"
    r"|#?\d+(?=[.):](?!\d)|\s))\s*[.):\-\u2013]?\s*)?",
    re.I,
)
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)")
_TRIM = " \t\"'`*_.,;:!?()[]{}<>"


class _Unread(Exception):
    """This reading does not apply (the next one is tried); its text says why."""


def read_grades(
    content: str,
    n: int,
    *,
    grader: str | None = None,
    truncated: bool = False,
    prompt: str = "",
) -> list[float]:
    """``n`` grades in [0, 1] from a model's answer ``content`` (module doc).

    Args:
        content: the assistant message's text.
        n: how many passages were asked about.
        grader: the grader's fingerprint, for the error.
        truncated: the server said the answer was cut (``finish_reason ==
            "length"``); the error says so.
        prompt: the text the model was sent (its messages); a plain-text line
            found in it is an echo, not a grade.

    Raises:
        GraderOutputError: no reading gives exactly ``n`` grades.
    """
    text = _THINK.sub("", content).strip()
    if text.lower().startswith("<think>"):
        raise _error("the answer is an unfinished <think> block", content, truncated, grader)
    reasons: list[str] = []
    # 1. the whole answer, or a fenced block, is JSON: it is the answer, fitting or not
    for candidate in [text, *(block.strip() for block in _FENCE.findall(text))]:
        value = _decoded(candidate)
        if value is not _NOTHING:
            try:
                return _scaled(_from_json(value, n), n)
            except _Unread as why:
                raise _error(str(why), content, truncated, grader) from None
        if _JSON_START.match(candidate):
            raise _error("it is not valid JSON (cut short?)", content, truncated, grader)
    # 2. JSON somewhere in the text ("Here are the grades: {...}"), the first that fits
    for value in _embedded_json(text):
        try:
            return _scaled(_from_json(value, n), n)
        except _Unread as why:
            reasons.append(str(why))
    # 3. a verdict per line
    try:
        return _scaled(_from_text(text, n, _normalised(prompt)), n)
    except _Unread as why:
        reasons.append(str(why))
    raise _error(reasons[0], content, truncated, grader)


def _error(reason: str, content: str, truncated: bool, grader: str | None) -> GraderOutputError:
    cut = "; the server cut the answer at its token limit (max_tokens)" if truncated else ""
    return GraderOutputError(
        f"cannot read the model's answer ({len(content)} characters): {reason}{cut}",
        grader=grader,
    )


_NOTHING: Any = object()
# an answer meant as JSON: "{", or "[" that is no "[1] ..." list marker
_JSON_START = re.compile(r"\{|\[(?!\s*\d+\s*\]\s*[^\s,\]])")
_SCAN_LIMIT = 64  # brackets tried in a text answer


def _decoded(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOTHING


def _embedded_json(text: str) -> list[Any]:
    """Each JSON object or list that starts at a bracket of ``text`` (in order,
    at most ``_SCAN_LIMIT`` tried)."""
    decoder = json.JSONDecoder()
    found = []
    for tried, match in enumerate(re.finditer(r"[\[{]", text)):
        if tried >= _SCAN_LIMIT:
            break
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except (ValueError, RecursionError):
            continue
        found.append(value)
    return found


Item = tuple[str, float]  # ("verdict", 0/1) or ("number", x): numbers are scaled together


def _from_json(value: Any, n: int) -> list[Item]:
    if isinstance(value, Mapping):
        for key in _LIST_KEYS:
            if isinstance(value.get(key), list):
                return _from_json(value[key], n)
        lists = [v for v in value.values() if isinstance(v, list)]
        if len(lists) == 1:
            return _from_json(lists[0], n)
        numbered = _numbered(value)
        if numbered is not None:
            return numbered
        for key in _GRADE_KEYS:
            if key in value:
                return [_item(value[key], 0)]
        raise _Unread(f"a JSON object with keys {sorted(map(str, value))[:6]} holds no grades")
    if isinstance(value, list):
        if value and all(isinstance(v, Mapping) for v in value):
            return _from_records(value)
        return [_item(v, i) for i, v in enumerate(value)]
    return [_item(value, 0)]


def _numbered(value: Mapping[Any, Any]) -> list[Item] | None:
    """``{"1": g, "2": g}`` (or ``"passage 1"``) in the numbers' order, else ``None``."""
    keyed = {}
    for key, grade in value.items():
        found = re.fullmatch(r"\s*(?:passage|document|doc|chunk)?\s*#?\s*(\d+)\s*", str(key), re.I)
        if found is None:
            return None
        keyed[int(found.group(1))] = grade
    if not keyed:
        return None
    return [_item(keyed[k], i) for i, k in enumerate(sorted(keyed))]


def _from_records(records: Sequence[Mapping[Any, Any]]) -> list[Item]:
    grades = []
    for i, record in enumerate(records):
        key = next((k for k in _GRADE_KEYS if k in record), None)
        if key is None:
            raise _Unread(f"object {i} of the answer's list has no grade field")
        grades.append(record[key])
    ids = [next((r[k] for k in _INDEX_KEYS if k in r), None) for r in records]
    if all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        numbers = [int(i) for i in ids]  # type: ignore[arg-type]  # all ints: checked above
        grades = [grades[j] for j in sorted(range(len(records)), key=numbers.__getitem__)]
    return [_item(g, i) for i, g in enumerate(grades)]


def _item(value: Any, position: int) -> Item:
    if isinstance(value, bool):
        return ("verdict", 1.0 if value else 0.0)
    if isinstance(value, int | float):
        return ("number", float(value))
    if isinstance(value, str):
        found = _verdict(value)
        if found is not None:
            return found
        raise _Unread(f"grade {position} is a string that is no verdict")
    raise _Unread(f"grade {position} is {type(value).__name__}, not a verdict or a number")


def _verdict(text: str) -> Item | None:
    """A word or number as a verdict: its first token decides (``"No, because..."``)."""
    words = text.strip().strip(_TRIM).split()
    if not words:
        return None
    first = words[0].strip(_TRIM).lower()
    if first in YES:
        return ("verdict", 1.0)
    if first in NO:
        return ("verdict", 0.0)
    if _NUMBER.fullmatch(first):
        return ("number", float(first))
    return None


_DEFINITION = re.compile(r"\s*[-+]?(?:\d+(?:\.\d*)?|\.\d+)\s*=")
_ECHO_CHARS = 16  # a shorter line ("1. Yes.") may well be in a passage: never an echo


def _normalised(text: str) -> str:
    """``text`` lower-cased, white space runs as one space, markdown emphasis removed."""
    return " ".join(text.replace("*", "").replace("`", "").lower().split())


def _echo(line: str, prompt: str) -> bool:
    """Whether a line of the answer repeats the prompt rather than answering: a
    definition (``0.3 = on the topic``) or a long enough line found in ``prompt``."""
    if _DEFINITION.match(_MARKER.sub("", line, count=1)):
        return True
    said = _normalised(line).strip(_TRIM)
    return len(said) >= _ECHO_CHARS and said in prompt


def _from_text(text: str, n: int, prompt: str = "") -> list[Item]:
    """One verdict per line (lines without one skipped, echoes of the prompt
    too); a single line of comma- or semicolon-separated verdicts; for one
    passage, the first line's."""
    lines = [line for line in text.splitlines() if line.strip()]
    echoed = sum(_echo(line, prompt) for line in lines)
    lines = [line for line in lines if not _echo(line, prompt)]
    if n == 1 and lines:
        first = _verdict(_MARKER.sub("", lines[0], count=1))
        if first is not None:
            return [first]
    if len(lines) == 1 and re.search(r"[,;]", lines[0]):
        lines = re.split(r"[,;]", lines[0])
    items = []
    for line in lines:
        found = _verdict(_MARKER.sub("", line, count=1))
        if found is not None:
            items.append(found)
    if not items:
        why = "neither JSON nor a verdict (yes / no / a number) per line"
        if echoed:
            why += f"; {echoed} line(s) echo the prompt (a rubric, a definition), not grades"
        raise _Unread(why)
    return items


def _scaled(items: list[Item], n: int) -> list[float]:
    """The items as grades in [0, 1]: numbers as they are, or on the 0-3 scale
    when they exceed 1 and all are its integers (module doc)."""
    if len(items) != n:
        raise _Unread(f"it holds {len(items)} grade(s) for {n} passage(s)")
    numbers = [value for kind, value in items if kind == "number"]
    for position, (kind, value) in enumerate(items):
        if kind == "number" and not math.isfinite(value):
            raise _Unread(f"grade {position} is {value} (not finite)")
    on_scale = any(v > 1.0 for v in numbers) and all(
        v == int(v) and 0 <= v <= _SCALE_TOP for v in numbers
    )
    out = []
    for position, (kind, value) in enumerate(items):
        if kind == "number" and on_scale:
            value /= _SCALE_TOP
        elif kind == "number" and not 0.0 <= value <= 1.0:
            raise _Unread(f"grade {position} is {value:g}: outside [0, 1] and not a 0-3 grade")
        out.append(value)
    return out
