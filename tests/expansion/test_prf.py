"""PRFExpander: RM3-style feedback weights worked out by hand on a two-chunk corpus."""

from __future__ import annotations

import math

import pytest

from crag_heuristic import Chunk, ConfigError, ScoreKind
from crag_heuristic._exceptions import DuplicateChunkError, InvalidQueryError
from crag_heuristic._expansion.prf import PRFExpander
from crag_heuristic._protocols import QueryExpander
from crag_heuristic.text import CorpusStats

# Content terms (stop words gone, stems):
#   A: solar panel convert sunlight solar   |A| = 5, cosine 0.8 -> P(A|Q) = 0.8
#   B: solar cell sunlight                  |B| = 3, cosine 0.2 -> P(B|Q) = 0.2
CHUNKS = [
    Chunk(
        id="A",
        text="The solar panels convert sunlight, solar!",
        score=0.8,
        score_kind=ScoreKind.COSINE,
    ),
    Chunk(id="B", text="Solar cells and sunlight.", score=0.2, score_kind=ScoreKind.COSINE),
]


def test_weights_are_tf_over_length_times_doc_weight() -> None:
    expander = PRFExpander(n_docs=5, n_terms=3)
    weights = {stem: w for stem, _, w in expander.term_weights("solar energy", CHUNKS)}
    # "solar" is a query term: excluded
    assert set(weights) == {"panel", "convert", "sunlight", "cell"}
    assert weights["panel"] == pytest.approx(0.8 * 1 / 5)  # 0.16
    assert weights["convert"] == pytest.approx(0.8 * 1 / 5)  # 0.16
    assert weights["sunlight"] == pytest.approx(0.8 * 1 / 5 + 0.2 * 1 / 3)  # 0.2267
    assert weights["cell"] == pytest.approx(0.2 * 1 / 3)  # 0.0667

    expansion = expander.expand("solar energy", chunks=CHUNKS)
    # ties (convert, panel at 0.16) break by stem; surfaces are the tokens as written
    assert expansion.queries == ("solar energy sunlight convert panels",)
    assert expansion.added == (("solar energy", ("sunlight", "convert", "panels")),)
    assert expansion.method == "prf"
    assert [term for term, _ in expansion.weights] == ["sunlight", "convert", "panels"]
    assert expansion.weights[0][1] == pytest.approx(0.8 / 5 + 0.2 / 3)


def test_idf_reorders_the_terms() -> None:
    stats = CorpusStats(n_docs=10, doc_freq={"sunlight": 9, "convert": 1, "panel": 4})
    idf = {  # ln(1 + (N - df + 0.5) / (df + 0.5))
        "sunlight": math.log(1 + 1.5 / 9.5),  # 0.1466
        "convert": math.log(1 + 9.5 / 1.5),  # 1.9924
        "panel": math.log(1 + 6.5 / 4.5),  # 0.8938
        "cell": math.log(1 + 10.5 / 0.5),  # 3.0910 (unseen)
    }
    expander = PRFExpander(n_terms=4)
    ranked = expander.term_weights("solar energy", CHUNKS, stats)
    assert [stem for stem, _, _ in ranked] == ["convert", "cell", "panel", "sunlight"]
    weights = {stem: w for stem, _, w in ranked}
    assert weights["convert"] == pytest.approx(0.16 * idf["convert"])  # 0.3188
    assert weights["cell"] == pytest.approx(0.2 / 3 * idf["cell"])  # 0.2061
    assert weights["panel"] == pytest.approx(0.16 * idf["panel"])  # 0.1430
    assert weights["sunlight"] == pytest.approx((0.16 + 0.2 / 3) * idf["sunlight"])  # 0.0332
    expansion = expander.expand("solar energy", chunks=CHUNKS, corpus_stats=stats)
    assert expansion.queries == ("solar energy convert cells panels sunlight",)


def test_chunks_without_usable_scores_weigh_the_same() -> None:
    chunks = [
        Chunk(id="a", text="alpha beta", score=None),
        Chunk(id="b", text="gamma", score=3.0, score_kind=ScoreKind.RRF),
    ]
    expander = PRFExpander()
    assert expander.doc_weights(chunks) == [0.5, 0.5]
    weights = {stem: w for stem, _, w in expander.term_weights("query", chunks)}
    assert weights == pytest.approx({"alpha": 0.25, "beta": 0.25, "gamma": 0.5})


def test_zero_similarities_fall_back_to_uniform() -> None:
    chunks = [
        Chunk(id="a", text="x1", score=-0.3, score_kind=ScoreKind.COSINE),
        Chunk(id="b", text="y1", score=0.0, score_kind=ScoreKind.COSINE),
    ]
    assert PRFExpander().doc_weights(chunks) == [0.5, 0.5]


def test_only_the_top_n_docs_feed_back() -> None:
    chunks = [
        Chunk(id="a", text="first words", score=0.9, score_kind=ScoreKind.COSINE),
        Chunk(id="b", text="second thing", score=0.8, score_kind=ScoreKind.COSINE),
    ]
    expansion = PRFExpander(n_docs=1, n_terms=5).expand("query", chunks=chunks)
    assert expansion.added == (("query", ("first", "words")),)


def test_surface_is_the_most_frequent_form_then_the_first_seen() -> None:
    chunks = [Chunk(id="a", text="Cell cells CELLS. Runs running run, running")]
    expansion = PRFExpander(n_terms=2).expand("biology", chunks=chunks)
    # run (4 of 7 tokens) outweighs cell (3 of 7); cell: "cells" x2 beats "cell" x1;
    # run: "running" x2 beats "runs" and "run" x1
    assert expansion.terms == ("running", "cells")


def test_stop_words_digits_letters_and_query_terms_are_dropped() -> None:
    chunks = [Chunk(id="a", text="The 2019 x study of the heart: hearts and studies")]
    expansion = PRFExpander(n_terms=10).expand("heart", chunks=chunks)
    assert expansion.terms == ("study",)


def test_no_chunks_or_no_terms_give_no_query() -> None:
    expander = PRFExpander()
    assert expander.expand("solar").queries == ()
    only_query_words = [Chunk(id="a", text="solar, the SOLAR of it")]
    empty = expander.expand("solar", chunks=only_query_words)
    assert empty.queries == () and empty.added == () and empty.weights == ()


def test_configuration_and_inputs_are_checked() -> None:
    with pytest.raises(ConfigError):
        PRFExpander(n_docs=0)
    with pytest.raises(ConfigError):
        PRFExpander(n_terms=2.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidQueryError):
        PRFExpander().expand(" ", chunks=CHUNKS)
    with pytest.raises(DuplicateChunkError):
        PRFExpander().expand("q", chunks=[CHUNKS[0], CHUNKS[0]])
    assert isinstance(PRFExpander(), QueryExpander)
