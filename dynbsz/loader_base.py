"""What both loader runtimes share: the epoch lifecycle, steps, checkpoint checks, and the
arguments of the ``StatefulDataLoader`` underneath.

``EpochLoader`` owns the current epoch and moving to the next, the live step iterator (held
weakly), closing, turning micro-batches into ``Step``s, and the checks every runtime runs on
its dataset and configuration. A runtime (``dynbsz.loader.DynamicBatchLoader`` for
runtime='main', ``dynbsz.worker_runtime.WorkerRuntimeLoader`` for runtime='worker') supplies
the epoch's steps and its own checkpoint format.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
import weakref
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
import torch.distributed as dist
from torch.utils.data import Dataset, IterableDataset
from torchdata.stateful_dataloader import StatefulDataLoader

from .config import PackerConfig
from .errors import ConfigError, StateMismatchError, check_int
from .gates import Gate, resolve_gate
from .loader_config import RUNTIMES, LoaderConfig
from .packer import MicroBatch


def default_tokens(sample: Any) -> int:
    """Token length of a sample: its ``tokens`` field, else the length of its ``input_ids``."""
    if isinstance(sample, Mapping):
        if "tokens" in sample:
            return sample["tokens"]
        if "input_ids" in sample:
            return len(sample["input_ids"])
    raise ConfigError("cannot tell the token length of a sample: give it a 'tokens' or 'input_ids' field, "
                      "or pass tokens_fn=... to build_loader")


def default_source(sample: Any) -> Any:
    return sample.get("source") if isinstance(sample, Mapping) else None


def identity(batch: Any) -> Any:
    """collate_fn of the inner loader: hand what was fetched over untouched (module level: picklable
    under spawn)."""
    return batch


@dataclass(frozen=True)
class Step:
    """One optimizer step's worth of micro-batches."""

    index: int                          # steps delivered before this one, all epochs
    epoch: int
    micro_batches: tuple[MicroBatch, ...]
    data: tuple | None                  # collate_fn(micro_batch) for each, when a collate_fn is given
    partial: bool                       # fewer micro-batches than micro_batches_per_step (end of epoch)

    @property
    def sample_ids(self) -> list:
        return [sid for mb in self.micro_batches for sid in mb.ids]


class StepIterator:
    """The iterator ``iter(loader)`` returns. The loader only holds it weakly, so dropping it
    frees the inner torch iterator (and its workers) at once instead of at the next GC cycle,
    when forked workers could inherit it."""

    __slots__ = ("_gen", "__weakref__")

    def __init__(self, gen: Iterator[Step]):
        self._gen = gen

    def __iter__(self) -> "StepIterator":
        return self

    def __next__(self) -> Step:
        return next(self._gen)

    def close(self) -> None:
        self._gen.close()


@contextlib.contextmanager
def torchdata_quiet():
    """Silence torchdata's construction-time log lines: its in_order=False caveat is already warned
    about, with what dynbsz does about it, by ``LoaderConfig.resolved()``. One warning, in one place."""
    log = logging.getLogger("torchdata.stateful_dataloader.stateful_dataloader")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="'set_vital' is deprecated")
            yield
    finally:
        log.setLevel(level)


def inner_loader(dataset: Dataset | IterableDataset, config: LoaderConfig, **kw: Any) -> StatefulDataLoader:
    """The ``StatefulDataLoader`` a runtime runs on, with the knobs of ``config`` (resolved) and
    whatever the runtime adds (its sampler, batch size). Its state is never loaded: dynbsz
    checkpoints what was delivered, not torchdata's counts. With a reorder buffer torch runs out
    of order and dynbsz puts the order back (``dynbsz.sequencer``).

    So torchdata's own snapshots are off (``snapshot_every_n_steps=0``): at its default of one per
    step, every dispatch serializes the sampler, every worker sends its state with every batch, and
    the main process merges it, 120-140 us of main-process CPU a batch (40% of torch's hand-out on
    zero-cost samples, docs/ordering.md) for a state nothing reads. The in-order modes dispatch only
    on hand-out, so that time is the workers' idle time."""
    kw.update(num_workers=config.num_workers, persistent_workers=config.persistent_workers,
              in_order=config.in_order and not config.reorder_buffer, pin_memory=config.pin_memory,
              timeout=config.timeout_s, collate_fn=identity, snapshot_every_n_steps=0)
    if config.num_workers:
        kw.update(prefetch_factor=config.prefetch_factor, multiprocessing_context=config.start_method)
    with torchdata_quiet():
        return StatefulDataLoader(dataset, **kw)


