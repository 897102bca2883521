"""Properties of a streaming loader: drive it through epochs, checkpoints and early breaks, check the transcript.

A *stream loader* is what ``StreamComponent.make_loader(scenario)`` returns: ``set_epoch(e)``
(a no-op for loaders that count epochs themselves), ``__iter__`` over batches, ``state_dict()``,
``load_state_dict(state)`` and ``close()``; ``ids_of(batch)`` is the flat tuple of sample ids a
batch delivers. ``run_stream`` follows a trainer's loop: ``set_epoch(e)``, ``iter()``, batches; a
checkpoint saves the state, closes the loader and restores it into a fresh one, which the loop then
iterates again (``iter()`` once more, as a trainer that resumes mid-epoch does); epoch 0's loop may
``break`` early, after which the trainer starts epoch 1. With ``checkpoint_on_resume`` the trainer
writes a checkpoint right after every restore (``state_dict()`` before ``set_epoch`` and ``iter()``,
as trainers that checkpoint on resume do), and a restore before the epoch's next batch loads that one.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Callable

from .errors import PropertyViolation
from .loader_props import run_schedule
from .stream_scenarios import StreamScenario, source_of


@dataclass
class StreamTranscript:
    """What the consumer saw: per batch (epoch, ids)."""

    steps: list[tuple[int, tuple]]

    def epoch_ids(self, epoch: int) -> list:
        return [sid for e, ids in self.steps if e == epoch for sid in ids]

    def boundaries(self) -> list[int]:
        """Batch counts at which an epoch had just ended."""
        out, n = [], 0
        for e in sorted({e for e, _ in self.steps}):
            n += sum(1 for ee, _ in self.steps if ee == e)
            out.append(n)
        return out


def run_stream(make: Callable[[StreamScenario], Any], sc: StreamScenario, *, ids_of: Callable[[Any], tuple],
               codec: str = "pickle", first_epoch: int = 0, epoch_end: str = "open") -> StreamTranscript:
    """The loader suite's trainer loop (``loader_props.run_schedule``) over a stream scenario: the
    state is saved while the epoch's iterator is still alive, as a trainer saves inside its loop,
    epoch 0's loop breaks after ``sc.break_after`` batches, and with ``sc.checkpoint_on_resume`` every
    restore is followed at once by a checkpoint of the restored loader; ``epoch_end`` is the loader's
    convention for a state saved after an epoch's last batch (``run_schedule``)."""
    t = run_schedule(make, sc, ids_of=lambda batch: tuple(ids_of(batch)), codec=codec, first_epoch=first_epoch,
                     break_after=sc.break_after, checkpoint_on_resume=sc.checkpoint_on_resume, epoch_end=epoch_end)
    return StreamTranscript(t.steps)


def schedule(sc: StreamScenario) -> str:
    where = f"checkpoints after batches {list(sc.checkpoints)}"
    where += " and at every epoch end" if sc.restore_at_epoch_end else ""
    where += ", a checkpoint written right after every restore" if sc.checkpoint_on_resume else ""
    return where + (f", epoch 0's loop breaking after {sc.break_after} batches" if sc.break_after is not None else "")


def _short(ids: list, k: int = 14) -> str:
    return str(ids[:k])[:-1] + (", ...]" if len(ids) > k else "]")


def check_epoch(ids: list, expected: set, *, epoch: int, loss: int | None, loss_reason: str, where: str,
                partial: bool = False) -> None:
    """No sample twice, nothing foreign, and at most ``loss`` of ``expected`` left out (None: any
    number; ``partial``: the loop broke early, so only the first two hold)."""
    counts = Counter(ids)
    dup = sorted(k for k, c in counts.items() if c > 1)
    if dup:
        raise PropertyViolation(f"exactly-once: epoch {epoch} delivered {dup[:10]} more than once ({where})")
    foreign = sorted(set(ids) - expected)
    if foreign:
        raise PropertyViolation(f"exactly-once: epoch {epoch} delivered samples outside the rank's data {foreign[:10]} "
                                f"({where})")
    lost = sorted(expected - set(ids))
    if not partial and loss is not None and len(lost) > loss:
        allowed = f"at most {loss} may be left out: {loss_reason}" if loss else "none may be left out"
        raise PropertyViolation(f"exactly-once: epoch {epoch} lost {len(lost)} samples {lost[:10]} ({allowed}; {where})")


def with_boundaries(sc: StreamScenario, plain: StreamTranscript) -> StreamScenario:
    """``sc`` with checkpoints added exactly at every epoch end and on the next epoch's first batch."""
    extra = []
    for b in plain.boundaries()[:-1]:
        extra += [b, b + 1]
    return replace(sc, checkpoints=tuple(sorted(set(sc.checkpoints) | set(extra))))


