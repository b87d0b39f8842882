"""The weighted verdict, per-chunk grades and bad input, with hand-computed numbers."""

from __future__ import annotations

import math
import threading

import pytest

from crag_heuristic import (
    Chunk,
    ConfigError,
    Evaluator,
    EvaluatorConfig,
    InputError,
    InvalidQueryError,
    ScoreKind,
    Verdict,
    load_config,
)
from crag_heuristic.text import Analyzer, CorpusStats

# Worked example (see conftest.solar_chunks):
#   query terms: solar, panel, effici
#   chunk a: 10 tokens, covers all 3 terms; cosine 0.8; source s1
#   chunk b: 6 tokens, covers none;        cosine 0.4; source s2
# set:  keyword (best chunk) 1.0; coherence 0.6 * (1 - 0.04) = 0.576;
#       length mean(0.13, 0.078) = 0.104; diversity 2/2 = 1.0
#       score = 0.3*1 + 0.4*0.576 + 0.15*0.104 + 0.15*1 = 0.696 -> PARTIAL
# a:    0.3*1 + 0.4*0.8 + 0.15*0.13 + 0.15*1 = 0.7895 -> RELEVANT
# b:    0.3*0 + 0.4*0.4 + 0.15*0.078 + 0.15*1 = 0.3217 -> IRRELEVANT
QUERY = "How efficient are solar panels? solar panel efficiency"


def test_weighted_verdict_by_hand(solar_chunks: list[Chunk]) -> None:
    evaluation = Evaluator("synapse").evaluate("solar panel efficiency", solar_chunks)
    assert evaluation.signals.keyword_overlap == pytest.approx(1.0)
    assert evaluation.signals.semantic_coherence == pytest.approx(0.576)
    assert evaluation.signals.length_adequacy == pytest.approx(0.104)
    assert evaluation.signals.source_diversity == pytest.approx(1.0)
    assert evaluation.score == pytest.approx(0.696)
    assert evaluation.verdict is Verdict.PARTIAL
    a, b = evaluation.chunks
    assert (a.chunk_id, a.score, a.verdict) == ("a", pytest.approx(0.7895), Verdict.RELEVANT)
    assert (b.chunk_id, b.score, b.verdict) == ("b", pytest.approx(0.3217), Verdict.IRRELEVANT)
    assert evaluation.kept_ids(Verdict.RELEVANT) == ["a"]
    assert evaluation.profile == "synapse"
    assert evaluation.reasoning.startswith("partial (0.70): keyword overlap 1.00")
    assert "weakest: length adequacy" in evaluation.reasoning


def test_crag_profile_changes_only_the_bands(solar_chunks: list[Chunk]) -> None:
    evaluation = Evaluator("crag").evaluate("solar panel efficiency", solar_chunks)
    assert evaluation.score == pytest.approx(0.696)
    assert evaluation.verdict is Verdict.AMBIGUOUS  # 0.3 < 0.696 <= 0.7
    assert evaluation.profile == "crag"


def test_config_can_be_overridden_per_call(solar_chunks: list[Chunk]) -> None:
    evaluator = Evaluator("synapse")
    loose = evaluator.config.replace(thresholds={"relevant": 0.6})
    assert (
        evaluator.evaluate("solar panel efficiency", solar_chunks, config=loose).verdict
        is Verdict.RELEVANT
    )
    assert evaluator.evaluate("solar panel efficiency", solar_chunks).verdict is Verdict.PARTIAL


