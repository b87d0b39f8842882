"""Simulated queries: deterministic, made of the document's own words, targets known."""

from __future__ import annotations

import pytest

from crag_heuristic import Chunk, InputError
from crag_heuristic._calibration.simulation import STYLES, QuerySimulator, SimulatedQuery
from crag_heuristic._text.analyzer import Analyzer, split_sentences
from crag_heuristic.sample import load_sample_corpus


def _neighbours_by_topic(doc: Chunk, m: int) -> list[str]:
    """The sample's documents of the same topic (ids are "<topic>-<n>")."""
    topic = doc.id.rsplit("-", 1)[0]
    return [d.id for d in load_sample_corpus() if d.id.startswith(topic) and d.id != doc.id][:m]


def test_same_seed_same_queries_other_seed_others() -> None:
    docs = load_sample_corpus()

    def make(seed: int) -> list[SimulatedQuery]:
        return QuerySimulator(docs, seed=seed).simulate(40, neighbours=_neighbours_by_topic)

    assert make(3) == make(3)
    assert make(3) != make(4)


def test_every_style_is_made_of_its_documents() -> None:
    docs = {d.id: d for d in load_sample_corpus()}
    analyzer = Analyzer()
    queries = QuerySimulator(list(docs.values()), seed=1).simulate(
        40, neighbours=_neighbours_by_topic
    )
    assert {q.style for q in queries} == set(STYLES)
    for q in queries:
        source = docs[q.source]
        assert q.source in q.targets
        if q.style == "title":
            assert q.text == source.metadata["title"]
        elif q.style == "sentence":
            assert q.text in split_sentences(source.text)
        elif q.style == "terms":
            assert 2 <= len(q.text.split()) <= 5
            assert set(analyzer.terms(q.text)) <= set(analyzer.terms(source.text))
        else:
            assert len(q.targets) > 1
            pooled = set().union(*(analyzer.terms(docs[t].text) for t in q.targets))
            assert set(analyzer.terms(q.text)) <= pooled


def test_exact_duplicates_are_targets_too() -> None:
    docs = load_sample_corpus()
    twin = docs[0].replace(id="twin-of-" + docs[0].id)
    queries = QuerySimulator([*docs, twin], seed=0).simulate(300, styles=("terms",))
    from_first = [q for q in queries if q.source in (docs[0].id, twin.id)]
    assert from_first and all(q.targets == {docs[0].id, twin.id} for q in from_first)


def test_bad_requests_are_input_errors() -> None:
    docs = load_sample_corpus()
    simulator = QuerySimulator(docs)
    with pytest.raises(InputError, match="unknown query style"):
        simulator.simulate(10, styles=("riddle",))
    with pytest.raises(InputError, match="no query style"):
        simulator.simulate(10, styles=())
    with pytest.raises(InputError, match="needs neighbours"):
        simulator.simulate(10, styles=("topic",))
    with pytest.raises(InputError, match="positive integer"):
        simulator.simulate(0, styles=("terms",))
    with pytest.raises(InputError, match="content terms"):
        QuerySimulator([Chunk(id="a", text="too short"), Chunk(id="b", text="")])
