"""Properties of a whole loader: resume, exactly-once, epochs under persistent workers, DP shards.

A *loader target* is a callable ``make(scenario) -> loader`` whose loader has
``set_epoch(e)``, ``state_dict()``, ``load_state_dict(state)``, ``close()`` and
iterates steps; ``ids_of(step)`` turns a step into the sample ids it delivers,
grouped per micro-batch. ``run_schedule`` drives it through epochs with
checkpoint-and-restore-into-a-fresh-loader at chosen steps (step 0 and epoch
boundaries included) and records the transcript the checks compare.

The driver follows a trainer's call order: build, ``load_state_dict`` (on a resume),
``set_epoch(e)``, ``iter()``, steps; a state is taken between steps, or between epochs.
"""

from __future__ import annotations

import json
import pickle
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Callable

from .errors import PropertyViolation
from .scenarios import LoaderScenario


@dataclass
class Transcript:
    """What the consumer saw: per step (epoch, [ids per micro-batch])."""

    steps: list[tuple[int, tuple[tuple, ...]]]

    def epoch_ids(self, epoch: int) -> list:
        return [sid for e, mbs in self.steps if e == epoch for mb in mbs for sid in mb]

    def epoch_steps(self, epoch: int) -> list:
        return [mbs for e, mbs in self.steps if e == epoch]


LoaderFactory = Callable[[LoaderScenario], Any]


def default_ids_of(step: Any) -> tuple[tuple, ...]:
    """Sample ids per micro-batch; where micro-batches carry payloads, each must be its own sample
    (a restore that forgets to re-read buffered payloads delivers ids with nothing behind them)."""
    for mb in step.micro_batches:
        payloads = getattr(mb, "payloads", None)
        if payloads is None:
            continue
        for sid, payload in zip(mb.ids, payloads):
            if not (isinstance(payload, dict) and payload.get("id") == sid):
                raise PropertyViolation(f"payload: sample {sid!r} was delivered with payload "
                                        f"{type(payload).__name__ if not isinstance(payload, dict) else payload.get('id')!r}"
                                        " instead of its own data")
    return tuple(tuple(mb.ids) for mb in step.micro_batches)


def run_schedule(make: LoaderFactory, scenario: LoaderScenario, *, ids_of=default_ids_of, codec: str | None = None,
                 first_epoch: int = 0) -> Transcript:
    """Iterate epochs ``first_epoch .. scenario.epochs - 1``; after each step count in
    ``scenario.checkpoints`` (and, with ``restore_at_epoch_end``, after every epoch) save the
    state, close the loader, build a fresh one, restore, and carry on.

    The state travels through JSON, as a checkpoint file would, unless the target says its state
    holds tensors or objects (``codec="pickle"``, or ``make.state_codec = "pickle"``, as torchdata's does).
    """
    codec = codec or getattr(make, "state_codec", "json")
    points = Counter(scenario.checkpoints)
    loader = make(scenario)
    steps: list = []
    n = 0

    def restore(loader):
        state = loader.state_dict()
        state = json.loads(json.dumps(state)) if codec == "json" else pickle.loads(pickle.dumps(state))
        loader.close()
        fresh = make(scenario)
        fresh.load_state_dict(state)
        return fresh

    try:
        for _ in range(points.pop(0, 0)):
            loader = restore(loader)
        for epoch in range(first_epoch, scenario.epochs):
            loader.set_epoch(epoch)
            it = iter(loader)
            while True:
                try:
                    step = next(it)
                except StopIteration:
                    break
                steps.append((epoch, ids_of(step)))
                n += 1
                for _ in range(points.get(n, 0)):
                    loader = restore(loader)
                    loader.set_epoch(epoch)
                    it = iter(loader)
            it = None  # the finished iterator goes before a restore builds new workers
            if scenario.restore_at_epoch_end and epoch < scenario.epochs - 1:
                loader = restore(loader)
    finally:
        loader.close()
    return Transcript(steps)


def expected_epoch_ids(scenario: LoaderScenario) -> set | None:
    """The ids a single rank must see each epoch (sample id = dataset index). With DP the shard
    depends on the target's epoch order; check_dp_shards covers that case."""
    return set(range(scenario.num_samples)) if scenario.dp_size == 1 else None


# ---- properties ------------------------------------------------------------------------------

def _schedule(scenario: LoaderScenario) -> str:
    where = f"checkpoints after steps {list(scenario.checkpoints)}"
    return where + (" and at every epoch end" if scenario.restore_at_epoch_end else "")


def check_exactly_once(make: LoaderFactory, scenario: LoaderScenario, *, expected: set | None = None,
                       ids_of=default_ids_of, codec: str | None = None) -> Transcript:
    """Every epoch delivers each of the rank's samples exactly once, whatever the checkpoints."""
    t = run_schedule(make, scenario, ids_of=ids_of, codec=codec)
    for epoch in range(scenario.epochs):
        ids = t.epoch_ids(epoch)
        counts = Counter(ids)
        dup = sorted(k for k, c in counts.items() if c > 1)
        if dup:
            raise PropertyViolation(f"exactly-once: epoch {epoch} delivered {dup[:10]} more than once "
                                    f"({_schedule(scenario)})")
        if expected is not None and set(ids) != expected:
            lost = sorted(expected - set(ids))
            extra = sorted(set(ids) - expected)
            what = f"lost {lost[:10]}" if lost else "lost nothing"
            what += f" and delivered foreign {extra[:10]}" if extra else ""
            raise PropertyViolation(f"exactly-once: epoch {epoch} {what} ({_schedule(scenario)})")
    return t


