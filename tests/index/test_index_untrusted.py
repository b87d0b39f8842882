"""An index directory is data, never code (issue 32).

Whoever can write an index directory (a shared disk, a downloaded index, a build
artefact) chose every byte of it, the manifest included. The threat, tried here with
every loader (``CRAG.from_index_dir``, ``IndexDirectory.load``, ``retrieve``,
``evaluate``, ``calibrate --self`` and ``serve`` on ``--index DIR``): a manifest that
names ``os:system`` or ``builtins:eval`` as the query embedder (every query run as a
command), a module of the attacker's, files outside the directory (``../``, absolute
paths, symlinks), a file dropped from the list, a part whose hash was rewritten over a
malformed array (a ``MemoryError`` before), and a seeded mutation fuzz of 120
directories. Goals: 0 code executed, 0 untyped errors, no error showing a file's size or
digest; with a secret, a manifest nobody else can rewrite.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import uuid
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from crag_heuristic import CRAG, CragError
from crag_heuristic._cli import main
from crag_heuristic.index import IndexDirectory, IndexDirectoryError
from crag_heuristic.sample import load_sample_corpus

SECRET = "an-index-secret-of-32-characters"
QUERY = "honeybee waggle dance"


def run(argv: list[str]) -> int:
    return main(argv, out=io.StringIO())


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> IndexDirectory:
    """A small LSA index directory (40 documents, 16 dimensions): copied and crafted."""
    folder = tmp_path_factory.mktemp("small") / "index"
    return IndexDirectory.build(load_sample_corpus()[:40], folder, n_components=16)


def copy(small: IndexDirectory, tmp_path: Path) -> Path:
    target = tmp_path / f"copy-{uuid.uuid4().hex[:8]}"
    shutil.copytree(small.path, target)
    return target


def manifest_of(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "manifest.json").read_text())
    return data


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    (folder / "manifest.json").write_text(json.dumps(manifest))


def rehash(folder: Path, name: str) -> None:
    """What an attacker who can write the manifest does after changing a part."""
    manifest = manifest_of(folder)
    data = (folder / name).read_bytes()
    manifest["files"][name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    write_manifest(folder, manifest)


# -- 0 code executed -------------------------------------------------------------------------


CANARY = """
from pathlib import Path

Path({marker!r}).write_text("imported")  # code run at import: the attacker's


class Embed:
    def __call__(self, text):
        Path({marker!r}).write_text("called")
        return [1.0] * {dimension}
"""


@pytest.fixture
def canary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """A module of the attacker's on the path: importing it leaves a marker file."""
    name = f"crag_canary_{uuid.uuid4().hex[:8]}"
    marker = tmp_path / f"{name}.ran"
    folder = tmp_path / "modules"
    folder.mkdir()
    (folder / f"{name}.py").write_text(CANARY.format(marker=str(marker), dimension=16))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", str(folder))  # the commands run in processes too
    yield f"{name}:Embed", marker
    sys.modules.pop(name, None)


def with_spec(small: IndexDirectory, tmp_path: Path, spec: str) -> Path:
    """A copy whose manifest names ``spec`` as its query embedder (the LSA file gone)."""
    folder = copy(small, tmp_path)
    manifest = manifest_of(folder)
    manifest["embedder"] = {"kind": "spec", "spec": spec, "dimension": 16}
    del manifest["files"]["embedder.npz"]
    (folder / "embedder.npz").unlink()
    write_manifest(folder, manifest)
    return folder


