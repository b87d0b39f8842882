"""The LLM grader's pure parts: reading a model's answer, the prompts, the retry
delays and the usage arithmetic (no server here: tests/grading/test_openai_grader.py
runs the grader against a real one)."""

from __future__ import annotations

import pickle
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest

from crag_heuristic import ConfigError
from crag_heuristic._grading.answers import read_grades
from crag_heuristic._grading.prompts import BINARY, PROMPTS, RUBRIC, prompt_of
from crag_heuristic._retry import backoff_delay, retry_after_seconds
from crag_heuristic.grading import (
    Graded,
    GraderConnectionError,
    GraderHTTPError,
    GraderOutputError,
    GraderUsage,
    Prompt,
)

# (the model's answer, passages asked about, the grades read)
READABLE = [
    ('{"grades": ["yes", "no", "yes"]}', 3, [1.0, 0.0, 1.0]),
    ('{"grades": ["Yes", "NO", "yes."]}', 3, [1.0, 0.0, 1.0]),
    ('{"grades": [true, false]}', 2, [1.0, 0.0]),
    ('{"grades": [0.7, 0.2]}', 2, [0.7, 0.2]),
    ('{"grades": ["0.7", "1"]}', 2, [0.7, 1.0]),
    ('{"scores": [1, 0], "reasoning": "the second is off-topic"}', 2, [1.0, 0.0]),
    ('{"grades": [1, 0], "ids": [1, 2]}', 2, [1.0, 0.0]),  # "grades" named: chosen
    ('{"relevance": ["no", "yes"]}', 2, [0.0, 1.0]),
    ('["yes", "no"]', 2, [1.0, 0.0]),
    ('{"grade": "yes"}', 1, [1.0]),
    ('{"binary_score": "no"}', 1, [0.0]),  # the LangGraph CRAG tutorial's field
    ('{"score": 0.4}', 1, [0.4]),
    ('{"1": "yes", "2": "no"}', 2, [1.0, 0.0]),
    ('{"passage 2": "no", "passage 1": "yes"}', 2, [1.0, 0.0]),
    ('[{"passage": 2, "grade": "no"}, {"passage": 1, "grade": "yes"}]', 2, [1.0, 0.0]),
    ('[{"grade": "no"}, {"relevant": true}]', 2, [0.0, 1.0]),
    ('"no"', 1, [0.0]),
    ("0.25", 1, [0.25]),
    ("true", 1, [1.0]),
    # the 0-3 scale: numbers above 1, all integers 0..3
    ('{"grades": [3, 0, 2, 1]}', 4, [1.0, 0.0, 2 / 3, 1 / 3]),
    ('{"grades": ["yes", 3, 0]}', 3, [1.0, 1.0, 0.0]),  # a word is 1 whatever the numbers
    # fenced, wrapped in text, after a reasoning block
    ('```json\n{"grades": ["yes", "no"]}\n```', 2, [1.0, 0.0]),
    ('Sure.\n```\n["no", "yes"]\n```\nHope this helps.', 2, [0.0, 1.0]),
    ('Here are the grades: {"grades": ["no", "no"]} as asked.', 2, [0.0, 0.0]),
    ('<think>passage 2 says "no" to nothing</think>\n{"grades": ["yes", "no"]}', 2, [1.0, 0.0]),
    # plain text: a verdict per line, markers and markdown around it
    ("1. Yes\n2. **No**\n3. no.", 3, [1.0, 0.0, 0.0]),
    ("Here are my answers:\n- yes\n- no", 2, [1.0, 0.0]),
    ("[1] yes\n[2] No, it is about wax.", 2, [1.0, 0.0]),
    ("Passage 1: relevant\nPassage 2: not relevant", 2, [1.0, 0.0]),
    ("0.9\n0.1", 2, [0.9, 0.1]),
    ("yes, no; yes", 3, [1.0, 0.0, 1.0]),
    # one passage: the first word decides, whatever its case and punctuation (the
    # public CRAG demo that compared the answer to "no" exactly never took its web route)
    ("No", 1, [0.0]),
    ("no", 1, [0.0]),
    ("No.", 1, [0.0]),
    ("NO!", 1, [0.0]),
    ("'no'", 1, [0.0]),
    ("**No**", 1, [0.0]),
    (" no \n", 1, [0.0]),
    ("No, the passage is about coffee prices.", 1, [0.0]),
    ("Yes, it answers the question.", 1, [1.0]),
    ("Irrelevant", 1, [0.0]),
]


@pytest.mark.parametrize(("answer", "n", "grades"), READABLE, ids=[a for a, _, _ in READABLE])
def test_an_answer_is_read(answer: str, n: int, grades: list[float]) -> None:
    assert read_grades(answer, n) == pytest.approx(grades, abs=1e-12)


