"""Loader throughput on uneven decode costs: in_order=True, plain in_order=False, and dynbsz's
exactly-once in_order=False, side by side in one process.

Each sample really sleeps its decode cost in a worker (fast text, slow video).
Throughput is reported as delivered samples per second and as a fraction of the
physical limit: total decode cost divided by the number of workers, i.e. the
makespan of a perfectly balanced schedule with no overhead.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import asdict, dataclass
from typing import Callable

from torch.utils.data import Sampler
from torchdata.stateful_dataloader import StatefulDataLoader

from .datasets import TraceMapDataset
from .loader import build_loader
from .loader_base import identity, torchdata_quiet
from .loader_config import LoaderConfig
from .order import epoch_order
from .tables import pct, table
from .workload import SourceSpec, Workload

#: 80% text at 2 ms a sample, 20% video at 20 ms: the in_order=False use case.
MIXED = Workload((SourceSpec("text", 0.8, median_tokens=1000, sigma=0.5, cost_base_s=0.002),
                  SourceSpec("video", 0.2, median_tokens=8000, sigma=0.3, cost_base_s=0.020)))


@dataclass(frozen=True)
class LoaderBenchRow:
    mode: str
    samples: int
    seconds: float
    samples_per_s: float
    fraction_of_limit: float
    exactly_once: bool


class _ListSampler(Sampler):
    def __init__(self, order):
        self.order = order

    def __iter__(self):
        return iter(self.order)

    def __len__(self):
        return len(self.order)


def _time(fn: Callable[[], list], repeat: int) -> tuple[float, list]:
    best, ids = float("inf"), []
    for _ in range(repeat):
        t0 = time.perf_counter()
        ids = fn()
        best = min(best, time.perf_counter() - t0)
    return best, ids


def run(samples: int = 400, workers: int = 4, prefetch_factor: int = 2, seed: int = 0, repeat: int = 3
        ) -> list[LoaderBenchRow]:
    trace = MIXED.sample(samples, seed)
    dataset = TraceMapDataset(trace)
    order = epoch_order(samples, seed, 0).tolist()
    limit_s = trace.total_cost_s() / workers

    def plain(in_order: bool) -> Callable[[], list]:
        def go():
            dl = StatefulDataLoader(dataset, batch_size=1, sampler=_ListSampler(order), num_workers=workers,
                                    prefetch_factor=prefetch_factor, in_order=in_order, collate_fn=identity)
            return [s["id"] for batch in dl for s in batch]
        return go

    def ours(in_order: bool) -> Callable[[], list]:
        def go():
            ld = build_loader(dataset, None, None, LoaderConfig(num_workers=workers, prefetch_factor=prefetch_factor,
                                                                in_order=in_order, seed=seed))
            try:
                return [sid for step in ld for sid in step.sample_ids]
            finally:
                ld.close()
        return go

    modes = [("torchdata in_order=True", plain(True)), ("torchdata in_order=False", plain(False)),
             ("dynbsz in_order=True", ours(True)), ("dynbsz exactly-once in_order=False", ours(False))]
    rows = []
    with warnings.catch_warnings(), torchdata_quiet():
        warnings.simplefilter("ignore")
        for name, fn in modes:
            seconds, ids = _time(fn, repeat)
            rows.append(LoaderBenchRow(name, samples, seconds, samples / seconds, limit_s / seconds,
                                       sorted(ids) == list(range(samples))))
    return rows


def format_table(rows: list[LoaderBenchRow]) -> str:
    lines = [table(["mode", "samples", "seconds", "samples/s", "of limit", "exactly-once"],
                   [[r.mode, r.samples, f"{r.seconds:.3f}", f"{r.samples_per_s:.1f}", pct(r.fraction_of_limit, 1),
                     "yes" if r.exactly_once else "NO"] for r in rows])]
    by = {r.mode: r for r in rows}
    ours, theirs = by.get("dynbsz exactly-once in_order=False"), by.get("torchdata in_order=False")
    if ours and theirs:
        lines.append(f"exactly-once out of order runs at {pct(ours.samples_per_s / theirs.samples_per_s, 1)} of plain "
                     "in_order=False (goal: within 5%)")
    return "\n".join(lines)


def rows_to_json(rows: list[LoaderBenchRow]) -> list[dict]:
    return [asdict(r) for r in rows]
