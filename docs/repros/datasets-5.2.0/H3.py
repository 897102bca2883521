"""datasets 5.2.0, H3: a checkpoint written right after a resume restarts the stream.

`IterableDataset.load_state_dict` only keeps the state for the next iteration (`_starting_state_dict`,
datasets/iterable_dataset.py:2848), and `state_dict()` returns the pipeline's own state (2798): in a restarted job
that has not read an example yet, the start of the stream. So a state saved after a restore and before the next
example (a job that checkpoints on resume, or one restarted twice in a row) says "the beginning", and the next
restart replays the stream, although load_state_dict promises "The iteration will restart at the next example
from when the state was saved". Imports datasets only. Exits 1 while the bug is present, 0 once fixed.
"""

import sys

from datasets import Dataset


def job():   # each restart is a new process: a new dataset object
    return Dataset.from_dict({"a": range(6)}).to_iterable_dataset(num_shards=3)


first, seen = job(), []
for example in first:
    seen.append(example["a"])
    if len(seen) == 3:
        state = first.state_dict()            # checkpoint after three examples, then the job dies
        break
second = job()
second.load_state_dict(state)                 # restart from the checkpoint ...
again = second.state_dict()                   # ... and checkpoint at once, before the next example; it dies again
third = job()
third.load_state_dict(again)                  # the second restart
rest = [example["a"] for example in third]
print(f"before the checkpoint {seen}; after two restarts {rest}")
sys.exit(0 if rest == [3, 4, 5] else 1)
