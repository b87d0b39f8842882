"""Real FAISS indexes over small vectors the tests make."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def unit_vectors() -> np.ndarray:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(40, 16)).astype("float32")
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture
def docs() -> list[dict]:
    return [
        {
            "id": f"d{i}",
            "text": f"document number {i} about topic {i % 4}",
            "source": f"file{i // 2}.md",
        }
        for i in range(40)
    ]
