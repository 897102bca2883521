"""Main-process dynamic batching: the fetch loop, driving dynbsz's real packer and gate.

The loop is dynbsz's own (``dynbsz.packing.pack``, VeOmni's main-runtime loop): fetch
one item from the loader, ``put`` each of its samples, and if the gate says ready cut
**one** micro-batch (never more per fetched item); the training step then runs on it
before the next fetch is asked for. At the end of every epoch the buffer is drained, as
the loader drains it.

Nothing here decides *which* samples are packed or *when* a cut is allowed:
those are ``pack``, the packer and the gate's ``ready(view)``, called exactly as the
loader calls them. The simulator only supplies the
times: each fetched item arrives at the loader model's hand-out time, and the
consumer is busy for ``step.of(tokens)`` after each optimizer step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, NamedTuple

import numpy as np

from dynbsz import GreedyPacker, PackerConfig
from dynbsz.errors import ConfigError, check_int
from dynbsz.gates import Gate
from dynbsz.packer import PackerFactory
from dynbsz.packing import pack
from dynbsz.workload import Trace

from .config import LoaderModelConfig, StepTime
from .loader_model import LoaderModel, LoaderRun, OrderFn


@dataclass(frozen=True)
class RankRun:
    """One DP rank's micro-batches, in cut order."""

    rank: int
    budget: int
    cut_s: np.ndarray            # when each micro-batch was cut: its data-ready time
    tokens: np.ndarray           # budgeted tokens per micro-batch
    n_samples: np.ndarray
    drained: np.ndarray          # cut at end of stream, gate ignored
    fetched: np.ndarray          # samples fetched from the loader when each was cut
    ids: tuple                   # per micro-batch: tuple of sample ids
    sources: tuple               # per micro-batch: tuple of source names
    stream_ended: bool           # the loader ran out before max_cuts was reached
    loader: LoaderRun

    def __len__(self) -> int:
        return len(self.cut_s)

    @property
    def ready_s(self) -> float:
        """Time to the first micro-batch (cold start)."""
        return float(self.cut_s[0]) if len(self.cut_s) else float("nan")

    @property
    def candidates_before_first(self) -> int:
        return int(self.fetched[0]) if len(self.fetched) else 0


class FedStep(NamedTuple):
    """One optimizer step's micro-batches on one rank, as the fetch loop cut them.

    A named tuple rather than a frozen dataclass: one is built per optimizer step (200,000 in a
    million-sample run), and a tuple is built several times faster; it is as immutable."""

    micro_batches: tuple          # dynbsz MicroBatch objects, in cut order
    ready_s: float                # when the last of them was cut: the step's data-ready time
    partial: bool                 # fewer than micro_batches_per_step (an epoch's end, or max_cuts)

    @property
    def tokens(self) -> int:
        return sum(mb.total_tokens for mb in self.micro_batches)


