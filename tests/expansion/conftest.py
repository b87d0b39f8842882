"""Fixtures for the expansion tests: small hand-written synonym sets, the shipped ones."""

from __future__ import annotations

import pytest

from crag_heuristic._expansion.synonyms import SynonymSet, parse_synonyms

SMALL = """\
# a small set whose expansions the tests work out by hand
car, automobile, auto, motorcar
big => large, huge
heart attack, myocardial infarction
heart => cardiac
it, information technology
"""


@pytest.fixture
def small_set() -> SynonymSet:
    return parse_synonyms(SMALL, source="small.txt")


@pytest.fixture(scope="session")
def bundled_set() -> SynonymSet:
    """Every shipped set (parsed once: the English one takes a fraction of a second)."""
    return SynonymSet.bundled()
