"""An index directory's gate: recorded in the manifest, loaded by every door that takes the
directory, refused when it does not read; the command line's default and its opt-out."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from crag_heuristic import CRAG, Evaluator, EvaluatorConfig, InputError
from crag_heuristic._calibration.gate import profile_toml
from crag_heuristic._cli import main
from crag_heuristic._cli.common import EXIT_BAD_INPUT, EXIT_OK
from crag_heuristic.index import IndexDirectory, IndexDirectoryError, IndexGate
from crag_heuristic.sample import load_sample_corpus


class WordHash:
    """An embedder of one's own: each word hashed into one of 16 dimensions."""

    def __call__(self, text: str) -> list[float]:
        vector = [0.0] * 16
        for word in text.lower().split():
            vector[sum(word.encode()) % 16] += 1.0
        return vector


# a gate of its own: the shipped one with other bands (what a calibrator may write)
OWN = EvaluatorConfig().replace(name="own-gate", thresholds={"relevant": 0.97, "partial": 0.96})


def own_gate(built: IndexDirectory) -> IndexGate:
    """A calibrator: it sees the built directory (its parts load) and returns its gate."""
    assert len(built.docs) == 64 and built.corpus_stats.n_docs == 64
    return IndexGate(
        "self-calibrated",
        profile=profile_toml(OWN, {"method": "by hand"}),
        notes=("a note",),
        details={"queries": 0},
    )


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> IndexDirectory:
    folder = tmp_path_factory.mktemp("gated") / "idx"
    return IndexDirectory.build(load_sample_corpus(), folder, gate=own_gate)


def test_the_gate_is_a_file_of_the_manifest_and_every_door_loads_it(gated: IndexDirectory) -> None:
    manifest = gated.manifest
    assert manifest.gate["status"] == "self-calibrated" and manifest.gate["file"] == "gate.toml"
    assert manifest.gate["embedder"] == "lsa-63" and manifest.gate["notes"] == ["a note"]
    assert manifest.gate["queries"] == 0
    assert "gate.toml" in manifest.files and "calibrating" in manifest.build_seconds
    loaded = IndexDirectory.load(gated.path)
    assert loaded.gate == OWN
    crag = CRAG.from_index_dir(gated.path)
    assert crag.evaluator.config == OWN
    # another evaluator given: that one
    assert CRAG.from_index_dir(gated.path, "synapse").evaluator.config.name == "synapse"
    assert CRAG.from_index_dir(gated.path, Evaluator()).evaluator.config == EvaluatorConfig()


def test_the_command_line_decides_with_the_directory_s_gate(
    gated: IndexDirectory, tmp_path: Path
) -> None:
    def run(argv: list[str]) -> dict[str, Any]:
        out = io.StringIO()
        assert main(argv, out=out) == EXIT_OK
        return dict(json.loads(out.getvalue()))

    query = ["retrieve", "-q", "queen honeybee colony", "--index", str(gated.path), "--quiet"]
    assert run(query)["evaluation"]["profile"] == "own-gate"
    assert run([*query, "--profile", "synapse"])["evaluation"]["profile"] == "synapse"
    tuned = run([*query, "--set", "thresholds.relevant=0.99"])["evaluation"]
    assert tuned["profile"] == "own-gate+overrides"  # --set adjusts the directory's gate
    chunks = tmp_path / "chunks.jsonl"
    found = gated.retriever().search("queen honeybee colony", 3)
    chunks.write_text("\n".join(json.dumps(c.to_dict()) for c in found))
    graded = ["evaluate", "-q", "queen honeybee colony", "-c", str(chunks)]
    assert run([*graded, "--index", str(gated.path)])["profile"] == "own-gate"
    assert run(graded)["profile"] == EvaluatorConfig().name


def test_serve_decides_with_the_directory_s_gate_and_says_which(gated: IndexDirectory) -> None:
    from crag_heuristic._cli import build_parser
    from crag_heuristic._cli.progress import Progress
    from crag_heuristic._cli.serve import _router

    args = build_parser().parse_args(["serve", "--index", str(gated.path), "--quiet"])
    crag, info = _router(args, Progress("serve", enabled=False))
    assert crag.evaluator.config == OWN and info["gate"] == "own-gate"  # /healthz shows it
    args = build_parser().parse_args(["serve", "--index", str(gated.path), "--profile", "crag"])
    assert _router(args, Progress("serve", enabled=False))[1]["gate"] == "crag"


def _copy(gated: IndexDirectory, folder: Path) -> tuple[Path, dict[str, Any]]:
    shutil.copytree(gated.path, folder)
    return folder, json.loads((folder / "manifest.json").read_text())


