"""Relevance thresholds, nested leave-one-collection-out and self-calibration from the command line."""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from crag_heuristic import EvaluatorConfig, InputError
from crag_heuristic._bench import loco
from crag_heuristic._bench.data import load_collection, relevance_threshold
from crag_heuristic._bench.loco import LOCO_GATE, LR_GATE, collection_folders, run_loco
from crag_heuristic._bench.pipeline import prepare
from crag_heuristic._bench.selection import CollectionData, FitCache, gate_scores
from crag_heuristic._bench.variants import BAND_VARIANTS, EVIDENCE_VARIANTS, LR_BASELINE
from crag_heuristic._cli import main
from crag_heuristic._cli.common import EXIT_BAD_INPUT, EXIT_OK

TWO_VARIANTS = (EVIDENCE_VARIANTS[0], LR_BASELINE)
# nested leave-one-collection-out fits many gates: 50 s of the suite (pytest -m "not slow"
# leaves them out of a quick run; the README's pytest runs them)
pytestmark = pytest.mark.slow


def _copy(folder: Path, to: Path) -> Path:
    to.mkdir()
    for item in folder.iterdir():
        (to / item.name).symlink_to(item)
    return to


def test_the_relevance_threshold_follows_the_grading_scale(tmp_path: Path) -> None:
    binary = {"test": {"q": {"a": 1, "b": 0}}}
    beir_graded = {"test": {"q": {"a": 1, "b": 2}}}  # NFCorpus: BEIR counts from 1
    trec_graded = {"test": {"q": {"a": 0, "b": 1, "c": 3}}}  # TREC DL: 1 means related
    assert relevance_threshold(tmp_path, binary) == 1
    assert relevance_threshold(tmp_path, beir_graded) == 1
    assert relevance_threshold(tmp_path, trec_graded) == 2
    assert relevance_threshold(tmp_path, trec_graded, declared=3) == 3
    (tmp_path / "relevance.json").write_text('{"relevant_min": 3}')
    assert relevance_threshold(tmp_path, binary) == 3
    (tmp_path / "relevance.json").write_text("[]")
    with pytest.raises(InputError, match="relevant_min"):
        relevance_threshold(tmp_path, binary)
    with pytest.raises(InputError, match=">= 1"):
        relevance_threshold(tmp_path, binary, declared=0)


def test_a_folder_declares_its_threshold(beir_folder: Path, tmp_path: Path) -> None:
    folder = _copy(beir_folder, tmp_path / "declared")
    (folder / "relevance.json").write_text('{"relevant_min": 2}')
    assert load_collection(folder).relevant_min == 2
    assert load_collection(folder, relevant_min=1).relevant_min == 1


