"""T3: torchtitan's reloop calls self._data.set_epoch(self._data.epoch + 1) inside each DataLoader worker, but
datasets 4.7.0 keeps an IterableDataset's epoch in a torch tensor in shared memory
(_maybe_share_with_torch_persistent_workers), so two workers increment one counter. Run with the overlay first:

    PYTHONPATH=.venv/overlays/torchtitan python studies/torchtitan/data/t3_shared_epoch.py

Prints the order of an unshuffled to_iterable_dataset at epochs 0 and 1, then (worker id, the epoch its second pass reads) for two workers, and the epoch the main process then sees.
"""
import time

import torch
from datasets import Dataset

ds = Dataset.from_dict({"t": list(range(8))}).to_iterable_dataset(num_shards=4)
for n, shards in ((21, 11), (8, 4)):
    unshuffled = Dataset.from_dict({"t": list(range(n))}).to_iterable_dataset(num_shards=shards)
    order0 = [r["t"] for r in unshuffled]
    unshuffled.set_epoch(1)
    print(f"no shuffle(), {shards} shards: epoch 0 reads", order0, "epoch 1 reads", [r["t"] for r in unshuffled])


class Reloop(torch.utils.data.IterableDataset):
    def __init__(self, data):
        self.data = data

    def __iter__(self):
        wid = torch.utils.data.get_worker_info().id
        for _ in self.data:
            pass
        time.sleep(0.2 * wid)
        self.data.set_epoch(self.data.epoch + 1)   # text_datasets.py, HuggingFaceTextDataset.reloop
        yield (wid, int(self.data.epoch))


print(list(torch.utils.data.DataLoader(Reloop(ds), num_workers=2, batch_size=None)),
      "main process sees epoch", int(ds.epoch))
