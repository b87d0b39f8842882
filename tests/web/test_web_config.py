"""SearxngConfig: validation, request headers and parameters, retry delays."""

from __future__ import annotations

import re

import pytest

from crag_heuristic import ConfigError
from crag_heuristic._web.config import DEFAULT_HEADERS, SearxngConfig

# SearXNG's bot detection (searx/botdetection/http_user_agent.py) matches this
# pattern at the start of the User-Agent; a few of its alternatives, copied as data.
BOT_USER_AGENT_START = re.compile(
    r"(unknown|[Cc][Uu][Rr][Ll]|[wW]get|python-requests|Python|HttpClient|Go-http-client|Java|okhttp)"
)


def test_defaults() -> None:
    config = SearxngConfig()
    assert config.timeout == 10.0
    assert config.max_retries == 2
    assert config.categories == ()
    assert config.engines == ()


def test_frozen_and_keyword_only() -> None:
    config = SearxngConfig()
    with pytest.raises(AttributeError):
        config.timeout = 3.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        SearxngConfig(3.0)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("timeout", 0),
        ("timeout", -1.0),
        ("timeout", float("nan")),
        ("timeout", "10"),
        ("max_retries", -1),
        ("max_retries", 11),
        ("max_retries", 1.5),
        ("max_retries", True),
        ("backoff", -0.1),
        ("backoff_max", 0.1),  # below the default backoff of 0.5
        ("jitter", 1.5),
        ("jitter", -0.1),
        ("categories", 5),
        ("categories", ["general", ""]),
        ("engines", ["a,b"]),
        ("language", ""),
        ("language", 3),
        ("safesearch", 3),
        ("safesearch", True),
        ("max_content_chars", 0),
        ("max_title_chars", 2.0),
    ],
)
def test_bad_values_name_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        SearxngConfig(**{field: value})  # type: ignore[arg-type]
    assert info.value.field == field
    assert info.value.value is value


@pytest.mark.parametrize(
    ("headers", "field"),
    [
        ({"X-A": 1}, "headers['X-A']"),
        ({"Authorization": "Bearer tok\r\nX-Evil: 1"}, "headers['Authorization']"),
        ({"Authorization": "Bearer t\u00f6k"}, "headers['Authorization']"),
        ({"Bad Name": "v"}, "headers"),
        ([("X-A", "1")], "headers"),
    ],
)
def test_bad_headers_name_the_header_never_its_value(headers: object, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        SearxngConfig(headers=headers)  # type: ignore[arg-type]
    assert info.value.field == field
    assert "Bearer" not in str(info.value) and "Bearer" not in repr(info.value.value)


def test_header_values_are_masked_in_the_repr() -> None:
    config = SearxngConfig(headers={"Authorization": "Bearer s3cr3t"}, language="de")
    assert "s3cr3t" not in repr(config) and "'Authorization': '***'" in repr(config)
    assert "language='de'" in repr(config)


def test_names_accept_a_comma_separated_string() -> None:
    config = SearxngConfig(categories="general, news", engines=["wikipedia"])
    assert config.categories == ("general", "news")
    assert config.engines == ("wikipedia",)


def test_replace_validates_again() -> None:
    config = SearxngConfig().replace(timeout=4.0)
    assert config.timeout == 4.0
    with pytest.raises(ConfigError):
        config.replace(timeout=0)


def test_default_headers_pass_searxng_bot_detection() -> None:
    headers = SearxngConfig().request_headers()
    assert not BOT_USER_AGENT_START.match(headers["User-Agent"])
    assert headers["User-Agent"].startswith("Mozilla/5.0")
    # no browser version: Firefox >= 90 / Chrome >= 80 must also send Sec-Fetch-* headers
    assert not re.search(r"(?i)(firefox|chrome)/\d", headers["User-Agent"])
    assert "text/html" in headers["Accept"]
    assert "application/json" in headers["Accept"]
    assert headers["Accept-Language"].strip()


def test_headers_override_defaults_case_insensitively() -> None:
    headers = SearxngConfig(headers={"user-agent": "Mine/1.0", "X-Extra": "1"}).request_headers()
    assert headers["user-agent"] == "Mine/1.0"
    assert "User-Agent" not in headers
    assert headers["X-Extra"] == "1"
    assert headers["Accept"] == DEFAULT_HEADERS["Accept"]


def test_request_params() -> None:
    assert SearxngConfig().request_params("solar") == {"q": "solar", "format": "json"}
    config = SearxngConfig(
        categories=["general", "news"], engines=["a", "b"], language="de", safesearch=0
    )
    assert config.request_params("solar") == {
        "q": "solar",
        "format": "json",
        "categories": "general,news",
        "engines": "a,b",
        "language": "de",
        "safesearch": "0",
    }


@pytest.mark.parametrize(
    ("retry", "low", "high"),
    [(0, 0.25, 0.5), (1, 0.5, 1.0), (2, 1.0, 2.0), (3, 2.0, 4.0), (4, 4.0, 8.0), (5, 4.0, 8.0)],
)
def test_retry_delay_bounds(retry: int, low: float, high: float) -> None:
    # base = min(8, 0.5 * 2**retry); delay in [base * (1 - 0.5), base]
    config = SearxngConfig(backoff=0.5, backoff_max=8.0, jitter=0.5)
    assert config.retry_delay(retry, 0.0) == pytest.approx(high)
    assert config.retry_delay(retry, 0.999999) == pytest.approx(low, rel=1e-5)
    assert low <= config.retry_delay(retry, 0.5) <= high


def test_retry_after_raises_the_delay_up_to_the_cap() -> None:
    config = SearxngConfig(backoff=0.5, backoff_max=8.0, jitter=0.0)
    assert config.retry_delay(0, 0.3, retry_after=3.0) == 3.0
    assert config.retry_delay(0, 0.3, retry_after=0.1) == 0.5
    assert config.retry_delay(0, 0.3, retry_after=3600.0) == 8.0


def test_no_jitter_is_deterministic() -> None:
    config = SearxngConfig(backoff=1.0, jitter=0.0)
    assert {config.retry_delay(1, unit) for unit in (0.0, 0.3, 0.9)} == {2.0}
