"""python -m dynbsz chaos, short form: kill -9 at every kind of point loses and repeats nothing;
and the judge can fail (planted faults in logs, and resumes broken on purpose, are counted)."""

from __future__ import annotations

import json
import time
from collections import Counter

import numpy as np
import pytest

from dynbsz.__main__ import main
from dynbsz.chaos import KINDS, ChaosConfig, judge_rank, run_chaos, surviving_steps
from dynbsz.chaos import cli as chaos_cli
from dynbsz.chaos.runner import ChaosReport, drain_starts, draw_configs, live_in_group, plan_kill, run_attempt, warm_up
from dynbsz.chaos.trainer import RunSpec

#: Both runtimes, both orders, DP 1 and 2, 0-3 workers, persistent, warm-up: the CI short form.
SHORT = [ChaosConfig("main", True, 2, True, True, 2), ChaosConfig("worker", False, 3, False, False, 2),
         ChaosConfig("worker", True, 1, True, False, 1), ChaosConfig("main", False, 2, False, False, 1)]
JSON_KEYS = {"trials", "kills", "configs", "lost", "duplicated", "trajectory_mismatches", "refused_checkpoints"}


def test_short_form_kills_every_kind_and_loses_repeats_and_mismatches_nothing(tmp_path):
    """The CI short form, in one test (a module fixture could run once per xdist worker)."""
    t0 = time.perf_counter()
    d = run_chaos(configs=SHORT, seed=2026, kills_per_trial=3, work_dir=tmp_path).to_json()
    wall = time.perf_counter() - t0
    assert JSON_KEYS <= set(d)
    assert d["failures"] == [] and d["ok"], d["failures"]
    assert (d["lost"], d["duplicated"], d["trajectory_mismatches"]) == (0, 0, 0)
    assert d["hung"] == 0 and d["accepted_checkpoints"] == 0
    assert d["kills"] >= 10 and d["configs"] == len(SHORT)
    assert all(d["kills_by_kind"][k] >= 1 for k in KINDS), d["kills_by_kind"]
    # four damaged copies (truncated, bit flip, version, foreign loader) before every restart from a checkpoint
    restarts_from_checkpoint = sum(1 for r in d["trial_results"] for c in r["starts"] if c)
    assert restarts_from_checkpoint >= 5 and d["refused_checkpoints"] == 4 * restarts_from_checkpoint
    # a kill inside a checkpoint write leaves a temporary, never a final-named torn file
    assert d["torn_writes"] >= d["kills_by_kind"]["mid_checkpoint"]
    # every reference run crossed an epoch end, so the drains were real
    assert all(r["epochs"] >= 2 for r in d["trial_results"]), [r["epochs"] for r in d["trial_results"]]
    # no rank, and no DataLoader worker of one, outlives the run: every rank's process group is gone
    pids = [json.loads(line)["pid"] for log in tmp_path.rglob("log-r*.jsonl") for line in log.read_text().splitlines()
            if '"start"' in line]
    assert len(pids) >= d["restarts"] + 2 * d["trials"]   # every start of every rank, reference runs included
    assert [q for pid in pids for q in live_in_group(pid)] == []
    assert wall < 90, f"the CI short form took {wall:.0f} s"


@pytest.mark.parametrize("sabotage, expect", [("fresh_optimizer", "trajectory_mismatches"), ("skip_step", "lost")])
def test_the_runner_catches_a_resume_broken_on_purpose(tmp_path, sabotage, expect):
    report = run_chaos(configs=[ChaosConfig("main", True, 1, False, False, 1)], seed=7, kills_per_trial=1,
                       sabotage=sabotage, work_dir=tmp_path)
    d = report.to_json()
    assert any(start > 0 for start in d["trial_results"][0]["starts"]), "the sabotage needs a restart from a checkpoint"
    assert d["kills"] == 1 and d[expect] > 0 and not d["ok"]


def test_a_hung_rank_is_killed_at_the_deadline_with_its_workers(tmp_path):
    spec = RunSpec(ChaosConfig("main", True, 2, True, False, 1), seed=1, max_steps=6, checkpoint_every=3,
                   directory=str(tmp_path), attempt=0, resume_step=0, sabotage="hang")
    warm_up()
    t0 = time.perf_counter()
    out = run_attempt(spec, timeout_s=6)
    assert out.status == "hung" and time.perf_counter() - t0 < 30
    started = [json.loads(line) for line in (tmp_path / "log-r0.jsonl").read_text().splitlines()]
    assert live_in_group(started[0]["pid"]) == []   # the rank and its DataLoader workers are gone


# ---- the judge can fail ---------------------------------------------------------------------------

SHARDS = {0: [1, 2, 3, 4], 1: [4, 3, 2, 1], 2: [2, 1, 4, 3]}


def step(attempt, i, epoch, ids, loss=0.5):
    return {"type": "step", "attempt": attempt, "step": i, "epoch": epoch, "ids": ids, "loss": float(loss).hex(),
            "drained": [False], "partial": False}


REFERENCE = [step(0, 0, 0, [1, 2]), step(0, 1, 0, [3, 4]), step(0, 2, 1, [4, 3]), step(0, 3, 1, [2, 1]),
             step(0, 4, 2, [2])]


