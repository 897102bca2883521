"""Trainer models: how one real trainer drives a loader, literally, so a verdict is about the loader.

A loader failure is a claim about someone's code only if a trainer that really exists sees it. A
*trainer model* is a small literal copy of one trainer's calls on its dataloader, written from the
trainer's source at a pinned version (``TrainerModel.cites``): when it calls ``set_epoch``, ``iter``,
``next``, ``state_dict`` and ``load_state_dict``, which checkpoint it keeps, how a restarted job
decides the epoch and step it is in, and how it bounds an epoch.

``TrainerModel.run(make, scenario, preempt_after=...)`` drives a loader built by ``make(scenario)``
(any loader target's factory) through the scenario's epochs as that trainer would; each entry of
``preempt_after`` kills the job right after that global step (the n-th preemption fires the first
time the job reaches its step), and a new job restarts from the trainer's latest checkpoint as the
trainer restarts. It returns the steps that *survive* into the final run: a step trained after the
latest checkpoint and before a kill is redone by the next job, so it is dropped. ``judge`` compares
those with the same trainer's uninterrupted run, as ``dynbsz chaos`` judges a kill -9: sample for
sample where the loader promises order, each sample exactly once per epoch otherwise.

The models here:

* ``torchdata``: the documented ``StatefulDataLoader`` contract (its README and tutorial): a
  checkpoint after any step, a fresh loader restored before the next ``iter()`` re-enters that epoch.
* ``veomni``: VeOmni 0.1.12's ``BaseTrainer.train`` with its ``CheckpointerCallback``.
* ``adversarial``: every order the loader API allows (``properties.loader_props.run_schedule``:
  restores into fresh loaders at any step, double restores, a checkpoint right after a restore,
  re-entering a restored epoch). No trainer is known to do all of it; it is kept because it finds
  real bugs too, and a failure only it shows is a *contract gap*, not a bug (``classify``).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Callable

from .errors import PropertyViolation
from .loader_props import Transcript, default_ids_of, roundtrip, run_schedule
from .scenarios import LoaderScenario

#: a step the trainer trained: (global step, epoch, ids per micro-batch)
Trained = tuple[int, int, tuple[tuple, ...]]


@dataclass(frozen=True)
class TrainerModel:
    """One trainer's way of driving a loader. ``run(make, scenario, preempt_after, ids_of, codec,
    steps_per_epoch)`` returns the surviving steps as a Transcript; ``steps_per_epoch`` is the
    trainer's own epoch bound where it has one (VeOmni's ``train_steps``), else None."""

    name: str
    cites: str
    summary: str
    run: Callable[..., Transcript]
    epoch_bound: bool = False     # the trainer bounds an epoch by its own step count (steps_per_epoch)


def _veomni_run(make: Callable[[LoaderScenario], Any], scenario: LoaderScenario, *, preempt_after=(),
                ids_of=default_ids_of, codec: str = "json", steps_per_epoch: int | None = None,
                save_steps: int = 1, save_epochs: int = 1) -> Transcript:
    # Mirrors veomni 0.1.12, trainer/base.py:926-970 (train), 850-857 (train_step: global_step += 1 before
    # next(), so a StopIteration still counts a step) and trainer/callbacks/checkpoint_callback.py:46-57
    # (save every save_steps global steps and at the end of every save_epochs-th epoch unless that step was
    # just saved), 86-96 (resume: start_epoch = global_step // train_steps, start_step = global_step %
    # train_steps, load_state_dict, and an eager iter() when start_step == 0) and 106-115 (the checkpoint
    # holds train_dataloader.state_dict()).
    if steps_per_epoch is None or steps_per_epoch <= 0:
        raise ValueError(f"trainer 'veomni' bounds an epoch by train_steps: steps_per_epoch must be > 0, "
                         f"got {steps_per_epoch!r}")
    train_steps = steps_per_epoch
    kills = sorted(preempt_after)
    trained: list[Trained] = []
    checkpoint: tuple[int, Any] | None = None     # (global_step, loader state): the latest one written
    global_step, start_epoch, start_step = 0, 0, 0
    loader = make(scenario)
    try:
        while True:
            last_saved = -1

            def save():
                nonlocal checkpoint, last_saved
                checkpoint = (global_step, roundtrip(loader.state_dict(), codec))
                last_saved = global_step

            killed = False
            for epoch in range(start_epoch, scenario.epochs):
                loader.set_epoch(epoch)
                it = iter(loader)
                for _ in range(start_step, train_steps):
                    global_step += 1
                    try:
                        step = next(it)
                    except StopIteration:
                        break
                    trained.append((global_step, epoch, ids_of(step)))
                    if save_steps and global_step % save_steps == 0:
                        save()
                    if kills and global_step >= kills[0]:
                        kills.pop(0)
                        killed = True
                        break
                if killed:
                    break
                it = None
                if save_epochs and (epoch + 1) % save_epochs == 0 and global_step != last_saved:
                    save()
                start_step = 0
            if not killed:
                break
            # the job dies; the next one loads the latest checkpoint into a freshly built loader
            it = None
            loader.close()
            loader = make(scenario)
            if checkpoint is None:
                trained, global_step, start_epoch, start_step = [], 0, 0, 0
                continue
            global_step, state = checkpoint
            trained = [t for t in trained if t[0] <= global_step]
            start_epoch, start_step = global_step // train_steps, global_step % train_steps
            loader.load_state_dict(state)
            if start_step == 0:
                iter(loader)
    finally:
        loader.close()
    return Transcript([(epoch, ids) for _, epoch, ids in trained])


def _torchdata_run(make: Callable[[LoaderScenario], Any], scenario: LoaderScenario, *, preempt_after=(),
                   ids_of=default_ids_of, codec: str = "json", steps_per_epoch: None = None) -> Transcript:
    # torchdata's documented use (stateful_dataloader/README.md "Saving and loading state", v0.11.0, and the
    # Stateful DataLoader tutorial): state_dict() between steps inside `for batch in dataloader`, and on resume a
    # freshly built loader gets load_state_dict(state) before `for batch in dataloader` resumes ("state_dict /
    # load_state_dict ... operate on the previous/next iterator requested from the dataloader"). Across epochs
    # the trainer calls set_epoch(e) before each epoch's iter(), keeps its epoch counter beside the loader's
    # state, and on a restart re-enters the saved epoch (which may have nothing left) before moving on. It has no
    # epoch bound of its own (steps_per_epoch is taken for the common signature only), and since it checkpoints
    # after every step, a kill always has a checkpoint to restart from.
    kills = sorted(preempt_after)
    trained: list[Trained] = []
    checkpoint: tuple[int, int, Any] | None = None     # (global step, epoch, loader state)
    global_step, start_epoch = 0, 0
    loader = make(scenario)
    try:
        while True:
            killed = False
            for epoch in range(start_epoch, scenario.epochs):
                loader.set_epoch(epoch)
                for step in loader:
                    global_step += 1
                    trained.append((global_step, epoch, ids_of(step)))
                    checkpoint = (global_step, epoch, roundtrip(loader.state_dict(), codec))
                    if kills and global_step >= kills[0]:
                        kills.pop(0)
                        killed = True
                        break
                if killed:
                    break
            if not killed:
                break
            loader.close()
            loader = make(scenario)
            global_step, start_epoch, state = checkpoint
            trained = [t for t in trained if t[0] <= global_step]
            loader.load_state_dict(state)
    finally:
        loader.close()
    return Transcript([(epoch, ids) for _, epoch, ids in trained])


def _adversarial_run(make: Callable[[LoaderScenario], Any], scenario: LoaderScenario, *, preempt_after=(),
                     ids_of=default_ids_of, codec: str | None = None, steps_per_epoch: int | None = None,
                     ) -> Transcript:
    # A restore into a fresh loader right after each preempted step (and nowhere else), re-entering the restored
    # epoch; with steps_per_epoch, epoch 0 is cut short there (run_schedule's break_after).
    sc = replace(scenario, checkpoints=tuple(sorted(preempt_after)), restore_at_epoch_end=False)
    return run_schedule(make, sc, ids_of=ids_of, codec=codec, break_after=steps_per_epoch)


VEOMNI = TrainerModel(
    name="veomni",
    cites="veomni 0.1.12: trainer/base.py:850-857, 926-970; trainer/callbacks/checkpoint_callback.py:46-57, 86-115",
    summary="BaseTrainer.train: set_epoch(e), iter(), at most train_steps next() an epoch (StopIteration ends it "
            "early and still counts a global step); checkpoints every step and at each epoch end; a restart "
            "loads the latest, resumes at epoch global_step // train_steps, step global_step % train_steps, "
            "and calls iter() at once when that step is 0",
    run=_veomni_run,
    epoch_bound=True,
)
TORCHDATA = TrainerModel(
    name="torchdata",
    cites="torchdata v0.11.0: torchdata/stateful_dataloader/README.md (Saving and loading state); "
          "docs/source/stateful_dataloader_tutorial.rst",
    summary="the documented pattern: state_dict() after every step inside `for batch in loader`; a restart "
            "builds a fresh loader, load_state_dict(), set_epoch(saved epoch) and `for batch in loader` "
            "re-enters the saved epoch, then moves on",
    run=_torchdata_run,
)
ADVERSARIAL = TrainerModel(
    name="adversarial",
    cites="no trainer: every order the loader API allows (properties.loader_props.run_schedule)",
    summary="restores into fresh loaders at any step, step 0 and epoch ends, double restores, a checkpoint "
            "written right after a restore; re-enters the restored epoch",
    run=_adversarial_run,
)
TRAINERS: dict[str, TrainerModel] = {t.name: t for t in (TORCHDATA, VEOMNI, ADVERSARIAL)}


def get(name: str) -> TrainerModel:
    try:
        return TRAINERS[name]
    except KeyError:
        raise ValueError(f"--trainer {name!r} is not a trainer model; allowed values: {', '.join(TRAINERS)}") from None


def needs_epoch_bound(name: str) -> bool:
    return get(name).epoch_bound


_SELECTED: list[tuple[str, ...] | None] = [None]


@contextlib.contextmanager
def only(names: tuple[str, ...] | None):
    """Run the properties under these trainer models alone (``--trainer``; None: every one a target declares)."""
    for name in names or ():
        get(name)
    _SELECTED.append(tuple(names) if names else None)
    try:
        yield
    finally:
        _SELECTED.pop()


def selected(declared: tuple[str, ...]) -> tuple[str, ...]:
    """The declared trainers a run uses now: all of them, or those ``only`` selected."""
    chosen = _SELECTED[-1]
    return tuple(declared) if chosen is None else tuple(t for t in declared if t in chosen)


def judge(uninterrupted: Transcript, resumed: Transcript, *, in_order: bool) -> str | None:
    """What a preempted run got wrong against the same trainer's uninterrupted run, or None: in order,
    the surviving steps must be the uninterrupted ones; out of order, every epoch must hold the same
    samples exactly once (the order within an epoch is free)."""
    if in_order:
        for k, (a, b) in enumerate(zip(uninterrupted.steps, resumed.steps)):
            if a != b:
                return f"step {k} differs: uninterrupted {a} vs preempted {b}"
        if len(uninterrupted.steps) != len(resumed.steps):
            return f"{len(uninterrupted.steps)} steps uninterrupted vs {len(resumed.steps)} after preemption"
        return None
    epochs = sorted({e for e, _ in uninterrupted.steps} | {e for e, _ in resumed.steps})
    for e in epochs:
        want, got = Counter(uninterrupted.epoch_ids(e)), Counter(resumed.epoch_ids(e))
        if want != got:
            lost = sorted((want - got).elements())
            extra = sorted((got - want).elements())
            return f"epoch {e}: lost {lost[:10]}, repeated or foreign {extra[:10]}"
    return None


def check_under(trainer: TrainerModel, make, scenario: LoaderScenario, preempt_after, *, ordered: bool | None = None,
                **kw) -> None:
    """Raise PropertyViolation when preempting ``trainer`` after those steps changes what it trains
    (``ordered``: judged step for step; default: where the scenario is in_order)."""
    # The loaders are built from the scenario as drawn (its checkpoint schedule included: a target may refuse
    # one it documents no guarantee for); only ``preempt_after`` decides where the job dies.
    plain = trainer.run(make, scenario, **kw)
    resumed = trainer.run(make, scenario, preempt_after=tuple(preempt_after), **kw)
    why = judge(plain, resumed, in_order=scenario.in_order if ordered is None else ordered)
    if why:
        raise PropertyViolation(f"under trainer {trainer.name!r}, preempted after global steps "
                                f"{sorted(preempt_after)}: {why}")


__all__ = ["ADVERSARIAL", "TORCHDATA", "TRAINERS", "TrainerModel", "VEOMNI", "check_under", "get", "judge",
           "needs_epoch_bound", "only", "selected"]
