"""litdata 0.2.76, L15: a cycling ParallelStreamingDataset resumes each worker in the last batch's worker's epoch.

Each source's state holds one `current_epoch` for every worker: the main process's, which `update_epoch_counters`
(litdata/streaming/dataloader.py:897) sets from the cycles of the worker that produced the last batch. Workers reach
the end of a source's cycle at different times, so a worker a cycle behind resumes its part, and shuffles it, with
another cycle's epoch (parallel.py:197-209 hand the state to the sources as it is). Here: two shuffled sources of 4,
`length=4`, 2 workers, batch 1, a checkpoint after batch 5 (epoch 1's second) restored into a fresh loader: the
resumed run delivers other samples than the run it restores (as released L2 fails it first: a resume routes its
first batch to worker 0, so it needs L2's diff too). Imports litdata and torch only. Exits 1 while the resumed run
differs, 0 once it matches.
"""

import sys
import tempfile

from litdata import ParallelStreamingDataset, StreamingDataLoader, StreamingDataset
from litdata.streaming.writer import BinaryWriter

RESTORE = 5   # epoch 1's second batch


def write(root: str, name: str, ids: range) -> None:
    writer = BinaryWriter(f"{root}/{name}", chunk_size=1)
    for i, sample in enumerate(ids):
        writer.add_item(i, {"id": sample})
    writer.done()
    writer.merge()


def make(root: str) -> StreamingDataLoader:
    parts = [StreamingDataset(f"{root}/{name}", shuffle=True, seed=0) for name in "ab"]
    return StreamingDataLoader(ParallelStreamingDataset(parts, length=4, seed=0), batch_size=1, num_workers=2)


def run(root: str, restore_after: int | None = None) -> list[tuple[int, int]]:
    """Two epochs; after batch restore_after, a restarted job: a fresh loader given the checkpoint."""
    loader, batches = make(root), []
    for _ in range(2):
        it = iter(loader)
        while (batch := next(it, None)) is not None:
            batches.append((batch[0]["id"].item(), batch[1]["id"].item()))
            if len(batches) == restore_after:
                state = loader.state_dict()
                loader = make(root)
                loader.load_state_dict(state)
                it = iter(loader)
    return batches


if __name__ == "__main__":   # the workers re-import this file under spawn
    with tempfile.TemporaryDirectory() as root:
        write(root, "a", range(4))
        write(root, "b", range(100, 104))
        uninterrupted, resumed = run(root), run(root, RESTORE)
        print(f"uninterrupted: {uninterrupted}\nresumed:       {resumed}")
        sys.exit(0 if resumed == uninterrupted else 1)
