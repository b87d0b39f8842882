"""Markdown for the benchmark reports: a table's head."""

from __future__ import annotations


def table_head(*columns: str) -> list[str]:
    """A Markdown table's header row and the rule under it (the first column left as is)."""
    return ["| " + " | ".join(columns) + " |", "|---|" + "---|" * (len(columns) - 1)]
