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
import functools
import pickle
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Callable

from hypothesis.errors import HypothesisException

from .errors import PropertyViolation, Unsupported
from .loader_props import Transcript, default_ids_of, restore_events, roundtrip, run_schedule
from .scenarios import LoaderScenario
from .watchdog import Watch

#: a step the trainer trained: (global step, epoch, ids per micro-batch)
Trained = tuple[int, int, tuple[tuple, ...]]


def _preempted(kills: list[int], step: int) -> bool:
    """The job dies right after ``step`` if the next preemption is due (each fires once)."""
    if kills and step >= kills[0]:
        kills.pop(0)
        return True
    return False


def under_trainer(name: str) -> str:
    """How every failure and refusal under a trainer model names it; ``properties.verdicts`` reads the trainer back
    from exactly this phrase, so a message phrased otherwise would be credited to no trainer."""
    return f"under trainer {name!r}"


def _watch(trainer: str, scenario: LoaderScenario, kills: list[int], max_steps: int | None = None) -> Watch:
    """The no-hang bounds (``properties.watchdog``) for one trainer's run (``max_steps``: the trainer's own)."""
    rank = f", rank {scenario.dp_rank} of {scenario.dp_size}" if scenario.dp_size > 1 else ""
    # "under trainer 'NAME'" as every other failure under a trainer says it: the verdict reads the trainer from it
    return Watch(scenario, f"{under_trainer(trainer)}, preempted after global steps {list(kills)}{rank}",
                 max_steps=max_steps)


def _survivors(trained: list[Trained], step: int) -> list[Trained]:
    """What a restart from the checkpoint of global step ``step`` keeps: the later steps are redone."""
    return [t for t in trained if t[0] <= step]


def _transcript(trained: list[Trained], **kw) -> Transcript:
    return Transcript([(epoch, ids) for _, epoch, ids in trained], **kw)


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
    no_epochs: bool = False       # one iter() per job: the run is the loader's first pass, all of it epoch 0


def _veomni_run(make: Callable[[LoaderScenario], Any], scenario: LoaderScenario, *, preempt_after=(),
                ids_of=default_ids_of, codec: str = "json", steps_per_epoch: int | None = None,
                save_steps: int = 1, save_epochs: int = 1) -> Transcript:
    # Mirrors veomni 0.1.12, trainer/base.py:926-970 (train), 850-857 (train_step: global_step += 1 before
    # next(), so a StopIteration still counts a step) and trainer/callbacks/checkpoint_callback.py:46-57
    # (save every save_steps global steps and at the end of every save_epochs-th epoch unless that step was
    # just saved), 86-96 (resume: start_epoch = global_step // train_steps, start_step = global_step %
    # train_steps, load_state_dict, and an eager iter() when start_step == 0) and 106-115 (the checkpoint
    # holds train_dataloader.state_dict()). Checked against that loop itself, run as installed
    # (tests/test_veomni_trainer_real.py).
    if steps_per_epoch is None or steps_per_epoch <= 0:
        raise ValueError(f"trainer 'veomni' bounds an epoch by train_steps: steps_per_epoch must be > 0, "
                         f"got {steps_per_epoch!r}")
    train_steps = steps_per_epoch
    kills = sorted(preempt_after)
    trained: list[Trained] = []
    checkpoint: tuple[int, Any] | None = None     # (global_step, loader state): the latest one written
    global_step, start_epoch, start_step = 0, 0, 0
    watch = _watch("veomni", scenario, kills)
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
                it = watch.iter(loader, epoch)
                for _ in range(start_step, train_steps):
                    global_step += 1
                    try:
                        step = next(it)
                    except StopIteration:
                        break
                    trained.append((global_step, epoch, ids_of(step)))
                    if save_steps and global_step % save_steps == 0:
                        save()
                    if _preempted(kills, global_step):
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
            trained = _survivors(trained, global_step)
            start_epoch, start_step = global_step // train_steps, global_step % train_steps
            loader.load_state_dict(state)
            if start_step == 0:
                watch.iter(loader, start_epoch)
    finally:
        loader.close()
    return _transcript(trained)


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
    watch = _watch("torchdata", scenario, kills)
    loader = make(scenario)
    try:
        while True:
            killed = False
            for epoch in range(start_epoch, scenario.epochs):
                loader.set_epoch(epoch)
                for step in watch.iter(loader, epoch):
                    global_step += 1
                    trained.append((global_step, epoch, ids_of(step)))
                    checkpoint = (global_step, epoch, roundtrip(loader.state_dict(), codec))
                    if _preempted(kills, global_step):
                        killed = True
                        break
                if killed:
                    break
            if not killed:
                break
            loader.close()
            loader = make(scenario)
            global_step, start_epoch, state = checkpoint
            trained = _survivors(trained, global_step)
            loader.load_state_dict(state)
    finally:
        loader.close()
    return _transcript(trained)