# (the model's answer, passages, what the error says)
UNREADABLE = [
    ('{"grades": ["yes", "no"]}', 3, "holds 2 grade(s) for 3 passage(s)"),
    ('{"grades": ["yes", "no", "no", "no"]}', 3, "holds 4 grade(s) for 3"),
    ('{"grades": ["yes", "no",', 3, "not valid JSON"),
    ('```json\n{"grades": ["yes"\n```', 1, "not valid JSON"),
    ("[1, 0", 2, "not valid JSON"),
    ('{"grades": [7, 0]}', 2, "grade 0 is 7: outside [0, 1] and not a 0-3 grade"),
    ('{"grades": [2.5, 0]}', 2, "grade 0 is 2.5"),
    ('{"grades": [-1, 0]}', 2, "grade 0 is -1"),
    ('{"grades": [4, 0]}', 2, "grade 0 is 4"),  # the 0-3 scale ends at 3
    ('{"grades": [NaN]}', 1, "not finite"),
    ('{"grades": ["maybe", "no"]}', 2, "grade 0 is a string that is no verdict"),
    ('{"grades": [null]}', 1, "grade 0 is NoneType"),
    ('{"verdict": "yes"}', 1, "holds no grades"),
    ("I cannot help with that.", 1, "neither JSON nor a verdict"),
    ("", 2, "neither JSON nor a verdict"),
    ("<think>The first passage", 1, "unfinished <think> block"),
    ("Yes\nNo", 3, "holds 2 grade(s) for 3"),
]


@pytest.mark.parametrize(("answer", "n", "says"), UNREADABLE, ids=[a for a, _, _ in UNREADABLE])
def test_an_unreadable_answer_is_a_typed_error_never_a_silent_zero(
    answer: str, n: int, says: str
) -> None:
    with pytest.raises(GraderOutputError) as info:
        read_grades(answer, n, grader="llm:1")
    assert says in str(info.value)
    assert info.value.grader == "llm:1"
    assert f"({len(answer)} characters)" in str(info.value)


def test_the_error_names_a_cut_answer_and_never_quotes_it() -> None:
    secret_words = '{"grades": ["yes", "the honeybee waggle'
    with pytest.raises(GraderOutputError) as info:
        read_grades(secret_words, 2, truncated=True)
    message = str(info.value)
    assert "token limit (max_tokens)" in message
    assert "honeybee" not in message and "waggle" not in message


def test_the_0_3_scale_needs_a_number_above_1() -> None:
    # [1, 0] is read on [0, 1]; [1, 0, 2] on 0-3 (2 is above 1, all are its integers)
    assert read_grades("[1, 0]", 2) == [1.0, 0.0]
    assert read_grades("[1, 0, 2]", 3) == pytest.approx([1 / 3, 0.0, 2 / 3])
    assert read_grades("[1, 0, 3]", 3) == pytest.approx([1 / 3, 0.0, 1.0])


def test_an_echoed_rubric_line_is_no_grade() -> None:
    """A small model (SmolLM2-135M behind llama.cpp) answered with a line of the rubric;
    the tolerant reader took its number for a grade."""
    line = "1.0 = it is on the question's topic ..."  # the exact answer seen
    with pytest.raises(GraderOutputError, match="1 line\\(s\\) echo the prompt"):
        read_grades(line, 1)
    # the whole rubric, echoed for four passages: four numbers, no grade among them
    messages = RUBRIC.messages("Why do bees dance?", ["a", "b", "c", "d"], single=False)
    prompt = "\n".join(m["content"] for m in messages)
    echo = RUBRIC.system.split("\n", 1)[1]
    for given in (prompt, ""):
        with pytest.raises(GraderOutputError, match="echo the prompt"):
            read_grades(echo, 4, prompt=given)
    # a line copied word for word from the prompt, without "=": an echo only with the prompt
    copied = "Use the values in between when a passage lies between two steps.\n0.3"
    assert read_grades(copied, 1, prompt=prompt) == [0.3]
    # grades after the echo are read; a short verdict line is never taken for an echo
    assert read_grades(f"{echo}\n0.7\n0\n1\n0.3", 4, prompt=prompt) == [0.7, 0.0, 1.0, 0.3]
    assert read_grades("1. Yes\n2. No", 2, prompt="1. yes 2. no " * 3) == [1.0, 0.0]
    # a reason quoting a passage is no echo: the verdict before it is not in the prompt
    passage = "Coffee prices rose sharply on commodity markets last winter."
    assert read_grades(f"No - {passage}", 1, prompt=passage) == [0.0]


