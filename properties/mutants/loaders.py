"""Broken loaders: each subclasses (or wraps) the real classes of ``dynbsz/loader.py`` and
``dynbsz/worker_runtime.py`` and overrides as little as possible; dynbsz itself is never
edited. A mutant is a loader factory ``(LoaderScenario) -> loader`` standing in for one of
dynbsz's loader components (``loader:main`` or ``loader:worker``), so every example that
kills it replays on dynbsz under the same component name.
"""

from __future__ import annotations

from typing import Any

from dynbsz.datasets import TraceMapDataset
from dynbsz.gates import FixedGate
from dynbsz.loader import DynamicBatchLoader
from dynbsz.worker_runtime import PackingStream, WorkerRuntimeLoader

from ..loader_targets import loader_config, packer_config, trace_of
from ..registry import mutant
from ..scenarios import LoaderScenario


def _build(cls: type, sc: LoaderScenario):
    """The mutant class on the scenario's dataset, built exactly as dynbsz_loader builds dynbsz's."""
    return cls(TraceMapDataset(trace_of(sc)), packer_config(sc), FixedGate(sc.buffer_size), loader_config(sc))


def _factory(cls: type):
    def make(sc: LoaderScenario):
        return _build(cls, sc)

    make.__name__ = f"make_{cls.__name__}"
    make.__doc__ = cls.__doc__
    return make


def loader_mutant(name: str, replaces: str):
    """``@mutant`` for a loader class standing in for dynbsz's loader component ``replaces``: its
    ``make`` builds the class on the scenario's dataset (``_build``)."""
    return mutant(name, component="loader", replaces=replaces, factory=_factory)


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


@loader_mutant("set-epoch-ignored", replaces="loader:main")
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


@loader_mutant("epoch-read-once", replaces="loader:worker")
class EpochReadOnce(WorkerRuntimeLoader):
    """WorkerRuntimeLoader whose workers run ``EpochAtConstruction`` streams."""

    stream_class = EpochAtConstruction


@loader_mutant("rotation-not-restored", replaces="loader:worker")
class RotationNotRestored(WorkerRuntimeLoader):
    """A restore resumes every stream from its own state but forgets to rotate the stream-to-worker
    mapping (rr_offset): torch's round robin restarts at worker 0, so in_order=True hands the
    streams out in another order than the uninterrupted run."""

    def _plan_from_progress(self) -> dict:
        return {**super()._plan_from_progress(), "rr_offset": 0}