def test_idf_weights_rare_terms(solar_chunks: list[Chunk]) -> None:
    stats = CorpusStats(n_docs=10, doc_freq={"solar": 1, "panel": 4, "effici": 9})
    only_solar = [Chunk(id="c", text="solar", score=0.5, score_kind="cosine")]
    ev = Evaluator("synapse").evaluate("solar panel efficiency", only_solar, corpus_stats=stats)
    idf = [math.log(1 + 9.5 / 1.5), math.log(1 + 6.5 / 4.5), math.log(1 + 1.5 / 9.5)]
    assert ev.signals.keyword_overlap == pytest.approx(idf[0] / sum(idf))  # 0.65695
    assert ev.details["idf_weighted"] is True
    uniform = Evaluator("synapse").evaluate("solar panel efficiency", only_solar)
    assert uniform.signals.keyword_overlap == pytest.approx(1 / 3)
    no_idf = EvaluatorConfig.from_profile("synapse").replace(keyword={"use_idf": False})
    assert Evaluator(no_idf).evaluate(
        "solar panel efficiency", only_solar, corpus_stats=stats
    ).signals.keyword_overlap == pytest.approx(1 / 3)


def test_pooled_keyword_aggregate() -> None:
    chunks = [
        Chunk(id="1", text="solar", score=0.5, score_kind="cosine"),
        Chunk(id="2", text="panel", score=0.5, score_kind="cosine"),
    ]
    best = Evaluator("synapse").evaluate("solar panel", chunks)
    pooled = Evaluator(
        EvaluatorConfig.from_profile("synapse").replace(keyword={"aggregate": "pooled"})
    ).evaluate("solar panel", chunks)
    assert best.signals.keyword_overlap == pytest.approx(0.5)
    assert pooled.signals.keyword_overlap == pytest.approx(1.0)


def test_substring_is_not_a_match() -> None:
    chunk = Chunk(id="1", text="A category of catalogues.", score=0.5, score_kind="cosine")
    assert Evaluator("synapse").evaluate("cat", [chunk]).signals.keyword_overlap == 0.0


def test_no_chunks_is_irrelevant_with_reasoning() -> None:
    evaluation = Evaluator("synapse").evaluate("anything", [])
    assert evaluation.verdict is Verdict.IRRELEVANT
    assert evaluation.score == 0.0
    assert evaluation.chunks == ()
    assert "no chunks" in evaluation.reasoning


def test_unknown_scores_drop_coherence_and_renormalise_weights() -> None:
    # no score kind: coherence unavailable; weights 0.3/0.15/0.15 renormalise to 0.5/0.25/0.25
    chunk = Chunk(id="1", text="solar " * 100, score=0.9)
    evaluation = Evaluator("synapse").evaluate("solar", [chunk])
    assert evaluation.signals.semantic_coherence is None
    assert evaluation.details["weights_used"] == pytest.approx(
        {
            "keyword_overlap": 0.5,
            "semantic_coherence": 0.0,
            "length_adequacy": 0.25,
            "source_diversity": 0.25,
        }
    )
    assert evaluation.score == pytest.approx(1.0)
    assert "semantic coherence unavailable" in evaluation.reasoning
    assert "declare a ScoreKind" in evaluation.reasoning


def test_mixed_score_kinds_are_converted_each_and_noted() -> None:
    chunks = [
        Chunk(id="1", text="x", score=0.5, score_kind="squared_l2"),  # cos 0.75
        Chunk(id="2", text="y", score=10.0, score_kind="bm25"),  # 0.5
    ]
    evaluation = Evaluator("synapse").evaluate("x", chunks)
    assert [c.similarity for c in evaluation.chunks] == pytest.approx([0.75, 0.5])
    assert evaluation.details["score_kinds"] == ["bm25", "squared_l2"]
    assert "mixed score kinds" in evaluation.reasoning


def test_same_source_lowers_diversity() -> None:
    chunks = [
        Chunk(id=str(i), text="t", score=0.5, score_kind="cosine", source="doc") for i in range(4)
    ]
    evaluation = Evaluator("synapse").evaluate("t", chunks)
    assert evaluation.signals.source_diversity == pytest.approx(0.25)
    assert [c.signals.source_diversity for c in evaluation.chunks] == pytest.approx([0.25] * 4)


