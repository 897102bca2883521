"""torchtitan 0.3.0, T5: a streaming dataset with fewer shards than DataLoader workers hangs the job (1 and 2 here).

datasets gives a worker beyond `num_shards` an empty share; `HuggingFaceTextDataset.__iter__` (text_datasets.py:
129-171, with the Config's default `infinite=True`) re-loops an empty pass forever, and the in-order DataLoader waits
for its batch forever. A `timeout` (torchtitan sets none) ends the hang. Exits 1 while a step never comes, else 0
(a preempted job's other steps are T3: the worker re-loops move datasets' epoch, shared by the workers).
"""

import logging
import os
import pickle
import sys
import tempfile

os.environ["HF_HUB_OFFLINE"] = "1"   # local data only
from datasets import load_dataset  # noqa: E402
from torchtitan.hf_datasets import DatasetConfig, text_datasets  # noqa: E402

TEXTS = [" ".join([str(i)] * (1 + i % 3)) for i in range(5)]   # a sample's tokens are its id
logging.disable(logging.WARNING)   # a worker that spins re-looping logs a warning on every pass

class Tokenizer:   # the one method the text dataset calls
    def encode(self, text, add_bos=True, add_eos=True):
        return [-1] * add_bos + [int(w) for w in text.split()] + [-2] * add_eos

def train(delivered, steps, preempt_after=None):
    # torchtitan's Trainer.train: one iter() per job, a checkpoint every step; a restart loads it into a new loader
    checkpoint = None
    while len(delivered) < steps:
        config = text_datasets.HuggingFaceTextDataLoader.Config(dataset="t5", dataset_path=DATA, num_workers=2)
        loader = config.build(dp_world_size=1, dp_rank=0, tokenizer=Tokenizer(), seq_len=3, local_batch_size=2)
        loader.timeout = 8   # seconds a step may take before it counts as a hang (a step takes < 1 s)
        if checkpoint is not None:
            loader.state_dict()   # DCP's load asks for the state first, as a template
            loader.load_state_dict(pickle.loads(checkpoint))
        for inputs, _labels in loader:
            delivered.append(inputs["input"].tolist())
            checkpoint = pickle.dumps(loader.state_dict())
            if len(delivered) in (steps, preempt_after):
                break
        else:
            break   # out of data (not with infinite=True)
        preempt_after = None
    return delivered

with tempfile.TemporaryDirectory() as root:
    os.makedirs(DATA := f"{root}/data")   # a local stand-in for a streaming dataset of one file: one shard
    with open(f"{DATA}/train.jsonl", "w") as f:
        f.writelines(f'{{"text": "{t}"}}\n' for t in TEXTS)
    text_datasets.DATASETS["t5"] = DatasetConfig(path=DATA, sample_processor=lambda s: s["text"], loader=lambda p: (
        load_dataset(p, split="train", cache_dir=f"{root}/cache").to_iterable_dataset(num_shards=1)))
    plain, resumed = [], []
    try:
        train(plain, steps=6), train(resumed, steps=6, preempt_after=3)
    except RuntimeError as e:   # "DataLoader timed out after 8 seconds"
        print(f"uninterrupted: {plain}\npreempted after step 3: {resumed}\n{e}: the next step never came")
        sys.exit(1)
    d = next((i for i in range(7) if resumed[i:i + 1] != plain[i:i + 1]), None)
    print(f"uninterrupted: {plain}\npreempted after step 3: {resumed}\nfirst difference: "
          f"{'none' if d is None else f'step {d + 1} (T3, not T5)'}")
