"""Broken loaders: each subclasses (or wraps) the real classes of ``dynbsz/loader.py`` and
``dynbsz/worker_runtime.py`` and overrides as little as possible; dynbsz itself is never
edited. A mutant is a loader factory ``(LoaderScenario) -> loader`` standing in for one of
dynbsz's loader components (``loader:main`` or ``loader:worker``), so every example that
kills it replays on dynbsz under the same component name.
"""

from __future__ import annotations

import copy
import threading
import time
from dataclasses import replace
from typing import Any

import numpy as np
from torch.utils.data import Dataset, get_worker_info

from dynbsz.datasets import TraceMapDataset
from dynbsz.gates import FixedGate
from dynbsz.loader import DynamicBatchLoader
from dynbsz.order import auto_lookahead, balanced_order, epoch_order, loader_order, rank_order, resolve_lookahead
from dynbsz.packing import pack
from dynbsz.sequencer import Sequencer
from dynbsz.worker_runtime import PackingStream, WorkerRuntimeLoader

from ..loader_targets import cost_source, loader_config, packer_config, trace_of
from ..registry import mutant
from ..scenarios import LoaderScenario


def _build(cls: type, sc: LoaderScenario):
    """The mutant class on the scenario's dataset, built exactly as dynbsz_loader builds dynbsz's."""
    extra = cost_source(sc) if issubclass(cls, DynamicBatchLoader) else {}
    return cls(TraceMapDataset(trace_of(sc)), packer_config(sc), FixedGate(sc.buffer_size), loader_config(sc), **extra)


def _factory(cls: type):
    def make(sc: LoaderScenario):
        return _build(cls, sc)

    make.__name__ = f"make_{cls.__name__}"
    make.__doc__ = cls.__doc__
    return make


def loader_mutant(name: str, replaces: str, aims_at: str | None = None, in_order_only: bool = False):
    """``@mutant`` for a loader class standing in for dynbsz's loader component ``replaces``: its
    ``make`` builds the class on the scenario's dataset (``_build``)."""
    return mutant(name, component="loader", replaces=replaces, factory=_factory, aims_at=aims_at,
                  in_order_only=in_order_only)


# ---- main runtime ----------------------------------------------------------------------------

@loader_mutant("resume-by-count", replaces="loader:main")
class CountResumeLoader(DynamicBatchLoader):
    """Checkpoints how many samples were delivered instead of which: a resume skips that many
    positions from the start of the epoch, as a count-based fast-forward does."""

    def state_dict(self):
        state = super().state_dict()
        state["ledger"] = {"watermark": self._ledger.count(), "ahead": []}
        return state


def count_resume_loader(sc: LoaderScenario):
    packer = packer_config(sc)
    return CountResumeLoader(TraceMapDataset(trace_of(sc)), packer, FixedGate(sc.buffer_size),
                             loader_config(sc, runtime="main"))


@loader_mutant("restore-deferred-to-set-epoch", replaces="loader:main", aims_at="exactly_once")
class RestoreDeferredToSetEpoch(DynamicBatchLoader):
    """Applies a loaded state at the next ``set_epoch``, as a wrapper that restores lazily does, and
    until then reports the state it had before the restore (a fresh loader's). Every restore followed
    by ``set_epoch`` and ``iter()`` is exact; a checkpoint written right after the restore saves the
    fresh loader's state, and a restart from that checkpoint starts the run over."""

    _deferred: dict | None = None

    def load_state_dict(self, state):
        self._deferred = state

    def set_epoch(self, epoch):
        if self._deferred is not None:
            state, self._deferred = self._deferred, None
            super().load_state_dict(state)
        super().set_epoch(epoch)


# in_order_only: the kill needs a preemption right after an epoch's last step, and out of order with workers
# how many steps an epoch packs into is arrival timing (ci.flips saw this kill fail 1 run in 2 under load)
@loader_mutant("finished-epoch-restored-as-fresh", replaces="loader:main", aims_at="trainer_resume",
               in_order_only=True)
class FinishedEpochRestoredAsFresh(DynamicBatchLoader):
    """A state written after an epoch's last step restores as that epoch not yet begun, as a loader
    that records only "which epoch" and not "how far" does once the epoch is over: the torchdata
    contract's restart (load_state_dict, set_epoch(saved epoch), iterate) trains that epoch twice."""

    def load_state_dict(self, state):
        super().load_state_dict(state)
        if self._done():
            self._start_epoch(self.epoch)


@loader_mutant("loader-buffer-not-checkpointed", replaces="loader:main")
class BufferNotCheckpointed(DynamicBatchLoader):
    """The loader's checkpoint leaves out the packer's buffer: samples delivered to the packer but
    not yet cut count as delivered and are lost on resume."""

    def state_dict(self):
        state = super().state_dict()
        state["packer"]["buffer"] = {"ids": [], "tokens": [], "physical": [], "sources": []}
        return state


