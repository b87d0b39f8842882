"""The gate service's tests serve the bundled sample's index directory."""

from __future__ import annotations

import pytest

from crag_heuristic.index import IndexDirectory
from crag_heuristic.sample import load_sample_corpus


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> IndexDirectory:
    """The sample corpus's index directory (LSA embedder, inner product)."""
    return IndexDirectory.build(load_sample_corpus(), tmp_path_factory.mktemp("index") / "sample")
