"""Properties of a whole loader: resume, exactly-once, epochs under persistent workers, DP shards.

A *loader target* is a callable ``make(scenario) -> loader`` whose loader has
``set_epoch(e)``, ``state_dict()``, ``load_state_dict(state)``, ``close()`` and
iterates steps; ``ids_of(step)`` turns a step into the sample ids it delivers,
grouped per micro-batch. ``run_schedule`` drives it through epochs with
checkpoint-and-restore-into-a-fresh-loader at chosen steps (step 0 and epoch
boundaries included) and records the transcript the checks compare.

The driver follows a trainer's call order: build, ``load_state_dict`` (on a resume),
``set_epoch(e)``, ``iter()``, steps; a state is taken between steps, or between epochs. A scenario
with ``checkpoint_on_resume`` set also has the trainer call ``state_dict()`` right after every
``load_state_dict`` (a checkpoint written on resume, the one a restore before the epoch's next step loads).
"""

from __future__ import annotations

import json
import pickle
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Callable

from .coverage import reached
from .errors import PropertyViolation
from .scenarios import LoaderScenario
from .watchdog import Watch

#: The states a loader run can reach (``properties.coverage`` labels).
RESTORE_MID_EPOCH = "restore mid-epoch"
RESTORE_AT_START = "restore at step 0"
RESTORE_AT_EPOCH_END = "restore at an epoch end"
MULTI_WORKER = "two or more workers"
RESTORE_CLOSED_EPOCH = "a restore after an epoch's last batch that moved on (epoch_end='closed')"
#: how a loader restores a state saved after an epoch's last batch (``run_schedule``'s ``epoch_end``)
EPOCH_END_CONVENTIONS = ("open", "closed")
UNEVEN_SHARDS = "shards of unequal size"
RANKS_DIFFER = "ranks' epochs differ in steps"
BOUND_CROSSES_EPOCH = "max_steps crosses an epoch end"
SAMPLE_MOVED = "a sample moved by the balanced order"
MOVED_FULL_LOOKAHEAD = "a sample moved the full lookahead"
HELD_FOR_ORDER = "samples held to restore the order"


@dataclass
class Transcript:
    """What the consumer saw: per step (epoch, [ids per micro-batch])."""

    steps: list[tuple[int, tuple[tuple, ...]]]
    #: where a trainer model drove the loader in a way that no loader can survive (the trainer's own fault)
    trainer_faults: tuple[str, ...] = ()
    #: why the trainer itself gives up the order of later epochs after a preemption (it never restores the
    #: loader there), so only each epoch's samples are the loader's to keep
    order_lost: str | None = None

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


def roundtrip(state: Any, codec: str) -> Any:
    """A state as a checkpoint file carries it: through JSON, or pickled (states holding tensors)."""
    return json.loads(json.dumps(state)) if codec == "json" else pickle.loads(pickle.dumps(state))


