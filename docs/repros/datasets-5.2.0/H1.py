"""datasets 5.2.0, H1: resuming a shuffled, sharded IterableDataset with DataLoader workers raises IndexError.

In a worker, `IterableDataset._iter_pytorch` first calls `_prepare_ex_iterable_for_iteration()`, which loads the
saved state into the whole dataset's pipeline (datasets/iterable_dataset.py:3025-3032), and only then splits the
shards by worker and loads the state again into the worker's share (2909-2928). The saved state is the worker's
share: with shuffle() the pipeline interleaves its shards, its state is a list per shard, and the whole dataset
has more shards than the worker, so loading walks past the saved list. A job resumes only by crashing.
Imports datasets, torchdata and torch only. Exits 1 while the bug is present, 0 once the resume continues.
"""

import sys

from datasets import Dataset
from torchdata.stateful_dataloader import StatefulDataLoader


def loader():
    data = Dataset.from_dict({"id": list(range(8))}).to_iterable_dataset(num_shards=4)
    # buffer_size=1: the shuffle buffer holds nothing a resume could lose
    return StatefulDataLoader(data.shuffle(seed=0, buffer_size=1), batch_size=1, num_workers=2)


if __name__ == "__main__":   # the workers re-import this file under spawn
    first = loader()
    it = iter(first)
    trained = [next(it)["id"].item() for _ in range(3)]
    state = first.state_dict()                               # the checkpoint after three batches
    del it, first
    resumed = loader()
    resumed.load_state_dict(state)
    try:
        trained += [batch["id"].item() for batch in resumed]
    except Exception as e:  # the worker's exception, re-raised in the main process
        print(f"after {trained}: the resumed loader raised {type(e).__name__}: {str(e).splitlines()[0]}")
        sys.exit(1)
    print(f"trained {trained}")
    sys.exit(0 if sorted(trained) == list(range(8)) else 1)