def loaders(tmp_path: Path, query: str) -> dict[str, Callable[[Path], Any]]:
    """Every way the library and the command line load an index directory; each raises
    or returns a non-zero exit code when the directory is refused."""
    chunks = tmp_path / "chunks.jsonl"
    chunks.write_text(json.dumps({"id": "a", "text": "bees dance", "score": 0.5}) + "\n")
    queries = tmp_path / "queries.txt"
    queries.write_text(query + "\n")

    def serve(folder: Path) -> int:
        command = [sys.executable, "-m", "crag_heuristic", "serve", "--index", str(folder)]
        done = subprocess.run(
            [*command, "--port", "0"], capture_output=True, text=True, timeout=120
        )
        return done.returncode

    return {
        "CRAG.from_index_dir": lambda f: CRAG.from_index_dir(f).retrieve(query, 3),
        "IndexDirectory.load": lambda f: IndexDirectory.load(f).retriever().search(query, 3),
        "retrieve --index": lambda f: run(["retrieve", "-q", query, "--index", str(f)]),
        "evaluate --index": lambda f: run(
            ["evaluate", "-q", query, "-c", str(chunks), "--index", str(f)]
        ),
        "calibrate --self --index": lambda f: run(
            ["calibrate", "--self", "--index", str(f), "--queries", "10", "--out", "p.toml"]
        ),
        "calibrate --grader --index": lambda f: run(
            [
                "calibrate",
                "--grader",
                "qrels",
                "--index",
                str(f),
                "--query-file",
                str(queries),
                "--out",
                "q.toml",
            ]
        ),
        "serve --index": serve,
    }


