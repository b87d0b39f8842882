"""The sample corpus as a docs file; its index directory is ``built`` (tests/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crag_heuristic.sample import load_sample_corpus


@pytest.fixture(scope="session")
def docs_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample corpus as a docs file (what ``crag-heuristic index --docs`` reads)."""
    path = tmp_path_factory.mktemp("docs") / "docs.jsonl"
    path.write_text(
        "\n".join(
            json.dumps({"id": c.id, "text": c.text, "source": c.source, "metadata": c.metadata})
            for c in load_sample_corpus()
        ),
        encoding="utf-8",
    )
    return path
