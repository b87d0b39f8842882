"""``crag-heuristic calibrate --grader SPEC`` and ``calibrate --grade-log FILE``: a gate and
a set cascade's band with a guarantee, from the user's own grader.

With ``--grader``, the labels are kept as they arrive in a grade log (``--grade-log``;
by default beside ``--out`` for a grader that costs: ``openai:`` and ``MODULE:NAME``)
and a run started again resumes from it; a list the grader fails on is skipped and
counted; with ``--guarantee``, the labels the band needs are estimated from the
gate's probabilities before any list is graded, and a run that cannot reach them
is refused before it pays (``--grade-anyway`` goes on). Exit codes: 0 every list
labelled and the profile written; 3 the profile written from the lists labelled
while some failed or were not tried (run again to grade them), or no list was
labelled (no profile); 2 bad input, a wrong model name, or too few labels for
the guarantee (before grading, or after: the labels stay in the log).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import random
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from .._config import DEFAULT_PROFILE, EvaluatorConfig, _read_file, load_config
from .._exceptions import ConfigError, GraderError, InputError, InsufficientLabelsError
from .._grading.graders import grader_fingerprint
from .._protocols import Grader
from .common import EXIT_OK, EXIT_SERVICE, read_secret
from .progress import Progress

GRADER_SPECS = (
    "qrels (the folder's judgments: the best case), llm:RUN (a label set of the folder's "
    "llm_judgments/), openai:MODEL@BASE_URL[?KEY=VALUE&...] (an OpenAI-compatible chat "
    "endpoint; settings such as timeout=60&max_tokens=64&prompt=rubric, more in "
    "--grader-config; the key from --api-key-env), or MODULE:NAME (a grader object, or a "
    "function returning one)"
)

FILE_SETTINGS = ("extra_body",)
"""What a ``--grader-config`` file may set beyond a spec's settings (and ``prompt``
as a table of a custom prompt's fields)."""


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


def grader_settings(path: str | None) -> dict[str, Any]:
    """The settings of a ``--grader-config`` file (TOML, JSON or YAML): the keys
    of a spec's query string (``OpenAIGrader.from_spec``), ``extra_body`` (a
    table) and ``prompt`` (a name, or a table of a custom prompt's fields).

    Raises:
        ConfigError: an unreadable file, or a key it may not set.
    """
    if path is None:
        return {}
    from .._grading.llm import SPEC_SETTINGS

    data = dict(_read_file(Path(path)))
    known = (*SPEC_SETTINGS, *FILE_SETTINGS)
    for key in data:
        if key not in known:
            raise ConfigError(
                f"{path}: {key}", data[key], f"not a grader setting; known: {', '.join(known)}"
            )
    return data


def grader_from_spec(
    spec: str,
    *,
    folder: Any = None,
    split: str = "test",
    queries: dict[str, str] | None = None,
    api_key_env: str = "CRAG_LLM_API_KEY",
    settings: Mapping[str, Any] | None = None,
) -> Grader:
    """The grader a ``--grader`` spec names (:data:`GRADER_SPECS`); ``settings``: an
    ``openai:`` grader's from a ``--grader-config`` file (:func:`grader_settings`).

    Raises:
        InputError: an unknown spec, a folder without the labels it names, a module
            that cannot be imported or an object that is not a grader, or settings
            for a grader that is not ``openai:``.
        ConfigError: a bad ``openai:`` spec or setting.
    """
    if settings and not spec.startswith("openai:"):
        raise InputError("--grader-config sets an openai: grader's settings")
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
        from .._grading.llm import OpenAIGrader

        return OpenAIGrader.from_spec(
            spec, api_key=os.environ.get(api_key_env), **dict(settings or {})
        )
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
    from .._calibration.gate import CalibrationResult

    return CalibrationResult(config=config, report=report, warnings=tuple(warnings)).write(args.out)


def warn(messages: Sequence[str]) -> None:
    """Each warning of a calibration on stderr, in the CLI's words."""
    for message in messages:
        sys.stderr.write(f"crag-heuristic: warning: {message}\n")


