"""litdata 0.2.76, L18: StreamingDataLoader's len() over a CombinedStreamingDataset counts too few batches.

`__len__` is `ceil(get_len() / batch_size)` (litdata/streaming/dataloader.py:925-931), the samples of every source
summed. An iterable dataset is batched inside each DataLoader worker, so each worker ends its share of the mixture on
its own partial batch: here 2 workers, sources of 4 and 7 samples, batches of 3 give 5 batches, and len() says 4.
Lightning's fit loop ends an epoch after len() batches, so one sample is never trained, in every epoch.
Imports litdata and torch only. Exits 1 while len() is short, 0 once it equals the batches the loader yields.
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
        mixture = CombinedStreamingDataset([source(root, "a", range(4)), source(root, "b", range(100, 107))],
                                           iterate_over_all=True)
        loader = StreamingDataLoader(mixture, batch_size=3, num_workers=2)
        promised = len(loader)
        batches = [batch["id"].tolist() for batch in loader]
        print(f"len() = {promised}; the loader yielded {len(batches)} batches: {batches}")
        if promised < len(batches):
            print(f"a trainer that stops after len() batches never sees {batches[promised:]}")
            sys.exit(1)
        sys.exit(0)
