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

import time
import weakref
from typing import Any, Callable, Iterator

import numpy as np
from torch.utils.data import Dataset, Sampler
from torchdata.stateful_dataloader import StatefulDataLoader

from .config import PackerConfig
from .costs import costs_digest, estimate_costs
from .errors import SampleFetchError
from .gates import Gate
from .loader_base import (
    EpochLoader,
    Step,
    check_cost_source,
    check_loader_state,
    dataset_identity,
    default_source,
    default_tokens,
    inner_loader,
)
from .loader_config import LoaderConfig
from .order import DeliveryLedger, loader_order, resolve_lookahead
from .packer import GreedyPacker, MicroBatch, Packer, PackerFactory
from .packing import pack
from .sequencer import Sequencer
from .worker_runtime import WorkerRuntimeLoader


class _KeyedDataset(Dataset):
    """Fetches ``dataset[index]`` for a key (epoch, position, index, refetch) and returns (key, sample)."""

    def __init__(self, dataset: Any):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, key: tuple) -> tuple:
        epoch, position, index, _ = key
        if position == PAUSE:
            time.sleep(PAUSE_S)
            return key, None
        try:
            sample = self.dataset[index]
        except Exception as e:
            raise SampleFetchError(f"fetching sample {index} (epoch {epoch}, position {position}) failed: "
                                   f"{type(e).__name__}: {e}") from e
        return key, sample


#: Position of a pause key: no sample, a short sleep in the worker. Dispatched instead of new work
#: while the reorder buffer is full, so early arrivals stop piling up behind a slow sample.
PAUSE = -2
PAUSE_S = 0.002


def _key_batches(epoch: int, order, ledger: DeliveryLedger, refetch: list, size: int,
                 hold: Callable[[], bool] | None = None) -> Iterator[list]:
    """Keys still to fetch this epoch, in batches. A free function: the inner loader's iterator
    keeps this generator, and a generator of a loader method would keep the loader (a cycle).
    While ``hold()`` says so, each dispatch gets a pause instead of the next batch."""
    def batches() -> Iterator[list]:
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

    for batch in batches():
        while hold is not None and hold():
            yield [(epoch, PAUSE, -1, False)]
        yield batch


def _batch_key(first_key: tuple) -> tuple:
    """What identifies a batch within an epoch: its first key's position, index and refetch flag."""
    _, position, index, refetch = first_key
    return position, index, refetch


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
        seq, cap = owner._sequencer, owner.config.reorder_buffer
        # The sequencer, not the loader: a bound method of the owner would close the cycle above.
        hold = (lambda: seq.held >= cap) if cap and seq is not None else None
        return _key_batches(owner.epoch, owner._rank_order(), owner._ledger, owner._take_refetch(),
                            owner.config.fetch_batch_size, hold)

    def __len__(self) -> int:
        return self._owner()._num_key_batches()