def _rewrite(folder: Path, manifest: dict[str, Any], gate_toml: bytes | None = None) -> None:
    """What a writer of the directory without its secret can do: a new gate file, and the
    manifest's size and digest of it to match."""
    if gate_toml is not None:
        (folder / "gate.toml").write_bytes(gate_toml)
        manifest["files"]["gate.toml"] = {
            "bytes": len(gate_toml),
            "sha256": hashlib.sha256(gate_toml).hexdigest(),
        }
    (folder / "manifest.json").write_text(json.dumps(manifest))


def test_a_changed_gate_file_is_refused_even_unverified(
    gated: IndexDirectory, tmp_path: Path
) -> None:
    changed, _ = _copy(gated, tmp_path / "changed")
    text = (changed / "gate.toml").read_text()
    (changed / "gate.toml").write_text(text.replace("0.97", "0.10"))  # the size the same
    with pytest.raises(IndexDirectoryError, match=r"gate\.toml of another SHA-256"):
        IndexDirectory.load(changed)
    unverified = IndexDirectory.load(changed, verify=False)  # sizes only: loads ...
    with pytest.raises(
        IndexDirectoryError, match=r"gate\.toml of another size or SHA-256"
    ) as caught:
        unverified.gate  # noqa: B018 - ... but the gate is checked whenever it is read
    assert caught.value.field == "file"
    with pytest.raises(IndexDirectoryError):
        CRAG.from_index_dir(changed, verify=False)


@pytest.mark.parametrize(
    "raw",
    [
        b"thresholds = [",  # not TOML
        b"\xff\xfe",  # not UTF-8
        b'profile = "/etc/passwd"',  # a profile names a bundled one, never a file
        b'nonsense = "key"',  # not a configuration
        b"[thresholds]\nrelevant = 2.0",  # out of its bounds
    ],
)
def test_a_gate_file_that_is_not_a_profile_is_refused(
    gated: IndexDirectory, tmp_path: Path, raw: bytes
) -> None:
    folder, manifest = _copy(gated, tmp_path / "bad")
    _rewrite(folder, manifest, raw)
    loaded = IndexDirectory.load(folder)  # its digests match: the manifest vouches for it
    with pytest.raises(IndexDirectoryError) as caught:
        loaded.gate  # noqa: B018
    assert caught.value.field == "gate" and "passwd" not in str(caught.value)


def test_a_gate_entry_this_library_does_not_write_is_refused(
    gated: IndexDirectory, tmp_path: Path
) -> None:
    folder, manifest = _copy(gated, tmp_path / "odd")
    entry = manifest["gate"]
    for odd in (
        {**entry, "status": "trusted"},
        {**entry, "file": "../elsewhere.toml"},
        {**entry, "embedder": "lsa-8"},  # calibrated for another embedder than the directory's
        {**entry, "notes": ["x"] * 100},
        {**entry, "report": {"a": [[[[[[1.0]]]]]]}},  # nested beyond its bound
        {**entry, "report": "x" * 10_000},
        {**entry, "status": "shipped"},  # gate.toml listed, no gate of its own: not a part
        "self-calibrated",
    ):
        _rewrite(folder, {**manifest, "gate": odd})
        with pytest.raises(IndexDirectoryError) as caught:
            IndexDirectory.load(folder)
        assert caught.value.field == "manifest", odd
    # listed without an entry: refused; neither listed nor an entry (a directory built
    # before gates were recorded): the shipped gate decides
    del manifest["gate"]
    _rewrite(folder, manifest)
    with pytest.raises(IndexDirectoryError, match="manifest"):
        IndexDirectory.load(folder)
    del manifest["files"]["gate.toml"]
    _rewrite(folder, manifest)
    assert IndexDirectory.load(folder).gate is None


def test_a_signed_directory_s_gate_cannot_be_replaced(tmp_path: Path) -> None:
    secret = "s" * 32
    built = IndexDirectory.build(
        load_sample_corpus(), tmp_path / "idx", gate=own_gate, secret=secret
    )
    assert built.manifest.signed and IndexDirectory.load(built.path, secret=secret).gate == OWN
    assert CRAG.from_index_dir(built.path, index_secret=secret).evaluator.config == OWN
    envelope = json.loads((built.path / "manifest.json").read_text())
    manifest = envelope["v"] if isinstance(envelope["v"], dict) else json.loads(envelope["v"])
    raw = profile_toml(OWN.replace(thresholds={"relevant": 0.0, "partial": 0.0}), {}).encode()
    _rewrite(built.path, manifest, raw)  # the writer's own manifest, unsigned
    with pytest.raises(IndexDirectoryError) as caught:
        IndexDirectory.load(built.path, secret=secret)
    assert caught.value.field == "signature"