def calibrate_grade_log(args: argparse.Namespace, out: TextIO, command: str) -> int:
    """The verdict bands, and with ``--guarantee`` the set cascade's band, chosen again
    on the audited lists of a grade log (no refit)."""
    from .._calibration.gate import bands_on_labels
    from .._grading.guarantee import guaranteed_band
    from .._grading.monitor import JsonlGradeLog, audited_labels

    chosen = parse_guarantee(args.guarantee)
    prior = load_config(args.prior or DEFAULT_PROFILE)
    secret = read_secret(args.grade_log_secret_file)
    log = JsonlGradeLog(args.grade_log, secret=secret)
    records = list(log.records())  # each checked (and its signature, with a secret)
    if secret is None and log.skipped_by_kind.get("signature"):
        raise InputError(
            f"the grade log {args.grade_log} holds signed records: give the secret they were "
            "signed with (--grade-log-secret-file FILE); its unsigned records are not read alone"
        )
    audited = [r for r in records if r["audited"]]
    fingerprints = {r["profile"] for r in audited if r["profile"]}
    names = {r["profile_name"] for r in audited if r["profile_name"]}
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
        "records": len(records),
        "signed": secret is not None,
        "skipped": log.skipped_by_kind,
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
) -> tuple[list[Any], Any, str, Grader, EvaluatorConfig | None]:
    """The natural retrievals to grade, the corpus statistics, what they are, the
    grader and the index directory's own gate (``None``: a folder, or the shipped gate
    decides there): a folder's queries, a query file or simulated queries, through a
    folder's vectors or an index directory."""
    from .._calibration.gate import GateExample
    from .._calibration.self_calibration import simulate
    from ..bench import HarnessRetriever, chunks_of, folder_and_split, prepare
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
        index = open_index(args.index, progress, None, args)
        with progress.stage("loading its parts"):
            retriever: Any = index.retriever()
            own_gate = index.gate
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
        path, split = folder_and_split(args.data_dir[0], args.split or "")
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
        own_gate = None
        stats, analyzer, name = prepared.stats, prepared.analyzer, folder.name
        neighbours = retriever.neighbours
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
            if not split and args.grader == "qrels":  # the judged queries, not every query
                split = "test" if "test" in folder.qrels else min(folder.qrels, default="")
            if split in folder.qrels:
                qids = list(folder.split_queries(split))
            elif args.grader.startswith("llm:"):  # the queries the label set judges
                qids = [q for q in _label_queries(folder, args.grader) if q in folder.queries]
            else:
                qids = list(folder.queries)
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
        api_key_env=args.api_key_env, settings=grader_settings(args.grader_config),
    )  # fmt: skip
    return lists, stats, what, grader, own_gate


def grade_log_path(args: argparse.Namespace) -> str | None:
    """Where ``calibrate --grader`` keeps its labels: ``--grade-log``, else, for a
    grader that costs (``openai:``, ``MODULE:NAME``), ``--out``'s path with the
    suffix ``.grades.jsonl``; ``None`` for recorded labels (``qrels``, ``llm:``)."""
    if args.grade_log:
        return str(args.grade_log)
    if args.grader == "qrels" or args.grader.startswith("llm:"):
        return None
    return str(Path(args.out).with_suffix(".grades.jsonl"))


def _say(message: str) -> None:
    sys.stderr.write(f"crag-heuristic: {message}\n")


def _check_model(grader: Grader, args: argparse.Namespace, progress: Progress) -> None:
    """A wrong model name refused before anything is paid for (a grader that can ask)."""
    check = getattr(grader, "check_model", None)
    if args.no_model_check or not callable(check):
        return
    with progress.stage("checking the model's name"):
        check()


def _label_queries(folder: Any, spec: str) -> list[str]:
    """The query ids a folder's label set (``llm:RUN``) judges, in its order.

    Raises:
        InputError: the label file is missing or unreadable.
    """
    from .._grading.recorded import read_labels

    path = folder.path / "llm_judgments" / f"{spec[4:]}.tsv"
    if not path.exists():
        raise InputError(f"--grader {spec}: {path} does not exist")
    return list(read_labels(path))


def calibrate_grader(
    args: argparse.Namespace, out: TextIO, command: str, progress: Progress
) -> int:
    """The gate refitted on a grader's labels of a folder's queries, with a band
    (the module doc: the labels kept, resumed, failures counted, the budget)."""
    chosen = parse_guarantee(args.guarantee)
    lists, stats, what, grader, own_gate = _grader_lists(args, progress)
    # an index directory's own gate (calibrated for its corpus and embedder) is the
    # prior unless one is named
    prior = load_config(args.prior) if args.prior else own_gate or load_config(DEFAULT_PROFILE)
    try:
        return _calibrate_on(
            grader, lists, stats, what, prior, chosen, args, out, command, progress
        )
    finally:
        close = getattr(grader, "close", None)
        if callable(close):
            close()


