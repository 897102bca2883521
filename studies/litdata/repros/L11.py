"""litdata 0.2.76, L11: with persistent workers a cycling ParallelStreamingDataset starts its sources over each epoch.

`StreamingDataLoader.__iter__` continues a cycling dataset across epochs by handing it its own state
(litdata/streaming/dataloader.py:846), in the main process: a worker's copy gets it only when the worker forks, so a
persistent worker's copy finds no new counts in `ParallelStreamingDataset.__iter__` (parallel.py:197-250) and its
sources start their parts over. Here: sources of 4 and 6 samples, `length=4`, 1 worker, batch 1, three epochs with
and without persistent workers: without them the longer source goes on to its samples 104 and 105 and cycles; with
them every epoch is its first 4 samples again. Imports litdata and torch only. Exits 1 while the two runs differ.
"""

import sys
import tempfile

from litdata import ParallelStreamingDataset, StreamingDataLoader, StreamingDataset
from litdata.streaming.writer import BinaryWriter


def write(root: str, name: str, ids: range) -> None:
    writer = BinaryWriter(f"{root}/{name}", chunk_size=1)
    for i, sample in enumerate(ids):
        writer.add_item(i, {"id": sample})
    writer.done()
    writer.merge()


def run(root: str, persistent: bool) -> list[list[tuple[int, int]]]:
    mixture = ParallelStreamingDataset([StreamingDataset(f"{root}/a"), StreamingDataset(f"{root}/b")], length=4)
    loader = StreamingDataLoader(mixture, batch_size=1, num_workers=1, persistent_workers=persistent)
    return [[(a["id"].item(), b["id"].item()) for a, b in loader] for _ in range(3)]


if __name__ == "__main__":   # the workers re-import this file under spawn
    with tempfile.TemporaryDirectory() as root:
        write(root, "a", range(4))
        write(root, "b", range(100, 106))
        fresh, persistent = run(root, False), run(root, True)
        print(f"fresh workers:      {fresh}\npersistent workers: {persistent}")
        sys.exit(0 if persistent == fresh else 1)