def _sized_len(loader: Any) -> int | None:
    # lightning.fabric.utilities.data.sized_len on the object the user hands Lightning: an adapter's wrapped
    # loader (``.dl``, properties.loader_targets.DelegatingLoader) where it has one, else the loader itself
    target = getattr(loader, "dl", loader)
    try:
        return len(target)
    except (TypeError, NotImplementedError):
        return None


class _LightningFetcher:
    """lightning 2.6.5 pytorch/loops/fetchers.py _PrefetchDataFetcher(prefetch_batches=1): ``length``
    is min(len(loader), limit_train_batches) (or the limit alone for an unsized loader); with a
    length it fetches on demand and is done after ``length`` batches, never asking the iterator for
    the StopIteration; without one it keeps one batch fetched ahead to know the last batch."""

    def __init__(self, loader: Any, limit: int | None, watch: Watch):
        self.limit, self.length, self.watch = limit, None, watch
        self.iterator, self.ahead, self.fetched, self.done = None, [], 0, False

    def iter(self, loader: Any, epoch: int) -> None:
        # __iter__ then reset(): the length is read again at every iter(), after any load_state_dict
        self.iterator = self.watch.iter(loader, epoch)
        n = _sized_len(loader)
        self.length = (min(n, self.limit) if self.limit is not None else n) if n is not None else self.limit
        self.fetched, self.ahead, self.done = 0, [], self.length == 0
        if self.length is None:
            self.ahead = self._fetch(1)

    def _fetch(self, n: int) -> list:
        out = []
        for _ in range(n):
            try:
                out.append(next(self.iterator))
            except StopIteration:
                self.done = True
                break
            self.fetched += 1
            if self.length is not None:
                self.done = self.fetched >= self.length
        return out

    def next(self) -> Any:
        if self.ahead:
            batch = self.ahead.pop(0)
            self.ahead = self._fetch(1)
            self.done = not self.ahead
            return batch
        if self.done:
            raise StopIteration
        got = self._fetch(1)
        if not got:
            raise StopIteration
        return got[0]


def _lightning_fault(fetcher: _LightningFetcher, last: bool) -> str | None:
    """What a restart from a step checkpoint written now does wrong with any loader, even one that
    resumes exactly (checked on real Lightning with torchdata's StatefulDataLoader:
    tests/test_trainers_lightning.py)."""
    if fetcher.ahead:
        return ("Lightning had fetched the next batch ahead (an unsized loader, fetchers.py _PrefetchDataFetcher), "
                "so the loader's state counts a batch the trainer never trained and a resume skips it")
    if last and fetcher.length is not None:
        return ("the epoch's last batch of a known length (len() or limit_train_batches): Lightning never asked "
                "the iterator for its StopIteration, and resumes the next epoch on the iterator made right after "
                "load_state_dict (RESTARTED_ON_LAST, no fresh iter()), which an exactly resuming loader fills "
                "with what was left of the old epoch: nothing, or the rest the limit cut short")
    return None