class DynamicBatchLoader(EpochLoader):
    """Main-runtime loader over a map-style dataset. Use ``build_loader`` to construct one."""

    runtime = "main"

    def __init__(self, dataset: Any, packer_config: PackerConfig | None, gate: Gate | str | None = None,
                 config: LoaderConfig = LoaderConfig(), *, collate_fn: Callable | None = None,
                 tokens_fn: Callable[[Any], int] = default_tokens, source_fn: Callable[[Any], Any] = default_source,
                 packer_factory: PackerFactory = GreedyPacker, process_group: Any = None,
                 meta_fn: Callable[[int], dict] | None = None, cost_fn: Callable[[dict], float] | None = None):
        super().__init__(dataset, packer_config, gate, config, collate_fn=collate_fn, tokens_fn=tokens_fn,
                         source_fn=source_fn, process_group=process_group)
        self._estimate = check_cost_source(self.config, meta_fn, cost_fn)
        self.meta_fn = meta_fn
        self._cost_estimates: np.ndarray | None = None
        self.packer: Packer | None = None
        self._packer_factory = packer_factory
        if packer_config is not None:
            self.packer = packer_factory(packer_config, self.gate)
        self._ledger = DeliveryLedger()
        self._order_cache: tuple[int, Any] | None = None
        self._refetch: list = []       # buffered ids whose payloads must be re-read after a restore
        self._pending_refetch: set = set()
        self._sequencer: Sequencer | None = None   # reorder_buffer > 0: the running epoch's

    # ---- epochs ------------------------------------------------------------------------------

    def _rank_order(self):
        if self._order_cache is None or self._order_cache[0] != self.epoch:
            costs = self.cost_estimates() if self.config.order == "balanced" else None
            # Lazy: torch's sampler reads it as it dispatches, so no stall before the epoch's first task.
            order = loader_order(self.num_samples, self.config, self.epoch, costs, lazy=True)
            self._order_cache = (self.epoch, order)
        return self._order_cache[1]

    def cost_estimates(self) -> np.ndarray:
        """Estimated decode seconds of every dataset index (order='balanced'): ``cost_fn`` or the cost
        model applied to ``meta_fn(index)``, computed once, in the main process, before any epoch."""
        if self._cost_estimates is None:
            self._cost_estimates = estimate_costs(self.num_samples, self.meta_fn, self._estimate)
        return self._cost_estimates

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
            self._dl = inner_loader(_KeyedDataset(self.dataset), self.config, batch_sampler=_KeyBatches(self))
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
        if self._at_max_steps():
            return
        self._pending_refetch = set(self._refetch)
        order = self._rank_order()   # a failing cost estimate raises here, not inside torch's iterator set-up
        if self.config.reorder_buffer:
            # What the sampler will send, in order, read as far as the arrivals reach. From a copy of
            # the ledger and the refetch list: both move as batches are released.
            ledger = DeliveryLedger(self._ledger.watermark, self._ledger.ahead)
            self._sequencer = Sequencer(_batch_key(b[0]) for b in _key_batches(
                self.epoch, order, ledger, list(self._refetch), self.config.fetch_batch_size))
        it = iter(self._inner())
        if self.config.reorder_buffer:
            it = self._in_sequence(it)
        self._started = True
        if self.packer is None:
            for batch in it:
                yield from self._emit([self._plain_micro_batch(batch)], partial=False)
                if self._at_max_steps():
                    return
        else:
            packer = self.packer
            mbps = self.packer_config.micro_batches_per_step
            pending: list[MicroBatch] = []
            # Cuts wait while re-read payloads are still in flight (out of order they may arrive
            # after fresh samples): a micro-batch never leaves without its samples' data.
            for mb in pack(packer, self._fresh_items(it), may_cut=lambda: not self._pending_refetch):
                pending.append(mb)
                if len(pending) == mbps:
                    yield from self._emit(pending, partial=False)
                    pending = []
                    if self._at_max_steps():
                        return
            if pending:
                packer.start_new_step()
                yield from self._emit(pending, partial=True)
        self._finished = True
        self._after_yield = False

    @property
    def reorder_peak(self) -> int:
        """Most samples the reorder buffer held at once in the current (or last) epoch's iteration; 0
        without a reorder buffer. At most about ``reorder_buffer`` plus what was already in flight
        when the buffer filled (``prefetch_factor * num_workers * fetch_batch_size``)."""
        return self._sequencer.peak if self._sequencer is not None else 0

    def _in_sequence(self, it: Iterator[list]) -> Iterator[list]:
        """Fetched batches in the sampler's order: out-of-order arrivals wait in the sequencer."""
        seq = self._sequencer
        for batch in it:
            first_key = batch[0][0]
            if first_key[1] == PAUSE:
                continue
            yield from seq.arrive(_batch_key(first_key), batch, len(batch))

    def _fresh_items(self, it: Iterator[list]) -> Iterator[list]:
        """The packing loop's items: each fetched batch's fresh samples, marked delivered as they are
        put. A batch that only re-reads buffered samples' payloads after a restore is no loop turn
        of the uninterrupted run, so it is absorbed here and never reaches the loop."""
        packer, ledger = self.packer, self._ledger
        tokens_fn, source_fn = self.tokens_fn, self.source_fn
        for batch in it:
            fresh = []
            for (_, position, index, refetch), sample in batch:
                if refetch:
                    packer.attach_payload(index, sample)
                    self._pending_refetch.discard(index)
                    self._refetch.remove(index)
                    continue
                ledger.mark(position)
                fresh.append((index, tokens_fn(sample), None, source_fn(sample), sample))
            if fresh:
                yield fresh

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
        fp = {"runtime": c.runtime, "num_samples": self.num_samples, "seed": c.seed, "shuffle": c.shuffle,
              "dp_size": c.dp_size, "dp_rank": c.dp_rank, "fetch_batch_size": c.fetch_batch_size,
              "packing": self.packer is not None, "order": c.order, **dataset_identity(self.dataset)}
        if c.order == "balanced":
            # The order is a function of these too: another worker count or cost model reorders the epoch.
            # The resolved value: 'auto' and the integer it resolves to give the same order.
            costs = self.cost_estimates()
            fp.update(num_workers=c.num_workers, prefetch_factor=c.prefetch_factor,
                      lookahead=resolve_lookahead(c, costs), costs=costs_digest(costs))
        return fp

    def state_dict(self) -> dict[str, Any]:
        """Exact, JSON-serializable state; take it between steps."""
        return {**self._state_common(), "after_yield": self._after_yield, "ledger": self._ledger.state_dict(),
                "packer": self.packer.state_dict() if self.packer is not None else None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a checkpoint, or raise and change nothing: every part is read into fresh objects
        first (the packer's own checks refuse another budget or gate), then swapped in."""
        check_loader_state(state, self.runtime, self._fingerprint())
        ledger = DeliveryLedger()
        ledger.load_state_dict(state["ledger"])
        packer = None
        if self.packer is not None:
            packer = self._packer_factory(self.packer_config, self.gate)
            packer.load_state_dict(state["packer"])
        self._restore_common(state)
        self._after_yield = state["after_yield"]
        self._ledger = ledger
        if packer is not None:
            self.packer = packer
            self._refetch = packer.buffered_ids()


def build_loader(dataset: Any, packer_config: PackerConfig | None = None, gate: Gate | str | None = None,
                 config: LoaderConfig = LoaderConfig(), **kwargs: Any) -> EpochLoader:
    """A dynamic-batching loader for ``dataset``; ``config.runtime`` picks where the packer runs.

    ``packer_config=None`` gives a plain loader (one fetched batch per step) with the same
    epoch and checkpoint guarantees. Keyword arguments: ``collate_fn``, ``tokens_fn``,
    ``source_fn``, ``packer_factory`` (a ``(PackerConfig, Gate) -> Packer``; default
    ``GreedyPacker``), ``process_group`` (the DP group ``max_tokens`` sums over; default: the
    world), and for ``LoaderConfig(order='balanced')`` ``meta_fn`` (index -> dict of
    cheap metadata) with ``cost_fn`` (meta -> seconds) unless the config holds a cost model.
    """
    if config.runtime == "worker":
        # Refuses a cost source, which only a balanced order (main runtime) reads.
        check_cost_source(config, kwargs.pop("meta_fn", None), kwargs.pop("cost_fn", None))
        return WorkerRuntimeLoader(dataset, packer_config, gate, config, **kwargs)
    return DynamicBatchLoader(dataset, packer_config, gate, config, **kwargs)