def run_schedule(make: LoaderFactory, scenario: LoaderScenario, *, ids_of=default_ids_of, codec: str | None = None,
                 first_epoch: int = 0, on_loader: Callable[[Any], None] | None = None,
                 break_after: int | None = None, checkpoint_on_resume: bool | None = None,
                 epoch_end: str = "open") -> Transcript:
    """Iterate epochs ``first_epoch .. scenario.epochs - 1``; after each step count in
    ``scenario.checkpoints`` (and, with ``restore_at_epoch_end``, after every epoch) save the
    state, close the loader, build a fresh one, restore, and carry on. With ``break_after``, epoch
    0's loop breaks once it has taken that many steps (counting those after a restore) and the
    trainer goes on to epoch 1, as a loop bounded by steps per epoch does.

    With ``checkpoint_on_resume`` (None: the scenario's field of that name, if it has one; off
    otherwise) the trainer writes a checkpoint right after every restore, ``state_dict()`` before
    ``set_epoch`` and ``iter()``, as trainers that checkpoint on resume do; that checkpoint is the
    trainer's latest, so a restore before the next step of the same epoch's loop loads it instead
    of asking the loader again (a restart right after a restart); once the epoch's iterator ran out
    or was abandoned, which the loader may record, a restore asks the loader. Off, the schedule is
    exactly as without the option.

    ``epoch_end`` is the loader's convention for a state saved after an epoch's last batch, before
    its iterator ran out (``EPOCH_END_CONVENTIONS``): ``open`` (torchdata's contract: the restored
    loader is still in that epoch, so the trainer re-enters it and its ``iter()`` ends it) or
    ``closed`` (the restored loader has moved on, as litdata's own tests say): the trainer then knows
    the epoch is over, as one that looks a batch ahead does (Lightning's data fetcher), and goes on
    to the next epoch instead of re-entering it. The schedule learns it as that trainer does: it asks
    the old loader's iterator for one more batch after saving its state (the old loader is discarded).

    The state travels through JSON, as a checkpoint file would, unless the target says its state
    holds tensors or objects (``codec="pickle"``, or ``make.state_codec = "pickle"``, as torchdata's does).
    ``on_loader(loader)`` is called with every loader at the end of each of its epochs and before
    it is replaced (to read what it reached). Reports where the restores fell (``properties.coverage``).
    """
    codec = codec or getattr(make, "state_codec", "json")
    if epoch_end not in EPOCH_END_CONVENTIONS:
        raise ValueError(f"epoch_end={epoch_end!r}; allowed values: {', '.join(EPOCH_END_CONVENTIONS)}")
    if checkpoint_on_resume is None:
        checkpoint_on_resume = bool(getattr(scenario, "checkpoint_on_resume", False))
    points = Counter(scenario.checkpoints)
    loader = make(scenario)
    steps: list = []
    restores: list[tuple[int, int]] = []   # (steps delivered, epoch) at each restore
    n = 0
    watch = Watch(scenario, _schedule(scenario))
    on_resume: list = []   # the checkpoint written on the last resume, until a step follows it

    def restore(loader, epoch: int, it=None):
        """A fresh loader given the checkpoint, and whether the trainer knows the epoch is over (``it``: the
        epoch's live iterator, which a trainer that knows its epoch's end has already looked past)."""
        restores.append((n, epoch))
        if on_loader is not None:
            on_loader(loader)
        state = on_resume.pop() if on_resume else roundtrip(loader.state_dict(), codec)
        over = it is not None and epoch_end == "closed" and _ran_out(it)
        loader.close()
        fresh = make(scenario)
        fresh.load_state_dict(state)
        if checkpoint_on_resume:
            on_resume.append(roundtrip(fresh.state_dict(), codec))
            reached("a checkpoint written on resume")
        return fresh, over

    try:
        for _ in range(points.pop(0, 0)):
            loader, _over = restore(loader, first_epoch)
        for epoch in range(first_epoch, scenario.epochs):
            loader.set_epoch(epoch)
            it = watch.iter(loader, epoch)
            taken = 0
            while not (epoch == 0 and break_after is not None and taken >= break_after):
                try:
                    step = next(it)
                except StopIteration:
                    break
                steps.append((epoch, ids_of(step)))
                n += 1
                taken += 1
                on_resume.clear()
                over = False
                for _ in range(points.get(n, 0)):
                    loader, ended = restore(loader, epoch, None if over else it)
                    over, it = over or ended, None
                    if not over:
                        loader.set_epoch(epoch)
                        it = watch.iter(loader, epoch)
                if over:   # the restored loader has moved on (epoch_end="closed"), and so does the trainer
                    reached(RESTORE_CLOSED_EPOCH)
                    break
            it = None  # the finished (or abandoned) iterator goes before a restore builds new workers
            on_resume.clear()   # the loader saw its epoch end (or broken off): the epoch-end checkpoint asks it
            if on_loader is not None:
                on_loader(loader)
            if scenario.restore_at_epoch_end and epoch < scenario.epochs - 1:
                loader, _over = restore(loader, epoch)
    finally:
        loader.close()
    transcript = Transcript(steps)
    restore_events(transcript, restores)
    if scenario.num_workers >= 2:
        reached(MULTI_WORKER)
    return transcript


def _ran_out(it) -> bool:
    """Whether the epoch's iterator has no batch left (the batch it may yield is the old loader's, never trained)."""
    try:
        next(it)
    except StopIteration:
        return True
    return False


def restore_events(t: Transcript, restores: list[tuple[int, int]]) -> None:
    """Where the restores of a run fell: at step 0, exactly at an epoch end, or mid-epoch (steps of
    the same epoch followed)."""
    ends = set(epoch_boundaries(t))
    last_of_epoch: dict[int, int] = {}
    for k, (e, _) in enumerate(t.steps):
        last_of_epoch[e] = k + 1
    for n, epoch in restores:
        if n == 0:
            reached(RESTORE_AT_START)
        elif n in ends and last_of_epoch.get(epoch, 0) <= n:
            reached(RESTORE_AT_EPOCH_END)
        if 0 < n < last_of_epoch.get(epoch, 0):
            reached(RESTORE_MID_EPOCH)