def _lightning_run(make: Callable[[LoaderScenario], Any], scenario: LoaderScenario, *, preempt_after=(),
                   ids_of=default_ids_of, codec: str = "pickle", steps_per_epoch: None = None,
                   limit_train_batches: int | None = None, every_n_train_steps: int = 0) -> Transcript:
    # Mirrors lightning 2.6.5 (paths under src/lightning/): one trainer.fit() per job, max_epochs =
    # scenario.epochs, max_steps=-1. pytorch/loops/fit_loop.py:208-217, 276 (setup_data: the fit's one iter()
    # before its first epoch), 443-445 (on_advance_start: set_epoch(epoch_progress.processed), which Lightning
    # calls on the loader's sampler: fabric/utilities/data.py:415-436; the adapters' set_epoch is that hook),
    # training_epoch_loop.py:245-246 (every later epoch: iter() after set_epoch), 249 (a resumed epoch fetches
    # only the batches not yet done), fetchers.py (the fetcher above). Checkpoints (ModelCheckpoint,
    # callbacks/model_checkpoint.py): every_n_train_steps > 0 saves at on_train_batch_end and then not at
    # epoch ends; 0 (its default, no validation) saves at on_train_epoch_end, after processed += 1. The
    # loader's state_dict() is taken at the save (fit_loop.py:520-525). Resume (fit_loop.py:133-140, 272,
    # 552-556, 346-418): the state is loaded, before the fit's iter(), only when the checkpoint's epoch is
    # unfinished (ready or started != processed): an epoch-end checkpoint's loader state is never loaded, and
    # the job starts epoch processed with a fresh loader; a step checkpoint at the epoch's last batch has
    # processed bumped on reset and its next epoch draws from the iterator made right after the load.
    kills = sorted(preempt_after)
    trained: list[Trained] = []
    # (global step, processed epochs, batches done in the unfinished epoch or None when finished, state,
    # what Lightning itself gets wrong when it restarts from this checkpoint)
    checkpoint: tuple[int, int, int | None, Any, str | None] | None = None
    faults: list[str] = []
    order_lost: str | None = None
    global_step, processed, done_in_epoch, state = 0, 0, 0, None
    watch = _watch("lightning", scenario, kills)
    loader = make(scenario)
    try:
        while True:
            fetcher = _LightningFetcher(loader, limit_train_batches, watch)
            if state is not None:
                loader.load_state_dict(state)
            fetcher.iter(loader, processed)
            first, killed = True, False
            while processed < scenario.epochs:
                epoch = processed
                loader.set_epoch(epoch)
                if not first:
                    fetcher.iter(loader, epoch)
                ready = done_in_epoch if first else 0
                if fetcher.length is not None and ready:
                    fetcher.fetched = ready   # training_epoch_loop.py:249: fetched starts at the batches done
                    fetcher.done = fetcher.fetched >= fetcher.length
                first = False
                while not fetcher.done or fetcher.ahead:
                    try:
                        batch = fetcher.next()
                    except StopIteration:
                        break
                    global_step += 1
                    ready += 1
                    trained.append((global_step, epoch, ids_of(batch)))
                    last = fetcher.done and not fetcher.ahead
                    if every_n_train_steps and global_step % every_n_train_steps == 0:
                        # is_last_batch: reset() counts the epoch processed and the next job starts the next one
                        checkpoint = (global_step, epoch + 1 if last else epoch, None if last else ready,
                                      roundtrip(loader.state_dict(), codec), _lightning_fault(fetcher, last))
                    if _preempted(kills, global_step):
                        killed = True
                        break
                if killed:
                    break
                processed += 1
                done_in_epoch = 0
                if not every_n_train_steps:
                    checkpoint = (global_step, processed, None, roundtrip(loader.state_dict(), codec), None)
            if not killed:
                break
            fetcher = None
            loader.close()
            loader = make(scenario)
            if checkpoint is None:
                trained, global_step, processed, done_in_epoch, state = [], 0, 0, 0, None
                continue
            global_step, processed, unfinished, saved, fault = checkpoint
            if fault and processed < scenario.epochs:
                faults.append(f"restarted from the checkpoint after global step {global_step}: {fault}")
            trained = _survivors(trained, global_step)
            done_in_epoch = unfinished or 0
            # restarting = epoch_unfinished (fit_loop.py:133-140): a finished epoch's loader state is not loaded,
            # except a step checkpoint at the last batch (RESTARTED_ON_LAST: its counters show it unfinished)
            state = saved if unfinished is not None or every_n_train_steps else None
            if state is None and order_lost is None:
                order_lost = (f"restarted from the epoch-end checkpoint after global step {global_step}, Lightning "
                              "loads no loader state and tells the fresh loader its epoch only through its "
                              "sampler's set_epoch: a loader (or sampler) that counts epochs itself starts its "
                              "count over, so the order of later epochs is the trainer's")
    finally:
        loader.close()
    return _transcript(trained, trainer_faults=tuple(faults), order_lost=order_lost)


