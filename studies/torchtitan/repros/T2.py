"""torchtitan 0.3.0, T2: map-style data is not split over DataLoader workers: each worker reads every sample.

For a map-style `Dataset`, `HuggingFaceTextDataset._get_data_iter` reads `self._data.skip(self._sample_idx)`
(text_datasets.py:108-117) with no `get_worker_info()` split, so with `num_workers=2` each worker packs the rank's
whole share and one pass trains every sample twice (a streaming dataset is split by datasets' own worker sharding).
Exits 1 while a pass delivers a sample more than once, else 0. No fix is proposed.
"""

import collections
import logging
import os
import sys
import tempfile

os.environ["HF_HUB_OFFLINE"] = "1"   # local data only
from datasets import load_dataset  # noqa: E402
from torchtitan.hf_datasets import DatasetConfig, text_datasets  # noqa: E402

logging.disable(logging.WARNING)   # the end of the data logs a warning

class Tokenizer:   # the one method the text dataset calls; a sample's tokens are its id, between BOS -1 and EOS -2
    def encode(self, text, add_bos=True, add_eos=True):
        return [-1] * add_bos + [int(w) for w in text.split()] + [-2] * add_eos

with tempfile.TemporaryDirectory() as root:
    os.makedirs(data := f"{root}/data")
    with open(f"{data}/train.jsonl", "w") as f:
        f.writelines(f'{{"text": "{i} {i}"}}\n' for i in range(8))   # 3 tokens a window: one sample each
    text_datasets.DATASETS["t2"] = DatasetConfig(path=data, sample_processor=lambda s: s["text"],
                                                 loader=lambda p: load_dataset(p, split="train", cache_dir=f"{root}/c"))
    config = text_datasets.HuggingFaceTextDataLoader.Config(dataset="t2", dataset_path=data, num_workers=2,
                                                            infinite=False)
    loader = config.build(dp_world_size=1, dp_rank=0, tokenizer=Tokenizer(), seq_len=3, local_batch_size=1)
    windows = [inputs["input"][0].tolist() for inputs, _labels in loader]
print(f"one pass over 8 samples with 2 workers: {windows}")
times = collections.Counter(w[1] for w in windows)
twice = sorted(i for i, n in times.items() if n > 1)
if twice:
    print(f"samples trained more than once in one pass: {twice}")
    sys.exit(1)
sys.exit(0)
