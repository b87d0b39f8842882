"""docs/cli.md and ``crag-heuristic <command> --help`` name the same options.

The synopsis at the top of docs/cli.md lists each command's long options; every one
the command's parser takes is there (``--help``, ``--debug`` and ``--verbose``, which
every command takes, are said once), and every long option the page names anywhere is
one a parser takes. Each command has a description in its ``--help``.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from crag_heuristic._cli import build_parser

CLI_DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
EVERYWHERE = {"--help", "--debug", "--verbose"}
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    [sub] = [action for action in parser._actions if action.dest == "command"]
    assert isinstance(sub.choices, dict)
    return dict(sub.choices)


def long_options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings if o.startswith("--")}


def synopsis() -> dict[str, set[str]]:
    """Each command's long options in the page's first code block (its lines from
    ``crag-heuristic COMMAND`` to the next command's)."""
    text = CLI_DOC.read_text(encoding="utf-8")
    block = text.split("```\n", 2)[1]
    found: dict[str, set[str]] = {}
    command = None
    for line in block.splitlines():
        head = re.match(r"crag-heuristic (\w+)", line)
        if head:
            command = head.group(1)
        assert command is not None, line
        found.setdefault(command, set()).update(FLAG.findall(line))
    return found


@pytest.mark.parametrize("command", sorted(commands()))
def test_the_synopsis_names_every_option_of_the_command_and_no_other(command: str) -> None:
    parser = commands()[command]
    taken = long_options(parser) - EVERYWHERE
    named = synopsis().get(command)
    assert named is not None, f"docs/cli.md has no synopsis of {command}"
    assert sorted(taken - named) == [], f"{command} --help has options docs/cli.md omits"
    assert sorted(named - taken) == [], f"docs/cli.md names options {command} does not take"
    assert parser.description, f"{command} --help has no description"


def test_every_option_the_page_names_is_one_a_command_takes() -> None:
    taken = set().union(*(long_options(p) for p in commands().values()))
    taken |= long_options(build_parser())  # --version
    named = set(FLAG.findall(CLI_DOC.read_text(encoding="utf-8")))
    assert sorted(named - taken) == []
    assert named >= EVERYWHERE