def expected_epoch_ids(scenario: LoaderScenario) -> set | None:
    """The ids a single rank must see each epoch (sample id = dataset index). With DP the shard
    depends on the target's epoch order; check_dp_shards covers that case."""
    return set(range(scenario.num_samples)) if scenario.dp_size == 1 else None


# ---- properties ------------------------------------------------------------------------------

def _schedule(scenario: LoaderScenario) -> str:
    where = f"rank {scenario.dp_rank} of {scenario.dp_size}, " if scenario.dp_size > 1 else ""
    where += f"checkpoints after steps {list(scenario.checkpoints)}" if scenario.checkpoints else "no checkpoints"
    where += " and at every epoch end" if scenario.restore_at_epoch_end else ""
    return where + (", a checkpoint written right after every restore" if scenario.checkpoint_on_resume else "")


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


def with_boundary_restores(make: LoaderFactory, scenario: LoaderScenario, *, ids_of=default_ids_of,
                           codec: str | None = None) -> tuple[Transcript, LoaderScenario]:
    """The uninterrupted run, and the scenario with a restore added exactly at each of its epoch ends
    (what ``check_exact_resume`` restores at, by default)."""
    plain = run_schedule(make, replace(scenario, checkpoints=(), restore_at_epoch_end=False), ids_of=ids_of,
                         codec=codec)
    return plain, replace(scenario, checkpoints=tuple(sorted(scenario.checkpoints + tuple(epoch_boundaries(plain)))))


def check_exact_resume(make: LoaderFactory, scenario: LoaderScenario, *, ids_of=default_ids_of,
                       at_boundaries: bool = True, codec: str | None = None) -> None:
    """Restoring at any steps (and, by default, exactly at every epoch boundary) reproduces the
    uninterrupted stream sample for sample."""
    plain, with_ends = with_boundary_restores(make, scenario, ids_of=ids_of, codec=codec)
    if at_boundaries:
        scenario = with_ends
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
        if not orders[e] and not orders[e - 1]:
            # two empty epochs do not differ, but the cause is that nothing was delivered, not set_epoch
            raise PropertyViolation(f"epochs: epochs {e - 1} and {e} delivered none of the {scenario.num_samples} "
                                    "samples, so neither can be reshuffled (every sample dropped, or none read)")
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
    if scenario.num_samples % scenario.dp_size:
        reached(UNEVEN_SHARDS)
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


# ---- DP step counts: every rank stops at the same step -------------------------------------------

def run_bounded(make: LoaderFactory, scenario: LoaderScenario, rule: str, *, steps_per_epoch: int | None = None,
                ids_of=default_ids_of, codec: str | None = None) -> list[int]:
    """One rank's run under a stopping rule; the steps it yielded in each epoch it started.

    ``max_steps``: the documented bounded loop, ``while steps < max_steps: set_epoch(e); for step in
    loader`` (the loader must stop by itself inside the epoch that reaches the bound); ``epoch``:
    ``scenario.epochs`` whole epochs; ``steps_per_epoch``: a trainer's ``for _ in range(S):
    next(it)``, ending the epoch early when the loader runs out. Checkpoints and restores into a
    fresh loader at ``scenario.checkpoints`` as in ``run_schedule`` (a bound must survive them).
    """
    codec = codec or getattr(make, "state_codec", "json")
    points = Counter(scenario.checkpoints)
    bound = scenario.max_steps if rule == "max_steps" else None
    max_epochs = (bound + 2) if bound is not None else scenario.epochs   # every epoch yields >= 1 step
    per_epoch: list[int] = []
    n = 0
    watch = Watch(scenario, f"stopping rule {rule}, {_schedule(scenario)}")
    loader = make(scenario)

    def restore(loader):
        state = roundtrip(loader.state_dict(), codec)
        loader.close()
        fresh = make(scenario)
        fresh.load_state_dict(state)
        return fresh

    try:
        for _ in range(points.pop(0, 0)):
            loader = restore(loader)
        epoch = 0
        while epoch < max_epochs and (bound is None or n < bound):
            loader.set_epoch(epoch)
            it = watch.iter(loader, epoch)
            k = 0
            while steps_per_epoch is None or k < steps_per_epoch:
                try:
                    step = next(it)
                except StopIteration:
                    break
                ids_of(step)
                k += 1
                n += 1
                if bound is not None and n > bound:
                    raise PropertyViolation(f"DP step counts: rank {scenario.dp_rank} yielded step {n} with "
                                            f"max_steps={bound} (epoch {epoch}): the loader does not stop at its bound")
                for _ in range(points.get(n, 0)):
                    loader = restore(loader)
                    loader.set_epoch(epoch)
                    it = watch.iter(loader, epoch)
            it = None
            per_epoch.append(k)
            epoch += 1
    finally:
        loader.close()
    return per_epoch


