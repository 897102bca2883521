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

* ``veomni``: VeOmni 0.1.12's ``BaseTrainer.train`` with its ``CheckpointerCallback``.
* ``adversarial``: every order the loader API allows (``properties.loader_props.run_schedule``:
  restores into fresh loaders at any step, double restores, a checkpoint right after a restore,
  re-entering a restored epoch). No trainer is known to do all of it; it is kept because it finds
  real bugs too, and a failure only it shows is a *contract gap*, not a bug (``classify``).
"""

from __future__ import annotations

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
    kills = list(sorted(preempt_after))
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


def _adversarial_run(make: Callable[[LoaderScenario], Any], scenario: LoaderScenario, *, preempt_after=(),
                     ids_of=default_ids_of, codec: str | None = None, steps_per_epoch: int | None = None,
                     ) -> Transcript:
    # A restore into a fresh loader right after each preempted step, re-entering the restored epoch; with
    # steps_per_epoch, epoch 0 is cut short there (run_schedule's break_after).
    sc = replace(scenario, checkpoints=tuple(sorted(scenario.checkpoints + tuple(preempt_after))))
    return run_schedule(make, sc, ids_of=ids_of, codec=codec, break_after=steps_per_epoch)


VEOMNI = TrainerModel(
    name="veomni",
    cites="veomni 0.1.12: trainer/base.py:850-857, 926-970; trainer/callbacks/checkpoint_callback.py:46-57, 86-115",
    summary="BaseTrainer.train: set_epoch(e), iter(), at most train_steps next() an epoch (StopIteration ends it "
            "early and still counts a global step); checkpoints every step and at each epoch end; a restart "
            "loads the latest, resumes at epoch global_step // train_steps, step global_step % train_steps, "
            "and calls iter() at once when that step is 0",
    run=_veomni_run,
)
ADVERSARIAL = TrainerModel(
    name="adversarial",
    cites="no trainer: every order the loader API allows (properties.loader_props.run_schedule)",
    summary="restores into fresh loaders at any step, step 0 and epoch ends, double restores, a checkpoint "
            "written right after a restore; re-enters the restored epoch",
    run=_adversarial_run,
)
TRAINERS: dict[str, TrainerModel] = {t.name: t for t in (VEOMNI, ADVERSARIAL)}


def get(name: str) -> TrainerModel:
    try:
        return TRAINERS[name]
    except KeyError:
        raise ValueError(f"--trainer {name!r} is not a trainer model; allowed values: {', '.join(TRAINERS)}") from None


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


def check_under(trainer: TrainerModel, make, scenario: LoaderScenario, preempt_after, **kw) -> None:
    """Raise PropertyViolation when preempting ``trainer`` after those steps changes what it trains."""
    plain = trainer.run(make, replace(scenario, checkpoints=(), restore_at_epoch_end=False), **kw)
    resumed = trainer.run(make, replace(scenario, checkpoints=(), restore_at_epoch_end=False),
                          preempt_after=tuple(preempt_after), **kw)
    why = judge(plain, resumed, in_order=scenario.in_order)
    if why:
        raise PropertyViolation(f"under trainer {trainer.name!r}, preempted after global steps "
                                f"{sorted(preempt_after)}: {why}")


__all__ = ["ADVERSARIAL", "TRAINERS", "TrainerModel", "VEOMNI", "check_under", "get", "judge"]