class RankFeed:
    """One DP rank's fetch loop (``dynbsz.packing.pack`` over the modelled loader), one optimizer step at a time.

    ``next_step()`` runs the loop until a step's micro-batches are cut and returns them
    (``FedStep``) with their data-ready time; the caller decides when the step ends and says so
    with ``finish_step(t)``: the loop asks the loader for the next item at ``t``. ``run_rank``
    drives one feed with a per-step time; ``simulator.training`` drives one feed per DP rank in
    lockstep. Nothing else runs the loop, so the two cannot drift apart.

    ``track_memory``: record, before every hand-out, what the rank holds decoded and not yet cut
    into a micro-batch (the packer's buffer plus results waiting in the loader), for ``peak_held``.
    """

    def __init__(self, trace: Trace, packer_config: PackerConfig, gate: Gate, loader: LoaderModelConfig, *,
                 max_cuts: int | None = None, epochs: int = 1, rank: int = 0,
                 packer_factory: PackerFactory = GreedyPacker, order_fn: OrderFn | None = None,
                 model_factory: Callable[..., LoaderModel] = LoaderModel, track_memory: bool = False):
        if max_cuts is not None:
            check_int("max_cuts", max_cuts, minimum=1)
        check_int("epochs", epochs, minimum=1)
        self.rank = rank
        self.budget = packer_config.budget
        self.packer = packer_factory(packer_config, gate)
        self.model = model_factory(trace.cost_s, loader, tokens=trace.tokens, order_fn=order_fn)
        self.trace = trace
        self.max_cuts = max_cuts
        self.epochs = epochs
        self.per_step = packer_config.micro_batches_per_step
        self.cuts: list = []
        self.times: list[float] = []
        self.fetched_at: list[int] = []
        self.fetched = 0
        self.t = 0.0
        self.track_memory = track_memory
        self._mem_samples: list[int] = []     # packer buffer before each hand-out
        self._mem_tokens: list[int] = []
        self._stopped = False
        self._samples = trace.put_rows
        self._gen = self._loop()
        self._pending = False

    def _items(self) -> Iterator[list]:
        # The clock lives here: an item is fetched when the packing loop asks for it, i.e. after
        # the consumer has finished the step of what was cut before. This runs once per fetched
        # item (a million times in a large study), so the put arguments are built once per feed
        # and the model's methods are bound once per epoch.
        model, packer, get = self.model, self.packer, self._samples.__getitem__
        nxt, handout = model.next, model.handout
        track = self.track_memory
        model.start_epoch(self.t)
        while (r := nxt(self.t)) is not None:
            self.t, rows = handout(r)
            self.fetched += len(rows)
            if track:
                self._mem_samples.append(packer.num_samples)
                self._mem_tokens.append(packer.tokens)
            yield map(get, rows)   # lazy: no list and no comprehension frame per item
        self.t = max(self.t, model.q.now)   # StopIteration is raised when the end is known, maybe after the last batch

    def _loop(self):
        packer, per_step, max_cuts = self.packer, self.per_step, self.max_cuts
        add_cut, add_time, add_fetched = self.cuts.append, self.times.append, self.fetched_at.append
        step: list = []
        for _ in range(self.epochs):
            for mb in pack(packer, self._items()):
                add_cut(mb)
                add_time(self.t)
                add_fetched(self.fetched)
                step.append(mb)
                if len(step) == per_step:   # the optimizer step runs once its micro-batches are in
                    yield FedStep(tuple(step), self.t, False)
                    step = []
                if max_cuts is not None and not mb.drained and len(self.cuts) >= max_cuts:
                    self._stopped = True
                    if step:
                        yield FedStep(tuple(step), self.t, True)
                    return
            if step:   # a partial step at the epoch's end runs as it is, and closes the step
                yield FedStep(tuple(step), self.t, True)
                step = []
                packer.start_new_step()

    def next_step(self) -> FedStep | None:
        """Run the fetch loop to the next optimizer step; None when the stream (or max_cuts) is done."""
        if self._pending:
            raise RuntimeError("next_step() before finish_step() of the step it returned")
        step = next(self._gen, None)
        self._pending = step is not None
        return step

    def finish_step(self, t: float) -> None:
        """The step returned last ended at ``t``: the loop asks for its next item then."""
        if not self._pending:
            raise RuntimeError("finish_step() without a step: call next_step() first")
        if t < self.t:
            raise ValueError(f"a step cannot end at {t!r}, before its data was ready ({self.t!r})")
        self.t = t
        self._pending = False

    def peak_held(self) -> tuple[int, int]:
        """Most samples and tokens this rank held at once, decoded and not yet cut into a micro-batch:
        the packer's buffer plus results that reached the main process and wait to be handed out
        (torch's reorder buffer, results prefetched during a step). Measured just before each
        hand-out, where the total peaks (arrivals only add until a hand-out moves one into the
        packer, and only a cut removes). Needs ``track_memory=True``."""
        if not self.track_memory:
            raise RuntimeError("peak_held() needs RankFeed(..., track_memory=True)")
        run = self.model.result()
        n = len(run)
        if n == 0:
            return 0, 0
        sizes = run.batch_sizes()
        tok = np.add.reduceat(self.trace.tokens[run.samples], run.offsets[:-1]) if len(run.samples) else \
            np.zeros(n, np.int64)
        arrival = run.arrival_s if run.config.num_workers else run.handout_s
        order = np.argsort(arrival, kind="stable")
        arr_sorted = arrival[order]
        cum_n = np.concatenate([[0], np.cumsum(sizes[order])])
        cum_t = np.concatenate([[0], np.cumsum(tok[order])])
        # arrived by each hand-out (itself included), minus what was handed out before it
        k = np.searchsorted(arr_sorted, run.handout_s, side="right")
        before_n = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        before_t = np.concatenate([[0], np.cumsum(tok)[:-1]])
        held_n = cum_n[k] - before_n
        held_t = cum_t[k] - before_t
        m = min(n, len(self._mem_samples))
        total_n = held_n[:m] + np.asarray(self._mem_samples[:m], dtype=np.int64)
        total_t = held_t[:m] + np.asarray(self._mem_tokens[:m], dtype=np.int64)
        return (int(total_n.max()) if m else 0), (int(total_t.max()) if m else 0)

    def result(self) -> "RankRun":
        cuts = self.cuts
        return RankRun(
            rank=self.rank, budget=self.budget, cut_s=np.asarray(self.times, dtype=np.float64),
            tokens=np.asarray([mb.total_tokens for mb in cuts], dtype=np.int64),
            n_samples=np.asarray([len(mb) for mb in cuts], dtype=np.int64),
            drained=np.asarray([mb.drained for mb in cuts], dtype=bool),
            fetched=np.asarray(self.fetched_at, dtype=np.int64),
            ids=tuple(mb.ids for mb in cuts), sources=tuple(mb.sources for mb in cuts),
            stream_ended=not self._stopped, loader=self.model.result())


