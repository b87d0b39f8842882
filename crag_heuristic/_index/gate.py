"""An index directory's gate: the profile calibrated for its corpus and embedder, or
why the shipped one decides.

The shipped gate was fitted on MiniLM cosines; an index of other vectors (the LSA
projection ``crag-heuristic index`` fits by default, or an embedder of yours) gives
other cosines. So ``crag-heuristic index`` self-calibrates a gate for the
directory's own retriever (``crag_heuristic.calibration.calibrate_index``) and records the
outcome in the manifest's ``gate`` entry, one of:

``{"status": "self-calibrated", "file": "gate.toml", ...}``
    the profile, written beside the other files (listed, sized and hashed in the
    manifest like them), is the directory's gate;
``{"status": "shipped", "notes": [...]}``
    self-calibration ran but could not promise more than the shipped gate: the
    shipped gate decides, and the notes say why;
``{"status": "skipped", "notes": [...]}``
    self-calibration did not run (``--no-calibrate``, or the ``calibrate`` extra
    is not installed): the shipped gate decides.

The entry also names the embedder the gate was calibrated for and what the
calibration cost and measured. ``retrieve --index DIR``, ``serve --index DIR``,
``evaluate --index DIR`` and ``CRAG.from_index_dir(DIR)`` use the directory's gate
unless they are given another profile or evaluator. The profile is data: a TOML
configuration, validated like any other (no code is read from it); the entry is
typed and bounded (:func:`check_entry`), ``gate.toml`` is listed, sized and hashed
in the manifest (signed with it, when the directory is), checked again each time it
is read, and anything that does not fit is an
:class:`~crag_heuristic.IndexDirectoryError` (``field="gate"``, or ``"manifest"`` /
``"file"``). The embedder it was calibrated for is the manifest's own, imported
(when it is a spec) only under the directory's embedder rules.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._config import EvaluatorConfig
from .._exceptions import ConfigError, IndexDirectoryError, InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

GATE_FILE = "gate.toml"
SELF_CALIBRATED = "self-calibrated"
SHIPPED = "shipped"
SKIPPED = "skipped"
STATUSES = (SELF_CALIBRATED, SHIPPED, SKIPPED)
MAX_GATE_BYTES = 1 << 20
"""The largest ``gate.toml`` read (a profile is a few kilobytes)."""
MAX_NOTES = 20
MAX_DEPTH = 4
MAX_ITEMS = 64
MAX_TEXT = 2000


@dataclass(frozen=True)
class IndexGate:
    """What calibrating a directory's gate made (see the module doc).

    Attributes:
        status: ``"self-calibrated"``, ``"shipped"`` or ``"skipped"``.
        profile: the profile as TOML (``self-calibrated`` only).
        notes: why the shipped gate decides, or what the calibrated one cannot
            promise, each a sentence.
        details: what the calibration measured and cost (JSON values), recorded
            in the manifest.
    """

    status: str
    profile: str | None = None
    notes: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise InputError(f"a gate's status is one of {list(STATUSES)}, got {self.status!r}")
        if (self.status == SELF_CALIBRATED) != (self.profile is not None):
            raise InputError("a self-calibrated gate has a profile, and no other has one")

    def entry(self) -> dict[str, Any]:
        """The manifest's ``gate`` entry."""
        out: dict[str, Any] = {"status": self.status}
        if self.profile is not None:
            out["file"] = GATE_FILE
        out["notes"] = list(self.notes)
        out.update(self.details)
        return out


def skipped(reason: str, **details: Any) -> IndexGate:
    """A gate not calibrated, and why (the shipped one decides)."""
    return IndexGate(SKIPPED, notes=(reason,), details=details)


def write(folder: Path, gate: IndexGate) -> list[str]:
    """Write the gate's profile into ``folder`` (when it has one); the files written."""
    if gate.profile is None:
        return []
    (folder / GATE_FILE).write_text(gate.profile, encoding="utf-8")
    return [GATE_FILE]


def calibrated(entry: Mapping[str, Any]) -> bool:
    """Whether a (checked) ``gate`` entry names a profile of the directory's own."""
    return entry.get("status") == SELF_CALIBRATED


def files(entry: Mapping[str, Any]) -> tuple[str, ...]:
    """The files a (checked) ``gate`` entry adds to the directory's parts."""
    return (GATE_FILE,) if calibrated(entry) else ()


def check_entry(entry: dict[str, Any], embedder: str | None) -> dict[str, Any]:
    """The manifest's ``gate`` entry, checked: a known status, ``gate.toml`` named by
    (and only by) a self-calibrated gate, notes of a few sentences, the embedder a
    self-calibrated gate was calibrated for (the manifest's own, ``embedder``), and
    every other value JSON of bounded size with finite numbers (a report, never read
    as code).

    Raises:
        ValueError: the first part that does not fit (the manifest reader makes it
            an :class:`~crag_heuristic.IndexDirectoryError`).
    """
    if entry.get("status") not in STATUSES:
        raise ValueError(f"gate: a 'status' of {list(STATUSES)}")
    if ("file" in entry or calibrated(entry)) and entry.get("file") != GATE_FILE:
        raise ValueError(
            f"gate: a self-calibrated gate's file is {GATE_FILE}, and no other has one"
        )
    notes = entry.get("notes", [])
    if not isinstance(notes, list) or len(notes) > MAX_NOTES:
        raise ValueError(f"gate: 'notes', a list of at most {MAX_NOTES} sentences")
    if calibrated(entry) and (embedder is None or entry.get("embedder") != embedder):
        raise ValueError("gate: calibrated for another embedder than the directory's")
    _json_value(entry, depth=0)
    return entry


def _json_value(value: Any, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValueError(f"gate: nested deeper than {MAX_DEPTH}")
    if isinstance(value, dict):
        if len(value) > MAX_ITEMS or not all(isinstance(k, str) for k in value):
            raise ValueError(f"gate: an object of at most {MAX_ITEMS} named values")
        for item in value.values():
            _json_value(item, depth + 1)
    elif isinstance(value, list):
        if len(value) > MAX_ITEMS:
            raise ValueError(f"gate: a list of at most {MAX_ITEMS} values")
        for item in value:
            _json_value(item, depth + 1)
    elif isinstance(value, str):
        if len(value) > MAX_TEXT:
            raise ValueError(f"gate: a text of at most {MAX_TEXT} characters")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("gate: a number that is not finite")
    elif value is not None and not isinstance(value, int):  # bool is an int
        raise ValueError(f"gate: a JSON value, not {type(value).__name__}")


def parse(where: str, raw: bytes) -> EvaluatorConfig:
    """The directory's gate from the bytes of its ``gate.toml``: a profile (TOML
    validated as any configuration; its ``profile`` key, if any, names a bundled
    profile, never a file), never code.

    Raises:
        IndexDirectoryError: ``field="gate"``: larger than :data:`MAX_GATE_BYTES`,
            not UTF-8 TOML, or not a configuration.
    """
    if len(raw) > MAX_GATE_BYTES:
        raise IndexDirectoryError(where, "gate", "larger than 1 MiB", "a profile")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
        return EvaluatorConfig.from_dict(data)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise IndexDirectoryError(
            where, "gate", f"unreadable ({type(exc).__name__})", "a TOML profile"
        ) from None
    except ConfigError as exc:
        raise IndexDirectoryError(
            where, "gate", f"not a profile ({exc.field})", "a profile"
        ) from None
