"""SynonymExpander: the documented query order, the caps, stop words, determinism."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crag_heuristic import Chunk, ConfigError, InputError, InvalidQueryError
from crag_heuristic._expansion.base import Expansion
from crag_heuristic._expansion.expander import SynonymExpander
from crag_heuristic._expansion.synonyms import SynonymSet, parse_synonyms
from crag_heuristic._protocols import QueryExpander
from crag_heuristic._text.analyzer import Analyzer


def test_bag_first_then_variants_by_rank_then_position(small_set: SynonymSet) -> None:
    expander = SynonymExpander(small_set, max_per_term=2, max_queries=10)
    expansion = expander.expand("big car")
    assert expansion.added == (("big", ("large", "huge")), ("car", ("automobile", "auto")))
    assert expansion.queries == (
        "big car large huge automobile auto",
        "large car",
        "big automobile",
        "huge car",
        "big auto",
    )
    assert expansion.method == "synonyms"
    assert expansion.original == "big car"
    assert expansion.terms == ("large", "huge", "automobile", "auto")


def test_max_queries_cuts_the_list(small_set: SynonymSet) -> None:
    expansion = SynonymExpander(small_set, max_queries=3).expand("big car")
    assert expansion.queries == (
        "big car large huge automobile auto",
        "large car",
        "big automobile",
    )
    only_bag = SynonymExpander(small_set, max_queries=1).expand("big car")
    assert only_bag.queries == ("big car large huge automobile auto",)


def test_max_per_term_caps_each_term(small_set: SynonymSet) -> None:
    expansion = SynonymExpander(small_set, max_per_term=1, max_queries=10).expand("big car")
    assert expansion.added == (("big", ("large",)), ("car", ("automobile",)))
    assert expansion.queries == ("big car large automobile", "large car", "big automobile")
    three = SynonymExpander(small_set, max_per_term=3).expand("car")
    assert three.added == (("car", ("automobile", "auto", "motorcar")),)


def test_variants_keep_the_rest_of_the_query(small_set: SynonymSet) -> None:
    expansion = SynonymExpander(small_set, max_queries=10).expand(
        "  Heart attacks in   young adults?"
    )
    assert expansion.added == (("Heart attacks", ("myocardial infarction",)),)
    assert expansion.queries == (
        "Heart attacks in young adults? myocardial infarction",
        "myocardial infarction in young adults?",
    )
    assert expansion.original == "  Heart attacks in   young adults?"


def test_stop_words_are_never_expanded(small_set: SynonymSet) -> None:
    expansion = SynonymExpander(small_set).expand("is it the car")
    assert expansion.added == (("car", ("automobile", "auto")),)
    assert SynonymExpander(small_set).expand("it is what it is").queries == ()


def test_synonyms_already_in_the_query_are_skipped(small_set: SynonymSet) -> None:
    expansion = SynonymExpander(small_set, max_queries=10).expand("car automobile")
    # car: automobile is there, so auto and motorcar; automobile: car is there and
    # auto, motorcar were added already, so nothing
    assert expansion.added == (("car", ("auto", "motorcar")),)
    assert expansion.queries == (
        "car automobile auto motorcar",
        "auto automobile",
        "motorcar automobile",
    )


def test_no_match_gives_no_queries(small_set: SynonymSet) -> None:
    expansion = SynonymExpander(small_set).expand("quantum chromodynamics")
    assert expansion == Expansion(original="quantum chromodynamics", method="synonyms")
    assert not expansion.expanded
    assert expansion.to_dict() == {
        "original": "quantum chromodynamics",
        "queries": [],
        "added": [],
        "method": "synonyms",
        "weights": [],
    }


def test_to_dict_round_trips(small_set: SynonymSet) -> None:
    expansion = SynonymExpander(small_set).expand("big heart")
    data = expansion.to_dict()
    assert data["added"] == [
        {"term": "big", "synonyms": ["large", "huge"]},
        {"term": "heart", "synonyms": ["cardiac"]},
    ]
    assert json.loads(json.dumps(data)) == data
    assert Expansion.from_dict(data) == expansion


def test_chunks_and_stats_are_accepted_and_ignored(small_set: SynonymSet) -> None:
    expander = SynonymExpander(small_set)
    chunks = [Chunk(id="a", text="cars and trucks")]
    assert expander.expand("car", chunks=chunks) == expander.expand("car")
    assert isinstance(expander, QueryExpander)


def test_expander_accepts_paths_and_names(tmp_path) -> None:
    mine = tmp_path / "mine.txt"
    mine.write_text("flat tire, flat tyre, puncture\n", encoding="utf-8")
    expander = SynonymExpander([mine, "english"])
    expansion = expander.expand("how to fix a flat tire on my car")
    assert expansion.added == (
        ("flat tire", ("flat tyre", "puncture")),
        ("car", ("automobile", "auto")),
    )
    assert SynonymExpander(mine).synonyms.sources == (str(mine),)


def test_the_analyzer_argument_rekeys(small_set: SynonymSet) -> None:
    expander = SynonymExpander(small_set, analyzer=Analyzer(stop_words=[]))
    assert expander.expand("it").added == (("it", ("information technology",)),)


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_per_term", 0), ("max_per_term", 1.5), ("max_queries", 0), ("max_queries", True)],
)
def test_bad_caps_raise_config_error(small_set: SynonymSet, field: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        SynonymExpander(small_set, **{field: value})  # type: ignore[arg-type]
    assert info.value.field == field
    assert info.value.value == value


def test_a_wrong_synonyms_argument_raises_input_error() -> None:
    with pytest.raises(InputError, match="got int"):
        SynonymExpander(42)  # type: ignore[arg-type]


@pytest.mark.parametrize("query", ["", "   ", None, 3])
def test_bad_queries_raise(small_set: SynonymSet, query: object) -> None:
    with pytest.raises(InvalidQueryError):
        SynonymExpander(small_set).expand(query)  # type: ignore[arg-type]


def test_default_expander_on_real_queries(bundled_set: SynonymSet) -> None:
    expander = SynonymExpander(bundled_set)
    heart = expander.expand("heart attack risk in young adults")
    assert heart.queries[:2] == (
        "heart attack risk in young adults myocardial infarction",
        "myocardial infarction risk in young adults",
    )
    tire = expander.expand("how to fix a flat tire on my car")
    assert tire.added == (("car", ("automobile", "auto")),)  # "flat" is ambiguous: untouched
    python = expander.expand("python list comprehension performance")
    assert python.added == (("list comprehension", ("listcomp",)),)


QUERIES = [
    "heart attack risk in young adults",
    "how to fix a flat tire on my car",
    "python list comprehension performance",
    "high blood pressure and kidney disease in children",
    "what is a good p/e ratio for a growth stock",
]

_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from crag_heuristic import Chunk, ScoreKind
    from crag_heuristic.expansion import PRFExpander, SynonymExpander
    queries = json.loads(sys.argv[1])
    expander = SynonymExpander()
    out = [expander.expand(q).to_dict() for q in queries]
    chunks = [
        Chunk(id=str(i), text=t, score=s, score_kind=ScoreKind.COSINE)
        for i, (t, s) in enumerate([
            ("kidney disease and blood pressure in young patients", 0.7),
            ("renal function declines with hypertension; renal care helps", 0.5),
            ("children with renal disease need blood tests", 0.3),
        ])
    ]
    out.append(PRFExpander(n_terms=4).expand("kidney disease", chunks=chunks).to_dict())
    print(json.dumps(out))
    """
)


