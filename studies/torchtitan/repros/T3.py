"""torchtitan 0.3.0, T3: with workers, every worker's re-loop moves one epoch that datasets shares between them.

`HuggingFaceTextDataset.reloop` (text_datasets.py:173-187) calls `self._data.set_epoch(self._data.epoch + 1)` inside
each DataLoader worker; datasets 4.7.0 keeps an IterableDataset's epoch in a torch tensor in shared memory
(`_maybe_share_with_torch_persistent_workers`), so the workers' re-loops add up in one counter: a pass reads how
often any worker has re-looped, not its own pass count. Which worker reads what is timing (here worker 1's data
costs 0.2 s more, and worker 0 re-loops ahead of it), and the epoch decides a streaming pass's shard order.
Exits 1 while a worker's second pass reads an epoch other than 1, else 0. No fix is proposed.
"""

import logging
import os
import pickle
import sys
import tempfile
import time

import torch

os.environ["HF_HUB_OFFLINE"] = "1"   # local data only
from datasets import load_dataset  # noqa: E402
from torchtitan.hf_datasets import DatasetConfig, text_datasets  # noqa: E402

logging.disable(logging.WARNING)   # each re-loop logs a warning

class Tokenizer:   # the one method the text dataset calls; a sample's tokens are its id, between BOS -1 and EOS -2
    def encode(self, text, add_bos=True, add_eos=True):
        return [-1] * add_bos + [int(w) for w in text.split()] + [-2] * add_eos

def text(sample):   # worker 1's samples take 0.2 s longer to process: it re-loops second
    time.sleep(0.2 * torch.utils.data.get_worker_info().id)
    return sample["text"]

with tempfile.TemporaryDirectory() as root:
    os.makedirs(data := f"{root}/data")
    with open(f"{data}/train.jsonl", "w") as f:
        f.writelines(f'{{"text": "{i} {i}"}}\n' for i in range(2))   # one window a sample, one sample a worker
    text_datasets.DATASETS["t3"] = DatasetConfig(path=data, sample_processor=text, loader=lambda p: (
        load_dataset(p, split="train", cache_dir=f"{root}/c").to_iterable_dataset(num_shards=2)))
    config = text_datasets.HuggingFaceTextDataLoader.Config(dataset="t3", dataset_path=data, num_workers=2)
    loader = config.build(dp_world_size=1, dp_rank=0, tokenizer=Tokenizer(), seq_len=3, local_batch_size=1)
    epochs = {}   # worker -> the epoch its latest pass over the data read, from the state it sent with its window
    for step, (inputs, _labels) in enumerate(loader):   # windows alternate: worker 0's, worker 1's
        state = pickle.loads(loader.state_dict()["dp_rank_0"])["_snapshot"]["_worker_snapshots"]
        epochs[step % 2] = state[f"worker_{step % 2}"]["dataset_state"]["data"]["epoch"]
        if step == 3:   # each worker's second pass has sent a window
            break
print(f"the epoch each worker's second pass read: {epochs}")
if set(epochs.values()) != {1}:
    print("first difference: one re-loop per worker, yet a second pass read another epoch than 1")
    sys.exit(1)
sys.exit(0)
