"""Packed collate: one micro-batch becomes one row of tokens (batch dimension 1), no padding.

The three token rows travel as one ``(3, T)`` int64 tensor (input ids, position ids, labels)
so that the host-to-device transfer is a single copy from one pinned buffer:

* input ids: the samples' ``input_ids`` concatenated in micro-batch order (mod the vocabulary);
* position ids: restart at 0 for every sample, so a sample sees the same positions packed or alone;
* labels: the next token *within the sample*; a sample's last position has ``IGNORE_INDEX``
  (packing must never teach the model to predict the next sample's first token).

``seq_lens`` (host ints) tell the model where samples start and end; attention is confined
to each of them. ``build_loader`` applies the collate per micro-batch; with runtime='worker'
it runs inside the loader's workers, so it is a small module-level class (picklable).
"""

from __future__ import annotations

from typing import Any

import torch

from dynbsz.packer import MicroBatch

IGNORE_INDEX = -100
INPUT, POSITION, LABEL = 0, 1, 2


class PackedCollate:
    """``collate(micro_batch) -> dict``; see the module docstring for the layout.

    ``pin_output``: allocate the ``(3, T)`` rows in pinned memory. Only for a collate that runs in
    the main process (runtime='main') of a CUDA job: a forked worker must not touch CUDA, and
    with runtime='worker' the loader's pin-memory thread pins the rows instead.
    """

    def __init__(self, vocab_size: int, pin_output: bool = False):
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 2:
            raise ValueError(f"vocab_size must be an integer >= 2, got {vocab_size!r}")
        self.vocab_size = vocab_size
        self.pin_output = bool(pin_output)

    def __call__(self, mb: MicroBatch) -> dict[str, Any]:
        if not len(mb):
            raise ValueError("cannot collate an empty micro-batch")
        missing = [sid for sid, p in zip(mb.ids, mb.payloads) if p is None]
        if missing:
            # A loader that restores buffer ids but never re-reads their payloads (dynbsz's main
            # runtime did, before 123c575) must fail here by name, not deep inside torch.cat.
            raise ValueError(f"micro-batch {mb.index}: samples {missing} arrived without a payload; the loader did "
                             "not re-read them (after a restore, buffered samples must be fetched again)")
        pieces = [p["input_ids"] for p in mb.payloads]
        lens = [int(t.numel()) for t in pieces]
        if lens != [int(t) for t in mb.tokens]:
            raise ValueError(f"micro-batch {mb.index}: input_ids lengths {lens} differ from the packed token "
                             f"counts {list(mb.tokens)}; the packer and the model would disagree on fill")
        if min(lens) < 1:
            raise ValueError(f"micro-batch {mb.index} holds an empty sample; the packed model needs >= 1 token each")
        total = sum(lens)
        rows = torch.empty((3, total), dtype=torch.long, pin_memory=self.pin_output)
        ids = rows[INPUT]
        torch.cat(pieces, out=ids)
        ids.remainder_(self.vocab_size)
        starts = torch.tensor([0] + lens[:-1], dtype=torch.long).cumsum(0)
        # position = index - start of its sample, vectorised: subtract each sample's start offset
        rows[POSITION] = torch.arange(total, dtype=torch.long) - torch.repeat_interleave(starts, torch.tensor(lens))
        labels = rows[LABEL]
        labels[:-1] = ids[1:]
        labels[starts + torch.tensor(lens) - 1] = IGNORE_INDEX
        return {
            "rows": rows,
            "seq_lens": tuple(lens),
            "sample_ids": tuple(int(i) for i in mb.ids),
            "real_tokens": total,
            "n_labels": total - len(lens),       # each sample of n tokens has n - 1 targets
            "budget": int(mb.budget),
        }

    def __repr__(self) -> str:
        return f"PackedCollate(vocab_size={self.vocab_size}, pin_output={self.pin_output})"


def unpack(batch: dict[str, Any]) -> list[dict[str, torch.Tensor]]:
    """The packed row split back into its samples (for tests and debugging)."""
    out, start = [], 0
    for n in batch["seq_lens"]:
        r = batch["rows"][:, start:start + n]
        out.append({"input_ids": r[INPUT], "position_ids": r[POSITION], "labels": r[LABEL]})
        start += n
    return out