@loader_mutant("refetch-skipped", replaces="loader:main")
class RefetchSkipped(DynamicBatchLoader):
    """After a restore the buffered samples' payloads are never re-read: their ids come back from the
    checkpoint, their data does not (a micro-batch then carries ids without samples)."""

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self._refetch = []


@loader_mutant("ledger-without-ahead", replaces="loader:main")
class LedgerWithoutAhead(DynamicBatchLoader):
    """The ledger is restored from its watermark alone, forgetting the positions delivered ahead of
    it out of order: those are delivered again after the resume."""

    def load_state_dict(self, state):
        super().load_state_dict({**state, "ledger": {**state["ledger"], "ahead": []}})


@loader_mutant("set-epoch-ignored", replaces="loader:main", aims_at="epoch_reshuffle")
class SetEpochIgnored(DynamicBatchLoader):
    """set_epoch() does nothing: a loader reaches later epochs only by running earlier ones out, so a
    trainer that starts (or restarts) at epoch e gets epoch 0's order."""

    def set_epoch(self, epoch: int) -> None:
        return None


@loader_mutant("epoch-not-checkpointed", replaces="loader:main")
class EpochNotCheckpointed(DynamicBatchLoader):
    """The checkpoint does not hold the epoch (torchdata's StatefulDistributedSampler state has no
    epoch either): a resume mid-epoch continues in epoch 0's order."""

    def state_dict(self):
        return {**super().state_dict(), "epoch": 0}


@loader_mutant("step-off-by-one", replaces="loader:main")
class StepOffByOne(DynamicBatchLoader):
    """The checkpoint holds one step fewer than were delivered (VeOmni's main runtime saves the step
    before its increment): the resumed loader renumbers steps and shifts warm-up budgets."""

    def state_dict(self):
        state = super().state_dict()
        state["steps"] = max(0, state["steps"] - 1)
        return state


# ---- worker runtime --------------------------------------------------------------------------