def _torchtitan_run(make: Callable[[LoaderScenario], Any], scenario: LoaderScenario, *, preempt_after=(),
                    ids_of=default_ids_of, codec: str = "pickle", steps_per_epoch: None = None,
                    training_steps: int | None = None, interval: int = 1) -> Transcript:
    # Mirrors torchtitan 0.3.0: trainer.py Trainer.train (load, then a lazy batch_generator: iter() at the first
    # next(); `while self.step < training.steps: self.step += 1; train_step; checkpointer.save(self.step)`; a
    # StopIteration becomes DataloaderExhaustedError and ends training without a save), no epochs and no
    # set_epoch: one iter() per job. components/checkpointer (DCP): save when step % interval == 0 (the last
    # step's save is model-only: no loader state); a job that finds a checkpoint loads it before anything
    # else, and DCP's load asks the Stateful for state_dict() as a template before load_state_dict()
    # (torch/distributed/checkpoint/state_dict_loader.py); components/dataloader.py pickles the loader's
    # state per DP rank. The run is the loader's first pass: the transcript's steps are all epoch 0.
    kills = sorted(preempt_after)
    trained: list[Trained] = []
    checkpoint: tuple[int, bytes] | None = None
    step = 0
    watch = _watch("torchtitan", scenario, kills, max_steps=training_steps)
    loader = make(scenario)
    try:
        while True:
            it, killed = None, False
            while training_steps is None or step < training_steps:
                step += 1
                try:
                    if it is None:
                        it = watch.iter(loader, 0)
                    batch = next(it)
                except StopIteration:
                    break   # "Ran out of data; last step was canceled.": neither trained nor saved
                trained.append((step, 0, ids_of(batch)))
                last = training_steps is not None and step == training_steps
                if interval and step % interval == 0 and not last:
                    checkpoint = (step, pickle.dumps(roundtrip(loader.state_dict(), codec)))
                if _preempted(kills, step):
                    killed = True
                    break
            if not killed:
                break
            it = None
            loader.close()
            loader = make(scenario)
            if checkpoint is None:
                trained, step = [], 0
                continue
            step, blob = checkpoint
            trained = _survivors(trained, step)
            loader.state_dict()
            loader.load_state_dict(pickle.loads(blob))
    finally:
        loader.close()
    return _transcript(trained)


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
_LIGHTNING_CITES = ("lightning 2.6.5 (be98784a), src/lightning/: pytorch/loops/fit_loop.py:133-140, 208-217, 272, 276, "
                    "346-418, 443-445, 520-530, 552-556; pytorch/loops/training_epoch_loop.py:245-249; "
                    "pytorch/loops/fetchers.py; pytorch/callbacks/model_checkpoint.py; fabric/utilities/data.py:415-436")
