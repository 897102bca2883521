"""datasets 5.2.0, H2: the epoch's shard shuffle ignores the seed: with 4 shards epoch 1 replays epoch 0.

`IterableDataset._prepare_ex_iterable_for_iteration` (iterable_dataset.py:2963-2968) shuffles the shards of epoch
e > 0 with `np.random.default_rng(e)`: the same permutation for every dataset and every seed given to `shuffle()`,
and `default_rng(1)` leaves 4 shards in order. With a shuffle buffer smaller than a shard, the order is the shards'
order, so epoch 1 trains in epoch 0's order whatever the seed. Imports datasets only. Exits 1 while epoch 1
replays epoch 0 for every one of 8 seeds, 0 once the seed reaches the shard shuffle.
"""

import sys

from datasets import Dataset


def epoch(seed, e):
    ds = Dataset.from_dict({"id": list(range(12))}).to_iterable_dataset(num_shards=4)
    ds = ds.shuffle(seed=seed, buffer_size=1)   # a buffer smaller than a shard
    ds.set_epoch(e)   # as a trainer does before each epoch
    return [row["id"] for row in ds]


replayed = []
for seed in range(8):
    first, second = epoch(seed, 0), epoch(seed, 1)
    print(f"seed {seed}: epoch 0 {first}, epoch 1 {second}")
    if first == second:
        replayed.append(seed)
if replayed == list(range(8)):
    print("first difference: none: epoch 1 replays epoch 0 for every seed")
    sys.exit(1)
print(f"epoch 1 replays epoch 0 for seeds {replayed} only")
sys.exit(0)