def _batch_for_batch(what: str, names: tuple[str, str], a: StreamTranscript, b: StreamTranscript,
                     sc: StreamScenario) -> None:
    """Raise PropertyViolation (``what``: the property's prefix) at the first batch where two runs of the schedule
    differ, or where one of them ends first; ``names``: what each run is."""
    for k, (x, y) in enumerate(zip(a.steps, b.steps)):
        if x != y:
            raise PropertyViolation(f"{what}: batch {k} differs ({schedule(sc)}): {names[0]} {x} vs {names[1]} {y}")
    if len(a.steps) != len(b.steps):
        more = b.steps[len(a.steps):] or a.steps[len(b.steps):]
        raise PropertyViolation(f"{what}: {len(a.steps)} batches {names[0]} vs {len(b.steps)} {names[1]} "
                                f"({schedule(sc)}); the first unmatched: {more[:3]}")


def check_exact_resume(make, sc: StreamScenario, *, ids_of, codec: str, epoch_end: str = "open") -> None:
    plain = run_stream(make, replace(sc, checkpoints=(), restore_at_epoch_end=False), ids_of=ids_of, codec=codec)
    sc = with_boundaries(sc, plain)
    resumed = run_stream(make, sc, ids_of=ids_of, codec=codec, epoch_end=epoch_end)
    _batch_for_batch("resume", ("uninterrupted", "resumed"), plain, resumed, sc)


def check_persistence(make, sc: StreamScenario, *, ids_of, codec: str, epoch_end: str = "open") -> None:
    """The same schedule (restores, an early break and the next ``iter()``, epoch ends) delivers batch for batch the
    same with persistent and with non-persistent workers: ``persistent_workers`` keeps worker processes alive between
    iterations, which must change no batch (a resumed epoch broken off and iterated again included, whatever the
    loader documents it then delivers)."""
    persistent = run_stream(make, replace(sc, persistent_workers=True), ids_of=ids_of, codec=codec, epoch_end=epoch_end)
    fresh = run_stream(make, replace(sc, persistent_workers=False), ids_of=ids_of, codec=codec, epoch_end=epoch_end)
    _batch_for_batch("persistent workers", ("persistent", "non-persistent"), persistent, fresh, sc)


def check_once_resume(make, sc: StreamScenario, *, ids_of, codec: str, epoch_end: str = "open") -> None:
    """Each epoch of the resumed run delivers the uninterrupted epoch's samples, each once (any order)."""
    plain = run_stream(make, replace(sc, checkpoints=(), restore_at_epoch_end=False), ids_of=ids_of, codec=codec)
    sc = with_boundaries(sc, plain)
    resumed = run_stream(make, sc, ids_of=ids_of, codec=codec, epoch_end=epoch_end)
    for epoch in range(sc.epochs):
        a, b = plain.epoch_ids(epoch), resumed.epoch_ids(epoch)
        dup = sorted(k for k, c in Counter(b).items() if c > 1)
        if dup:
            raise PropertyViolation(f"resume: epoch {epoch} delivered {dup[:10]} more than once ({schedule(sc)})")
        if set(a) != set(b):
            lost, extra = sorted(set(a) - set(b)), sorted(set(b) - set(a))
            raise PropertyViolation(f"resume: epoch {epoch} lost {lost[:10]} and delivered {extra[:10]} that the "
                                    f"uninterrupted run did not ({schedule(sc)})")


def check_reshuffle(make, sc: StreamScenario, *, ids_of, codec: str, must_differ: bool) -> None:
    plain = replace(sc, checkpoints=(), restore_at_epoch_end=False, break_after=None)
    persistent = run_stream(make, replace(plain, persistent_workers=True), ids_of=ids_of, codec=codec)
    fresh = run_stream(make, replace(plain, persistent_workers=False), ids_of=ids_of, codec=codec)
    for epoch in range(sc.epochs):
        if persistent.epoch_ids(epoch) != fresh.epoch_ids(epoch):
            raise PropertyViolation(f"epochs: epoch {epoch} differs between persistent and non-persistent workers: "
                                    f"{_short(persistent.epoch_ids(epoch))} vs {_short(fresh.epoch_ids(epoch))}")
    if must_differ:
        for e in range(1, sc.epochs):
            if persistent.epoch_ids(e) == persistent.epoch_ids(e - 1):
                raise PropertyViolation(f"epochs: epoch {e} replays epoch {e - 1}'s order "
                                        f"{_short(persistent.epoch_ids(e))} with shuffle=True")


#: the chance that a loader whose reshuffle is drawn from the seed replays epoch 0 for every seed tried (at most)
REPLAY_CHANCE = 1e-9
#: the most seeds tried; fewer orders than that would need are left undecided (Unsupported)
MAX_SEEDS = 12