def killed_and_restarted(steps):
    """Attempt 0 logs steps 0-3 and dies; attempt 1 restarts from checkpoint step 2 and logs 2-4."""
    first = [{"type": "start", "attempt": 0, "resume_step": 0}] + [dict(s, attempt=0) for s in steps[:4]]
    second = [{"type": "start", "attempt": 1, "resume_step": 2}] + [dict(s, attempt=1) for s in steps[2:]]
    return first + second


def verdict(records, in_order=True):
    survivors, problems = surviving_steps(records)
    v = judge_rank(survivors, max_steps=5, shards=SHARDS, reference=REFERENCE if in_order else None)
    v.problems += problems
    return v


def test_rolled_back_steps_are_replaced_not_counted_twice():
    records = killed_and_restarted(REFERENCE)
    # attempt 0's steps 2 and 3 were rolled back and are logged again: not duplicates
    assert verdict(records).ok
    survivors, _ = surviving_steps(records)
    assert [survivors[i]["attempt"] for i in range(5)] == [0, 0, 1, 1, 1]


def test_the_judge_counts_a_duplicated_sample():
    bad = list(REFERENCE)
    bad[3] = step(0, 3, 1, [2, 1, 3])
    v = verdict(killed_and_restarted(bad), in_order=False)
    assert v.duplicated == 1 and v.lost == 0


def test_the_judge_counts_a_lost_sample_of_a_completed_epoch():
    bad = list(REFERENCE)
    bad[1] = step(0, 1, 0, [3])
    v = verdict(killed_and_restarted(bad), in_order=False)
    assert v.lost == 1 and v.duplicated == 0


def test_the_judge_counts_a_changed_loss_and_a_changed_order():
    bad = list(REFERENCE)
    bad[3] = step(0, 3, 1, [2, 1], loss=0.5000000000000001)
    assert verdict(killed_and_restarted(bad)).trajectory_mismatches == 1
    swapped = list(REFERENCE)
    swapped[3] = step(0, 3, 1, [1, 2])
    assert verdict(killed_and_restarted(swapped)).trajectory_mismatches == 1
    assert verdict(killed_and_restarted(swapped), in_order=False).ok      # out of order, order is free


def test_the_judge_flags_a_restart_that_does_not_continue_where_its_checkpoint_left_off():
    records = killed_and_restarted(REFERENCE)
    records = [r for r in records if not (r.get("attempt") == 1 and r.get("step") == 2)]   # restarted, skipped 2
    v = verdict(records)
    assert not v.ok and any("step 3 where step 2" in p for p in v.problems)
    # steps lost from the end, or samples from another shard, fail too
    assert not verdict(killed_and_restarted(REFERENCE)[:-1]).ok
    foreign = list(REFERENCE)
    foreign[4] = step(0, 4, 2, [9])
    assert any("outside its shard" in p for p in verdict(killed_and_restarted(foreign), in_order=False).problems)


# ---- kill planning, configurations, CLI ---------------------------------------------------------------

def test_only_kills_that_can_happen_are_drawn():
    rng = np.random.default_rng(0)
    ref = [[dict(s, drained=[False, False]) for s in REFERENCE]]
    no_workers = ChaosConfig("main", True, 0, False, False, 1)
    kinds = Counter(plan_kill(no_workers, rng, 0, 5, 2, ref, Counter()).kind for _ in range(200))
    assert set(kinds) == {"between_steps", "mid_checkpoint"}                # no workers, no drain in range
    ref[0][1]["drained"] = [False, True]
    assert drain_starts(ref[0]) == [1]
    used = Counter()
    for _ in range(8):
        plan = plan_kill(ChaosConfig("main", True, 2, False, False, 1), rng, 0, 5, 2, ref, used)
        used[plan.kind] += 1
    assert set(used) == set(KINDS) and max(used.values()) == 2              # least used first: all kinds
    late = plan_kill(no_workers, rng, 5, 5, 2, ref, Counter())
    assert late is None                                                     # nothing left to kill


def test_drawn_configurations_cover_the_matrix():
    configs = draw_configs(8, np.random.default_rng(1))
    assert {(c.runtime, c.in_order, c.dp) for c in configs} == {(r, o, d) for r in ("main", "worker")
                                                                for o in (True, False) for d in (1, 2)}
    assert not any(c.warmup and c.runtime == "worker" for c in configs)
    assert not any(c.persistent and not c.num_workers for c in configs)


def test_cli_json_and_exit_codes(capsys, monkeypatch):
    assert main(["chaos", "--trials", "1", "--kills-per-trial", "1", "--seed", "4", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert JSON_KEYS <= set(d) and d["trials"] == 1 and d["kills"] == 1 and d["ok"]
    failing = ChaosReport(0)
    monkeypatch.setattr(chaos_cli, "run_chaos", lambda *a, **k: failing)
    monkeypatch.setattr(ChaosReport, "ok", property(lambda self: False))
    assert main(["chaos", "--trials", "1"]) == 1
    assert "FAILED" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["chaos", "--trials", "0"])
