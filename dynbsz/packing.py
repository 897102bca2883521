"""The packing loop: the one place that decides *when* a packer is fed and cut.

VeOmni's main runtime (``DynamicBatchSizeDataLoader.batch_data_generator``), which every
dynbsz runtime follows: put every sample of a fetched item, then cut **at most one**
micro-batch if the gate says ready, then fetch the next item; at the end of the stream drain
the buffer (gate ignored, nothing dropped). The loader (both runtimes), the simulator, the GPU
job's plan and the packer benchmark all run this function, so they cannot drift apart.

The loop is lazy both ways: an item is fetched only when the consumer asks for the next
micro-batch, and the drain cuts one micro-batch per request. That is what lets a caller keep
side effects in its item iterator (mark a sample delivered, advance a simulated clock) and
checkpoint between any two micro-batches.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Sequence

from .packer import MicroBatch, Packer

#: What ``Packer.put`` takes, positionally: (sample_id, tokens[, physical_tokens[, source[, payload]]]).
PutArgs = Sequence[Any]


def pack(packer: Packer, items: Iterable[Iterable[PutArgs]], *, may_cut: Callable[[], bool] | None = None,
         drain: bool = True) -> Iterator[MicroBatch]:
    """Feed ``items`` (each a fetched item: the samples to put) into ``packer``, yielding micro-batches.

    ``may_cut``, if given, is asked before the gate on every turn: False skips the cut for that
    turn (the loader holds cuts while re-read payloads are still in flight after a restore).
    ``drain=False`` leaves whatever is buffered when the items run out in the packer.
    """
    put, ready, cut = packer.put, packer.ready, packer.cut
    for item in items:
        for sample in item:
            put(*sample)
        if (may_cut is None or may_cut()) and ready():
            yield cut()
    if drain:
        yield from packer.drain()
