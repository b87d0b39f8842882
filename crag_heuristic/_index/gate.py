"""An index directory's gate: the profile calibrated for its corpus and embedder, or
why the shipped one decides.

The shipped gate was fitted on MiniLM cosines; an index of other vectors (the LSA
projection ``crag-heuristic index`` fits by default, or an embedder of yours) gives
other cosines. So ``crag-heuristic index`` self-calibrates a gate for the
directory's own retriever (``crag_heuristic.bench.calibrate_index``) and records the
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
configuration, validated like any other (no code is read from it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._config import EvaluatorConfig
from .._exceptions import ConfigError, IndexDirectoryError, InputError

GATE_FILE = "gate.toml"
SELF_CALIBRATED = "self-calibrated"
SHIPPED = "shipped"
SKIPPED = "skipped"
STATUSES = (SELF_CALIBRATED, SHIPPED, SKIPPED)


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


def load(folder: Path, entry: Mapping[str, Any]) -> EvaluatorConfig | None:
    """The directory's gate, or ``None`` when the shipped one decides.

    Raises:
        IndexDirectoryError: an entry of another form, or a profile that does not
            read as a configuration.
    """
    where = os.fspath(folder)
    if not entry:
        return None  # built before gates were recorded: the shipped gate
    status = entry.get("status")
    if status not in STATUSES:
        raise IndexDirectoryError(where, "gate", status, f"a status of {list(STATUSES)}")
    if status != SELF_CALIBRATED:
        return None
    if entry.get("file") != GATE_FILE:
        raise IndexDirectoryError(where, "gate", entry.get("file"), GATE_FILE)
    try:
        return EvaluatorConfig.from_file(folder / GATE_FILE)
    except ConfigError as exc:
        raise IndexDirectoryError(where, "gate", f"unreadable ({exc})", "a profile") from None
