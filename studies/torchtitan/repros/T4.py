"""torchtitan 0.3.0, T4: a finite text loader checkpointed after its last sample was read loses a window on resume.

`HuggingFaceTextDataset.__iter__` yields full windows only after reading a sample (text_datasets.py:153-166). The
last sample here fills two; a checkpoint after the first holds the second in its buffer with `sample_idx ==
len(data)`, the resumed pass reads no sample (`iter([])`, :113-114), and with `infinite=False` the resumed job ends a
step early. num_workers=0: deterministic. Imports torchtitan and datasets only. Exits 1 while the bug is present.
"""

import os
import pickle
import sys
import tempfile

os.environ["HF_HUB_OFFLINE"] = "1"   # local data only
from datasets import load_dataset  # noqa: E402
from torchtitan.hf_datasets import DatasetConfig, text_datasets  # noqa: E402

TEXTS = ["0 0", "1", "2 2 2 2 2 2"]   # a sample's tokens are its id; seq_len 4

class Tokenizer:   # the one method the text dataset calls
    def encode(self, text, add_bos=True, add_eos=True):
        return [-1] * add_bos + [int(w) for w in text.split()] + [-2] * add_eos

def train(steps, preempt_after=None):
    # torchtitan's Trainer.train: one iter() per job, a checkpoint every step; a restart loads it into a new loader
    delivered, checkpoint = [], None
    while len(delivered) < steps:
        config = text_datasets.HuggingFaceTextDataLoader.Config(dataset="t4", dataset_path=DATA, infinite=False)
        loader = config.build(dp_world_size=1, dp_rank=0, tokenizer=Tokenizer(), seq_len=4, local_batch_size=1)
        if checkpoint is not None:
            loader.state_dict()   # DCP's load asks for the state first, as a template
            loader.load_state_dict(pickle.loads(checkpoint))
        for inputs, _labels in loader:
            delivered.append(inputs["input"].flatten().tolist())
            checkpoint = pickle.dumps(loader.state_dict())
            if len(delivered) in (steps, preempt_after):
                break
        else:
            break   # out of data: DataloaderExhaustedError ends training
        preempt_after = None
    return delivered

with tempfile.TemporaryDirectory() as root:
    os.makedirs(DATA := f"{root}/data")   # c4_test's form: load_dataset(path, split="train") of a local directory
    with open(f"{DATA}/train.jsonl", "w") as f:
        f.writelines(f'{{"text": "{t}"}}\n' for t in TEXTS)
    text_datasets.DATASETS["t4"] = DatasetConfig(path=DATA, sample_processor=lambda s: s["text"], loader=lambda p: (
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