LIGHTNING = TrainerModel(
    name="lightning",
    cites=_LIGHTNING_CITES,
    summary="Trainer.fit with ModelCheckpoint's default (a checkpoint at every on_train_epoch_end): the fit's "
            "iter() before set_epoch in its first epoch, set_epoch then iter() later; an epoch of min(len, "
            "limit_train_batches) batches, abandoned without a StopIteration when the length is known, one "
            "batch fetched ahead when not; a restart from an epoch-end checkpoint never loads the loader's "
            "state and starts the next epoch on a fresh loader",
    run=_lightning_run,
)
LIGHTNING_STEPS = TrainerModel(
    name="lightning-steps",
    cites=_LIGHTNING_CITES,
    summary="Trainer.fit with ModelCheckpoint(every_n_train_steps=1): a checkpoint at every on_train_batch_end "
            "and none at epoch ends; a restart loads the loader's state before the fit's iter(), re-enters an "
            "unfinished epoch for its remaining batches, and after a checkpoint at an epoch's last batch "
            "starts the next epoch on the iterator made right after the load",
    run=functools.partial(_lightning_run, every_n_train_steps=1),
)
TORCHTITAN = TrainerModel(
    name="torchtitan",
    cites="torchtitan 0.3.0: torchtitan/trainer.py (Trainer.train, batch_generator, should_continue_training); "
          "components/checkpointer/dcp.py (_should_save, load); components/dataloader.py "
          "(ParallelAwareDataloader.state_dict / load_state_dict); torch 2.13 "
          "distributed/checkpoint/state_dict_loader.py",
    summary="no epochs: one iter() per job, created at the first next(); a checkpoint every step (interval=1) "
            "through DCP; a restart asks state_dict() then load_state_dict() before anything else; "
            "running out of data ends training",
    run=_torchtitan_run,
    no_epochs=True,
)
TRAINERS: dict[str, TrainerModel] = {t.name: t for t in (TORCHDATA, LIGHTNING, LIGHTNING_STEPS, TORCHTITAN,
                                                        VEOMNI, ADVERSARIAL)}


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


def adversarial_skip(component: Any) -> str | None:
    """Why the properties that run the adversarial schedule skip ``component`` (None: they run): it does not
    declare that model, or ``--trainer`` did not select it."""
    if "adversarial" not in component.trainers:
        return (f"runs the adversarial schedule, which {component.name} does not declare (trainers: "
                f"{', '.join(component.trainers)})")
    if "adversarial" not in selected(component.trainers):
        return "runs the adversarial schedule, which --trainer did not select"
    return None


def real_trainers(component: Any) -> tuple[str, ...]:
    """The real trainer models (not ``adversarial``) the component declares that this run uses."""
    return tuple(t for t in selected(component.trainers) if t != "adversarial")


def no_real_trainer(component: Any) -> str | None:
    """Why the properties that preempt real trainers skip ``component`` (None: they run)."""
    if not real_trainers(component):
        return (f"the component declares no trainer model but the adversarial schedule (trainers: "
                f"{', '.join(component.trainers)}), or --trainer selected none of them")
    return None


def judge(uninterrupted: Transcript, resumed: Transcript, *, in_order: bool, lossy: bool = False,
          allowed: set | None = None) -> str | None:
    """What a preempted run got wrong against the same trainer's uninterrupted run, or None: in order,
    the surviving steps must be the uninterrupted ones; out of order, every epoch must hold the same
    samples exactly once (the order within an epoch is free); ``lossy`` (a loader that documents losing
    samples on a resume, e.g. a shuffle buffer's), every epoch must still hold each sample at most once,
    and only samples of the data (``allowed``; default: any the uninterrupted run delivered, since which
    samples a drop_last leaves out of an epoch depends on its order)."""
    if lossy:
        allowed = set(allowed) if allowed is not None else {sid for e, _ in uninterrupted.steps
                                                            for sid in uninterrupted.epoch_ids(e)}
        for e in sorted({e for e, _ in resumed.steps}):
            got = Counter(resumed.epoch_ids(e))
            twice = sorted(k for k, c in got.items() if c > 1)
            foreign = sorted(set(got) - allowed)
            if twice or foreign:
                return f"epoch {e}: delivered {twice[:10]} more than once, {foreign[:10]} foreign"
        return None
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