def epoch_boundaries(t: Transcript) -> list[int]:
    """Step counts at which an epoch had just ended (a checkpoint there is 'exactly at a boundary')."""
    out, n = [], 0
    for e in sorted({e for e, _ in t.steps}):
        n += len(t.epoch_steps(e))
        out.append(n)
    return out


def check_exact_resume(make: LoaderFactory, scenario: LoaderScenario, *, ids_of=default_ids_of,
                       at_boundaries: bool = True, codec: str | None = None) -> None:
    """Restoring at any steps (and, by default, exactly at every epoch boundary) reproduces the
    uninterrupted stream sample for sample."""
    plain = run_schedule(make, replace(scenario, checkpoints=(), restore_at_epoch_end=False), ids_of=ids_of,
                         codec=codec)
    if at_boundaries:
        scenario = replace(scenario, checkpoints=tuple(sorted(scenario.checkpoints + tuple(epoch_boundaries(plain)))))
    resumed = run_schedule(make, scenario, ids_of=ids_of, codec=codec)
    for k, (a, b) in enumerate(zip(plain.steps, resumed.steps)):
        if a != b:
            raise PropertyViolation(f"resume: step {k} differs ({_schedule(scenario)}): "
                                    f"uninterrupted {a} vs resumed {b}")
    if len(plain.steps) != len(resumed.steps):
        raise PropertyViolation(f"resume: {len(plain.steps)} steps uninterrupted vs {len(resumed.steps)} resumed "
                                f"({_schedule(scenario)})")


def check_epoch_reshuffle(make: LoaderFactory, scenario: LoaderScenario, *, ids_of=default_ids_of,
                          codec: str | None = None) -> None:
    """Epoch e's order is the same with persistent and non-persistent workers, epochs differ, and
    the order is a function of (seed, epoch): a fresh loader told ``set_epoch(e)`` (a trainer
    resuming at an epoch start without a loader checkpoint) delivers what epoch e delivered."""
    if scenario.epochs < 2:
        raise ValueError("the epoch property needs epochs >= 2")
    plain = replace(scenario, checkpoints=(), restore_at_epoch_end=False)
    persistent = run_schedule(make, replace(plain, persistent_workers=True), ids_of=ids_of, codec=codec)
    fresh = run_schedule(make, replace(plain, persistent_workers=False), ids_of=ids_of, codec=codec)
    for epoch in range(scenario.epochs):
        if persistent.epoch_ids(epoch) != fresh.epoch_ids(epoch):
            raise PropertyViolation(f"epochs: epoch {epoch} differs between persistent and non-persistent workers: "
                                    f"{persistent.epoch_ids(epoch)[:12]} vs {fresh.epoch_ids(epoch)[:12]}")
    orders = [tuple(persistent.epoch_ids(e)) for e in range(scenario.epochs)]
    for e in range(1, scenario.epochs):
        if orders[e] == orders[e - 1]:
            raise PropertyViolation(f"epochs: epoch {e} replays epoch {e - 1}'s order {list(orders[e])[:12]} "
                                    "(set_epoch did not reach the workers?)")
    # Warm-up budgets follow the global step, which a fresh loader restarts: packing (and so the
    # delivered order) may then differ legitimately. Compare without warm-up.
    last = scenario.epochs - 1
    flat = replace(plain, persistent_workers=False, warmup_steps=0)
    reference = fresh if scenario.warmup_steps == 0 else run_schedule(make, flat, ids_of=ids_of, codec=codec)
    late = run_schedule(make, flat, ids_of=ids_of, codec=codec, first_epoch=last)
    if late.epoch_ids(last) != reference.epoch_ids(last):
        raise PropertyViolation(f"epochs: a fresh loader told set_epoch({last}) delivered {late.epoch_ids(last)[:12]}, "
                                f"but epoch {last} reached by iterating delivered {reference.epoch_ids(last)[:12]}: "
                                "the epoch's order is not a function of (seed, epoch)")


def check_dp_shards(make: LoaderFactory, scenario: LoaderScenario, *, ids_of=default_ids_of,
                    codec: str | None = None) -> None:
    """DP ranks read disjoint shards whose union is the dataset, every epoch."""
    per_rank = [run_schedule(make, replace(scenario, dp_rank=r, checkpoints=(), restore_at_epoch_end=False),
                             ids_of=ids_of, codec=codec)
                for r in range(scenario.dp_size)]
    for epoch in range(scenario.epochs):
        seen: dict = {}
        for r, t in enumerate(per_rank):
            for sid in t.epoch_ids(epoch):
                if sid in seen:
                    who = f"rank {r} twice" if seen[sid] == r else f"ranks {seen[sid]} and {r}"
                    raise PropertyViolation(f"DP shards: sample {sid} read by {who} in epoch {epoch}")
                seen[sid] = r
        missing = sorted(set(range(scenario.num_samples)) - set(seen))
        if missing:
            raise PropertyViolation(f"DP shards: epoch {epoch} no rank read {missing[:10]}")