@pytest.fixture(scope="module")
def nested_run(three_collections: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("loco")
    results = run_loco(
        [three_collections],
        out,
        k=5,
        evidence=TWO_VARIANTS,
        bands=BAND_VARIANTS[:2],
        self_calibrate=False,
        encode=False,
        rule="worst",  # the two variants are pooled fits: 'worst-within' picks neither
        log=lambda m: None,
    )
    results["out"] = out
    return results


def test_nested_leave_one_collection_out_writes_its_tables(
    nested_run: dict[str, Any], three_collections: Path
) -> None:
    assert [p.name for p in collection_folders([three_collections])] == ["alpha", "beta", "gamma"]
    assert set(nested_run["collections"]) == {"alpha", "beta", "gamma"}
    out = nested_run["out"]
    table = (out / "loco.md").read_text()
    assert "| alpha |" in table and "| gamma |" in table
    assert "## Failure AUC, natural retrievals alone" in table
    ledger = (out / "ledger.md").read_text()
    for variant in TWO_VARIANTS:  # every variant compared is in the ledger
        assert f"| {variant.label} |" in ledger
    assert json.loads((out / "loco.json").read_text())["k"] == 5
    assert nested_run["self_variants"] == []  # self_calibrate=False: none ran
    beta = nested_run["collections"]["beta"]  # the one with an LLM label set
    assert "noisy-grader" in beta["llm"] and "LLM label sets as gates: best" in beta["auc"]


def test_natural_only_auc_is_not_reported_below_five_failures(nested_run: dict[str, Any]) -> None:
    for row in nested_run["collections"].values():
        natural = row["auc"][LOCO_GATE]["natural"]
        assert (natural is None) == (row["natural_failed"] < 5)


def test_the_held_out_collection_is_never_fitted_on(nested_run: dict[str, Any]) -> None:
    names = set(nested_run["collections"])
    for name, row in nested_run["collections"].items():
        fitted_on = row["gate_fitted_on"]
        assert name not in fitted_on
        assert all(other in fitted_on for other in names - {name})
        # the picks are made on inner folds that never include the outer collection
        assert set(nested_run["inner"][name]["evidence"]) == {v.label for v in TWO_VARIANTS}


def test_a_leak_would_change_the_numbers(
    nested_run: dict[str, Any], three_collections: Path
) -> None:
    """The same pick fitted on every collection, the held-out one included, scores
    the held-out one differently: a LOCO that leaked would not reproduce the run."""
    datasets = {
        p.name: CollectionData.of(prepare(p, encode=False), 5)
        for p in collection_folders([three_collections])
    }
    cache = FitCache(datasets)
    differs = 0
    for name, row in nested_run["collections"].items():
        pick = next(v for v in TWO_VARIANTS if row["pick"].startswith(v.label + " | "))
        others = [n for n in datasets if n != name]
        honest = datasets[name].auc(gate_scores(cache.fit(pick, others), datasets[name])[0])[0]
        leaked = datasets[name].auc(
            gate_scores(cache.fit(pick, list(datasets)), datasets[name])[0]
        )[0]
        assert honest == pytest.approx(row["auc"][LOCO_GATE]["mix"])  # the run reproduces
        differs += honest != pytest.approx(leaked)
    assert differs >= 1


def test_the_lr_baseline_is_fitted_without_the_held_out_collection(
    nested_run: dict[str, Any],
) -> None:
    for row in nested_run["collections"].values():
        assert row["auc"][LR_GATE]["mix"] is not None
        low, high = row["intervals"][f"{LOCO_GATE} - {LR_GATE}"]
        assert low <= high


def test_the_self_calibration_prior_never_saw_the_collection(
    three_collections: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prior of each collection's self-calibration is the nested gate fitted
    without it (the simulation itself is stubbed: it needs MiniLM)."""
    seen: dict[str, str] = {}

    def fit(self: Any, name: str, variant: Any, prior: EvaluatorConfig) -> Any:
        assert prior.model is not None
        seen[name] = prior.model.fitted_on
        return prior, {
            "bands": "the prior's",
            "warnings": [],
            "prior_fitted_on": prior.model.fitted_on,
        }

    monkeypatch.setattr(loco._SelfCalibration, "fit", fit)
    run_loco(
        [three_collections],
        tmp_path / "out",
        k=5,
        evidence=TWO_VARIANTS[:1],
        bands=BAND_VARIANTS[:1],
        encode=False,
        rule="worst",
        log=lambda m: None,
    )
    assert set(seen) == {"alpha", "beta", "gamma"}
    for name, fitted_on in seen.items():
        assert name not in fitted_on


def test_nested_loco_needs_three_collections(beir_folder: Path, tmp_path: Path) -> None:
    parent = tmp_path / "two"
    parent.mkdir()
    _copy(beir_folder, parent / "a")
    _copy(beir_folder, parent / "b")
    with pytest.raises(InputError, match="at least 3 collections"):
        run_loco([parent], tmp_path / "out", k=5, encode=False, log=lambda m: None)


def test_calibrate_self_reads_no_qrels_and_no_queries(
    beir_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus_only = tmp_path / "corpus-only"
    corpus_only.mkdir()
    for name in ("corpus.jsonl", "corpus_minilm_l6_v2.npy", "corpus_minilm_l6_v2.ids.txt"):
        shutil.copy(beir_folder / name, corpus_only / name)
    prepared = prepare(corpus_only, encode=False, corpus_only=True)
    assert len(prepared.collection.doc_ids) == 64 and prepared.collection.qrels == {}
    with pytest.raises(InputError, match=r"queries\.jsonl is missing"):
        prepare(corpus_only, encode=False)
    out = io.StringIO()
    args = ["calibrate", "--self", "--data-dir", str(corpus_only), "--no-encode"]
    code = main([*args, "--out", str(tmp_path / "p.toml")], out=out)
    # simulated queries need MiniLM to be encoded: refused before any work
    assert code == EXIT_BAD_INPUT
    assert "drop --no-encode" in capsys.readouterr().err


def test_calibrate_self_from_the_command_line(tmp_path: Path) -> None:
    from crag_heuristic._sample import _read_jsonl

    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps(d) + "\n" for d in _read_jsonl("sample_documents.jsonl")))
    # a FAISS file of one's own and its docs (the older form; an index directory's vectors)
    assert main(["index", "--docs", str(docs), "--out", str(tmp_path / "idx")]) == 0
    index = tmp_path / "idx" / "vectors.faiss"
    out = io.StringIO()
    profile = tmp_path / "self.toml"
    args = ["calibrate", "--self", "--index", str(index), "--docs", str(docs)]
    code = main([*args, "--out", str(profile), "--queries", "60", "--k", "5"], out=out)
    assert code == EXIT_OK
    report = json.loads(out.getvalue())
    assert report["method"] == "calibrate_self" and report["profile"] == str(profile)
    assert set(report["simulated_queries"]) == {"topic"}  # the default style
    out = io.StringIO()
    code = main(
        [*args, "--out", str(profile), "--queries", "60", "--styles", "title,terms"], out=out
    )
    assert code == EXIT_OK
    assert set(json.loads(out.getvalue())["simulated_queries"]) == {"title", "terms"}
    code = main([*args, "--out", str(profile), "--styles", "riddle"], out=io.StringIO())
    assert code == EXIT_BAD_INPUT
    assert EvaluatorConfig.from_file(profile).model is not None
    assert main(["calibrate", "--out", str(profile)], out=io.StringIO()) == EXIT_BAD_INPUT
    both = ["calibrate", "--self", "--data-dir", str(tmp_path), "--index", str(index)]
    assert main([*both, "--docs", str(docs), "--out", str(profile)], out=io.StringIO()) == 2


def test_the_inner_step_never_reads_the_outer_collection(
    nested_run: dict[str, Any], three_collections: Path
) -> None:
    """Every step-1 number of an outer fold is recomputed here from fits that leave out
    the outer collection and the inner one scored: an inner step that fitted on the
    outer collection, or scored it, would not reproduce them."""
    from crag_heuristic._bench.selection import inner_numbers

    datasets = {
        p.name: CollectionData.of(prepare(p, encode=False), 5)
        for p in collection_folders([three_collections])
    }
    cache = FitCache(datasets)
    names = sorted(datasets)
    for outer in names:
        others = [n for n in names if n != outer]
        for variant in TWO_VARIANTS:
            aucs = [
                datasets[i].auc(
                    gate_scores(
                        cache.fit(variant, [n for n in names if n not in (outer, i)]), datasets[i]
                    )[0]
                )[0]
                for i in others
            ]
            assert all(a is not None for a in aucs)
            expected = inner_numbers(
                [float(a) for a in aucs if a is not None], [datasets[i].top1_auc for i in others]
            )
            assert nested_run["inner"][outer]["evidence"][variant.label] == pytest.approx(expected)


def test_the_worst_rule_reads_the_smallest_gain_over_top1() -> None:
    from crag_heuristic._bench.selection import evidence_key, inner_numbers

    numbers = inner_numbers([0.70, 0.60, 0.80], [0.65, 0.62, 0.70])
    # gains over top-1: +0.05, -0.02, +0.10
    assert numbers == pytest.approx({"mean_auc": 0.70, "min_gain": -0.02, "mean_gain": 0.13 / 3})
    assert evidence_key("worst", numbers) == pytest.approx((-0.02, 0.13 / 3))
    steady = inner_numbers([0.66, 0.63, 0.71], [0.65, 0.62, 0.70])  # +0.01 everywhere
    # the mean rule prefers the first (0.70 > 0.667), the worst rule the steady one
    assert evidence_key("mean", numbers) > evidence_key("mean", steady)
    assert evidence_key("worst", steady) > evidence_key("worst", numbers)
    assert evidence_key("mean", numbers) == pytest.approx((0.70,))
    with pytest.raises(ValueError, match="unknown rule"):
        evidence_key("median", numbers)


def test_the_shipped_recipe_is_read_from_the_default_profile() -> None:
    """The ledger's "the library's defaults are this pick" compares the pick with how the
    shipped profile was fitted, as its header records it."""
    from crag_heuristic._bench.loco import _library_default_is, shipped_recipe
    from crag_heuristic._bench.selection import GateVariant

    recipe = shipped_recipe()
    assert recipe["set_features"] and recipe["chunk_features"]
    shipped = GateVariant(label="shipped", **recipe)
    assert _library_default_is(shipped)
    for change in (
        {"within_collection": not recipe["within_collection"]},
        {"shrink": 0.25 if recipe["shrink"] != 0.25 else 0.75},
        {"max_good_irrelevant": 0.11},
        {"set_features": ("similarity_top",)},
    ):
        assert not _library_default_is(dataclasses.replace(shipped, **change))


def test_the_within_rule_picks_only_fits_within_collections() -> None:
    from crag_heuristic._bench.selection import eligible

    within = next(v for v in EVIDENCE_VARIANTS if v.within_collection)
    alone = next(v for v in EVIDENCE_VARIANTS if v.set_features == ("similarity_top",))
    pooled = EVIDENCE_VARIANTS[0]
    assert eligible("worst-within", within) and eligible("worst-within", alone)
    assert not eligible("worst-within", pooled)
    assert eligible("worst", pooled) and eligible("mean", pooled)


@pytest.fixture(scope="module")
def three_datasets(three_collections: Path) -> dict[str, CollectionData]:
    return {
        p.name: CollectionData.of(prepare(p, encode=False), 5)
        for p in collection_folders([three_collections])
    }


def test_the_band_step_never_reads_the_outer_collection(
    nested_run: dict[str, Any], three_datasets: dict[str, CollectionData]
) -> None:
    """Step 2 (the band targets) of each outer fold is recomputed here from the two inner
    collections alone, each scored by the banded pick fitted without it and without the
    outer one: a step 2 that also counted the outer collection's verdicts (its goal met
    or not, its fast-path share) would not reproduce the run's numbers nor, always, its pick."""
    from crag_heuristic._bench.failure import verdict_table
    from crag_heuristic._bench.selection import _band_label
    from crag_heuristic._bench.variants import meets_goal

    cache = FitCache(three_datasets)
    names = sorted(three_datasets)
    assert names == ["alpha", "beta", "gamma"]
    for outer in names:
        others = [n for n in names if n != outer]
        pick = nested_run["picks"][outer]["label"]
        chosen = next(v for v in TWO_VARIANTS if pick.startswith(v.label + " | "))
        expected: dict[str, list[Any]] = {}
        for targets in BAND_VARIANTS[:2]:
            label = f"{chosen.label} | {_band_label(targets)}"
            banded = dataclasses.replace(chosen, label=label, **dict(targets))  # type: ignore[arg-type]
            tables = []
            for i in others:  # two inner collections, never the outer one
                train = [n for n in names if n not in (outer, i)]
                assert len(train) == 1 and outer not in train
                verdicts = gate_scores(cache.fit(banded, train), three_datasets[i])[1]
                data = three_datasets[i]
                tables.append(verdict_table(verdicts, data.failed, data.natural))
            met = sum(meets_goal(t) for t in tables)
            share = (
                (tables[0]["good_natural_fast_path"] or 0.0)
                + (tables[1]["good_natural_fast_path"] or 0.0)
            ) / 2
            expected[banded.label] = [met, share]
        got = nested_run["inner"][outer]["bands"]
        assert set(got) == set(expected)
        for label, (met, share) in expected.items():
            assert got[label][0] == met <= 2
            assert got[label][1] == pytest.approx(share)
        assert pick == max(expected, key=lambda label: tuple(expected[label]))


def test_the_self_calibration_choice_never_reads_the_outer_collection(
    three_datasets: dict[str, CollectionData],
) -> None:
    """Choosing the self-calibration variant for an outer collection self-calibrates each
    inner collection with the outer pick fitted without both: with alpha, beta and gamma,
    alpha's choice self-calibrates beta on a prior fitted on gamma alone and gamma on one
    fitted on beta alone. The simulation needs MiniLM, so a stand-in records what it is
    given and returns the prior unchanged (every gain 0: the first variant is chosen)."""
    from crag_heuristic._bench.loco import SelfVariant, _choose_self
    from crag_heuristic._bench.selection import NestedResult

    calls: list[tuple[str, str, str]] = []

    class Recorder:
        def fit(self, name: str, variant: SelfVariant, prior: EvaluatorConfig) -> Any:
            assert prior.model is not None
            calls.append((name, variant.label, prior.model.fitted_on))
            return prior, {}

    label = f"{TWO_VARIANTS[0].label} | bands"
    pick = dataclasses.replace(TWO_VARIANTS[0], label=label, **dict(BAND_VARIANTS[0]))  # type: ignore[arg-type]
    names = ["alpha", "beta", "gamma"]
    nested = NestedResult(
        picks=dict.fromkeys(names, pick),
        inner={},
        configs={},
        scores={},
        verdicts={},
        loco={},
        on_all=pick,
        on_all_keys={},
    )
    cache = FitCache(three_datasets)
    variants = [SelfVariant(label="first"), SelfVariant(label="second", prior_c=None)]
    on = "the test splits of "
    expected = {
        "alpha": [("beta", on + "gamma"), ("gamma", on + "beta")],
        "beta": [("alpha", on + "gamma"), ("gamma", on + "alpha")],
        "gamma": [("alpha", on + "beta"), ("beta", on + "alpha")],
    }
    for outer in names:
        calls.clear()
        chosen, report = _choose_self(variants, outer, nested, cache, Recorder())  # type: ignore[arg-type]
        assert calls == [
            (inner, label, fitted_on)
            for inner, fitted_on in expected[outer]
            for label in ("first", "second")
        ]
        assert chosen.label == "first"
        assert report == {"chosen": "first", "inner_mean_gain": {"first": 0.0, "second": 0.0}}