def test_the_shipped_prompts_give_the_schema_of_one_answer() -> None:
    binary = BINARY.response_schema(3)
    assert binary is not None and binary["required"] == ["grades"]
    assert binary["properties"]["grades"] == {
        "type": "array",
        "items": {"type": "string", "enum": ["yes", "no"]},
        "minItems": 3,
        "maxItems": 3,
    }
    single = RUBRIC.response_schema(None)
    assert single is not None
    assert single["properties"] == {"grade": {"type": "number", "minimum": 0, "maximum": 1}}
    assert single["additionalProperties"] is False
    # what the schema asks for, the reader reads
    assert read_grades('{"grades": ["yes", "no", "no"]}', 3) == [1.0, 0.0, 0.0]
    mine = Prompt(name="m", version=1, system="", list_template="{query} {passages}",
                  single_template="{query} {passage}")  # fmt: skip
    assert mine.response_schema(2) is None  # no grade schema: none is asked for
    with pytest.raises(ConfigError, match="grade_schema"):
        Prompt(name="m", version=1, system="", list_template="{query} {passages}",
               single_template="{query} {passage}", grade_schema=["yes"])  # type: ignore[arg-type]  # fmt: skip


# -- prompts --------------------------------------------------------------------------------


def test_the_list_prompt_numbers_the_passages_and_asks_for_n_grades() -> None:
    messages = BINARY.messages("Why do bees dance?", ["A waggle dance.", "Wax."], single=False)
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert "Question: Why do bees dance?" in user
    assert "[1] A waggle dance.\n\n[2] Wax." in user
    assert '{"grades": ["yes", "no", ...]} with exactly 2 answers' in user


def test_the_single_prompt_asks_for_one_grade() -> None:
    [system, user] = RUBRIC.messages("Why do bees dance?", ["A waggle dance."], single=True)
    assert "0.7 = it answers the question in part" in system["content"]
    assert "Passage:\nA waggle dance." in user["content"]
    assert '{"grade": 0.7}' in user["content"]
    with pytest.raises(ValueError):
        RUBRIC.messages("q", ["a", "b"], single=True)


def test_a_passage_with_braces_is_not_a_template() -> None:
    [_, user] = BINARY.messages("q {x}", ["{passages} {0} }{"], single=False)
    assert "[1] {passages} {0} }{" in user["content"] and "Question: q {x}" in user["content"]


def test_prompts_are_versioned_and_found_by_name() -> None:
    assert (BINARY.id, RUBRIC.id) == ("binary@v1", "rubric@v1")
    assert prompt_of("binary") is BINARY and prompt_of(RUBRIC) is RUBRIC
    assert sorted(PROMPTS) == ["binary", "rubric"]
    with pytest.raises(ConfigError, match="must be a Prompt or one of binary, rubric"):
        prompt_of("yesno")


def test_a_change_of_text_changes_the_digest() -> None:
    edited = Prompt(
        name="binary",
        version=1,
        system=BINARY.system + " Be strict.",
        list_template=BINARY.list_template,
        single_template=BINARY.single_template,
    )
    assert edited.id == BINARY.id and edited.digest != BINARY.digest
    assert len(BINARY.digest) == 12


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"name": "my prompt"}, "prompt.name"),
        ({"version": 0}, "prompt.version"),
        ({"version": True}, "prompt.version"),
        ({"list_template": "Q: {query}"}, "must hold {passages}"),
        ({"single_template": "{passage}"}, "must hold {query}"),
        ({"list_template": "{query} {passages} {extra}"}, "cannot be filled in (KeyError"),
        ({"list_template": "{query} {passages} {"}, "cannot be filled in (ValueError"),
    ],
)
def test_a_bad_prompt_is_refused(change: dict[str, object], says: str) -> None:
    fields: dict[str, object] = {
        "name": "mine",
        "version": 1,
        "system": "",
        "list_template": "{query}\n{passages}",
        "single_template": "{query}\n{passage}",
        **change,
    }
    with pytest.raises(ConfigError, match=says.replace("{", r"\{").replace("(", r"\(")):
        Prompt(**fields)  # type: ignore[arg-type]


def test_a_prompt_without_a_system_message_sends_the_user_message_only() -> None:
    mine = Prompt(name="mine", version=2, system="", list_template="{query}|{passages}",
                  single_template="{query}|{passage}")  # fmt: skip
    assert mine.messages("q", ["a"], single=False) == [{"role": "user", "content": "q|[1] a"}]