def seeds_to_tell(orders: int) -> int | None:
    """How many seeds make ``orders ** -seeds <= REPLAY_CHANCE`` (None: more than ``MAX_SEEDS``)."""
    n = math.ceil(-math.log(REPLAY_CHANCE) / math.log(orders)) if orders > 1 else MAX_SEEDS + 1
    return n if n <= MAX_SEEDS else None


def check_reshuffle_across_seeds(make, sc: StreamScenario, *, orders: int, ids_of, codec: str) -> None:
    """Where one seed's two epochs agree by chance with probability ``1 / orders``, epoch 1 must differ from epoch 0
    for at least one of ``seeds_to_tell(orders)`` seeds (``sc.seed`` on): a reshuffle drawn from the seed replays
    epoch 0 for all of them with probability at most REPLAY_CHANCE."""
    seeds = seeds_to_tell(orders)
    plain = replace(sc, epochs=2, checkpoints=(), restore_at_epoch_end=False, break_after=None)
    for seed in range(sc.seed, sc.seed + seeds):
        t = run_stream(make, replace(plain, seed=seed), ids_of=ids_of, codec=codec)
        if t.epoch_ids(1) != t.epoch_ids(0):
            return
    raise PropertyViolation(f"epochs: epoch 1 replays epoch 0's order with shuffle=True for every one of {seeds} seeds "
                            f"{sc.seed}-{sc.seed + seeds - 1} (e.g. {_short(t.epoch_ids(0))}; with {orders} orders "
                            f"an epoch can take, a reshuffle drawn from the seed does so with probability "
                            f"{float(orders) ** -seeds:.0e})")


def check_dp(make, sc: StreamScenario, *, ids_of, codec: str, loss: int, loss_reason: str) -> None:
    runs = [run_stream(make, replace(sc, dp_rank=r, checkpoints=(), restore_at_epoch_end=False, break_after=None),
                       ids_of=ids_of, codec=codec) for r in range(sc.dp_size)]
    everything = sc.all_ids()
    for epoch in range(sc.epochs):
        seen: dict = {}
        for r, t in enumerate(runs):
            for sid in t.epoch_ids(epoch):
                if sid in seen:
                    who = f"rank {r} twice" if seen[sid] == r else f"ranks {seen[sid]} and {r}"
                    raise PropertyViolation(f"DP shards: sample {sid} read by {who} in epoch {epoch}")
                seen[sid] = r
        missing = sorted(everything - set(seen))
        if len(missing) > loss:
            allowed = f"at most {loss} may be left out: {loss_reason}" if loss else "none may be left out"
            raise PropertyViolation(f"DP shards: epoch {epoch} no rank read {len(missing)} samples {missing[:10]} "
                                    f"({allowed})")


#: a deviation of more than this many standard deviations from a weight fails (false alarms: ~1e-4 per check)
Z = 4.0


def mixture_deviation(ids: list, weights: tuple[float, ...], sizes: tuple[int, ...]) -> str | None:
    """Over the prefix of one epoch before any source ran out, is each source's share consistent
    with its weight (binomial, ``Z`` standard deviations)? None: yes, or too short to tell."""
    counts = [0] * len(sizes)
    prefix = 0
    for sid in ids:
        k = source_of(sid)
        counts[k] += 1
        prefix += 1
        if counts[k] >= sizes[k]:
            break
    if prefix < 12:
        return None
    total = sum(weights)
    for k, w in enumerate(weights):
        p = w / total
        sd = math.sqrt(prefix * p * (1 - p)) or 1.0
        if abs(counts[k] - prefix * p) > Z * sd + 1:
            return (f"source {k} has {counts[k]} of the first {prefix} samples (before a source ran out), "
                    f"weight {p:.3f} expects {prefix * p:.1f} +- {Z * sd:.1f}")
    return None


def check_mixture(make, sc: StreamScenario, *, ids_of, codec: str, weights: tuple[float, ...],
                  epoch_end: str = "open") -> None:
    """The mixture's weights hold in every epoch of the uninterrupted run and of the resumed one."""
    plain = run_stream(make, replace(sc, checkpoints=(), restore_at_epoch_end=False), ids_of=ids_of, codec=codec)
    resumed = run_stream(make, with_boundaries(sc, plain), ids_of=ids_of, codec=codec, epoch_end=epoch_end)
    for name, t, where in (("uninterrupted", plain, "no checkpoint"), ("resumed", resumed, schedule(sc))):
        for epoch in range(sc.epochs):
            if epoch == 0 and sc.break_after is not None:
                continue
            bad = mixture_deviation(t.epoch_ids(epoch), weights, sc.sources)
            if bad:
                raise PropertyViolation(f"mixture: epoch {epoch} of the {name} run ({where}): {bad}")
