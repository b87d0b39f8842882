"""The learning cascade: explores, certifies on audited labels only, refits at checkpoints,
keeps its state in the grade log, refuses what it cannot read."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from crag_heuristic._calibration.learning import Learning, LearningCascade, ListView
from crag_heuristic._calibration.stream import replay
from crag_heuristic._exceptions import ConfigError, InputError
from crag_heuristic._grading.betting import first_band_after
from crag_heuristic._grading.lists import SetEscalation
from crag_heuristic._grading.monitor import JsonlGradeLog


def synthetic(
    n: int, *, failure: float = 0.3, seed: int = 0
) -> tuple[list[ListView], list[dict[str, float]]]:
    """Lists whose top cosine and keyword coverage run lower when they failed."""
    rng = np.random.default_rng(seed)
    views, grades = [], []
    for i in range(n):
        failed = rng.random() < failure
        top = float(np.clip(rng.normal(0.45 if failed else 0.65, 0.1), 0.0, 1.0))
        coverage = float(np.clip(rng.normal(0.4 if failed else 0.7, 0.2), 0.0, 1.0))
        features = {
            "similarity_top": top,
            "similarity_mean": top - 0.1,
            "similarity_gap": 0.05,
            "bm25_top": 5.0 * coverage,
            "bm25_scaled_max": coverage,
            "keyword_coverage": coverage,
            "lexical_coherence": 0.08,
        }
        chunk = {"similarity": top, "keyword_overlap": coverage}
        views.append(ListView(f"q{i}", 0.0, features, (), (("c0", chunk), ("c1", chunk))))
        grades.append({"c0": 0.0 if failed else 1.0, "c1": 0.0})
    return views, grades


def cascade(settings: Learning | None = None, log: object = None) -> LearningCascade:
    learner = LearningCascade(settings=settings or Learning(), log=log, background=False)
    learner.bind("grader:test")
    return learner


def test_before_any_label_every_list_goes_to_the_grader_and_it_says_why() -> None:
    learner = cascade()
    snap = learner.snapshot()
    assert snap.escalation.band == (0.0, 1.0) and snap.escalation.audit == 1.0
    assert snap.exploring and not snap.certified and snap.model == 0
    status = learner.status()
    assert status.band is None and status.guarantee is None
    assert status.needed == first_band_after(0.1, 0.05)  # the shipped gate's half of delta
    assert "every list goes to the grader" in status.describe()


def test_a_band_is_certified_on_the_explored_labels_and_used() -> None:
    views, grades = synthetic(600)
    learner = cascade(Learning(explore=400, refits=0))
    trace = replay(learner, views, grades, range(600))
    status = learner.status()
    assert status.band is not None and status.guarantee is not None
    assert status.guarantee.eps == 0.1 and status.guarantee.delta == 0.1
    assert trace.escalated[:400].all()  # exploring: every list
    assert trace.calls(last=200) < 1.0  # then the band and the audit
    assert "at most 0.1 of failed lists" in status.describe()


def test_only_audited_labels_count_and_only_after_the_gate_was_fixed() -> None:
    views, grades = synthetic(900, seed=1)
    learner = cascade(Learning(explore=300, first_refit=100, refits=2))
    replay(learner, views, grades, range(900))
    failed_audited_after = [
        sum(
            1
            for label in learner._labels
            if label.counts and not label.good and label.index >= gate.start
        )
        for gate in learner._gates
    ]
    counted = [gate.certificate.status().counted for gate in learner._gates]
    assert counted == failed_audited_after
    assert [gate.start for gate in learner._gates] == [0, 100, 200]
    # lists escalated only because the band held them are labels, never certifying ones
    assert any(not label.audited for label in learner._labels)
    assert all(label.counts <= label.audited for label in learner._labels)


def test_the_state_is_the_log_a_restart_and_a_second_process_reach_the_same_band(
    tmp_path: Path,
) -> None:
    views, grades = synthetic(500, seed=2)
    path = tmp_path / "grades.jsonl"
    first = cascade(Learning(explore=300, refits=1, first_refit=100), JsonlGradeLog(path))
    replay(first, views, grades, range(500))
    again = cascade(Learning(explore=300, refits=1, first_refit=100), JsonlGradeLog(path))
    a, b = first.status(), again.status()
    assert (a.labels, a.audited, a.refits, a.model, a.band) == (
        b.labels,
        b.audited,
        b.refits,
        b.model,
        b.band,
    )
    # the log holds the query's digest, never its text; every record is one label
    lines = path.read_text().splitlines()
    assert len(lines) == a.labels and all(
        json.loads(line)["query"].startswith("q") for line in lines
    )


def test_two_processes_sharing_a_log_see_each_others_labels(tmp_path: Path) -> None:
    views, grades = synthetic(200, seed=3)
    path = tmp_path / "grades.jsonl"
    one = cascade(Learning(explore=100, refits=0), JsonlGradeLog(path))
    two = cascade(Learning(explore=100, refits=0), JsonlGradeLog(path))
    replay(one, views[:100], grades[:100], range(100))
    two._sync(force=True)
    assert two.status().labels == one.status().labels == 100


def test_records_of_another_kind_or_badly_typed_are_skipped(tmp_path: Path) -> None:
    views, grades = synthetic(50, seed=4)
    path = tmp_path / "grades.jsonl"
    learner = cascade(Learning(explore=50, refits=0), JsonlGradeLog(path))
    replay(learner, views, grades, range(50))
    record = json.loads(path.read_text().splitlines()[0])
    forged = [
        {**record, "audited": "false"},
        {**record, "grader_good": 1},
        {**record, "propensity": 0.0},
        {**record, "features": {"similarity_top": "0.9"}},
        {**record, "learner": "another"},
        {**record, "source": "calibrate"},
        {**record, "v": 2},
    ]
    with path.open("a") as handle:
        for item in forged:
            handle.write(json.dumps(item) + "\n")
        handle.write("not json\n")
    again = cascade(Learning(explore=50, refits=0), JsonlGradeLog(path))
    assert again.status().labels == 50
    assert again.status().skipped == len(forged) + 1  # and the line that is not JSON


def test_a_refit_learns_the_collection() -> None:
    views, grades = synthetic(800, seed=5)
    learner = cascade(Learning(explore=400, first_refit=200, refits=1))
    replay(learner, views, grades, range(800))
    assert learner.status().refits == 1
    refit = learner._gates[1].config
    assert refit.name.endswith("+learned1")
    assert refit.model is not None and "grader labels" in refit.model.fitted_on
    # the refit ranks this collection's failures better than the shipped gate
    from sklearn.metrics import roc_auc_score

    failed = [not any(g.values()) for g in grades]
    shipped = [learner.score(v, 0) for v in views]
    learned = [learner.score(v, 1) for v in views]
    assert roc_auc_score(failed, [-s for s in learned]) > roc_auc_score(
        failed, [-s for s in shipped]
    )


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"audit": 0.0}, "audit"),
        ({"features": ("best_chunk",)}, "features"),
        ({"features": ("no_such_feature",)}, "features"),
        ({"escalation": SetEscalation(band=(0.2, 0.4))}, "escalation"),
        ({"shipped_share": 1.0}, "shipped_share"),
        ({"first_refit": 5}, "first_refit"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        Learning(**kwargs)  # type: ignore[arg-type]


def test_a_snapshot_before_binding_is_refused() -> None:
    with pytest.raises(InputError, match="not bound"):
        LearningCascade(background=False).snapshot()


def test_background_refits_finish_and_are_waited_for() -> None:
    views, grades = synthetic(300, seed=6)
    learner = LearningCascade(settings=Learning(explore=300, refits=1, first_refit=100))
    learner.bind("grader:test")
    for i, view in enumerate(views):
        snap = learner.snapshot()
        learner.learn(replace(view, score=0.5), snap, audited=True, graded=True, grades=grades[i])
    assert learner.wait(timeout=60)
    assert learner.status().refits == 1


def test_two_processes_share_one_redis_stream_and_reach_the_same_gate() -> None:
    import redis
    from crag_testkit import RedisServer

    from crag_heuristic._grading.monitor import RedisGradeLog

    views, grades = synthetic(400, seed=7)
    settings = Learning(explore=200, first_refit=100, refits=1)
    with RedisServer() as server:
        clients = [redis.Redis.from_url(server.url) for _ in range(2)]
        secret = "a-shared-secret-of-32-characters"
        logs = [RedisGradeLog(c, stream="test:learning", secret=secret) for c in clients]
        one, two = (cascade(settings, log) for log in logs)
        for i, view in enumerate(views):  # the traffic alternates between the two
            learner = one if i % 2 else two
            snap = learner.snapshot()
            scored = replace(view, score=learner.score(view, snap.model))
            learner.learn(scored, snap, audited=True, graded=True, grades=grades[i])
        two._sync(force=True)
        one._sync(force=True)
        a, b = one.status(), two.status()
        assert a.labels == b.labels == 400
        assert (a.refits, a.model, a.band) == (b.refits, b.model, b.band)
        for client in clients:
            client.close()


def test_a_drift_after_the_band_was_certified_is_caught_and_every_list_graded_again() -> None:
    views, grades = synthetic(700, seed=8)
    learner = cascade(Learning(explore=400, refits=0, audit=0.5))
    replay(learner, views, grades, range(400))
    assert learner.status().band is not None
    # the traffic drifts: failed lists now look like good ones to the gate
    drifted = [
        replace(v, features={**v.features, "similarity_top": 0.8, "keyword_coverage": 0.9})
        for v in views[400:]
    ]
    failing = [{"c0": 0.0, "c1": 0.0} for _ in drifted]
    trace = replay(learner, drifted, failing, range(len(drifted)))
    assert learner.status().band is None  # revoked: every list goes to the grader again
    assert trace.escalated[-50:].all()
