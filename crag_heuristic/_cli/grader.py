"""``crag-heuristic calibrate --grader SPEC`` and ``calibrate --grade-log FILE``: a gate and
a set cascade's band with a guarantee, from the user's own grader."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import random
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from .._config import DEFAULT_PROFILE, EvaluatorConfig, load_config
from .._exceptions import ConfigError, InputError
from .._grading.graders import grader_fingerprint
from .._protocols import Grader
from .common import EXIT_OK
from .progress import Progress

GRADER_SPECS = (
    "qrels (the folder's judgments: the best case), llm:RUN (a label set of the folder's "
    "llm_judgments/), openai:MODEL@BASE_URL (an OpenAI-compatible chat endpoint; the key from "
    "--api-key-env), or MODULE:NAME (a grader object, or a function returning one)"
)


_GUARANTEE = re.compile(r"(recall|agreement):([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)")


def parse_guarantee(value: str | None) -> tuple[str, float] | None:
    """``TARGET:EPS`` (``recall:0.1``, ``agreement:0.05``) or ``None``.

    Raises:
        InputError: another form.
    """
    if value is None:
        return None
    match = _GUARANTEE.fullmatch(value)
    number = float(match.group(2)) if match else float("nan")
    if match is None or not 0.0 < number < 1.0:
        raise InputError(
            f"--guarantee must be recall:EPS or agreement:EPS with EPS in (0, 1), got {value!r}"
        )
    return match.group(1), number


def grader_from_spec(
    spec: str,
    *,
    folder: Any = None,
    split: str = "test",
    queries: dict[str, str] | None = None,
    api_key_env: str = "CRAG_LLM_API_KEY",
) -> Grader:
    """The grader a ``--grader`` spec names (:data:`GRADER_SPECS`).

    Raises:
        InputError: an unknown spec, a folder without the labels it names, a module
            that cannot be imported or an object that is not a grader.
    """
    from .._grading.recorded import RecordedGrader

    if spec == "qrels" or spec.startswith("llm:"):
        if folder is None:
            raise InputError(f"--grader {spec} reads the folder's labels: give --data-dir")
        path = (
            folder.path / "qrels" / f"{split}.tsv"
            if spec == "qrels"
            else folder.path / "llm_judgments" / f"{spec[4:]}.tsv"
        )
        if not path.exists():
            raise InputError(f"--grader {spec}: {path} does not exist")
        return RecordedGrader.from_file(
            path,
            queries=folder.queries if queries is None else queries,
            relevant_min=folder.relevant_min,
            missing=0.0,  # a chunk nobody judged is not relevant, as TREC counts it
        )
    if spec.startswith("openai:"):
        model, at, base_url = spec[len("openai:") :].partition("@")
        if not model or not at or not base_url:
            raise InputError(f"--grader openai:MODEL@BASE_URL, got {spec!r}")
        from .._grading.llm import OpenAIGrader

        return OpenAIGrader(base_url=base_url, model=model, api_key=os.environ.get(api_key_env))
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise InputError(f"unknown --grader {spec!r}; give {GRADER_SPECS}")
    try:
        module = importlib.import_module(module_name)
        found = getattr(module, attribute)
    except (ImportError, AttributeError) as exc:
        raise InputError(f"--grader {spec}: {type(exc).__name__}: {exc}") from None
    if isinstance(found, type) or (not hasattr(found, "grade") and callable(found)):
        found = found()  # a class, or a function that makes the grader
    if not hasattr(found, "grade"):
        raise InputError(f"--grader {spec} is not a grader (no grade(query, chunks))")
    return found  # type: ignore[no-any-return]


def _write(
    config: EvaluatorConfig,
    report: dict[str, Any],
    args: argparse.Namespace,
    warnings: Sequence[str] = (),
) -> Any:
    from .._bench.calibration import CalibrationResult

    return CalibrationResult(config=config, report=report, warnings=tuple(warnings)).write(args.out)


def warn(messages: Sequence[str]) -> None:
    """Each warning of a calibration on stderr, in the CLI's words."""
    for message in messages:
        sys.stderr.write(f"crag-heuristic: warning: {message}\n")