def _epochs_differ(runs: list[list[int]], cut_short: bool) -> bool:
    """Some epoch holds more steps on one rank than on another. With ``cut_short`` each rank's last
    epoch was stopped by the bound: its count is only a lower bound of that epoch's length."""
    for e in range(max(len(r) for r in runs)):
        exact = {r[e] for r in runs if e < len(r) - (1 if cut_short else 0)}
        at_least = [r[e] for r in runs if cut_short and e == len(r) - 1]
        if len(exact) > 1 or (exact and any(c > max(exact) for c in at_least)):
            return True
    return False


def check_dp_step_counts(make: LoaderFactory, scenario: LoaderScenario, stopping: tuple[str, ...], *,
                         steps_per_epoch: Callable[[LoaderScenario], int] | None = None, ids_of=default_ids_of,
                         codec: str | None = None) -> None:
    """Under every stopping rule the loader offers, all DP ranks stop at the same step (ranks pack
    their own shards, so their epochs need not hold the same number of steps; a rank that stops
    earlier leaves its partners waiting in their next collective). Ranks are simulated in one
    process: rank r's loader is built with ``dp_rank=r``, no process group is needed."""
    if not stopping:
        raise PropertyViolation("DP step counts: the loader offers no stopping rule (max_steps, whole epochs or a "
                                "trainer's steps per epoch) under which DP ranks stop at the same step")
    for rule in stopping:
        if rule == "max_steps":
            # A scenario drawn for another loader (one without max_steps) is bounded at the samples of one
            # rank's shard: at least one epoch end crossed, since every step holds a sample or more.
            sc = scenario if scenario.max_steps is not None else replace(
                scenario, max_steps=max(1, scenario.num_samples // scenario.dp_size))
        else:
            sc = replace(scenario, max_steps=None)
        per = steps_per_epoch(sc) if rule == "steps_per_epoch" and steps_per_epoch is not None else None
        runs = [run_bounded(make, replace(sc, dp_rank=r), rule, steps_per_epoch=per, ids_of=ids_of, codec=codec)
                for r in range(sc.dp_size)]
        if _epochs_differ(runs, cut_short=rule == "max_steps"):
            reached(RANKS_DIFFER)
        if rule == "max_steps":
            if len(runs[0]) > 1:
                reached(BOUND_CROSSES_EPOCH)
            for r, steps in enumerate(runs):
                if sum(steps) != sc.max_steps:
                    others = "; ".join(f"rank {q}: {sum(x)} ({x})" for q, x in enumerate(runs) if q != r)
                    raise PropertyViolation(f"DP step counts: under max_steps={sc.max_steps} rank {r} yielded "
                                            f"{sum(steps)} steps (per epoch {steps}; {others}) ({_schedule(sc)})")
            continue
        for epoch in range(max(len(x) for x in runs)):
            counts = [x[epoch] if epoch < len(x) else 0 for x in runs]
            if len(set(counts)) > 1:
                how = "whole epochs" if rule == "epoch" else f"at most {per} steps per epoch (the trainer's loop)"
                raise PropertyViolation(f"DP step counts: looping over {how}, epoch {epoch} ends after "
                                        f"{', '.join(f'{c} steps on rank {r}' for r, c in enumerate(counts))}: the "
                                        f"ranks stop at different steps ({sc.dp_size} ranks, {sc.num_samples} "
                                        f"samples, {_schedule(sc)})")


# ---- order='balanced': a bounded rearrangement ---------------------------------------------------

def delivery_order(make: LoaderFactory, scenario: LoaderScenario, *, ids_of=default_ids_of,
                   codec: str | None = None) -> Transcript:
    """The loader's fetch order, epoch by epoch: a budget of one token and a buffer of one make every
    sample (overlong, emitted alone) a micro-batch of its own, cut in arrival order; in_order=True
    makes arrival order the dispatch order. No checkpoints, no warm-up, one micro-batch per step."""
    plain = replace(scenario, budget=1, buffer_size=1, micro_batches_per_step=1, warmup_steps=0, checkpoints=(),
                    restore_at_epoch_end=False, in_order=True, reorder_buffer=0, max_steps=None)
    return run_schedule(make, plain, ids_of=ids_of, codec=codec)


def source_of(scenario: LoaderScenario) -> dict[int, int]:
    """Sample id -> source row of the scenario's trace (sample id = dataset index)."""
    trace = scenario.workload().sample(scenario.num_samples, scenario.data_seed)
    return {int(i): int(s) for i, s in zip(trace.ids.tolist(), trace.source.tolist())}


def check_balanced_order(make: LoaderFactory, scenario: LoaderScenario, *, ids_of=default_ids_of,
                         codec: str | None = None) -> None:
    """order='balanced' rearranges each epoch of the rank's sampler order (what order='sampler'
    delivers) without losing or adding a sample, and moves no sample more than ``lookahead``
    places (``'auto'``: the value dynbsz resolves it to); so no window of the delivered order holds more than ``2 * lookahead`` samples of a
    source beyond what the same window of the sampler order holds (the per-window source-share
    drift is at most ``2 * lookahead / window``)."""
    lookahead = scenario.resolved_lookahead()   # 'auto' judged by the value dynbsz resolves it to
    sampler = delivery_order(make, replace(scenario, order="sampler"), ids_of=ids_of, codec=codec)
    balanced = delivery_order(make, replace(scenario, order="balanced"), ids_of=ids_of, codec=codec)
    sources = source_of(scenario)
    window = max(4, 4 * lookahead)
    for epoch in range(scenario.epochs):
        a, b = sampler.epoch_ids(epoch), balanced.epoch_ids(epoch)
        if sorted(a) != sorted(b):
            lost, extra = sorted(set(a) - set(b))[:10], sorted(set(b) - set(a))[:10]
            raise PropertyViolation(f"balanced order: epoch {epoch} is not a rearrangement of the sampler's "
                                    f"({len(a)} vs {len(b)} samples; missing {lost}, foreign or repeated {extra})")
        where = {sid: i for i, sid in enumerate(a)}
        moves = [(abs(i - where[sid]), sid, where[sid], i) for i, sid in enumerate(b)]
        worst = max(moves, default=(0, None, 0, 0))
        if worst[0] > 0:
            reached(SAMPLE_MOVED)
        if worst[0] == lookahead and lookahead > 0:
            reached(MOVED_FULL_LOOKAHEAD)
        if worst[0] > lookahead:
            _, sid, was, now = worst
            raise PropertyViolation(f"balanced order: epoch {epoch} moved sample {sid} from sampler position {was} "
                                    f"to {now}, {worst[0]} places with lookahead={lookahead}")
        for start in range(max(1, len(a) - window + 1)):
            got = Counter(sources[x] for x in b[start:start + window])
            want = Counter(sources[x] for x in a[start:start + window])
            drift = max((abs(got[k] - want[k]) for k in set(got) | set(want)), default=0)
            if drift > 2 * lookahead:
                raise PropertyViolation(f"balanced order: epoch {epoch}, window {start}-{start + window - 1} holds "
                                        f"{dict(got)} samples per source where the sampler order holds {dict(want)}: "
                                        f"a drift of {drift} > 2 * lookahead={2 * lookahead}")


# ---- reorder_buffer: the sampler's order, whatever the costs -----------------------------------

def check_reorder_exact(make: LoaderFactory, scenario: LoaderScenario, *, ids_of=default_ids_of,
                        codec: str | None = None) -> None:
    """With in_order=True and a reorder buffer, torch hands samples out as they arrive and the
    loader puts them back: what it delivers (and resumes to) is step for step what in_order=True
    delivers without the buffer, uninterrupted, whatever the decode costs."""
    held = [0]

    def observe(loader: Any) -> None:
        held[0] = max(held[0], int(getattr(loader, "reorder_peak", 0) or 0))

    reference = run_schedule(make, replace(scenario, reorder_buffer=0, checkpoints=(), restore_at_epoch_end=False),
                             ids_of=ids_of, codec=codec)
    reordered = run_schedule(make, scenario, ids_of=ids_of, codec=codec, on_loader=observe)
    if held[0] > 0:
        reached(HELD_FOR_ORDER)
    for k, (a, b) in enumerate(zip(reference.steps, reordered.steps)):
        if a != b:
            raise PropertyViolation(f"reorder buffer: step {k} differs from in_order=True without one "
                                    f"(reorder_buffer={scenario.reorder_buffer}, {_schedule(scenario)}): "
                                    f"{a} vs {b}")
    if len(reference.steps) != len(reordered.steps):
        raise PropertyViolation(f"reorder buffer: {len(reordered.steps)} steps with reorder_buffer="
                                f"{scenario.reorder_buffer}, {len(reference.steps)} with in_order=True alone "
                                f"({_schedule(scenario)})")
