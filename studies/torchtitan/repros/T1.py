"""torchtitan 0.3.0, T1: with a DataLoader worker, a job resumed from a checkpoint trains tokens twice.

`HuggingFaceTextDataset.state_dict()` returns its live token buffers (text_datasets.py:220-225) and `__iter__` goes
on `extend`ing them (:142-150). torchdata's worker puts the state on a queue whose feeder thread pickles it later,
while the worker already packs the next batch into the same lists: the checkpoint holds tokens of a later step with
the `sample_idx` of before, so the resumed job trains them again. Imports torchtitan and datasets only. Exits 1 while
a job preempted after some step trains other steps than an uninterrupted one, 0 once it trains the same.
"""

import os
import pickle
import sys
import tempfile

os.environ["HF_HUB_OFFLINE"] = "1"   # local data only
from datasets import load_dataset  # noqa: E402
from torchtitan.hf_datasets import DatasetConfig, text_datasets  # noqa: E402

TEXTS = [" ".join([str(i)] * (1 + i % 3)) for i in range(6)]   # a sample's tokens are its id

class Tokenizer:   # the one method the text dataset calls
    def encode(self, text, add_bos=True, add_eos=True):
        return [-1] * add_bos + [int(w) for w in text.split()] + [-2] * add_eos

def train(steps, preempt_after=None):
    # torchtitan's Trainer.train: one iter() per job, a checkpoint every step; a restart loads it into a new loader
    delivered, checkpoint = [], None
    while len(delivered) < steps:
        config = text_datasets.HuggingFaceTextDataLoader.Config(dataset="t1", dataset_path=DATA, num_workers=1)
        loader = config.build(dp_world_size=1, dp_rank=0, tokenizer=Tokenizer(), seq_len=3, local_batch_size=1)
        if checkpoint is not None:
            loader.state_dict()   # DCP's load asks for the state first, as a template
            loader.load_state_dict(pickle.loads(checkpoint))
        for inputs, _labels in loader:
            delivered.append(inputs["input"].flatten().tolist())
            checkpoint = pickle.dumps(loader.state_dict())
            if len(delivered) in (steps, preempt_after):
                break
        else:
            break   # out of data (not here: infinite=True, the Config's default, re-loops)
        preempt_after = None
    return delivered

with tempfile.TemporaryDirectory() as root:
    os.makedirs(DATA := f"{root}/data")   # c4_test's form: load_dataset(path, split="train") of a local directory
    with open(f"{DATA}/train.jsonl", "w") as f:
        f.writelines(f'{{"text": "{t}"}}\n' for t in TEXTS)
    text_datasets.DATASETS["t1"] = DatasetConfig(path=DATA, sample_processor=lambda s: s["text"], loader=lambda p: (
        load_dataset(p, split="train", cache_dir=f"{root}/cache")))
    plain = train(steps=10)
    print(f"uninterrupted: {len(plain)} steps {plain}")
    for k, resumed in ((k, train(steps=10, preempt_after=k)) for k in range(1, len(plain))):
        if resumed != plain:
            d = next(i for i in range(len(plain) + 1) if resumed[i:i + 1] != plain[i:i + 1])
            print(f"preempted after step {k}: {len(resumed)} steps {resumed}\n"
                  f"first difference: step {d + 1}: uninterrupted {plain[d:d + 1]}, resumed {resumed[d:d + 1]}")
            sys.exit(1)
    print("every preempted job trains the uninterrupted steps")