class EpochAtConstruction(PackingStream):
    """Reads the epoch once, when the stream is built, instead of from the shared tensor at every
    iter(): a persistent worker's replica keeps epoch 0 for ever."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.epoch_seen = int(self.control[0])

    def current_epoch(self) -> tuple[int, int]:
        return self.epoch_seen, int(self.control[1])


@loader_mutant("epoch-read-once", replaces="loader:worker", aims_at="epoch_reshuffle")
class EpochReadOnce(WorkerRuntimeLoader):
    """WorkerRuntimeLoader whose workers run ``EpochAtConstruction`` streams."""

    stream_class = EpochAtConstruction


@loader_mutant("rotation-not-restored", replaces="loader:worker", aims_at="loader_stateful")
class RotationNotRestored(WorkerRuntimeLoader):
    """A restore resumes every stream from its own state but forgets to rotate the stream-to-worker
    mapping (rr_offset): torch's round robin restarts at worker 0, so in_order=True hands the
    streams out in another order than the uninterrupted run."""

    def _plan_from_progress(self) -> dict:
        return {**super()._plan_from_progress(), "rr_offset": 0}


class ConsumedAhead(PackingStream):
    """Reports one sample more consumed than its stream had fetched when a micro-batch came out (the
    count read after the generator's look-ahead)."""

    def _item(self, logical: int, seq: int, consumed: int, packer: Any, mb: Any) -> dict:
        return super()._item(logical, seq, consumed + 1, packer, mb)


@loader_mutant("stream-consumed-ahead", replaces="loader:worker")
class StreamConsumedAhead(WorkerRuntimeLoader):
    """WorkerRuntimeLoader whose streams checkpoint one sample too far (``ConsumedAhead``): a resume
    skips the sample after each stream's last cut."""

    stream_class = ConsumedAhead


class UndrainedStream(PackingStream):
    """Runs dynbsz.packing.pack with ``drain=False``: what is buffered when the stream runs out stays in
    the worker's packer and is never handed out."""

    def _stream(self, epoch: int, logical: int, saved: dict | None):
        order = rank_order(len(self.dataset), self.seed, epoch, self.dp_rank, self.dp_size, self.shuffle)
        indices = order[logical::self.num_streams].tolist()
        packer = self.packer_factory(self.packer_config, copy.deepcopy(self.gate))
        consumed, seq = 0, 0
        if saved is not None:
            consumed, seq = saved["consumed"], saved["seq"] + 1
            packer.load_state_dict(saved["packer"])
            for sid in packer.buffered_ids():
                packer.attach_payload(sid, self._fetch(epoch, sid))

        def items():
            nonlocal consumed
            for index in indices[consumed:]:
                sample = self._fetch(epoch, index)
                consumed += 1
                yield [(index, self.tokens_fn(sample), None, self.source_fn(sample), sample)]

        for mb in pack(packer, items(), drain=False):
            yield self._item(logical, seq, consumed, packer, mb)
            seq += 1


@loader_mutant("stream-not-drained", replaces="loader:worker")
class StreamNotDrained(WorkerRuntimeLoader):
    """WorkerRuntimeLoader whose packing loop skips the end-of-stream drain (``UndrainedStream``): each
    worker's last buffered samples are lost every epoch."""

    stream_class = UndrainedStream


@loader_mutant("rank-order-padded", replaces="loader:main", aims_at="dp_shards")
class RankOrderPadded(DynamicBatchLoader):
    """Evens out DP ranks like torch's DistributedSampler: the epoch order is padded by wrapping around
    to a multiple of dp_size before ranks take their slices, so some samples are read by two ranks."""

    def _rank_order(self):
        if self._order_cache is None or self._order_cache[0] != self.epoch:
            c = self.config
            full = epoch_order(self.num_samples, c.seed, self.epoch, c.shuffle)
            padded = np.concatenate([full, full[:self.epoch_length() * c.dp_size - self.num_samples]])
            self._order_cache = (self.epoch, padded[c.dp_rank::c.dp_size])
        return self._order_cache[1]

    def epoch_length(self) -> int:
        return -(-self.num_samples // self.config.dp_size)


@loader_mutant("balanced-lookahead-plus-one", replaces="loader:main", aims_at="balanced_order")
class BalancedLookaheadPlusOne(DynamicBatchLoader):
    """order='balanced' lets a sample move one place further than ``lookahead`` (the deadline test
    off by one)."""

    def _rank_order(self):
        if self.config.order == "balanced" and (self._order_cache is None or self._order_cache[0] != self.epoch):
            wider = replace(self.config, lookahead=self.config.lookahead + 1)
            self._order_cache = (self.epoch, loader_order(self.num_samples, wider, self.epoch, self.cost_estimates()))
        return super()._rank_order()


@loader_mutant("balanced-order-at-restore", replaces="loader:main")
class BalancedOrderAtRestore(DynamicBatchLoader):
    """After a restore the epoch's balanced order is computed for the worker processes running, and a
    restored loader has none yet: the rest of the epoch follows the sampler order, so positions the
    ledger holds as delivered are other samples than the ones delivered."""

    def load_state_dict(self, state):
        super().load_state_dict(state)
        c = self.config
        if c.order == "balanced":
            alive = 0   # len(workers) of a loader that has not iterated since the restore
            self._reorder_after_restore(num_workers=alive, lookahead=resolve_lookahead(c, self.cost_estimates()))

    def _reorder_after_restore(self, *, num_workers: int, lookahead: int) -> None:
        c = self.config
        order = rank_order(self.num_samples, c.seed, self.epoch, c.dp_rank, c.dp_size, c.shuffle)
        self._order_cache = (self.epoch, balanced_order(order, self.cost_estimates()[order], num_workers=num_workers,
                                                        prefetch_factor=c.prefetch_factor or 2, lookahead=lookahead,
                                                        batch_size=c.fetch_batch_size))


@loader_mutant("balanced-auto-at-restore", replaces="loader:main")
class BalancedAutoAtRestore(BalancedOrderAtRestore):
    """lookahead='auto' resolved from the worker processes running, and a restored loader has none
    yet: after a restore the epoch is ordered with lookahead 0 (the sampler's order), so positions
    the ledger holds as delivered are other samples than the ones delivered."""

    def load_state_dict(self, state):
        DynamicBatchLoader.load_state_dict(self, state)
        c = self.config
        if c.order == "balanced" and c.lookahead == "auto":
            alive = 0   # len(workers) of a loader that has not iterated since the restore
            self._reorder_after_restore(num_workers=c.num_workers, lookahead=auto_lookahead(self.cost_estimates(), alive))


class OverflowSequencer(Sequencer):
    """A sequencer that lets an early arrival through, out of order, when holding it would take it over
    its limit (a full buffer "spills" instead of waiting)."""

    __slots__ = ("limit",)

    def __init__(self, expected, limit: int):
        super().__init__(expected)
        self.limit = limit

    def arrive(self, key, item, size: int = 1) -> list:
        if key not in self._held and self._reach(key) and key != self._expected[0] \
                and self.held + size > self.limit:
            self._expected.remove(key)
            self._known.discard(key)
            return [item]
        return super().arrive(key, item, size)


@loader_mutant("reorder-overflow-released", replaces="loader:main", aims_at="reorder_exact")
class ReorderOverflowReleased(DynamicBatchLoader):
    """The reorder buffer releases an early arrival when it is full instead of holding it
    (``OverflowSequencer``): with torch dispatching out of order, in_order=True is then out of order."""

    def _in_sequence(self, it):
        self._sequencer = OverflowSequencer(self._sequencer.unreleased(), self.config.reorder_buffer)
        return super()._in_sequence(it)


@loader_mutant("reorder-marks-on-arrival", replaces="loader:main", aims_at="reorder_exact")
class ReorderMarksOnArrival(DynamicBatchLoader):
    """With a reorder buffer, samples are marked delivered in the ledger when they arrive from the
    workers, not when the sequencer releases them: a checkpoint taken while early arrivals wait counts
    them as delivered, and the resumed loader never delivers them."""

    def _in_sequence(self, it):
        def marked():
            for batch in it:
                for (_, position, _, refetch), _ in batch:
                    if position >= 0 and not refetch:
                        self._ledger.mark(position)
                yield batch

        return super()._in_sequence(marked())

    def _fresh_items(self, it):
        packer = self.packer
        for batch in it:
            fresh = []
            for (_, position, index, refetch), sample in batch:
                if refetch:
                    packer.attach_payload(index, sample)
                    self._pending_refetch.discard(index)
                    self._refetch.remove(index)
                    continue
                if not self.config.reorder_buffer:
                    self._ledger.mark(position)
                fresh.append((index, self.tokens_fn(sample), None, self.source_fn(sample), sample))
            if fresh:
                yield fresh


@loader_mutant("ledger-ahead-as-range", replaces="loader:main")
class LedgerAheadAsRange(DynamicBatchLoader):
    """The checkpoint stores the ledger's positions delivered ahead of the watermark as one range (first
    to last) to keep it small: positions in the gaps count as delivered, and a resume never delivers them."""

    def state_dict(self):
        state = super().state_dict()
        ahead = state["ledger"]["ahead"]
        state["ledger"] = {**state["ledger"], "ahead": list(range(ahead[0], ahead[-1] + 1)) if ahead else []}
        return state


@loader_mutant("max-steps-overshoot", replaces="loader:main", aims_at="dp_step_counts")
class MaxStepsOvershoot(DynamicBatchLoader):
    """The run's bound compares with ``>`` where ``>=`` was meant (EpochLoader.stopped): every rank yields
    max_steps + 1 steps, one step past where the trainer's schedule (and its partners) end."""

    @property
    def stopped(self) -> bool:
        c = self.config
        return (c.max_steps is not None and self.steps > c.max_steps) or \
            (c.max_tokens is not None and self.tokens_trained >= c.max_tokens)


# ---- no hang: loaders that stop without ending (properties.watchdog) -------------------------

@loader_mutant("epoch-never-ends", replaces="loader:main", aims_at="no_hang")
class EpochNeverEnds(DynamicBatchLoader):
    """After an epoch's last step the iterator never raises StopIteration: it goes on yielding empty
    steps, as a loader that pads a short rank with empty steps until told its peers are done does when
    that word never comes. Nothing is lost or repeated, so every safety property would wait forever."""

    def _run(self):
        yield from super()._run()
        while True:
            yield from self._emit([], partial=True)


class _StallsInWorker(Dataset):
    """The dataset, except that worker 0 stops returning samples after its first two: every later
    fetch it is handed sleeps (as a decode stuck on a dead network mount does)."""

    def __init__(self, dataset: Any):
        self.dataset = dataset
        self.fetched = 0

    def __len__(self) -> int:
        return len(self.dataset)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["dataset"], name)

    def __getitem__(self, index: int) -> Any:
        info = get_worker_info()
        if info is not None and info.id == 0:
            self.fetched += 1
            if self.fetched > 2:
                time.sleep(3600)   # killed with its worker when the loader shuts down
        return self.dataset[index]


@loader_mutant("silent-worker", replaces="loader:main", aims_at="no_hang")
class SilentWorker(DynamicBatchLoader):
    """Worker 0 stops delivering after its first two samples (``_StallsInWorker``) while staying alive,
    so torch's check for dead workers never fires: the main process waits for its batch forever."""

    def __init__(self, dataset: Any, *args: Any, **kw: Any):
        super().__init__(_StallsInWorker(dataset), *args, **kw)


@loader_mutant("stuck-rank", replaces="loader:main", aims_at="no_hang")
class StuckRank(DynamicBatchLoader):
    """The last DP rank, done with its epoch, waits for its peers in a collective they never enter (a
    loader that agrees on the epoch's end with an all-reduce its shorter-shard peers skipped): its
    iterator never returns from the epoch's last next()."""

    def _run(self):
        yield from super()._run()
        c = self.config
        if c.dp_size > 1 and c.dp_rank == c.dp_size - 1:
            threading.Event().wait()