@pytest.mark.parametrize("spec", ["os:system", "builtins:eval", "canary"])
def test_no_loader_runs_code_a_directory_names(
    small: IndexDirectory,
    tmp_path: Path,
    canary: tuple[str, Path],
    spec: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    marker = canary[1] if spec == "canary" else tmp_path / "pwned"
    spec = canary[0] if spec == "canary" else spec
    query = (
        f"__import__('pathlib').Path({str(marker)!r}).touch()"
        if spec == "builtins:eval"
        else f"touch {marker}"
    )
    folder = with_spec(small, tmp_path, spec)
    outcomes: dict[str, Any] = {}
    errors: list[IndexDirectoryError] = []
    for name, load in loaders(tmp_path, query).items():
        try:
            outcomes[name] = load(folder)
        except IndexDirectoryError as refused:
            errors.append(refused)
            outcomes[name] = "refused"
    assert all(e.field == "embedder" and "code it would import" in e.found for e in errors)
    assert not marker.exists(), f"code ran: {marker.read_text()}"
    assert canary[0].partition(":")[0] not in sys.modules
    # evaluate reads the statistics alone: it needs no embedder, and imports none
    assert outcomes.pop("evaluate --index") == 0
    assert outcomes == {
        "CRAG.from_index_dir": "refused",
        "IndexDirectory.load": "refused",
        "retrieve --index": 2,
        "calibrate --self --index": 2,
        "calibrate --grader --index": 2,
        "serve --index": 2,
    }


def test_the_operator_names_the_spec_or_trusts_the_directory(
    small: IndexDirectory, tmp_path: Path, canary: tuple[str, Path]
) -> None:
    """The same spec named again, or the directory trusted: then (and only then) the
    spec is imported: the canary shows these tests would see code run."""
    spec, marker = canary
    folder = with_spec(small, tmp_path, spec)
    with pytest.raises(IndexDirectoryError) as other:
        CRAG.from_index_dir(folder, embedder="other.module:Embed")
    assert "not the 'other.module:Embed' named" in other.value.found
    assert not marker.exists()
    CRAG.from_index_dir(folder, embedder=spec).retrieve(QUERY, 3)
    assert marker.read_text() == "called"
    marker.unlink()
    sys.modules.pop(spec.partition(":")[0])
    assert run(["retrieve", "-q", QUERY, "--index", str(folder), "--trust-embedder"]) == 0
    assert marker.read_text() == "called"
    # the LSA projection is data: it loads with no name nor trust, and "lsa" names it
    assert CRAG.from_index_dir(small.path, embedder="lsa").retrieve(QUERY, 3).chunks


# -- only the files the manifest lists, inside the directory -------------------------------


def refused(folder: Path, field: str, **options: Any) -> IndexDirectoryError:
    """The error loading ``folder`` and reading every part comes to (its ``field``)."""

    def read_every_part() -> None:
        index = IndexDirectory.load(folder, **options)
        index.retriever()
        index.lexical()
        assert index.docs.ids

    with pytest.raises(IndexDirectoryError) as caught:
        read_every_part()
    assert caught.value.field == field, caught.value
    return caught.value


def shows_no_size_nor_digest(error: IndexDirectoryError, *files: Path) -> None:
    text = str(error) + repr(vars(error))
    for path in files:
        data = path.read_bytes()
        assert hashlib.sha256(data).hexdigest()[:12] not in text
        assert not re.search(rf"\b{len(data)}\b", text), text


def test_paths_outside_the_directory_are_never_read(small: IndexDirectory, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("the server's secrets: 31337\n" * 7)
    digest = hashlib.sha256(outside.read_bytes()).hexdigest()
    entry = {"bytes": outside.stat().st_size, "sha256": digest}
    for name in ("../outside.txt", str(outside), "sub/../../outside.txt"):
        folder = copy(small, tmp_path)
        manifest = manifest_of(folder)
        manifest["files"][name] = entry
        write_manifest(folder, manifest)
        error = refused(folder, "manifest")
        assert "lists other files" in error.found
        shows_no_size_nor_digest(error, outside)
    # a part renamed to a path outside, its bytes there: refused, not read
    folder = copy(small, tmp_path)
    shutil.copy(folder / "stats.npz", tmp_path / "stats.npz")
    manifest = manifest_of(folder)
    manifest["files"]["../stats.npz"] = manifest["files"].pop("stats.npz")
    write_manifest(folder, manifest)
    assert "leaves out ['stats.npz']" in refused(folder, "manifest").found
    for file in ("../../etc/passwd", "/etc/passwd", "stats.npz"):
        folder = copy(small, tmp_path)
        manifest = manifest_of(folder)
        manifest["embedder"]["file"] = file
        write_manifest(folder, manifest)
        assert "embedder.npz" in refused(folder, "manifest").found


def test_every_part_read_is_listed(small: IndexDirectory, tmp_path: Path) -> None:
    for name in ("bm25.npz", "docs.index.npz", "embedder.npz", "vectors.faiss"):
        folder = copy(small, tmp_path)
        manifest = manifest_of(folder)
        del manifest["files"][name]  # the file is still there: never read unlisted
        write_manifest(folder, manifest)
        assert f"leaves out ['{name}']" in refused(folder, "manifest").found


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks here")
def test_no_symlink_is_followed(small: IndexDirectory, tmp_path: Path) -> None:
    """Any symlink among the parts is refused, inside the directory or out, whatever its
    bytes (here the very ones the manifest lists): a part is a regular file."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for target_inside in (False, True):
        folder = copy(small, tmp_path)
        place = folder if target_inside else elsewhere
        os.replace(folder / "stats.npz", place / "real-stats.npz")
        os.symlink(place / "real-stats.npz", folder / "stats.npz")
        error = refused(folder, "file")
        assert "stats.npz: a symlink" in error.found
        shows_no_size_nor_digest(error, place / "real-stats.npz")
    folder = copy(small, tmp_path)
    os.replace(folder / "manifest.json", elsewhere / "manifest.json")
    os.symlink(elsewhere / "manifest.json", folder / "manifest.json")
    assert "a symlink" in refused(folder, "manifest").found
    # the directory itself may be a symlink: the operator names it (a release switch)
    link = tmp_path / "current"
    os.symlink(small.path, link)
    assert IndexDirectory.load(link).retriever().search(QUERY, 3)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_without_waiting(small: IndexDirectory, tmp_path: Path) -> None:
    folder = copy(small, tmp_path)
    (folder / "bm25.npz").unlink()
    os.mkfifo(folder / "bm25.npz")
    assert "not a regular file" in refused(folder, "file").found


def test_a_changed_file_shows_neither_its_size_nor_its_digest(
    small: IndexDirectory, tmp_path: Path
) -> None:
    folder = copy(small, tmp_path)
    with open(folder / "docs.jsonl", "ab") as handle:
        handle.write(b'{"id": "x", "text": "planted"}\n')
    error = refused(folder, "file")
    assert error.found == "docs.jsonl of another size"
    shows_no_size_nor_digest(error, folder / "docs.jsonl")


# -- malformed parts are typed, and bounded ----------------------------------------------


def with_npy_shape(data: bytes, member: str, shape: str) -> bytes:
    """An .npz whose ``member`` declares ``shape`` (its bytes unchanged)."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            raw = source.read(info.filename)
            if info.filename == member and raw[6:8] == b"\x01\x00":  # .npy format 1.0
                end = 10 + int.from_bytes(raw[8:10], "little")
                header = re.sub(r"'shape': \([^)]*\)", f"'shape': {shape}", raw[10:end].decode())
                header = header.rstrip()
                header += " " * (-(10 + len(header) + 1) % 64) + "\n"
                raw = raw[:8] + len(header).to_bytes(2, "little") + header.encode() + raw[end:]
            target.writestr(info.filename, raw)
    return out.getvalue()


@pytest.mark.parametrize(
    ("part", "member"),
    [
        ("stats.npz", "counts.npy"),
        ("bm25.npz", "doc_freq_counts.npy"),
        ("docs.index.npz", "offsets.npy"),
        ("embedder.npz", "components.npy"),
    ],
)
def test_a_rewritten_hash_over_a_huge_array_is_typed(
    small: IndexDirectory, tmp_path: Path, part: str, member: str
) -> None:
    """The shape (10**12,) with the manifest's hash rewritten: a MemoryError before,
    now the header is checked against the bytes the archive holds."""
    folder = copy(small, tmp_path)
    names = zipfile.ZipFile(folder / part).namelist()
    member = member if member in names else names[-1]
    data = with_npy_shape((folder / part).read_bytes(), member, "(1000000000000,)")
    assert data != (folder / part).read_bytes()
    (folder / part).write_bytes(data)
    rehash(folder, part)
    assert "decla" in refused(folder, "content").found  # "declares N bytes" (cut short)


def test_a_faiss_header_is_checked_before_faiss_reads_it(
    small: IndexDirectory, tmp_path: Path
) -> None:
    for offset, value in ((8, 2**40), (4, 2**20), (37, 2**50)):  # ntotal, d, the codes' count
        folder = copy(small, tmp_path)
        data = bytearray((folder / "vectors.faiss").read_bytes())
        width = 4 if offset == 4 else 8
        data[offset : offset + width] = value.to_bytes(width, "little")
        (folder / "vectors.faiss").write_bytes(bytes(data))
        rehash(folder, "vectors.faiss")
        assert "not the flat ip index" in refused(folder, "content").found
    folder = copy(small, tmp_path)
    data = bytearray((folder / "vectors.faiss").read_bytes())
    data[45:49] = b"\x00\x00\xc0\x7f"  # a NaN in the first vector
    (folder / "vectors.faiss").write_bytes(bytes(data))
    rehash(folder, "vectors.faiss")
    assert "NaN" in refused(folder, "content").found


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    kind = rng.choice(["flip", "cut", "append", "int64", "window"])
    if kind == "flip":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(out))
            out[i] ^= 1 << rng.randrange(8)
    elif kind == "cut":
        out = out[: rng.randrange(len(out))]
    elif kind == "append":
        out += rng.randbytes(rng.randint(1, 64))
    elif kind == "int64":
        i = rng.randrange(max(1, len(out) - 8))
        out[i : i + 8] = rng.choice([2**62, 2**40, 2**31 - 1, 0, 2**64 - 1]).to_bytes(8, "little")
    else:
        i = rng.randrange(len(out))
        out[i : i + 16] = rng.randbytes(16)
    return bytes(out)


def mutate_manifest(rng: random.Random, manifest: dict[str, Any]) -> dict[str, Any]:
    files = manifest["files"]
    name = rng.choice(sorted(files))
    edits: list[Callable[[], None]] = [
        lambda: manifest.update(documents=rng.choice([0, -1, 10**12, "x", 1.5, None, True])),
        lambda: manifest["faiss"].update(dimension=rng.choice([0, -3, 10**9, "x", 17])),
        lambda: manifest.update(
            embedder=rng.choice(
                [
                    {"kind": "spec", "spec": "os:system", "dimension": 16},
                    {"kind": "lsa", "file": "../../etc/passwd", "dimension": 16},
                    {"kind": 3},
                    "lsa",
                    None,
                ]
            )
        ),
        lambda: files.update({"../" + name: files.pop(name)}),
        lambda: files.pop(name),
        lambda: files.update({"/etc/hostname": {"bytes": 1, "sha256": "0" * 64}}),
        lambda: manifest["faiss"].update(metric=rng.choice(["cosine", 3, None])),
        lambda: manifest["faiss"].update(normalized=rng.choice(["yes", None, 0])),
        lambda: files[name].update(bytes=rng.choice(["x", -1, 10**15, None])),
        lambda: files.update({name: rng.choice(["x", [], None])}),
        lambda: manifest.update(bm25=rng.choice([[], None])),
        lambda: manifest.update(analyzer=rng.choice([None, 5, "other"])),
        lambda: manifest.update(files=rng.choice([[], None, {}, {"x": {}}])),
        lambda: manifest.update(format_version=rng.choice([True, 1.0, "1"])),
    ]
    rng.choice(edits)()
    return manifest


def mutant(small: IndexDirectory, tmp_path: Path, seed: int) -> tuple[Path, str]:
    """Directory number ``seed``: one part changed (and its hash rewritten), or the
    manifest; deterministic for its seed."""
    rng = random.Random(seed)
    folder = tmp_path / f"mutant-{seed}"
    shutil.copytree(small.path, folder)
    target = rng.choice(["manifest.json", *sorted(small.manifest.files) * 2])
    if target == "manifest.json":
        write_manifest(folder, mutate_manifest(rng, manifest_of(folder)))
        return folder, target
    data = (folder / target).read_bytes()
    if target.endswith(".npz") and rng.random() < 0.5:
        member = rng.choice(zipfile.ZipFile(io.BytesIO(data)).namelist())
        shape = rng.choice(["(999999999999,)", "(7,)", "(99999999, 3)", "()"])
        data = with_npy_shape(data, member, shape)
    else:
        data = mutate_bytes(rng, data)
    (folder / target).write_bytes(data)
    rehash(folder, target)
    return folder, target


def typed(error: BaseException) -> bool:
    """An IndexDirectoryError, or a typed error caused by one (a search that met a damaged
    document is a RetrieverError whose cause is the IndexDirectoryError)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, IndexDirectoryError):
            return True
        seen = seen.__cause__
    return False


def test_mutated_directories_are_refused_with_a_typed_error(
    small: IndexDirectory, tmp_path: Path
) -> None:
    """120 mutated directories, seeded: each loaded, searched twice, its documents read
    whole, its BM25 side searched. 0 untyped errors; every error an IndexDirectoryError
    (or caused by one)."""
    outcomes: Counter[str] = Counter()
    untyped = []
    for seed in range(120):
        folder, target = mutant(small, tmp_path, seed)
        try:
            crag = CRAG.from_index_dir(folder, cache=False)
            for query in (QUERY, "roman roads"):
                crag.retrieve(query, 5)
            index = IndexDirectory.load(folder)
            assert len(index.docs.ids) == index.manifest.documents
            list(index.docs)
            index.lexical().search("bees", 5)
            crag.close()
            outcomes["loaded"] += 1
        except CragError as error:
            outcomes["IndexDirectoryError" if typed(error) else type(error).__name__] += 1
        except BaseException as error:  # what the goal counts
            untyped.append((seed, target, repr(error)[:200]))
        shutil.rmtree(folder)
    assert untyped == []
    assert set(outcomes) <= {"loaded", "IndexDirectoryError"}, outcomes
    assert outcomes["IndexDirectoryError"] >= 90  # most mutants are damaged; the rest load


# -- a signed manifest -------------------------------------------------------------------------


def test_a_signed_manifest_needs_its_secret(small: IndexDirectory, tmp_path: Path) -> None:
    signed = IndexDirectory.build(
        load_sample_corpus()[:40], tmp_path / "signed", n_components=16, secret=SECRET
    )
    assert signed.manifest.signed
    assert manifest_of(signed.path).keys() == {"mac", "exp", "v"}
    loaded = IndexDirectory.load(signed.path, secret=SECRET)
    assert loaded.manifest.signed and loaded.retriever().search(QUERY, 3)
    assert CRAG.from_index_dir(signed.path, index_secret=SECRET).retrieve(QUERY, 3).chunks
    assert refused(signed.path, "signature").found == "a signed manifest"
    assert refused(small.path, "signature", secret=SECRET).found == "an unsigned manifest"
    other = "another-secret-of-32-characters!"
    assert "does not match" in refused(signed.path, "signature", secret=other).found
    # the attack a signature stops: a part changed and its hash rewritten in the manifest
    folder = tmp_path / "tampered"
    shutil.copytree(signed.path, folder)
    (folder / "stats.npz").write_bytes(
        mutate_bytes(random.Random(1), (folder / "stats.npz").read_bytes())
    )
    envelope = json.loads((folder / "manifest.json").read_text())
    inner = envelope["v"]
    data = (folder / "stats.npz").read_bytes()
    inner["files"]["stats.npz"] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    text = json.dumps(inner, indent=2)
    (folder / "manifest.json").write_text(f'{{"mac":"{envelope["mac"]}","exp":null,"v":{text}}}')
    assert "does not match" in refused(folder, "signature", secret=SECRET).found
    # ... and one written unsigned in its place
    write_manifest(folder, inner)
    assert refused(folder, "signature", secret=SECRET).found == "an unsigned manifest"


def test_the_commands_sign_and_check_with_a_secret_file_or_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "\n".join(json.dumps({"id": c.id, "text": c.text}) for c in load_sample_corpus()[:40])
    )
    secret_file = tmp_path / "index-secret"
    secret_file.write_text(SECRET + "\n")
    out = tmp_path / "signed"
    base = ["index", "--docs", str(docs), "--out", str(out), "--components", "16"]
    assert run([*base, "--index-secret-file", str(secret_file)]) == 0
    assert manifest_of(out).keys() == {"mac", "exp", "v"}
    retrieve = ["retrieve", "-q", QUERY, "--index", str(out)]
    assert run(retrieve) == 2  # signed, and no secret given
    assert run([*retrieve, "--index-secret-file", str(secret_file)]) == 0
    monkeypatch.setenv("CRAG_HEURISTIC_INDEX_SECRET", SECRET)
    assert run(retrieve) == 0
    assert run(["evaluate", "-q", QUERY, "-c", str(docs), "--index", str(out)]) == 0
    monkeypatch.delenv("CRAG_HEURISTIC_INDEX_SECRET")
    short = tmp_path / "short"
    short.write_text("short")
    assert run([*retrieve, "--index-secret-file", str(short)]) == 2
    assert run(["retrieve", "-q", QUERY, "--index-secret-file", str(secret_file)]) == 2