def _check_callable(name: str, fn: Any, signature: str) -> None:
    if fn is not None and not callable(fn):
        raise ConfigError(f"{name} must be a callable {signature}, got {type(fn).__name__}")


def check_cost_source(config: LoaderConfig, meta_fn: Callable | None,
                      cost_fn: Callable | None) -> Callable[[Mapping], float] | None:
    """What turns a sample's metadata into seconds for order='balanced' (``cost_fn``, else the config's
    cost model); a cost source given where nothing reads it is refused, not ignored, and one that is not
    callable is refused here rather than at the first estimate."""
    _check_callable("meta_fn", meta_fn, "index -> dict (the sample's metadata)")
    _check_callable("cost_fn", cost_fn, "metadata dict -> seconds (the sample's estimated decode cost)")
    if config.order != "balanced":
        given = [name for name, fn in (("meta_fn", meta_fn), ("cost_fn", cost_fn)) if fn is not None]
        if given:
            raise ConfigError(f"{' and '.join(given)} feed order='balanced' only, and this loader has "
                              f"order={config.order!r} (runtime={config.runtime!r}); set LoaderConfig(order='balanced') "
                              "(runtime='main') or drop them")
        return None
    if meta_fn is None:
        raise ConfigError("order='balanced' needs meta_fn=... (index -> dict of cheap metadata: tokens, source, "
                          "bytes) passed to build_loader, to estimate decode costs before the epoch")
    if cost_fn is not None and config.cost_model is not None:
        raise ConfigError("order='balanced' got both cost_fn and LoaderConfig(cost_model=...); give one of them")
    if cost_fn is None and config.cost_model is None:
        raise ConfigError("order='balanced' needs decode-cost estimates: LoaderConfig(cost_model=...) (python -m "
                          "dynbsz profile fits one) or cost_fn=... (meta -> seconds) passed to build_loader")
    return cost_fn if cost_fn is not None else config.cost_model.estimate


def check_token_parity(config: LoaderConfig, process_group: Any) -> Any:
    """The process group whose ranks' token counts ``max_tokens`` sums: it must exist and have
    ``dp_size`` ranks, or ranks would stop at different steps and hang in their next collective."""
    if config.max_tokens is None or config.dp_size == 1:
        return None
    if not (dist.is_available() and dist.is_initialized()):
        raise ConfigError(f"max_tokens={config.max_tokens} with dp_size={config.dp_size} sums the tokens every rank "
                          "trained, through torch.distributed: call torch.distributed.init_process_group() before "
                          "build_loader (or pass process_group=...), or bound the run with max_steps")
    size = dist.get_world_size(process_group)
    if size != config.dp_size:
        raise ConfigError(f"max_tokens sums token counts over the process group, which has {size} ranks, but "
                          f"dp_size={config.dp_size}; pass process_group= the data-parallel group")
    return process_group


def all_ranks_sum(value: int, group: Any) -> int:
    """One all-reduce of an integer over ``group`` (on the GPU under NCCL, which has no CPU tensors)."""
    device = "cuda" if dist.get_backend(group) == "nccl" else "cpu"
    t = torch.tensor([value], dtype=torch.int64, device=device)
    dist.all_reduce(t, group=group)
    return int(t.item())


def state_format(runtime: str) -> str:
    """The name of a runtime's checkpoint format: each runtime writes its own."""
    return f"dynbsz.loader.{runtime}/1"


def dataset_identity(dataset: Any) -> dict[str, Any]:
    """The fingerprint entry that names a dataset's content: ``{"dataset": dataset.fingerprint()}``
    when the dataset has a ``fingerprint()`` method (a short string that changes when its samples
    do), else nothing, and only its size is checked. Without it a checkpoint of another dataset
    of the same size would resume silently, over the wrong samples."""
    fingerprint = getattr(dataset, "fingerprint", None)
    if not callable(fingerprint):
        return {}
    value = fingerprint()
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{type(dataset).__name__}.fingerprint() must return a non-empty string that names the "
                          f"dataset's content (it is stored in loader checkpoints), got {value!r}")
    return {"dataset": value}