def test_stop_word_query_still_matches() -> None:
    chunk = Chunk(id="1", text="To be or not to be", score=0.5, score_kind="cosine")
    evaluation = Evaluator("synapse").evaluate("to be", [chunk])
    assert evaluation.signals.keyword_overlap == 1.0
    assert evaluation.details["all_stop_words"] is True


@pytest.mark.parametrize("query", ["", "   ", "\n\t", None, 42, b"bytes"])
def test_bad_queries_raise_invalid_query(query: object, solar_chunks: list[Chunk]) -> None:
    with pytest.raises(InvalidQueryError):
        Evaluator("synapse").evaluate(query, solar_chunks)  # type: ignore[arg-type]


def test_punctuation_only_query_is_documented_not_an_error(solar_chunks: list[Chunk]) -> None:
    evaluation = Evaluator("synapse").evaluate("???", solar_chunks)
    assert evaluation.signals.keyword_overlap == 0.0
    assert "no word tokens" in evaluation.reasoning


def test_bad_corpus_stats_type() -> None:
    with pytest.raises(InputError):
        Evaluator("synapse").evaluate("q", [], corpus_stats={"a": 1})  # type: ignore[arg-type]


def test_one_megabyte_chunk_is_handled() -> None:
    big = Chunk(
        id="big", text=("solar energy " + "\x00\udcff ") * 70_000, score=0.6, score_kind="cosine"
    )
    assert len(big.text) > 1_000_000
    evaluation = Evaluator("synapse").evaluate("solar energy", [big])
    assert evaluation.signals.keyword_overlap == 1.0
    assert evaluation.signals.length_adequacy == 1.0


def test_deterministic_and_cache_transparent(solar_chunks: list[Chunk]) -> None:
    evaluator = Evaluator("synapse")
    first = evaluator.evaluate(QUERY, solar_chunks)
    assert evaluator.evaluate(QUERY, solar_chunks) == first
    evaluator.clear_cache()
    assert evaluator.evaluate(QUERY, solar_chunks) == first
    assert Evaluator("synapse", cache_size=0).evaluate(QUERY, solar_chunks) == first


def test_new_evaluators_share_the_chunks_the_process_analysed(solar_chunks: list[Chunk]) -> None:
    """Evaluator() per call starts with what the process analysed (its analyzer's settings
    and cache size alike); an evaluator of its own cache, a subclass's analyzer or another
    size keeps its own; what is shared never changes a result."""
    query = "solar panel efficiency in a brand new phrasing"
    chunks = [c.replace(id=f"shared-{c.id}") for c in solar_chunks]
    first = Evaluator()
    expected = first.evaluate(query, chunks)
    assert (
        Evaluator()._cache is first._cache and Evaluator(analyzer=Analyzer())._cache is first._cache
    )
    assert Evaluator()._cache.get_many([(c.id, c.text) for c in chunks]) == list(
        first.analyze_chunks(chunks)
    )
    own = Evaluator(shared_cache=False)
    assert own._cache is not first._cache and len(own._cache) == 0
    assert own.evaluate(query, chunks) == expected == Evaluator().evaluate(query, chunks)

    class Stemless(Analyzer):
        pass

    assert not Stemless().shares_caches and Analyzer().shares_caches
    assert Evaluator(analyzer=Stemless())._cache is not first._cache
    assert Evaluator(cache_size=7)._cache is not first._cache
    assert len(Evaluator(cache_size=0)._cache) == 0
    with pytest.raises(ConfigError, match="shared_cache"):
        Evaluator(shared_cache=1)  # type: ignore[arg-type]


def test_cache_keys_on_text_not_only_id(solar_chunks: list[Chunk]) -> None:
    evaluator = Evaluator("synapse")
    evaluator.evaluate("solar", solar_chunks)
    changed = [solar_chunks[0].replace(text="nothing relevant here"), solar_chunks[1]]
    assert evaluator.evaluate("solar", changed).signals.keyword_overlap == 0.0