def test_same_output_across_processes_and_hash_seeds() -> None:
    outputs = []
    for seed in ("1", "2", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", _SCRIPT, json.dumps(QUERIES)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=True,
        )
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1] == outputs[2]
    expansions = json.loads(outputs[0])
    assert len(expansions) == len(QUERIES) + 1
    assert expansions[3]["added"][0] == {
        "term": "high blood pressure",
        "synonyms": ["hypertension", "elevated blood pressure"],
    }


def test_same_output_across_runs_in_one_process(bundled_set: SynonymSet) -> None:
    first = [SynonymExpander(bundled_set).expand(q) for q in QUERIES]
    again = [SynonymExpander(SynonymSet(bundled_set.rules)).expand(q) for q in QUERIES]
    assert first == again


def test_threads_get_the_same_answers(bundled_set: SynonymSet) -> None:
    expander = SynonymExpander(bundled_set)
    expected = [expander.expand(q) for q in QUERIES]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda _: [expander.expand(q) for q in QUERIES], range(32)))
    assert all(result == expected for result in results)


_WORDS = st.sampled_from(
    ["big", "car", "cars", "heart", "attack", "attacks", "it", "the", "is", "red", "Car,", "!"]
)
_PROPERTY_SET = parse_synonyms(
    "car, automobile, auto\nbig => large, huge\nheart attack, myocardial infarction\n"
    "heart => cardiac\nred car, sports car\n"
)


@settings(max_examples=200, deadline=None)
@given(words=st.lists(_WORDS, min_size=1, max_size=8), per_term=st.integers(1, 3))
def test_expansion_invariants(words: list[str], per_term: int) -> None:
    query = " ".join(words)
    base = " ".join(query.split())
    for max_queries in (1, 2, 5):
        expander = SynonymExpander(_PROPERTY_SET, max_per_term=per_term, max_queries=max_queries)
        expansion = expander.expand(query)
        folded = [q.casefold() for q in expansion.queries]
        assert len(folded) == len(set(folded)) <= max_queries
        assert base.casefold() not in folded
        assert all(1 <= len(used) <= per_term for _, used in expansion.added)
        assert bool(expansion.queries) == bool(expansion.added)
        if expansion.queries:
            assert expansion.queries[0].startswith(base)
        assert expansion == expander.expand(query)
