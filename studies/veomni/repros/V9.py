"""VeOmni 0.1.12, V9: a `first_exhausted` mixture restored after its stop draws on past its own end.

`WeightedMultiSourceDataset.__iter__` stops the epoch when one source is exhausted (`_next_sample`,
veomni/data/dataset.py:646-647), but `state_dict()` (725-759) does not record the stop. A state saved after it
restores (`_just_resumed`, 573-574) into a mixture that draws again from the sources that still have data: the
resumed epoch trains samples the uninterrupted one never had. Imports VeOmni and torch only.
Exits 1 while the bug is present, 0 once fixed (then the next epoch must also start fresh on every source).
"""

import sys

import torch
from veomni.data.dataset import WeightedMultiSourceDataset


class Source(torch.utils.data.IterableDataset):
    """A stateful source that resumes at its saved position, as VeOmni's _MapStyleSamplerWrapper does."""

    def __init__(self, ids):
        self.ids, self.pos, self._just_resumed = list(ids), 0, False

    def __iter__(self):
        if not self._just_resumed:
            self.pos = 0
        self._just_resumed = False
        while self.pos < len(self.ids):
            self.pos += 1
            yield {"input_ids": torch.tensor([self.ids[self.pos - 1]] * 2)}

    def state_dict(self):
        return {"pos": self.pos}

    def load_state_dict(self, state):
        self.pos, self._just_resumed = state["pos"], True


def mixture():   # sources 0-3 and 100-115, drawn 50:50 until one is exhausted
    return WeightedMultiSourceDataset([Source(range(4)), Source(range(100, 116))], [0.5, 0.5], seed=3,
                                      stopping_strategy="first_exhausted")


def ids(dataset):
    return [int(s["input_ids"][0]) for s in dataset]


first = mixture()
epoch0 = ids(first)
state = first.state_dict()              # the checkpoint written after the epoch's draw stopped
first.set_epoch(1)
epoch1 = ids(first)
resumed = mixture()
resumed.load_state_dict(state)
rest = ids(resumed)                     # what is left of epoch 0: nothing
resumed.set_epoch(1)
print(f"uninterrupted: epoch 0 {epoch0}, epoch 1 {epoch1}")
print(f"resumed after epoch 0's stop: epoch 0 goes on with {rest}, epoch 1 {(resumed_epoch1 := ids(resumed))}")
sys.exit(0 if rest == [] and resumed_epoch1 == epoch1 else 1)
