"""Real FAISS indexes over small vectors the tests make."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest


@pytest.fixture
def unit_vectors() -> np.ndarray:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(40, 16)).astype("float32")
    unit: np.ndarray = x / np.linalg.norm(x, axis=1, keepdims=True)
    return unit


@pytest.fixture
def docs() -> list[dict[str, Any]]:
    return [
        {
            "id": f"d{i}",
            "text": f"document number {i} about topic {i % 4}",
            "source": f"file{i // 2}.md",
        }
        for i in range(40)
    ]