def _run_naming_trainer(trainer: TrainerModel, make, scenario: LoaderScenario, preempt_after: tuple, **kw) -> Transcript:
    """``trainer.run``, with whatever the loader raises reported under the trainer and schedule it raised in:
    a crash is a reproduction under that trainer, and the verdict (``properties.verdicts``) reads the
    trainer's name from the message."""
    try:
        return trainer.run(make, scenario, preempt_after=preempt_after, **kw)
    except (PropertyViolation, Unsupported, HypothesisException):
        raise
    except Exception as e:  # noqa: BLE001 - whatever the library raised under this trainer
        where = f"preempted after global steps {sorted(preempt_after)}" if preempt_after else "uninterrupted"
        raise PropertyViolation(f"{under_trainer(trainer.name)}, {where}: the loader raised "
                                f"{type(e).__name__}: {' '.join(str(e).split())}") from e


def check_under(trainer: TrainerModel, make, scenario: LoaderScenario, preempt_after, *, ordered: bool | None = None,
                fixed_epochs: bool = True, lossy: bool = False, allowed: set | None = None, **kw) -> None:
    """Raise PropertyViolation when preempting ``trainer`` after those steps changes what it trains
    (``ordered``: judged step for step; default: where the scenario is in_order). ``fixed_epochs``:
    an epoch holds the same samples whatever its order (False for a weighted draw, or a drop_last whose
    dropped samples depend on the shuffle), so it can still be judged where the trainer gave up the order;
    ``lossy``: the loader documents losing samples on a resume, so only "at most once" is judged."""
    # The loaders are built from the scenario as drawn (its checkpoint schedule included: a target may refuse
    # one it documents no guarantee for); only ``preempt_after`` decides where the job dies.
    plain = _run_naming_trainer(trainer, make, scenario, (), **kw)
    # where the preemptions fall in the uninterrupted run (at an epoch end, mid-epoch): the coverage tally
    restore_events(plain, [(k, plain.steps[k - 1][0]) for k in preempt_after if 0 < k <= len(plain.steps)])
    resumed = _run_naming_trainer(trainer, make, scenario, tuple(preempt_after), **kw)
    if resumed.trainer_faults:
        raise Unsupported(f"{under_trainer(trainer.name)} the trainer itself mis-resumes here, with any loader: "
                          f"{resumed.trainer_faults[0]}")
    if lossy:
        why = judge(plain, resumed, in_order=False, lossy=True, allowed=allowed)
        if why:
            raise PropertyViolation(f"{under_trainer(trainer.name)}, preempted after global steps "
                                    f"{sorted(preempt_after)}: {why} (a resume may lose samples here, as documented, "
                                    "but deliver none twice)")
        return
    if resumed.order_lost and not fixed_epochs:
        raise Unsupported(f"{under_trainer(trainer.name)} the trainer gives up the order here "
                          f"({resumed.order_lost}), and which samples this loader's epoch holds depends on it")
    in_order = scenario.in_order if ordered is None else ordered
    why = judge(plain, resumed, in_order=in_order and not resumed.order_lost)
    if why:
        raise PropertyViolation(f"{under_trainer(trainer.name)}, preempted after global steps "
                                f"{sorted(preempt_after)}: {why}"
                                + (f" (judged per epoch, not step for step: {resumed.order_lost})"
                                   if in_order and resumed.order_lost else ""))


__all__ = ["ADVERSARIAL", "LIGHTNING", "LIGHTNING_STEPS", "TORCHDATA", "TORCHTITAN", "adversarial_skip", "no_real_trainer",
           "real_trainers", "TRAINERS", "TrainerModel", "VEOMNI", "check_under", "get", "judge",
           "needs_epoch_bound", "only", "selected", "under_trainer"]
