"""The LLM grader's prompts: their whole text, in one place, versioned.

Two prompts ship, each for a whole list (numbered passages, one JSON answer
with a grade per passage: one request per list) and for a single passage:

* ``"binary"`` (:data:`BINARY`): relevant or not, answered ``"yes"`` / ``"no"``:
  the grader of the usual CRAG graph ("does the document contain keywords or
  meaning related to the question? give a binary score 'yes' or 'no'"),
  asked for a list at once;
* ``"rubric"`` (:data:`RUBRIC`): a graded score in [0, 1] on a four-step
  rubric (1 answers it, 0.7 answers in part, 0.3 on the topic only, 0 unrelated).

A prompt's ``name`` and ``version`` are part of the grader's fingerprint, and
with them a digest of its text, so that cached grades never outlive a change
of wording: change the text, change the version. A user's own prompt is a
:class:`Prompt` too (its templates hold ``{query}`` and ``{passages}`` /
``{n}``, or ``{passage}`` for one); the answer format the grader reads is
:mod:`crag_heuristic._grading.answers`'s, whatever the prompt asks for.

**Structured output.** A prompt may say what one grade is as a JSON schema
(``grade_schema``: ``{"type": "string", "enum": ["yes", "no"]}`` for the binary
prompt, a number from 0 to 1 for the rubric). The grader then asks the server
for an answer of that shape (:meth:`Prompt.response_schema`:
``{"grades": [g1, ..., gn]}`` with exactly ``n`` grades, or ``{"grade": g}``),
and a server that decodes under the schema (llama.cpp, vLLM, Ollama, OpenAI)
cannot answer anything else. A prompt without one is sent without a schema.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._exceptions import ConfigError

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True, kw_only=True, slots=True)
class Prompt:
    """A grading prompt for a chat model. Frozen, keyword-only, validated.

    Attributes:
        name: a short name (letters, digits, ``_ . -``); part of the fingerprint.
        version: a positive integer; part of the fingerprint: raise it with
            every change of the text.
        system: the system message.
        list_template: the user message for a list: ``{query}``, ``{n}`` (the
            number of passages) and ``{passages}`` (``[1] text`` blocks, one
            blank line apart) are filled in (``str.format``: a literal brace
            is written twice).
        single_template: the user message for one passage: ``{query}`` and
            ``{passage}``.
        grade_schema: the JSON schema of one grade, for structured output
            (module doc; ``None``: no schema is sent). It should accept what
            the templates ask for, and :mod:`~crag_heuristic._grading.answers`
            must read it (``"yes"`` / ``"no"``, a number in [0, 1], a 0-3 integer).

    Raises:
        ConfigError: a bad name or version, a template without its fields
            (or with others), or a grade schema that is not a JSON object.
    """

    name: str
    version: int
    system: str
    list_template: str
    single_template: str
    grade_schema: Mapping[str, Any] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ConfigError("prompt.name", self.name, "must be letters, digits, '_', '.', '-'")
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise ConfigError("prompt.version", self.version, "must be an integer >= 1")
        if not isinstance(self.system, str):
            raise ConfigError("prompt.system", self.system, "must be a string")
        _check_template("prompt.list_template", self.list_template, ("query", "passages"), n=3)
        _check_template("prompt.single_template", self.single_template, ("query", "passage"))
        if self.grade_schema is not None:
            object.__setattr__(self, "grade_schema", _checked_schema(self.grade_schema))

    @property
    def id(self) -> str:
        """``name@vVERSION`` (``"binary@v1"``)."""
        return f"{self.name}@v{self.version}"

    @property
    def digest(self) -> str:
        """The first 12 hex digits of the SHA-256 of the three texts."""
        text = "\x1f".join((self.system, self.list_template, self.single_template))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]

    def response_schema(self, n: int | None) -> dict[str, Any] | None:
        """The JSON schema of a whole answer: ``{"grades": [...]}`` with exactly ``n``
        grades, or ``{"grade": g}`` (``n=None``, one passage); ``None`` without a
        ``grade_schema``."""
        if self.grade_schema is None:
            return None
        grade = json.loads(json.dumps(self.grade_schema))  # a copy the caller may keep
        if n is None:
            key, value = "grade", grade
        else:
            key = "grades"
            value = {"type": "array", "items": grade, "minItems": n, "maxItems": n}
        return {
            "type": "object",
            "properties": {key: value},
            "required": [key],
            "additionalProperties": False,
        }

    def messages(self, query: str, passages: list[str], *, single: bool) -> list[dict[str, str]]:
        """The chat messages asking about ``passages`` (one, with ``single``)."""
        if single:
            if len(passages) != 1:
                raise ValueError("a single-passage prompt takes exactly one passage")
            user = self.single_template.format(query=query, passage=passages[0])
        else:
            blocks = "\n\n".join(f"[{i}] {text}" for i, text in enumerate(passages, 1))
            user = self.list_template.format(query=query, n=len(passages), passages=blocks)
        out = [{"role": "user", "content": user}]
        if self.system:
            out.insert(0, {"role": "system", "content": self.system})
        return out


def _checked_schema(schema: Any) -> dict[str, Any]:
    """A copy of a grade's JSON schema.

    Raises:
        ConfigError: not a mapping with string keys that JSON encodes.
    """
    if not isinstance(schema, Mapping) or not all(isinstance(k, str) for k in schema):
        raise ConfigError(
            "prompt.grade_schema", type(schema).__name__, "must be a JSON schema (a dict)"
        )
    try:
        copied: dict[str, Any] = json.loads(json.dumps(dict(schema)))
    except (TypeError, ValueError) as exc:
        raise ConfigError("prompt.grade_schema", "<schema>", f"must be JSON ({exc})") from None
    return copied


def _check_template(field: str, template: Any, needed: tuple[str, ...], **extra: Any) -> None:
    if not isinstance(template, str):
        raise ConfigError(field, template, "must be a string")
    for name in needed:
        if "{" + name + "}" not in template:
            raise ConfigError(field, template, f"must hold {{{name}}}")
    try:
        template.format(**dict.fromkeys(needed, "x"), **extra)
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(
            field, template, f"cannot be filled in ({type(exc).__name__}: {exc})"
        ) from None


BINARY = Prompt(
    name="binary",
    version=1,
    system=(
        "You are a grader assessing the relevance of retrieved passages to a user question. "
        "A passage is relevant if it contains keywords or meaning related to the question "
        "that would help answer it; it need not answer it completely. A passage about "
        "something else is not relevant. The goal is to filter out erroneous retrievals."
    ),
    list_template=(
        "Question: {query}\n\n"
        "Passages ({n}):\n\n"
        "{passages}\n\n"
        'For each passage, answer "yes" if it is relevant to the question and "no" if it '
        "is not. Reply with JSON only, one answer per passage, in the passages' order:\n"
        '{{"grades": ["yes", "no", ...]}} with exactly {n} answers.'
    ),
    single_template=(
        "Question: {query}\n\n"
        "Passage:\n{passage}\n\n"
        "Is the passage relevant to the question? Reply with JSON only: "
        '{{"grade": "yes"}} or {{"grade": "no"}}.'
    ),
    grade_schema={"type": "string", "enum": ["yes", "no"]},
)
"""The binary prompt (yes / no), version 1."""

RUBRIC = Prompt(
    name="rubric",
    version=1,
    system=(
        "You are a grader rating how relevant retrieved passages are to a user question, "
        "on a scale from 0 to 1:\n"
        "1.0 = the passage answers the question directly and completely;\n"
        "0.7 = it answers the question in part, or holds most of what is needed;\n"
        "0.3 = it is on the question's topic but does not help answer it;\n"
        "0.0 = it is unrelated to the question.\n"
        "Use the values in between when a passage lies between two steps."
    ),
    list_template=(
        "Question: {query}\n\n"
        "Passages ({n}):\n\n"
        "{passages}\n\n"
        "Rate each passage from 0 to 1. Reply with JSON only, one number per passage, "
        'in the passages\' order: {{"grades": [0.7, 0.0, ...]}} with exactly {n} numbers.'
    ),
    single_template=(
        "Question: {query}\n\n"
        "Passage:\n{passage}\n\n"
        'Rate the passage from 0 to 1. Reply with JSON only: {{"grade": 0.7}}.'
    ),
    grade_schema={"type": "number", "minimum": 0, "maximum": 1},
)
"""The graded rubric prompt (0 to 1), version 1."""

PROMPTS: dict[str, Prompt] = {BINARY.name: BINARY, RUBRIC.name: RUBRIC}
"""The shipped prompts by name."""


def prompt_of(value: Any) -> Prompt:
    """A :class:`Prompt`, or a shipped one by name.

    Raises:
        ConfigError: neither.
    """
    if isinstance(value, Prompt):
        return value
    if isinstance(value, str) and value in PROMPTS:
        return PROMPTS[value]
    raise ConfigError("prompt", value, f"must be a Prompt or one of {', '.join(sorted(PROMPTS))}")
