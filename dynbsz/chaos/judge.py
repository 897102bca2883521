"""Judging a killed-and-restarted run against an uninterrupted one, from the ranks' step logs.

Only the steps that survive into the final run count. Attempts are replayed in order: an
attempt that restarts from checkpoint step c replaces every step >= c that earlier attempts
logged (they were rolled back), and must itself log c, c+1, ... without a gap. What survives
must be exactly steps 0 .. max_steps-1, and then, per rank:

* every run (in or out of order): per epoch, each sample of the rank's shard at most once
  (``duplicated`` counts the extra deliveries), every sample of each completed epoch at least
  once (``lost``), nothing from outside the shard;
* in_order=True: the same steps as the uninterrupted run, step for step: epoch, sample ids and
  the loss bit for bit (``trajectory_mismatches`` counts the steps that differ).

The functions take plain records (the JSON lines ``dynbsz.chaos.trainer`` writes), so a test can
plant a fault in a log and see it counted.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence


@dataclass
class Verdict:
    lost: int = 0
    duplicated: int = 0
    trajectory_mismatches: int = 0
    problems: list[str] = field(default_factory=list)

    def add(self, other: "Verdict") -> None:
        self.lost += other.lost
        self.duplicated += other.duplicated
        self.trajectory_mismatches += other.trajectory_mismatches
        self.problems += other.problems

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.trajectory_mismatches or self.problems)


def read_log(path: str | Path) -> list[dict]:
    """The records of one rank's log. Every line must parse: the runner cuts a torn last line
    (a rank killed mid-write) before the next attempt appends."""
    records = []
    with open(path) as f:
        for n, line in enumerate(f, start=1):
            try:
                records.append(json.loads(line))
            except ValueError as e:
                raise ValueError(f"{path}: line {n} is not a JSON record ({e}): {line[:80]!r}") from None
    return records


def surviving_steps(records: Iterable[dict]) -> tuple[dict[int, dict], list[str]]:
    """Replay the attempts of one rank's log: ``{step index: record}`` of the steps that survive,
    and the problems found (an attempt that did not continue where its checkpoint left off)."""
    survivors: dict[int, dict] = {}
    problems: list[str] = []
    attempt, expected = None, None
    for rec in records:
        kind = rec.get("type")
        if kind == "start":
            attempt, expected = rec["attempt"], rec["resume_step"]
            rolled_back = [i for i in survivors if i >= expected]
            for i in rolled_back:
                del survivors[i]
            missing = [i for i in range(expected) if i not in survivors]
            if missing:
                problems.append(f"attempt {attempt} resumed at step {expected}, but steps {missing[:5]} were never "
                                "logged before it")
        elif kind == "step":
            if rec["attempt"] != attempt:
                problems.append(f"step {rec['step']} logged by attempt {rec['attempt']} inside attempt {attempt}")
                continue
            if rec["step"] != expected:
                problems.append(f"attempt {attempt} logged step {rec['step']} where step {expected} was next")
            survivors[rec["step"]] = rec
            expected = rec["step"] + 1
    return survivors, problems


def judge_rank(survivors: dict[int, dict], *, max_steps: int, shards: dict[int, Sequence[int]],
               reference: Sequence[dict] | None = None, rank: int = 0) -> Verdict:
    """One rank's surviving steps against its epoch shards (``shards[e]``: the sample ids the rank
    reads in epoch e) and, for in_order=True, the uninterrupted run's steps (``reference``)."""
    v = Verdict()
    where = f"rank {rank}"
    missing = [i for i in range(max_steps) if i not in survivors]
    extra = sorted(i for i in survivors if not 0 <= i < max_steps)
    if missing or extra:
        v.problems.append(f"{where}: steps missing {missing[:5]} or beyond max_steps {extra[:5]}")
    steps = [survivors[i] for i in sorted(survivors)]
    per_epoch: dict[int, Counter] = {}
    for rec in steps:
        per_epoch.setdefault(rec["epoch"], Counter()).update(rec["ids"])
    last = max(per_epoch, default=-1)
    for epoch, seen in sorted(per_epoch.items()):
        shard = set(shards.get(epoch, ()))
        v.duplicated += sum(n - 1 for n in seen.values() if n > 1)
        foreign = sorted(set(seen) - shard)
        if foreign:
            v.problems.append(f"{where}: epoch {epoch} delivered {len(foreign)} samples from outside its shard "
                              f"({foreign[:5]})")
        if epoch < last:   # a completed epoch: the rank moved on, so everything must have come
            v.lost += len(shard - set(seen))
    if reference is not None:
        if len(reference) != max_steps:
            v.problems.append(f"{where}: the uninterrupted run has {len(reference)} steps, not {max_steps}")
        for rec, ref in zip(steps, reference):
            if (rec["epoch"], rec["ids"], rec["loss"]) != (ref["epoch"], ref["ids"], ref["loss"]):
                v.trajectory_mismatches += 1
    return v


def reference_steps(records: Iterable[dict]) -> list[dict]:
    """The uninterrupted run's steps, in order (its log has one attempt and no kill)."""
    survivors, problems = surviving_steps(records)
    if problems:
        raise ValueError(f"the uninterrupted run's log is inconsistent: {problems}")
    return [survivors[i] for i in sorted(survivors)]