def test_a_calibrator_that_answers_nonsense_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not an IndexGate"):
        IndexDirectory.build(load_sample_corpus(), tmp_path / "idx", gate=lambda built: "yes")  # type: ignore[arg-type, return-value]
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(InputError, match="status"):
        IndexGate("trusted")
    with pytest.raises(InputError, match="profile"):
        IndexGate("self-calibrated")
    with pytest.raises(InputError, match="profile"):
        IndexGate("shipped", profile="name = 'x'")


def test_the_index_command_self_calibrates_or_says_why_not(
    docs_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = io.StringIO()
    built = tmp_path / "idx"
    command = ["index", "--docs", str(docs_file), "--out", str(built), "--quiet"]
    assert main([*command, "--calibrate-queries", "80"], out=out) == EXIT_OK
    summary = json.loads(out.getvalue())
    gate = summary["gate"]
    assert summary["embedder"] == "lsa-63" and gate["embedder"] == "lsa-63"
    assert gate["status"] in ("self-calibrated", "shipped")
    assert gate["simulated_queries"] <= 80 and "calibrating" in summary["seconds"]
    loaded = IndexDirectory.load(built)
    if gate["status"] == "self-calibrated":
        assert loaded.gate is not None and loaded.gate.model is not None
        assert CRAG.from_index_dir(built).evaluator.config == loaded.gate
    else:  # it refused: the shipped gate, and the reason on stderr
        assert loaded.gate is None and gate["notes"]
        assert "warning" in capsys.readouterr().err
    # --no-calibrate: the shipped gate, a note naming how to calibrate later
    out = io.StringIO()
    assert main([*command, "--no-calibrate"], out=out) == EXIT_OK
    summary = json.loads(out.getvalue())
    assert summary["gate"]["status"] == "skipped" and "calibrating" not in summary["seconds"]
    assert "--no-calibrate" in capsys.readouterr().err
    assert IndexDirectory.load(built).gate is None


def test_without_scikit_learn_an_embedder_of_one_s_own_indexes_with_a_note(
    docs_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "sklearn", None)  # the core install
    monkeypatch.setitem(sys.modules, "sklearn.decomposition", None)
    out = io.StringIO()
    spec = f"{__name__}:WordHash"
    command = ["index", "--docs", str(docs_file), "--out", str(tmp_path / "idx")]
    assert main([*command, "--embedder", spec, "--quiet"], out=out) == EXIT_OK
    gate = json.loads(out.getvalue())["gate"]
    assert gate["status"] == "skipped" and "calibrate" in gate["notes"][0]
    assert "pip install 'crag-heuristic[calibrate]'" in capsys.readouterr().err
    # LSA itself needs the extra: refused, naming it
    assert main([*command, "--quiet"], out=io.StringIO()) == EXIT_BAD_INPUT


# -- self-calibration for a directory: which gate it keeps, and when it refuses ------------


@pytest.fixture(scope="module")
def simulated(gated: IndexDirectory) -> tuple[Any, Any]:
    """The sample directory's simulation and the refit on it (what calibrate_index fits)."""
    from crag_heuristic._calibration.index_gate import IndexSearch, stored_neighbours
    from crag_heuristic._calibration.self_calibration import fit_simulation, simulate

    simulation = simulate(
        IndexSearch(gated), gated.docs, k=5, queries=80, corpus_stats=gated.corpus_stats,
        neighbours=stored_neighbours(gated),
    )  # fmt: skip
    return simulation, fit_simulation(simulation, name="index-gate")


def _decide(simulated: tuple[Any, Any], **report: Any) -> IndexGate:
    from crag_heuristic._calibration.index_gate import _decide

    simulation, refit = simulated
    changed = dataclasses.replace(refit, report={**refit.report, **report})
    return _decide(simulation, changed, EvaluatorConfig(), "lsa-63", 0.0)


def _profile(made: IndexGate, folder: Path) -> EvaluatorConfig:
    assert made.profile is not None
    (folder / "gate.toml").write_text(made.profile)
    return EvaluatorConfig.from_file(folder / "gate.toml")


def test_the_refit_is_kept_where_it_ranks_the_simulated_failures_better(
    simulated: tuple[Any, Any], tmp_path: Path
) -> None:
    made = _decide(simulated, oof_set_auc_failure=1.0)
    assert made.status == "self-calibrated" and made.profile is not None
    config = _profile(made, tmp_path)
    assert config.name == "index-gate" and config.model == simulated[1].config.model
    assert made.details["chosen"].startswith("the shipped gate refitted")
    assert made.details["simulated_auc"]["refit"] == 1.0
    # the IRRELEVANT band sits at the lowest good simulated list: none is below it
    below = made.details["bands"]["good_in_irrelevant"]
    assert round(below["value"] * below["of"]) == 1  # the lowest one, at the band
    assert "# verdict_bands: RELEVANT above" in made.profile


def test_otherwise_the_shipped_gate_is_kept_with_bands_chosen_on_the_simulation(
    simulated: tuple[Any, Any], tmp_path: Path
) -> None:
    made = _decide(simulated, oof_set_auc_failure=0.0)
    shipped = EvaluatorConfig()
    if made.status == "self-calibrated":
        assert made.profile is not None
        config = _profile(made, tmp_path)
        assert config.model == shipped.model  # the shipped gate's scores, other bands
        assert made.details["chosen"].startswith("the shipped gate as it is")
    else:  # or it refused, saying why
        assert made.status == "shipped" and made.notes


def test_it_refuses_what_it_cannot_promise(
    simulated: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # bands that miss their targets on the simulated queries: the shipped gate, and why
    made = _decide(simulated, oof_set_auc_failure=1.0, bands_met_targets=False)
    assert made.status == "shipped" and made.profile is None
    assert "cannot meet its targets" in made.notes[0]
    # a gate no better than the top-1 cosine on the simulated failures: the same
    from crag_heuristic._calibration import index_gate

    aucs = iter([0.99, 0.6])  # the top-1 cosine's, then the shipped gate's
    monkeypatch.setattr(index_gate, "failure_auc", lambda failed, score: next(aucs))
    made = _decide(simulated, oof_set_auc_failure=0.5)
    assert made.status == "shipped" and "no better than the top-1 cosine" in made.notes[0]
    assert made.entry()["status"] == "shipped" and "file" not in made.entry()


def test_a_corpus_too_small_to_simulate_keeps_the_shipped_gate(tmp_path: Path) -> None:
    from crag_heuristic.calibration import calibrate_index

    built = IndexDirectory.build(load_sample_corpus()[:30], tmp_path / "idx", gate=calibrate_index)
    assert built.manifest.gate["status"] == "shipped" and built.gate is None
    assert "at least 50 documents" in built.manifest.gate["notes"][0]
    assert CRAG.from_index_dir(built.path).evaluator.config == EvaluatorConfig()


def test_the_calibrator_searches_with_the_model_in_hand(tmp_path: Path) -> None:
    """An embedder of one's own is made once per build: the calibrator gets the same object
    (a model loaded twice would cost its load twice)."""
    seen: list[Any] = []

    def calibrator(built: IndexDirectory) -> IndexGate:
        seen.append(built.embedder)
        return IndexGate("shipped", notes=("looked",))

    Counted.made = 0
    built = IndexDirectory.build(
        load_sample_corpus(), tmp_path / "idx", embedder=f"{__name__}:Counted", gate=calibrator
    )
    assert Counted.made == 1 and isinstance(seen[0], Counted)
    assert built.manifest.gate == {
        "status": "shipped",
        "notes": ["looked"],
        "embedder": built.manifest.embedder["name"],
    }


class Counted(WordHash):
    made = 0

    def __init__(self) -> None:
        Counted.made += 1


GRADER = """
class Words:
    fingerprint = "words:v1"

    def grade(self, query, chunks):
        words = set(query.lower().split())
        return [1.0 if words & set(c.text.lower().split()) else 0.0 for c in chunks]
"""


def test_calibrate_on_a_grader_starts_from_the_directory_s_gate(
    gated: IndexDirectory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index's own gate is the prior of ``calibrate --grader --index DIR`` (its
    bands kept where the labels are too few to choose them), unless ``--prior`` names
    another."""
    (tmp_path / "words_grader.py").write_text(GRADER)
    monkeypatch.syspath_prepend(str(tmp_path))
    queries = tmp_path / "queries.txt"
    queries.write_text("queen honeybee colony\nsolar panel efficiency\n")
    base = ["calibrate", "--grader", "words_grader:Words", "--index", str(gated.path)]
    out = io.StringIO()
    assert (
        main([*base, "--query-file", str(queries), "--out", str(tmp_path / "a.toml")], out=out) == 0
    )
    assert json.loads(out.getvalue())["prior"] == "own-gate"
    made = EvaluatorConfig.from_file(tmp_path / "a.toml")
    assert made.thresholds == OWN.thresholds  # two labels: the prior's bands, as it was
    argv = [
        *base,
        "--query-file",
        str(queries),
        "--prior",
        "crag",
        "--out",
        str(tmp_path / "b.toml"),
    ]
    out = io.StringIO()
    assert main(argv, out=out) == EXIT_OK
    assert json.loads(out.getvalue())["prior"] == "crag"
