"""litdata 0.2.76, L13: a checkpoint written right after a resume names the next worker as the last one.

`StreamingDataLoader.load_state_dict` keeps `obj["latest_worker_idx"] + 1` in `_latest_worker_idx`
(litdata/streaming/dataloader.py:1033-1037): the worker the resume's first batch is sent to. `state_dict` saves
`_latest_worker_idx` as the last worker that delivered (944, 970). A state saved again before the next batch (a job
restarted twice at the same step, or a checkpoint at the resume step) names the next worker, and its restore adds one
more: the workers resume out of the turn the split of the sample count among them assumes.
Here: 8 samples, 2 workers, batch 1, a job restarted twice after batch 1 and once after batch 2: sample 1 comes twice,
sample 4 never.
Imports litdata and torch only. Exits 1 while the resumed epoch differs from the uninterrupted one, 0 once it matches.
"""

import sys
import tempfile

from litdata import StreamingDataLoader, StreamingDataset
from litdata.streaming.writer import BinaryWriter


def make(root: str) -> StreamingDataLoader:
    return StreamingDataLoader(StreamingDataset(root), batch_size=1, num_workers=2)


def epoch(root: str, restores: list[int]) -> list[int]:
    """One epoch; after batch k, one restore into a fresh loader per k in restores (a restarted job)."""
    loader, ids = make(root), []
    it = iter(loader)
    while (batch := next(it, None)) is not None:
        ids.append(batch["id"].item())
        for _ in range(restores.count(len(ids))):
            state = loader.state_dict()
            loader = make(root)
            loader.load_state_dict(state)
            it = iter(loader)
    return ids


if __name__ == "__main__":   # the workers re-import this file under spawn
    with tempfile.TemporaryDirectory() as root:
        writer = BinaryWriter(root, chunk_size=1)
        for i in range(8):
            writer.add_item(i, {"id": i})
        writer.done()
        writer.merge()
        uninterrupted, resumed = epoch(root, []), epoch(root, [1, 1, 2])
        print(f"uninterrupted: {uninterrupted}\nresumed:       {resumed}")
        if resumed != uninterrupted:
            k = next((k for k, (a, b) in enumerate(zip(uninterrupted, resumed)) if a != b), None)
            k = min(len(uninterrupted), len(resumed)) if k is None else k
            print(f"first difference: batch {k}: uninterrupted {uninterrupted[k:k + 1]}, resumed {resumed[k:k + 1]}")
            sys.exit(1)
        sys.exit(0)
