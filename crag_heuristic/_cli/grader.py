"""``crag-heuristic calibrate --grader SPEC`` and ``calibrate --grade-log FILE``: a gate and
a set cascade's band with a guarantee, from the user's own grader."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import re
from typing import Any, TextIO

from .._config import DEFAULT_PROFILE, EvaluatorConfig, load_config
from .._exceptions import ConfigError, InputError
from .._grading.graders import grader_fingerprint
from .._protocols import Grader
from .common import EXIT_OK

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
    if not hasattr(found, "grade") and callable(found):
        found = found()
    if not hasattr(found, "grade"):
        raise InputError(f"--grader {spec} is not a grader (no grade(query, chunks))")
    return found  # type: ignore[no-any-return]


def _write(config: EvaluatorConfig, report: dict[str, Any], args: argparse.Namespace) -> Any:
    from .._bench.calibration import CalibrationResult

    return CalibrationResult(config=config, report=report).write(args.out)


def calibrate_grade_log(args: argparse.Namespace, out: TextIO, command: str) -> int:
    """The band chosen again on the audited lists of a grade log (no refit)."""
    from .._grading.guarantee import guaranteed_band
    from .._grading.monitor import JsonlGradeLog, audited_labels

    chosen = parse_guarantee(args.guarantee)
    if chosen is None:
        raise InputError("--grade-log chooses a band: give --guarantee recall:EPS or agreement:EPS")
    prior = load_config(args.prior or DEFAULT_PROFILE)
    records = list(JsonlGradeLog(args.grade_log).records())
    profiles = {str(r.get("profile")) for r in records if r.get("audited") and r.get("profile")}
    if profiles and profiles != {prior.fingerprint()}:
        raise InputError(
            f"the grade log's lists were scored by another gate ({', '.join(sorted(profiles))}); "
            f"--prior {prior.name} is {prior.fingerprint()}: give the profile that scored them"
        )
    scores, good, grader = audited_labels(records)
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
        labels=f"{len(scores)} audited lists of the grade log {args.grade_log}",
    )
    config = prior.replace(guarantee=guarantee, name=args.name or f"{prior.name}-guaranteed")
    report = {
        "method": "calibrate --grade-log",
        "grade_log": str(args.grade_log),
        "audited_lists": len(scores),
        "grader": grader,
        "guarantee": guarantee.describe(),
        "command": command,
    }
    path = _write(config, report, args)
    out.write(json.dumps({"profile": str(path), **report}, indent=2) + "\n")
    return EXIT_OK


def calibrate_grader(args: argparse.Namespace, out: TextIO, command: str) -> int:
    """The gate refitted on a grader's labels of a folder's queries, with a band."""
    from .._bench.calibration import GateExample
    from .._bench.grader_calibration import calibrate_on_grader, examples_from_grader
    from .._bench.pipeline import HarnessRetriever, _folder_and_split, prepare

    if not args.data_dir or len(args.data_dir) != 1:
        raise InputError("calibrate --grader takes one --data-dir DIR[:SPLIT] (its queries)")
    folder, split = _folder_and_split(args.data_dir[0], args.split or "")
    prepared = prepare(folder, cache_dir=args.cache_dir, encode=not args.no_encode)
    collection = prepared.collection
    qids = (
        list(collection.split_queries(split))
        if split in collection.qrels
        else list(collection.queries)
    )
    if args.max_queries is not None and len(qids) > args.max_queries:
        qids = sorted(random.Random(args.seed).sample(qids, args.max_queries))
    texts: dict[str, str] = {}
    seen: set[str] = set()
    for q in qids:  # a text asked under two ids is graded once
        text = collection.queries[q]
        if text.strip() not in seen:
            seen.add(text.strip())
            texts[q] = text
    qids = list(texts)
    grader = grader_from_spec(
        args.grader,
        folder=collection,
        split=split or "test",
        queries=texts,
        api_key_env=args.api_key_env,
    )
    name = grader_fingerprint(grader)
    retriever = HarnessRetriever(prepared, texts)
    found = retriever.search_many([texts[q] for q in qids], args.k)
    retrievals = [
        GateExample(
            group=q,
            kind="natural",
            query=texts[q],
            chunks=tuple(chunks),
            relevant=frozenset(),
            corpus_stats=prepared.stats,
            collection=collection.name,
        )
        for q, chunks in zip(qids, found, strict=True)
    ]
    examples = examples_from_grader(retrievals, grader)
    chosen = parse_guarantee(args.guarantee)
    try:
        result = calibrate_on_grader(
            examples,
            grader=name,
            prior=args.prior or DEFAULT_PROFILE,
            target=None if chosen is None else chosen[0],
            eps=0.1 if chosen is None else chosen[1],
            delta=args.delta,
            window=args.window,
            min_refit=args.min_refit,
            seed=args.seed,
            name=args.name or "grader-calibrated",
            labels=f"{len(examples)} natural retrievals (k={args.k}) of {collection.name} {split}",
        )
    except ConfigError as exc:
        raise InputError(str(exc)) from None
    result.report["command"] = command
    path = result.write(args.out)
    out.write(json.dumps({"profile": str(path), **result.report}, indent=2, default=str) + "\n")
    return EXIT_OK
