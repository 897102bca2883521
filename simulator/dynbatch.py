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
from typing import Iterator

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


def run_rank(trace: Trace, packer_config: PackerConfig, gate: Gate, loader: LoaderModelConfig,
             step: StepTime = StepTime(), *, max_cuts: int | None = None, epochs: int = 1, rank: int = 0,
             packer_factory: PackerFactory = GreedyPacker, order_fn: OrderFn | None = None) -> RankRun:
    """Feed ``trace`` (this rank's samples in trace order) through the modelled loader into a real packer.

    Each epoch runs ``dynbsz.packing.pack`` exactly as the loader does: the modelled loader
    hands out the fetched items lazily, at the times it would, and the buffer is drained at the
    end of every epoch; a partial optimizer step at an epoch's end is closed there, as the
    loader closes it. Stops after ``max_cuts`` gated micro-batches if given (the rest of the
    stream is never fetched, as in a job that stops), else runs ``epochs`` epochs. ``order_fn``: the
    loader's epoch order, if not the model config's sampler (``LoaderModel``; ``bridge.LoaderOrder``).
    """
    if max_cuts is not None:
        check_int("max_cuts", max_cuts, minimum=1)
    check_int("epochs", epochs, minimum=1)
    packer = packer_factory(packer_config, gate)
    model = LoaderModel(trace.cost_s, loader, tokens=trace.tokens, order_fn=order_fn)
    ids = trace.ids.tolist()
    toks = trace.tokens.tolist()
    names = trace.source_names
    srcs = [names[s] for s in trace.source.tolist()]
    per_step = packer_config.micro_batches_per_step
    cuts: list = []
    times: list[float] = []
    fetched_at: list[int] = []
    fetched = 0
    t = 0.0

    def items() -> Iterator[list]:
        # The clock lives here: an item is fetched when the packing loop asks for it, i.e. after
        # the consumer has spent the step time of what was cut before.
        nonlocal t, fetched
        model.start_epoch(t)
        while (r := model.next(t)) is not None:
            t = model.handout_time(r)
            rows = model.batch_rows(r).tolist()
            fetched += len(rows)
            yield [(ids[i], toks[i], None, srcs[i]) for i in rows]
        t = max(t, model.q.now)   # StopIteration is raised when the end is known, maybe after the last batch

    in_step = step_tokens = 0
    for _ in range(epochs):
        for mb in pack(packer, items()):
            cuts.append(mb)
            times.append(t)
            fetched_at.append(fetched)
            in_step += 1
            step_tokens += mb.total_tokens
            if in_step == per_step:   # the optimizer step runs once its micro-batches are in
                t += step.of(step_tokens)
                in_step = step_tokens = 0
            if max_cuts is not None and not mb.drained and len(cuts) >= max_cuts:
                break
        else:
            if in_step:   # a partial step at the epoch's end runs as it is, and closes the step
                t += step.of(step_tokens)
                in_step = step_tokens = 0
                packer.start_new_step()
            continue
        break
    stopped = max_cuts is not None and len(cuts) >= max_cuts and not cuts[-1].drained
    return RankRun(
        rank=rank, budget=packer_config.budget, cut_s=np.asarray(times, dtype=np.float64),
        tokens=np.asarray([mb.total_tokens for mb in cuts], dtype=np.int64),
        n_samples=np.asarray([len(mb) for mb in cuts], dtype=np.int64),
        drained=np.asarray([mb.drained for mb in cuts], dtype=bool),
        fetched=np.asarray(fetched_at, dtype=np.int64),
        ids=tuple(mb.ids for mb in cuts), sources=tuple(mb.sources for mb in cuts),
        stream_ended=not stopped, loader=model.result())


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