def _calibrate_on(
    grader: Grader,
    lists: list[Any],
    stats: Any,
    what: str,
    prior: EvaluatorConfig,
    chosen: tuple[str, float] | None,
    args: argparse.Namespace,
    out: TextIO,
    command: str,
    progress: Progress,
) -> int:
    from .._calibration.grader import calibrate_on_grader
    from .._evaluator.evaluator import Evaluator
    from .._grading.labelling import decisions, label_budget, label_lists, resumed_grades
    from .._grading.monitor import JsonlGradeLog

    name = grader_fingerprint(grader)
    _check_model(grader, args, progress)
    evaluator = Evaluator(prior)
    gates = [
        evaluator.evaluate(ex.query, ex.chunks, ex.corpus_stats or stats)
        for ex in progress.iterate(lists, "scoring the lists with the gate")
    ]
    where = grade_log_path(args)
    if where is not None:  # its folder made, as --out's is
        Path(where).parent.mkdir(parents=True, exist_ok=True)
    secret = read_secret(getattr(args, "grade_log_secret_file", None))
    log = JsonlGradeLog(where, secret=secret) if where is not None else None
    done = resumed_grades(lists, log.records(), name) if log is not None else {}
    budget = None
    if chosen is not None:
        budget = label_budget(
            [g.score for g in gates], target=chosen[0], eps=chosen[1], delta=args.delta,
            window=args.window, known=decisions(done),
        )  # fmt: skip
        if not budget.enough and not args.grade_anyway:
            raise InsufficientLabelsError(
                f"not graded: {budget.describe()}; give more queries (or --grade-anyway "
                "to grade these all the same)",
                needed=budget.needed,
                have=round(budget.expected),
            )
        _say(f"labels: {budget.describe()}")
    if done:
        _say(f"resuming: {len(done)} of {len(lists)} lists are labelled in {where}")
    labelling = label_lists(
        lists, grader, log=log, gates=gates, profile=prior.fingerprint(), seed=args.seed,
        stop_after=args.stop_after_failures or None, progress=progress.iterate, done=done,
    )  # fmt: skip
    progress.close()
    summary = labelling.summary()
    for message in labelling.warnings():
        _say(f"warning: {message}")
    if not labelling.grades:
        raise GraderError(f"no list was labelled: {json.dumps(summary)}", grader=name)
    examples = [
        dataclasses.replace(
            lists[i],
            relevant=frozenset(
                c.id for c, g in zip(lists[i].chunks, grades, strict=True) if g >= 0.5
            ),
        )
        for i, grades in sorted(labelling.grades.items())
    ]
    progress("fitting the gate and its band")
    try:
        result = calibrate_on_grader(
            examples,
            grader=name,
            prior=prior,
            corpus_stats=stats,
            target=None if chosen is None else chosen[0],
            eps=0.1 if chosen is None else chosen[1],
            delta=args.delta,
            window=args.window,
            min_refit=args.min_refit,
            seed=args.seed,
            name=args.name or Path(args.out).stem,
            labels=f"{what}: {len(examples)} labelled",
            target_precision=args.target_precision,
            min_failure_recall=args.min_failure_recall,
            max_good_irrelevant=args.max_good_irrelevant,
        )
    except InsufficientLabelsError as exc:
        kept = f"; the {len(examples)} labels are kept in {where}" if where else ""
        raise InsufficientLabelsError(f"{exc}{kept}", needed=exc.needed, have=exc.have) from None
    except ConfigError as exc:
        raise InputError(str(exc)) from None
    progress.close()
    warn(result.warnings)  # the labelling's were said as they came
    result = dataclasses.replace(result, warnings=(*result.warnings, *labelling.warnings()))
    result.report["command"] = command
    result.report["labelling"] = summary
    if where is not None:
        result.report["grade_log"] = where
    if budget is not None:
        result.report["label_budget"] = budget.describe()
    path = result.write(args.out)
    out.write(json.dumps({"profile": str(path), **result.report}, indent=2, default=str) + "\n")
    return EXIT_OK if labelling.complete else EXIT_SERVICE
