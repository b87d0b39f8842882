"""URL normalisation for dedupe, and the stable web chunk id."""

from __future__ import annotations

import hashlib

import pytest

from crag_heuristic._web.urls import normalize_url, web_chunk_id


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("https://example.org/a", "https://example.org/a"),
        ("http://example.org/a", "https://example.org/a"),
        ("HTTPS://Example.ORG/a", "https://example.org/a"),
        ("https://www.example.org/a", "https://example.org/a"),
        ("https://example.org/a/", "https://example.org/a"),
        ("https://example.org", "https://example.org/"),
        ("https://example.org/", "https://example.org/"),
        ("https://example.org./a", "https://example.org/a"),
        ("https://example.org:443/a", "https://example.org/a"),
        ("http://example.org:80/a", "https://example.org/a"),
        ("https://example.org:8443/a", "https://example.org:8443/a"),
        ("https://example.org/a#section-2", "https://example.org/a"),
        ("  https://example.org/a  ", "https://example.org/a"),
        ("https://example.org/a?utm_source=x&utm_medium=y", "https://example.org/a"),
        ("https://example.org/a?UTM_Campaign=x", "https://example.org/a"),
        ("https://example.org/a?fbclid=1&gclid=2&msclkid=3", "https://example.org/a"),
        ("https://example.org/a?id=7&utm_source=x", "https://example.org/a?id=7"),
        ("https://example.org/a?b=2&a=1", "https://example.org/a?a=1&b=2"),
        ("https://example.org/a?x=2&a=1&x=1", "https://example.org/a?a=1&x=2&x=1"),
        ("https://user@example.org/a", "https://user@example.org/a"),
    ],
)
def test_normalize_url(url: str, key: str) -> None:
    assert normalize_url(url) == key


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("https://example.org/Page", "https://example.org/page"),  # paths are case-sensitive
        ("https://example.org/a?id=1", "https://example.org/a?id=2"),
        ("https://example.org/a", "https://example.com/a"),
        ("https://example.org/a", "https://sub.example.org/a"),
        ("https://example.org/a%2Fb", "https://example.org/a/b"),
        ("https://example.org/a?q=a%2Bb", "https://example.org/a?q=a+b"),
    ],
)
def test_different_pages_keep_different_keys(first: str, second: str) -> None:
    assert normalize_url(first) != normalize_url(second)


@pytest.mark.parametrize(
    "url", ["not a url", "/relative/path", "mailto:someone@example.org", "ftp://files.org/x"]
)
def test_other_text_is_its_own_key(url: str) -> None:
    assert normalize_url(url) == url


def test_bad_port_does_not_raise() -> None:
    assert normalize_url("https://example.org:99999/a") == "https://example.org:99999/a"


def test_chunk_id_is_prefixed_sha256_of_the_key() -> None:
    expected = hashlib.sha256(b"https://example.org/a").hexdigest()[:16]
    assert web_chunk_id("https://example.org/a") == "web:" + expected


def test_spellings_of_a_page_share_the_chunk_id() -> None:
    ids = {
        web_chunk_id(url)
        for url in (
            "https://example.org/a",
            "http://www.example.org/a/",
            "https://example.org/a?utm_source=news#top",
        )
    }
    assert len(ids) == 1
    assert web_chunk_id("https://example.org/b") not in ids
