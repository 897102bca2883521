"""The production loader: torchdata's StatefulDataLoader underneath, dynamic batching on top.

What it adds to a plain ``StatefulDataLoader``:

* **Epochs are a pure function of (seed, epoch)**, computed in the main process
  and shipped to workers as explicit keys, so ``set_epoch`` reaches persistent
  workers and epoch e's order is the same with persistent and non-persistent
  workers (``dynbsz.order``).
* **The checkpoint is what was delivered**, not a count of batches: a
  ``DeliveryLedger`` of epoch positions plus the packer's buffer by sample id.
  With in_order=True a resume continues the stream sample for sample; with
  in_order=False it re-issues exactly the undelivered samples of the epoch.
  (torchdata's own state replays *counts* of batches, which out of order loses
  some samples and repeats others; we never load state into the inner loader.)
* **Main-process dynamic batching** with VeOmni's loop semantics: put every
  sample of a fetched batch, then cut at most one micro-batch, then fetch again;
  at the end of an epoch the packer is drained, never dropped.

``build_loader`` picks the runtime: ``main`` (this module) or ``worker``
(``dynbsz.worker_runtime``: a packer inside each worker).
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

from torch.utils.data import Dataset, Sampler
from torchdata.stateful_dataloader import StatefulDataLoader

from .config import PackerConfig
from .errors import ConfigError, SampleFetchError, StateMismatchError, check_int
from .gates import Gate, resolve_gate
from .loader_config import LoaderConfig
from .order import DeliveryLedger, rank_order
from .packer import GreedyPacker, MicroBatch

STATE_FORMAT = "dynbsz.loader/1"


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


class _StepIterator:
    """The iterator ``iter(loader)`` returns. The loader only holds it weakly, so dropping it
    frees the inner torch iterator (and its workers) at once instead of at the next GC cycle,
    when forked workers could inherit it."""

    __slots__ = ("_gen", "__weakref__")

    def __init__(self, gen: Iterator[Step]):
        self._gen = gen

    def __iter__(self) -> "_StepIterator":
        return self

    def __next__(self) -> Step:
        return next(self._gen)

    def close(self) -> None:
        self._gen.close()


def as_list(batch: list) -> list:
    """collate_fn of the inner loader: keep samples as they are (module level: picklable under spawn)."""
    return batch


class _KeyedDataset(Dataset):
    """Fetches ``dataset[index]`` for a key (epoch, position, index, refetch) and returns (key, sample)."""

    def __init__(self, dataset: Any):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, key: tuple) -> tuple:
        epoch, position, index, _ = key
        try:
            sample = self.dataset[index]
        except Exception as e:
            raise SampleFetchError(f"fetching sample {index} (epoch {epoch}, position {position}) failed: "
                                   f"{type(e).__name__}: {e}") from e
        return key, sample


def _key_batches(epoch: int, order, ledger: DeliveryLedger, refetch: list, size: int) -> Iterator[list]:
    """Keys still to fetch this epoch, in batches. A free function: the inner loader's iterator
    keeps this generator, and a generator of a loader method would keep the loader (a cycle)."""
    for i in range(0, len(refetch), size):
        yield [(epoch, -1, sid, True) for sid in refetch[i:i + size]]
    batch = []
    for p in ledger.remaining(len(order)):
        batch.append((epoch, p, int(order[p]), False))
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


class _KeyBatches(Sampler):
    """Batch sampler over the keys its owner still has to fetch this epoch, read at iter() time.

    Buffered samples to re-read after a restore come first, in batches of their own, so the
    batches of new samples keep the boundaries they had in the uninterrupted run.
    """

    def __init__(self, owner: "DynamicBatchLoader"):
        # Weak: the owner holds the inner loader, which holds this sampler. A cycle would leave
        # the inner loader (and its worker handles) to the garbage collector, which may run it
        # inside a freshly forked worker.
        self._owner = weakref.ref(owner)

    def __iter__(self) -> Iterator[list]:
        owner = self._owner()
        return _key_batches(owner.epoch, owner._rank_order(), owner._ledger, owner._take_refetch(),
                            owner.config.fetch_batch_size)

    def __len__(self) -> int:
        return self._owner()._num_key_batches()


@contextlib.contextmanager
def _torchdata_quiet():
    # torchdata logs its in_order=False caveat at construction; LoaderConfig.resolved() already
    # warned, with what dynbsz does about it. One warning, in one place.
    log = logging.getLogger("torchdata.stateful_dataloader.stateful_dataloader")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="'set_vital' is deprecated")
            yield
    finally:
        log.setLevel(level)


class EpochLoader(ABC):
    """What both runtimes share: the current epoch and moving to the next, the live iterator (held
    weakly), closing, and turning micro-batches into steps. A subclass provides ``_run`` (the
    current epoch's steps), ``_done``, ``_reset_progress`` and ``_progress_note``."""

    config: LoaderConfig
    collate_fn: Callable | None

    def _init_epochs(self) -> None:
        self.epoch = 0
        self.steps = 0
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
        it = _StepIterator(self._run())
        self._live = weakref.ref(it)
        return it

    def _before_run(self) -> None:
        """Hook: prepare to continue an epoch whose previous iterator was dropped."""

    def _emit(self, mbs: list[MicroBatch], partial: bool, datas: list | None = None) -> Iterator[Step]:
        if datas is None and self.collate_fn is not None:
            datas = [self.collate_fn(mb) for mb in mbs]
        step = Step(self.steps, self.epoch, tuple(mbs), tuple(datas) if datas is not None else None, partial)
        self.steps += 1
        self._after_yield = True
        yield step
        self._after_yield = False


class DynamicBatchLoader(EpochLoader):
    """Main-runtime loader over a map-style dataset. Use ``build_loader`` to construct one."""

    def __init__(self, dataset: Any, packer_config: PackerConfig | None, gate: Gate | str | None = None,
                 config: LoaderConfig = LoaderConfig(), *, collate_fn: Callable | None = None,
                 tokens_fn: Callable[[Any], int] = default_tokens, source_fn: Callable[[Any], Any] = default_source):
        if not (hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__")):
            raise ConfigError(f"the main runtime needs a map-style dataset (__len__ and __getitem__), got "
                              f"{type(dataset).__name__}")
        if config.runtime != "main":
            raise ConfigError("DynamicBatchLoader is the runtime='main' loader; use build_loader() for runtime='worker'")
        self.config = config.resolved()
        self.dataset = dataset
        self.num_samples = len(dataset)
        if self.num_samples < self.config.dp_size:
            raise ConfigError(f"dataset has {self.num_samples} samples, fewer than dp_size={self.config.dp_size}: "
                              "some ranks would read nothing")
        self.packer = None
        if packer_config is not None:
            self.packer = GreedyPacker(packer_config, resolve_gate("fixed" if gate is None else gate,
                                                                   budget=packer_config.budget))
        self.collate_fn = collate_fn
        self.tokens_fn = tokens_fn
        self.source_fn = source_fn
        self._init_epochs()
        self._ledger = DeliveryLedger()
        self._order_cache: tuple[int, Any] | None = None
        self._refetch: list = []       # buffered ids whose payloads must be re-read after a restore

    # ---- epochs ------------------------------------------------------------------------------

    def _rank_order(self):
        if self._order_cache is None or self._order_cache[0] != self.epoch:
            c = self.config
            self._order_cache = (self.epoch, rank_order(self.num_samples, c.seed, self.epoch, c.dp_rank, c.dp_size,
                                                        c.shuffle))
        return self._order_cache[1]

    def epoch_length(self) -> int:
        """Samples this rank reads per epoch."""
        return len(self._rank_order())

    def _done(self) -> bool:
        """Everything of the current epoch was delivered, even if the generator has not noticed yet."""
        return self._finished or (self._ledger.count() == self.epoch_length() and not self._refetch
                                  and (self.packer is None or len(self.packer) == 0))

    def _reset_progress(self) -> None:
        self._ledger = DeliveryLedger()

    def _progress_note(self) -> str:
        return (f"{self._ledger.count()}/{self.epoch_length()} samples delivered, "
                f"{len(self.packer) if self.packer else 0} buffered")

    # ---- iteration ---------------------------------------------------------------------------

    def _inner(self) -> StatefulDataLoader:
        if not self.config.persistent_workers:
            # A non-persistent StatefulDataLoader keeps its previous iterator until the new one is
            # built, i.e. across the fork of the new workers; the children then tear it down a
            # second time. Release it first: one inner loader per epoch.
            self._dl = None
        if self._dl is None:
            c = self.config
            kw: dict[str, Any] = dict(num_workers=c.num_workers, persistent_workers=c.persistent_workers,
                                      in_order=c.in_order, pin_memory=c.pin_memory, timeout=c.timeout_s,
                                      collate_fn=as_list)
            if c.num_workers:
                kw.update(prefetch_factor=c.prefetch_factor, multiprocessing_context=c.start_method)
            with _torchdata_quiet():
                self._dl = StatefulDataLoader(_KeyedDataset(self.dataset), batch_sampler=_KeyBatches(self), **kw)
        return self._dl

    def _take_refetch(self) -> list:
        # Not cleared here: torch builds the batch-sampler iterator twice per loader iterator
        # (__init__ and _reset) and keeps the second. Entries leave the list when they arrive.
        return list(self._refetch)

    def _num_key_batches(self) -> int:
        size = self.config.fetch_batch_size
        left = self.epoch_length() - self._ledger.count()
        return -(-len(self._refetch) // size) + -(-left // size)

    def _run(self) -> Iterator[Step]:
        packer = self.packer
        max_steps = self.config.max_steps
        mbps = packer.config.micro_batches_per_step if packer is not None else 1
        fetch_first = self._after_yield
        self._pending_refetch = set(self._refetch)
        it = iter(self._inner())
        self._started = True
        pending: list[MicroBatch] = []
        while True:
            if max_steps is not None and self.steps >= max_steps:
                return
            if packer is not None and not fetch_first and not self._pending_refetch and packer.ready():
                pending.append(packer.cut())
                if len(pending) == mbps:
                    yield from self._emit(pending, partial=False)
                    pending = []
            fetch_first = False
            try:
                batch = next(it)
            except StopIteration:
                break
            if packer is None:
                yield from self._emit([self._plain_micro_batch(batch)], partial=False)
                continue
            if not self._absorb(batch):
                fetch_first = True  # only re-read payloads: not a loop turn of the uninterrupted run
        if packer is not None:
            # End of the epoch's stream: drain one micro-batch at a time, so a checkpoint taken
            # between drained steps still holds the rest in the packer.
            for mb in packer.drain():
                pending.append(mb)
                if len(pending) == mbps:
                    yield from self._emit(pending, partial=False)
                    pending = []
                    if max_steps is not None and self.steps >= max_steps:
                        return
            if pending:
                packer.start_new_step()
                yield from self._emit(pending, partial=True)
        self._finished = True
        self._after_yield = False

    def _absorb(self, batch: list) -> bool:
        """Put a fetched batch into the packer. False if it only carried re-read payloads."""
        packer, ledger = self.packer, self._ledger
        tokens_fn, source_fn = self.tokens_fn, self.source_fn
        fresh = False
        for (_, position, index, refetch), sample in batch:
            if refetch:
                packer.attach_payload(index, sample)
                self._pending_refetch.discard(index)
                self._refetch.remove(index)
                continue
            fresh = True
            ledger.mark(position)
            packer.put(index, tokens_fn(sample), None, source_fn(sample), sample)
        return fresh

    def _plain_micro_batch(self, batch: list) -> MicroBatch:
        ids, toks, srcs, payloads = [], [], [], []
        for (_, position, index, _), sample in batch:
            self._ledger.mark(position)
            ids.append(index)
            toks.append(int(self.tokens_fn(sample)))
            srcs.append(self.source_fn(sample))
            payloads.append(sample)
        return MicroBatch(tuple(ids), tuple(toks), tuple(toks), tuple(srcs), tuple(payloads), self.steps, self.steps,
                          0, False)

    # ---- checkpointing -----------------------------------------------------------------------

    def _fingerprint(self) -> dict[str, Any]:
        c = self.config
        return {"runtime": c.runtime, "num_samples": self.num_samples, "seed": c.seed, "shuffle": c.shuffle,
                "dp_size": c.dp_size, "dp_rank": c.dp_rank, "fetch_batch_size": c.fetch_batch_size,
                "packing": self.packer is not None}

    def state_dict(self) -> dict[str, Any]:
        """Exact, JSON-serializable state; take it between steps."""
        return {
            "format": STATE_FORMAT,
            "fingerprint": self._fingerprint(),
            "epoch": self.epoch,
            "started": self._started,
            "finished": self._finished,
            "after_yield": self._after_yield,
            "ledger": self._ledger.state_dict(),
            "steps": self.steps,
            "packer": self.packer.state_dict() if self.packer is not None else None,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        check_loader_state(state, self._fingerprint())
        self.close()
        self._dl = None  # fresh workers, like torchdata: nothing stale survives a restore
        self.epoch = state["epoch"]
        self._ledger = DeliveryLedger.from_state(state["ledger"])
        self.steps = state["steps"]
        self._started, self._finished = state["started"], state["finished"]
        self._after_yield = state["after_yield"]
        if self.packer is not None:
            self.packer.load_state_dict(state["packer"])
            self._refetch = self.packer.buffered_ids()


def check_loader_state(state: Any, fingerprint: dict[str, Any]) -> None:
    """Reject a checkpoint from another dataset, seed, DP layout or runtime with the setting named."""
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise StateMismatchError(f"not a dynbsz loader checkpoint (expected format {STATE_FORMAT!r})")
    saved = state["fingerprint"]
    if saved.get("runtime") != fingerprint["runtime"]:
        raise StateMismatchError(f"checkpoint was made with runtime={saved.get('runtime')!r}, this loader has "
                                 f"runtime={fingerprint['runtime']!r}; build the loader with the checkpoint's runtime")
    diffs = [f"{k}: checkpoint={saved.get(k)!r}, current={v!r}" for k, v in fingerprint.items() if saved.get(k) != v]
    if diffs:
        raise StateMismatchError("cannot resume: the checkpoint was made with different settings (" + "; ".join(diffs)
                                 + "); resuming would lose or repeat samples. Rebuild the loader with the "
                                 "checkpoint's settings")


def build_loader(dataset: Any, packer_config: PackerConfig | None = None, gate: Gate | str | None = None,
                 config: LoaderConfig = LoaderConfig(), **kwargs: Any):
    """A dynamic-batching loader for ``dataset``; ``config.runtime`` picks where the packer runs.

    ``packer_config=None`` gives a plain loader (one fetched batch per step) with the same
    epoch and checkpoint guarantees.
    """
    if config.runtime == "worker":
        from .worker_runtime import WorkerRuntimeLoader

        return WorkerRuntimeLoader(dataset, packer_config, gate, config, **kwargs)
    return DynamicBatchLoader(dataset, packer_config, gate, config, **kwargs)