def check_loader_state(state: Any, runtime: str, fingerprint: dict[str, Any]) -> None:
    """Reject anything but a checkpoint of this runtime with this fingerprint (dataset size, seed,
    DP layout, packing), naming the setting that differs."""
    expected = state_format(runtime)
    formats = {state_format(r): r for r in RUNTIMES}
    got = state.get("format") if isinstance(state, dict) else type(state).__name__
    if got not in formats:
        raise StateMismatchError(f"not a dynbsz loader checkpoint (expected format {expected!r}, got {got!r})")
    if got != expected:
        raise StateMismatchError(f"checkpoint was made with runtime={formats[got]!r} (format {got!r}), this loader "
                                 f"has runtime={runtime!r}; build the loader with the checkpoint's runtime")
    saved = state["fingerprint"]
    diffs = [f"{k}: checkpoint={saved.get(k)!r}, current={v!r}" for k, v in fingerprint.items() if saved.get(k) != v]
    if diffs:
        raise StateMismatchError("cannot resume: the checkpoint was made with different settings (" + "; ".join(diffs)
                                 + "); resuming would lose or repeat samples. Rebuild the loader with the "
                                 "checkpoint's settings")


class EpochLoader(ABC):
    """The epoch lifecycle both runtimes share. A subclass provides ``_run`` (the current epoch's
    steps), ``_done``, ``_reset_progress``, ``_progress_note`` and its checkpoint."""

    #: The runtime a subclass implements ('main' or 'worker'); its checkpoints carry it.
    runtime: str

    def __init__(self, dataset: Any, packer_config: PackerConfig | None, gate: Gate | str | None,
                 config: LoaderConfig, *, collate_fn: Callable | None, tokens_fn: Callable[[Any], int],
                 source_fn: Callable[[Any], Any], process_group: Any = None):
        """The checks and settings both runtimes share; a subclass runs its own checks first."""
        if config.runtime != self.runtime:
            raise ConfigError(f"{type(self).__name__} is the runtime={self.runtime!r} loader, got "
                              f"LoaderConfig(runtime={config.runtime!r}); use build_loader() to pick the runtime")
        if not (hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__")):
            raise ConfigError(f"runtime={self.runtime!r} reads a map-style dataset (__len__ and __getitem__), got "
                              f"{type(dataset).__name__}")
        self.config = config.resolved()
        self.dataset = dataset
        self.num_samples = len(dataset)
        if self.num_samples < self.config.dp_size:
            raise ConfigError(f"dataset has {self.num_samples} samples, fewer than dp_size={self.config.dp_size}: "
                              "some ranks would read nothing")
        self.packer_config = packer_config
        self.gate: Gate | None = None
        if packer_config is not None:
            self.gate = resolve_gate("fixed" if gate is None else gate, budget=packer_config.budget,
                                     context=self.config.gate_context())
        elif gate is not None:
            raise ConfigError(f"gate={gate!r} was given with packer_config=None: with dynamic batching off there is "
                              "no packer for a gate to open; pass packer_config=PackerConfig(budget=...) to pack, "
                              "or leave gate=None for a plain loader")
        self.collate_fn = collate_fn
        self.tokens_fn = tokens_fn
        self.source_fn = source_fn
        self.epoch = 0
        self.steps = 0
        self.tokens_trained = 0     # all ranks together (max_tokens); this rank's alone without it
        self._token_group = check_token_parity(self.config, process_group)
        self._started = False
        self._finished = False
        self._after_yield = False      # the last thing that happened was a step handed to the caller
        self._live: weakref.ref | None = None   # the running epoch iterator, if any (weak: no cycle)
        self._dl: StatefulDataLoader | None = None

    @abstractmethod
    def _done(self) -> bool:
        """The current epoch has delivered everything."""

    @abstractmethod
    def _reset_progress(self) -> None:
        """Forget the current epoch's progress (a new epoch starts)."""

    @abstractmethod
    def _progress_note(self) -> str:
        """Where the current epoch stands, for error messages."""

    @abstractmethod
    def _run(self) -> Iterator[Step]:
        """The current epoch's remaining steps."""

    @abstractmethod
    def _fingerprint(self) -> dict[str, Any]:
        """What a checkpoint must match to be resumed by this loader (runtime included)."""

    def epoch_length(self) -> int:
        """Samples this rank reads per epoch: positions dp_rank, dp_rank + dp_size, ... of the order."""
        return len(range(self.config.dp_rank, self.num_samples, self.config.dp_size))

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch to iterate. A no-op for the current epoch, so a restored loader keeps its place."""
        check_int("epoch", epoch, minimum=0)
        if epoch == self.epoch:
            return
        if self._started and not self._done():
            raise ConfigError(f"set_epoch({epoch}) while epoch {self.epoch} is unfinished ({self._progress_note()}): "
                              "iterate the loader to the end of the epoch first; switching now would drop those "
                              "samples")
        self._start_epoch(epoch)

    def _start_epoch(self, epoch: int) -> None:
        self._stop()
        self.epoch = epoch
        self._reset_progress()
        self._started = self._finished = self._after_yield = False

    def _stop(self) -> None:
        """Stop the running epoch iterator; non-persistent workers exit, persistent ones stay for
        the next epoch."""
        live = self._live() if self._live is not None else None
        self._live = None
        if live is not None:
            live.close()
        if not self.config.persistent_workers:
            self._dl = None

    def close(self) -> None:
        """Stop iterating and shut every worker down, persistent ones included. Progress is kept:
        iterating again starts fresh workers and continues after the last handed-out step."""
        self._stop()
        self._dl = None

    def __iter__(self) -> Iterator[Step]:
        """Iterate the rest of the current epoch. After a finished epoch, the next one starts.

        Dropping the iterator mid-epoch loses nothing: what was prefetched but not handed out is
        produced again by the next iterator, as after a restore.
        """
        live = self._live() if self._live is not None else None
        if live is not None:
            return live
        if self._finished:
            self._start_epoch(self.epoch + 1)
        else:
            self._before_run()
        it = StepIterator(self._run())
        self._live = weakref.ref(it)
        return it

    def _before_run(self) -> None:
        """Hook: prepare to continue an epoch whose previous iterator was dropped."""

    @property
    def stopped(self) -> bool:
        """The run's bound is reached (``max_steps`` or ``max_tokens``): iterating yields nothing more.
        The loop for a bounded run: ``while not loader.stopped: for step in loader: ...``."""
        c = self.config
        return (c.max_steps is not None and self.steps >= c.max_steps) or \
            (c.max_tokens is not None and self.tokens_trained >= c.max_tokens)

    def _at_max_steps(self) -> bool:
        return self.stopped

    def _emit(self, mbs: list[MicroBatch], partial: bool, datas: list | None = None) -> Iterator[Step]:
        if datas is None and self.collate_fn is not None:
            datas = [self.collate_fn(mb) for mb in mbs]
        step = Step(self.steps, self.epoch, tuple(mbs), tuple(datas) if datas is not None else None, partial)
        self.steps += 1
        tokens = sum(mb.total_tokens for mb in mbs)
        if self.config.max_tokens is not None and self.config.dp_size > 1:
            tokens = all_ranks_sum(tokens, self._token_group)   # every rank, once per step, in step
        self.tokens_trained += tokens
        self._after_yield = True
        yield step
        self._after_yield = False

    def _restore_common(self, state: dict[str, Any]) -> None:
        """Check a checkpoint and restore what every runtime keeps: epoch, steps, where the epoch is."""
        check_loader_state(state, self.runtime, self._fingerprint())
        self.close()   # fresh workers, like torchdata: nothing stale survives a restore
        self.epoch, self.steps = state["epoch"], state["steps"]
        self.tokens_trained = state["tokens_trained"]
        self._started, self._finished = state["started"], state["finished"]

    def _state_common(self) -> dict[str, Any]:
        return {"format": state_format(self.runtime), "fingerprint": self._fingerprint(), "epoch": self.epoch,
                "started": self._started, "finished": self._finished, "steps": self.steps,
                "tokens_trained": self.tokens_trained}