def test_thread_safe(solar_chunks: list[Chunk]) -> None:
    evaluator = Evaluator("synapse", cache_size=2)  # tiny cache: constant eviction under contention
    queries = [f"solar panel efficiency {i}" for i in range(50)]
    expected = [Evaluator("synapse").evaluate(q, solar_chunks) for q in queries]
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for q, want in zip(queries, expected, strict=True):
                assert evaluator.evaluate(q, solar_chunks) == want
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_score_kind_bm25_uses_saturation() -> None:
    chunk = Chunk(id="1", text="x", score=30.0, score_kind=ScoreKind.BM25)
    evaluation = Evaluator("synapse").evaluate("x", [chunk])
    assert evaluation.chunks[0].similarity == pytest.approx(0.75)


def test_fingerprint_follows_the_configuration() -> None:
    evaluator = Evaluator("synapse")
    assert evaluator.fingerprint == evaluator.config.fingerprint()
    evaluator.config = EvaluatorConfig.from_profile("crag")
    assert evaluator.fingerprint == EvaluatorConfig.from_profile("crag").fingerprint()


def test_making_an_evaluator_digests_nothing() -> None:
    """``Evaluator()`` per call is cheap: the configuration's fingerprint (a digest of
    every setting, 89 % of the construction's 0.31 ms) is made on first use, once per
    configuration object; the default configuration is one object."""
    config = EvaluatorConfig.from_profile("synapse").replace(name="fresh")
    evaluator = Evaluator(config)
    assert config._digest == []  # not computed by the construction
    first = evaluator.fingerprint
    assert config._digest == [first]
    config._digest[0] = "kept"  # the cached digest is what a second call answers
    assert config.fingerprint() == "kept" and Evaluator(config).fingerprint == "kept"
    assert load_config(None) is load_config(None) is Evaluator().config
    # the cache is not a setting: neither compared, exported nor taken
    assert config == EvaluatorConfig.from_profile("synapse").replace(name="fresh")
    assert "_digest" not in config.to_dict()
    with pytest.raises(ConfigError, match="unknown field"):
        EvaluatorConfig.from_dict({"_digest": ["x"]})


def _analyses_events(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    return [
        {k: getattr(r, k) for k in ("reason", "tokenised", "chunks")}
        for r in caplog.records
        if r.getMessage() == "crag.chunk_analyses"
    ]


def test_chunks_missing_from_the_analyses_are_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An evaluation that tokenises chunks although the statistics were given says why,
    once per statistics and reason (a debug event), not silently every time."""
    texts = ["Solar panels convert sunlight.", "Wind turbines turn.", "Bees dance."]
    chunks = [
        Chunk(id=f"c{i}", text=t, score=0.6, score_kind=ScoreKind.COSINE)
        for i, t in enumerate(texts)
    ]
    web = Chunk(id="web", text="A page the corpus never held.", score=0.5, score_kind="cosine")
    bare = CorpusStats.build(texts)  # no analyses
    kept = CorpusStats.from_texts(texts)  # analyses, found by text whatever the ids
    evaluator = Evaluator()
    caplog.set_level("DEBUG", logger="crag_heuristic")
    for _ in range(3):
        evaluator.clear_cache()
        evaluator.evaluate("solar panels", chunks, bare)
        evaluator.clear_cache()
        evaluator.evaluate("solar panels", chunks, kept)  # every chunk found: nothing said
    assert _analyses_events(caplog) == [{"reason": "no_analyses", "tokenised": 3, "chunks": 3}]
    caplog.clear()
    for _ in range(2):
        evaluator.evaluate("solar panels", [*chunks, web], kept)
    assert _analyses_events(caplog) == [{"reason": "not_in_corpus", "tokenised": 1, "chunks": 4}]
    caplog.clear()
    other = Evaluator(analyzer=Analyzer(stop_words=["the"]))
    other.evaluate("solar panels", chunks, kept)
    other.evaluate("solar panels", chunks, kept)
    assert [e["reason"] for e in _analyses_events(caplog)] == ["other_analyzer"]
