"""VeOmni 0.1.12, B2: a resumed multi-source mixture loses what its sources' shuffle buffers held: a short epoch.

`build_iterable_dataset` (veomni/data/dataset.py:1479-1513) always shuffles a source with `buffer_size=10_000`, and
`build_weighted_multisource_dataset` (1692-1736) passes `shuffle=True` unless told otherwise (BaseTrainer does not).
datasets saves a shuffle buffer's source position, not its content (as its docs say), so a source smaller than
the buffer restores exhausted, and `first_exhausted` ends the resumed epoch at once. Needs the datasets VeOmni
declares (>=2.20,<=2.21). Imports VeOmni, torch, torchdata and datasets only. Exits 1 while a resumed epoch
delivers fewer samples than the uninterrupted one, else 0. No fix is proposed: the maintainers' own mixture
resume test turns shuffling off.
"""

import json
import os
import sys
import tempfile

import torch
from torchdata.stateful_dataloader import StatefulDataLoader
from veomni.data.dataset import build_weighted_multisource_dataset
from veomni.distributed import parallel_state


def transform(example, source_name=None, **_):   # stands in for a tokenizer: a sample's tokens are its id
    return [{"input_ids": torch.full((3,), example["id"]), "id": example["id"]}]

def make(config):   # the worker runtime's dataset as BaseTrainer builds it, read one sample at a time
    return StatefulDataLoader(build_weighted_multisource_dataset(train_path=config, transform=transform, seed=42),
                              batch_size=None, collate_fn=lambda sample: sample[0]["id"])

torch.distributed.init_process_group("gloo", store=torch.distributed.HashStore(), rank=0, world_size=1)
parallel_state.init_parallel_state(dp_size=1)   # BaseTrainer._setup's, for one process
with tempfile.TemporaryDirectory() as root:
    sources = []
    for s, name in enumerate(("text", "video")):   # 6 rows a source, ids 0-5 and 10-15
        os.makedirs(d := f"{root}/{name}")
        with open(f"{d}/part-000.jsonl", "w") as f:
            f.writelines(json.dumps({"id": 10 * s + i}) + "\n" for i in range(6))
        sources.append(d)
    with open(config := f"{root}/mixture.yaml", "w") as f:   # JSON is YAML
        json.dump({"sources": sources, "names": ["text", "video"],
                   "schedule": [{"schedule_type": "const", "weights": [0.5, 0.5]}]}, f)
    uninterrupted = list(make(config))
    loader = make(config)
    first = [sid for _, sid in zip(range(3), loader)]   # a checkpoint after 3 samples, then a restart
    resumed = make(config)
    resumed.load_state_dict(loader.state_dict())
    after = list(resumed)
print(f"uninterrupted: {uninterrupted}\npreempted after 3 samples: {first} + {after}")
if len(first) + len(after) < len(uninterrupted):
    print(f"first difference: the resumed epoch ends after {len(first) + len(after)} of {len(uninterrupted)} samples")
    sys.exit(1)
sys.exit(0)