def calibrate_grade_log(args: argparse.Namespace, out: TextIO, command: str) -> int:
    """The verdict bands, and with ``--guarantee`` the set cascade's band, chosen again
    on the audited lists of a grade log (no refit)."""
    from .._bench.calibration import bands_on_labels
    from .._grading.guarantee import guaranteed_band
    from .._grading.monitor import JsonlGradeLog, audited_labels

    chosen = parse_guarantee(args.guarantee)
    prior = load_config(args.prior or DEFAULT_PROFILE)
    records = list(JsonlGradeLog(args.grade_log).records())
    audited = [r for r in records if isinstance(r, dict) and r.get("audited")]
    fingerprints = {str(r["profile"]) for r in audited if r.get("profile")}
    names = {str(r["profile_name"]) for r in audited if r.get("profile_name")}
    if (fingerprints and fingerprints != {prior.fingerprint()}) or (
        names and names != {prior.name}
    ):
        scored_by = ", ".join(sorted(fingerprints | names))
        raise InputError(
            f"the grade log's lists were scored by another gate ({scored_by}); --prior "
            f"{prior.name} ({prior.fingerprint()}): give the profile that scored them"
        )
    scores, good, grader = audited_labels(records)
    what = f"{len(scores)} audited lists of the grade log {args.grade_log}"
    # the audited lists are a uniform sample the gate was not fitted on: they choose the
    # verdict bands; the guarantee's path stays centred on the prior's (fixed) band
    bands = bands_on_labels(
        scores,
        good,
        prior=prior.thresholds,
        chosen_on=what,
        target_precision=args.target_precision,
        min_failure_recall=args.min_failure_recall,
        max_good_irrelevant=args.max_good_irrelevant,
    )
    config = prior.replace(
        thresholds={"relevant": bands.relevant, "partial": bands.partial},
        name=args.name or f"{prior.name}-{'guaranteed' if chosen else 'banded'}",
    )
    report: dict[str, Any] = {
        "method": "calibrate --grade-log",
        "grade_log": str(args.grade_log),
        "audited_lists": len(scores),
        "grader": grader,
        "verdict_bands": bands.statement,
        "bands_chosen": "on the audited lists" if bands.fitted else "the prior's: too few labels",
    }
    if chosen is not None:
        target, eps = chosen
        guarantee = guaranteed_band(
            scores,
            good,
            target=target,  # type: ignore[arg-type]
            eps=eps,
            delta=args.delta,
            centre=prior.thresholds.relevant,
            window=args.window,
            grader=grader,
            labels=what,
        )
        config = config.replace(guarantee=guarantee)
        report["guarantee"] = guarantee.describe()
    report["warnings"] = list(bands.warnings)
    report["command"] = command
    warn(bands.warnings)
    path = _write(config, report, args, bands.warnings)
    out.write(json.dumps({"profile": str(path), **report}, indent=2) + "\n")
    return EXIT_OK


