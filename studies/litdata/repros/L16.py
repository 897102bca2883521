"""litdata 0.2.76, L16: a weighted CombinedStreamingDataset draws the same datasets in every DataLoader worker.

`CombinedStreamingDataset.__iter__` (litdata/streaming/combined.py:130-150) hands every worker's iterator the same
`seed`, and the iterator draws each sample's dataset with `random.Random(seed)` (combined.py:180): every worker draws
the same sequence of datasets. The loader takes the workers in turn, so it delivers each draw once per worker: runs of
`num_workers` samples of one dataset, here 2 workers, two datasets of weight 0.5, and every pair of batches (one from
each worker) from the same dataset. Imports litdata and torch only. Exits 1 while the workers draw alike, 0 once not.
"""

import sys
import tempfile

from litdata import CombinedStreamingDataset, StreamingDataLoader, StreamingDataset
from litdata.streaming.writer import BinaryWriter


def source(root: str, name: str, ids: range) -> StreamingDataset:
    writer = BinaryWriter(f"{root}/{name}", chunk_size=1)
    for i, sample in enumerate(ids):
        writer.add_item(i, {"id": sample})
    writer.done()
    writer.merge()
    return StreamingDataset(f"{root}/{name}")


if __name__ == "__main__":   # the workers re-import this file under spawn
    with tempfile.TemporaryDirectory() as root:
        mixture = CombinedStreamingDataset([source(root, "a", range(12)), source(root, "b", range(100, 112))],
                                           seed=0, weights=[0.5, 0.5], iterate_over_all=False)
        loader = StreamingDataLoader(mixture, batch_size=1, num_workers=2)
        ids = [batch["id"].item() for batch in loader]
        # batches alternate between worker 0 and worker 1 while both have data
        drawn = ["a" if i < 100 else "b" for i in ids]
        print(f"the loader delivered {ids}")
        print(f"worker 0 drew {''.join(drawn[0::2])}\nworker 1 drew {''.join(drawn[1::2])}")
        pairs = list(zip(drawn[0::2], drawn[1::2]))
        differ = next((k for k, (w0, w1) in enumerate(pairs) if w0 != w1), None)
        if differ is None:
            print(f"every one of the {len(pairs)} pairs of batches comes from one dataset: the workers draw alike")
            sys.exit(1)
        print(f"first difference: batch pair {differ}: worker 0 drew {pairs[differ][0]}, worker 1 {pairs[differ][1]}")
        sys.exit(0)
