"""What a reorder buffer costs before an epoch's first step: wall time and main-process memory, as figures.

    python -m ci.bench_epoch_start [--samples 500000] [--workers 2] [--repeat 3]

Each row times ``next(iter(loader))`` (the workers' start included) on zero-cost samples of the loader
benchmark's mix, with ``reorder_buffer=64``, once over the sampler's order and once over the balanced
order (lookahead 32, exact costs); on the sampler order, a separate untimed run records the peak of
Python allocations in the main process up to the first step (``tracemalloc``: it slows allocation many
times over, so it never runs while the clock does; the balanced order's own arrays are the same in both
rows, the keys are what differ). Peer, side by side in the same run: the same
loader whose sequencer reads the epoch's whole key stream before the first step (what dynbsz did
before the sequencer read it lazily). Prints one JSON report with each pair's ratios. Rounds alternate
the rows, so a load that comes and goes falls on both alike; the best of ``--repeat`` counts.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import tracemalloc
import warnings

from dynbsz.costs import TraceMeta, exact_cost
from dynbsz.datasets import TraceMapDataset
from dynbsz.loader import DynamicBatchLoader
from dynbsz.loader_config import LoaderConfig
from dynbsz.sequencer import Sequencer
from dynbsz.workload import LOADER_BENCH_MIX


class WholeStreamSequencerLoader(DynamicBatchLoader):
    """The peer: its sequencer holds every key of the epoch before the first step."""

    def _in_sequence(self, it):
        self._sequencer = Sequencer(list(self._sequencer.unreleased()))
        return super()._in_sequence(it)


def first_step(cls, dataset, config: LoaderConfig, *, traced: bool = False, **kw) -> float:
    """Seconds to the first step, or with ``traced`` the peak bytes of Python allocations meanwhile
    (tracemalloc slows allocation-heavy code many times over: never timed and traced at once)."""
    loader = cls(dataset, None, None, config, **kw)
    try:
        if traced:
            tracemalloc.start()
        t0 = time.perf_counter()
        next(iter(loader))
        seconds = time.perf_counter() - t0
        if traced:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            return peak
        return seconds
    finally:
        loader.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ci.bench_epoch_start", description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=500_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    trace = LOADER_BENCH_MIX.sample(args.samples, 0)
    dataset = TraceMapDataset(trace, time_scale=0.0)
    base = dict(num_workers=args.workers, prefetch_factor=2, reorder_buffer=64, seed=0)
    orders = {"sampler order": (LoaderConfig(**base), {}),
              "balanced order": (LoaderConfig(order="balanced", lookahead=32, **base),
                                 {"meta_fn": TraceMeta(trace, trace.cost_s), "cost_fn": exact_cost})}
    loaders = {"lazy": DynamicBatchLoader, "whole stream": WholeStreamSequencerLoader}
    best = {(o, name): float("inf") for o in orders for name in loaders}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(args.repeat):
            for o, (config, kw) in orders.items():
                for name, cls in loaders.items():
                    best[o, name] = min(best[o, name], first_step(cls, dataset, config, **kw))
        config = orders["sampler order"][0]
        peak = {name: first_step(cls, dataset, config, traced=True) for name, cls in loaders.items()}
    rows = [{"order": o, "seconds_to_first_step": best[o, "lazy"], "peer_seconds": best[o, "whole stream"],
             "time_ratio": best[o, "lazy"] / best[o, "whole stream"]} for o in orders]
    rows[0].update(peak_bytes=peak["lazy"], peer_peak_bytes=peak["whole stream"],
                   memory_ratio=peak["lazy"] / peak["whole stream"])
    report = {"benchmark": "epoch_start", "python": platform.python_version(), "cpus": os.cpu_count(),
              "samples": args.samples, "workers": args.workers, "reorder_buffer": 64, "repeat": args.repeat,
              "peer": "the sequencer reads the whole key stream before the first step", "rows": rows}
    json.dump(report, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