def run_rank(trace: Trace, packer_config: PackerConfig, gate: Gate, loader: LoaderModelConfig,
             step: StepTime = StepTime(), *, max_cuts: int | None = None, epochs: int = 1, rank: int = 0,
             packer_factory: PackerFactory = GreedyPacker, order_fn: OrderFn | None = None) -> RankRun:
    """Feed ``trace`` (this rank's samples in trace order) through the modelled loader into a real packer.

    Each epoch runs ``dynbsz.packing.pack`` exactly as the loader does (``RankFeed``): the
    modelled loader hands out the fetched items lazily, at the times it would, and the buffer is
    drained at the end of every epoch; a partial optimizer step at an epoch's end is closed
    there, as the loader closes it. The consumer spends ``step.of(tokens)`` on each optimizer
    step. Stops after ``max_cuts`` gated micro-batches if given (the rest of the stream is never
    fetched, as in a job that stops), else runs ``epochs`` epochs. ``order_fn``: the loader's epoch
    order, if not the model config's sampler (``LoaderModel``; ``bridge.LoaderOrder``).
    """
    feed = RankFeed(trace, packer_config, gate, loader, max_cuts=max_cuts, epochs=epochs, rank=rank,
                    packer_factory=packer_factory, order_fn=order_fn)
    while (s := feed.next_step()) is not None:
        feed.finish_step(s.ready_s + step.of(s.tokens))
    return feed.result()


def shard(trace: Trace, rank: int, dp_size: int) -> Trace:
    """Rank ``rank``'s samples under a DistributedSampler without shuffle or padding: rows rank::dp_size."""
    check_int("dp_size", dp_size, minimum=1)
    check_int("rank", rank, minimum=0, maximum=dp_size - 1)
    return trace.subset(slice(rank, None, dp_size))


def truncate(trace: Trace, max_seq_len: int) -> Trace:
    """Cut every sample to ``max_seq_len`` tokens, as VeOmni's text transforms do (``tokens[:max_seq_len]``).

    Decode costs are unchanged: the sample was decoded in full before it was cut.
    """
    return Trace(trace.ids, np.minimum(trace.tokens, max_seq_len), trace.cost_s, trace.source, trace.source_names)


def check_overlong(trace_min_tokens: int, packer_config: PackerConfig, where: str) -> None:
    """Refuse a run in which every sample would raise: a budget below the smallest possible sample."""
    if packer_config.overlong == "raise" and trace_min_tokens > packer_config.budget:
        raise ConfigError(
            f"budget={packer_config.budget} is below the smallest possible sample ({trace_min_tokens} tokens, "
            f"{where}) and overlong='raise', so the very first sample would raise; raise the budget to at least "
            f"{trace_min_tokens}, truncate samples to the budget, or set overlong='emit_alone' or 'drop'")