# -- retry delays -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("retry", "unit", "retry_after", "delay"),
    [
        (0, 0.0, None, 0.5),  # base(0) = 0.5
        (0, 0.999, None, 0.5 * (1 - 0.5 * 0.999)),  # jitter takes up to half off
        (1, 0.0, None, 1.0),
        (2, 0.5, None, 1.5),  # base(2) = 2.0, less 0.5 * 0.5 of it
        (5, 0.0, None, 8.0),  # 0.5 * 32 = 16, capped at 8
        (0, 0.0, 3.0, 3.0),  # Retry-After raises it
        (0, 0.0, 0.1, 0.5),  # ... never lowers it
        (0, 0.0, 60.0, 8.0),  # ... and is capped
        (0, 0.0, 8.0, 8.0),
    ],
)
def test_backoff_delay_by_hand(
    retry: int, unit: float, retry_after: float | None, delay: float
) -> None:
    assert backoff_delay(
        retry, unit, backoff=0.5, backoff_max=8.0, jitter=0.5, retry_after=retry_after
    ) == pytest.approx(delay)


def test_retry_after_reads_seconds_milliseconds_and_dates() -> None:
    assert retry_after_seconds({"Retry-After": "2"}) == 2.0
    assert retry_after_seconds({"retry-after": "1.5"}) == 1.5
    assert retry_after_seconds({"retry-after-ms": "250", "Retry-After": "9"}) == 0.25
    assert retry_after_seconds({"retry-after-ms": "soon", "Retry-After": "9"}) == 9.0
    assert retry_after_seconds({"Retry-After": "-3"}) == 0.0
    assert retry_after_seconds({"Retry-After": "nan"}) is None
    assert retry_after_seconds({"Retry-After": "whenever"}) is None
    assert retry_after_seconds({}) is None
    later = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    assert 25.0 < (retry_after_seconds({"Retry-After": later}) or 0.0) <= 30.0
    past = format_datetime(datetime.now(timezone.utc) - timedelta(seconds=30), usegmt=True)
    assert retry_after_seconds({"Retry-After": past}) == 0.0


# -- usage --------------------------------------------------------------------------------------


def test_usage_adds_up() -> None:
    one = GraderUsage(requests=1, retries=0, prompt_tokens=100, completion_tokens=7, ms=20.0)
    two = GraderUsage(requests=3, retries=2, prompt_tokens=90, completion_tokens=3, ms=5.5)
    total = GraderUsage.total([one, None, two])
    assert total == GraderUsage(
        requests=4, retries=2, prompt_tokens=190, completion_tokens=10, ms=25.5
    )
    assert total.tokens == 200 and one + two == total
    assert total.to_dict() == {
        "requests": 4,
        "retries": 2,
        "prompt_tokens": 190,
        "completion_tokens": 10,
        "tokens": 200,
        "ms": 25.5,
    }
    assert GraderUsage.total([]) == GraderUsage()


def test_graded_is_a_sequence_of_grades_with_its_usage() -> None:
    usage = GraderUsage(requests=1, prompt_tokens=9)
    answer = Graded([1.0, 0.0, 0.5], usage)
    assert list(answer) == [1.0, 0.0, 0.5] and len(answer) == 3 and answer[2] == 0.5
    assert answer[:2] == (1.0, 0.0) and answer == [1.0, 0.0, 0.5] and answer.usage is usage
    assert answer == Graded([1.0, 0.0, 0.5], usage) and answer != Graded([1.0], usage)
    assert repr(answer).startswith("Graded([1.0, 0.0, 0.5], GraderUsage(requests=1")


def test_the_new_grader_errors_pickle_with_their_attributes() -> None:
    error = GraderHTTPError("429", status_code=429, retry_after=1.5, grader="llm:1")
    error.usage = GraderUsage(requests=3, retries=2)
    back = pickle.loads(pickle.dumps(error))
    assert (back.status_code, back.retry_after, back.grader) == (429, 1.5, "llm:1")
    assert back.usage == error.usage and str(back) == "429"
    gone = pickle.loads(pickle.dumps(GraderConnectionError("refused", grader="llm:1")))
    assert type(gone) is GraderConnectionError and gone.grader == "llm:1" and gone.usage is None


def test_the_grading_module_needs_httpx_only_for_the_llm_grader() -> None:
    """``import crag_heuristic.grading`` (and every grader but OpenAIGrader) works
    without the llm extra; OpenAIGrader then names it."""
    script = (
        "import sys\n"
        "sys.modules['httpx'] = None\n"
        "import crag_heuristic.grading as grading\n"
        "assert grading.RecordedGrader({'q': {'a': 3}}).fingerprint\n"
        "try:\n"
        "    grading.OpenAIGrader\n"
        "except ImportError as error:\n"
        "    print(error.extra)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "llm"