def read_query_file(path: str) -> list[str]:
    """Queries from a file: one per line, or JSON lines with a ``text`` field (a
    BEIR ``queries.jsonl``); blank lines skipped, repeats kept once.

    Raises:
        InputError: no such file, a JSON line without a text, or no query.
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"--query-file {path}: {exc.strerror}") from None
    out: list[str] = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text:
            continue
        if text.startswith("{"):
            try:
                text = json.loads(text).get("text", "")
            except (json.JSONDecodeError, AttributeError):
                text = ""
            if not isinstance(text, str) or not text.strip():
                raise InputError(f"--query-file {path}:{number}: a JSON line without a text")
            text = text.strip()
        if text not in out:
            out.append(text)
    if not out:
        raise InputError(f"--query-file {path} holds no query")
    return out


def _grader_lists(
    args: argparse.Namespace, progress: Progress
) -> tuple[list[Any], Any, str, Grader]:
    """The natural retrievals to grade, the corpus statistics, what they are, and the
    grader: a folder's queries, a query file or simulated queries, through a folder's
    vectors or an index directory."""
    from .._bench.calibration import GateExample
    from .._bench.pipeline import HarnessRetriever, _folder_and_split, prepare
    from .._bench.self_calibration import simulate
    from .index import is_index_dir, open_index

    sources = sum(x is not None for x in (args.data_dir or None, args.index))
    if sources != 1 or (args.data_dir and len(args.data_dir) != 1):
        raise InputError("calibrate --grader takes one --data-dir DIR[:SPLIT] or --index DIR")
    if args.query_file is not None and args.simulated is not None:
        raise InputError("give --query-file or --simulated, not both")
    docs: Sequence[Any]
    if args.index is not None:
        if not is_index_dir(args.index):
            raise InputError(
                f"--index {args.index} is not an index directory (crag-heuristic index)"
            )
        if args.query_file is None and args.simulated is None:
            raise InputError(
                "--grader on an index directory needs --query-file FILE or --simulated N"
            )
        index = open_index(args.index, progress)
        with progress.stage("loading its parts"):
            retriever: Any = index.retriever()
        stats, analyzer, docs, folder, split = (
            index.corpus_stats,
            index.analyzer,
            index.docs,
            None,
            "",
        )
        neighbours = None
        name = Path(args.index).name
    else:
        path, split = _folder_and_split(args.data_dir[0], args.split or "")
        with progress.stage(f"loading {path}"):
            prepared = prepare(
                path,
                cache_dir=args.cache_dir,
                encode=not args.no_encode,
                corpus_only=args.query_file is not None or args.simulated is not None,
                loops=progress.iterate,
            )
        folder = prepared.collection
        retriever = HarnessRetriever(prepared)
        stats, analyzer, name = prepared.stats, prepared.analyzer, folder.name
        neighbours = retriever.neighbours
        from .._bench.retrievals import chunks_of

        docs = list(chunks_of(folder, [(d, 0.0) for d in folder.doc_ids]))
    if args.simulated is not None:
        simulation = simulate(
            retriever,
            docs,
            k=args.k,
            queries=args.simulated,
            corpus_stats=stats,
            analyzer=analyzer,
            neighbours=neighbours,
            seed=args.seed,
            progress=progress.iterate,
        )
        lists = [dataclasses.replace(ex, relevant=frozenset()) for ex in simulation.natural]
        what = f"{len(lists)} simulated queries' retrievals (k={args.k}) on {name}"
        texts = {ex.group: ex.query for ex in lists}
    else:
        if args.query_file is not None:
            queries = read_query_file(args.query_file)
            texts = {f"q{i}": text for i, text in enumerate(queries)}
            what_queries = f"the queries of {args.query_file}"
        else:
            assert folder is not None
            qids = (
                list(folder.split_queries(split)) if split in folder.qrels else list(folder.queries)
            )
            texts, seen = {}, set()
            for q in qids:  # a text asked under two ids is graded once
                if folder.queries[q].strip() not in seen:
                    seen.add(folder.queries[q].strip())
                    texts[q] = folder.queries[q]
            what_queries = f"{name} {split or 'queries'}"
        if args.max_queries is not None and len(texts) > args.max_queries:
            keep = sorted(random.Random(args.seed).sample(list(texts), args.max_queries))
            texts = {q: texts[q] for q in keep}
        if isinstance(retriever, HarnessRetriever):
            with progress.stage(f"searching {len(texts):,} queries"):
                if args.query_file is None:  # the folder's own queries: their vectors ship
                    retriever = HarnessRetriever(retriever.prepared, texts)
                found = retriever.search_many(list(texts.values()), args.k)
        else:
            found = [
                retriever.search(text, args.k)
                for text in progress.iterate(list(texts.values()), "searching the queries")
            ]
        lists = [
            GateExample(group=q, kind="natural", query=text, chunks=tuple(chunks),
                        relevant=frozenset(), corpus_stats=stats, collection=name)
            for (q, text), chunks in zip(texts.items(), found, strict=True)
        ]  # fmt: skip
        what = f"{len(lists)} natural retrievals (k={args.k}) of {what_queries}"
    grader = grader_from_spec(
        args.grader, folder=folder, split=split or "test", queries=texts,
        api_key_env=args.api_key_env,
    )  # fmt: skip
    return lists, stats, what, grader


def calibrate_grader(
    args: argparse.Namespace, out: TextIO, command: str, progress: Progress
) -> int:
    """The gate refitted on a grader's labels of a folder's queries, with a band."""
    from .._bench.grader_calibration import calibrate_on_grader, examples_from_grader

    lists, stats, what, grader = _grader_lists(args, progress)
    name = grader_fingerprint(grader)
    examples = examples_from_grader(lists, grader, progress=progress.iterate)
    chosen = parse_guarantee(args.guarantee)
    progress("fitting the gate and its band")
    try:
        result = calibrate_on_grader(
            examples,
            grader=name,
            prior=args.prior or DEFAULT_PROFILE,
            corpus_stats=stats,
            target=None if chosen is None else chosen[0],
            eps=0.1 if chosen is None else chosen[1],
            delta=args.delta,
            window=args.window,
            min_refit=args.min_refit,
            seed=args.seed,
            name=args.name or Path(args.out).stem,
            labels=what,
            target_precision=args.target_precision,
            min_failure_recall=args.min_failure_recall,
            max_good_irrelevant=args.max_good_irrelevant,
        )
    except ConfigError as exc:
        raise InputError(str(exc)) from None
    progress.close()
    warn(result.warnings)
    result.report["command"] = command
    path = result.write(args.out)
    out.write(json.dumps({"profile": str(path), **result.report}, indent=2, default=str) + "\n")
    return EXIT_OK
