"""The in_order skew study: what ``in_order=False`` does to the data mix when costs are uneven.

Both settings read the same trace through the same modelled loader; we report
per-source share over windows of steps (and its largest deviation from the
overall mix), displacement from sampler order, and what in_order=False buys:
makespan, steady-state throughput, consumer stall fraction, cold start.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from dynbsz.errors import check_int
from dynbsz.workload import Trace

from . import metrics
from .config import LoaderModelConfig, StepTime
from .loader_model import LoaderRun, simulate


@dataclass(frozen=True)
class SkewResult:
    in_order: bool
    run: LoaderRun
    shares: np.ndarray           # (windows, sources)
    overall: np.ndarray          # (sources,)
    skew: float                  # max |window share - overall share| (includes the data's own noise)
    shift: float                 # max |window share - same window in sampler order|: the loader's doing
    displacement: dict           # summary of |delivered position - sampler position| (samples)
    makespan_s: float
    throughput: float            # samples / s after the cold start
    stall_fraction: float
    cold_start_s: float

    def to_json(self, names) -> dict:
        return {"in_order": self.in_order, "makespan_s": self.makespan_s, "throughput_per_s": self.throughput,
                "stall_fraction": self.stall_fraction, "cold_start_s": self.cold_start_s, "skew": self.skew,
                "shift_vs_sampler": self.shift,
                "displacement": self.displacement, "overall_share": dict(zip(names, self.overall.tolist())),
                "window_shares": {n: self.shares[:, i].tolist() for i, n in enumerate(names)}}


def analyse(trace: Trace, run: LoaderRun, window: int) -> SkewResult:
    """Skew metrics of one loader run over one epoch of ``trace`` (sampler order = trace order)."""
    check_int("window", window, minimum=1)
    sizes = run.batch_sizes()
    steps = np.repeat(np.arange(len(run)), sizes)
    src = trace.source[run.samples]
    k = len(trace.source_names)
    shares = metrics.source_shares(src, steps, window, k)
    overall = np.bincount(src, minlength=k) / max(len(src), 1)
    # The same windows had the loader delivered in sampler order: batch b at step b.
    sampler_rows = np.sort(run.samples)
    by_batch = np.zeros(len(run), dtype=np.int64)
    by_batch[run.batch] = sizes
    sampler_shares = metrics.source_shares(trace.source[sampler_rows], np.repeat(np.arange(len(run)), by_batch),
                                           window, k)
    return SkewResult(
        in_order=run.config.in_order, run=run, shares=shares, overall=overall,
        skew=metrics.share_skew(shares, overall), shift=metrics.share_shift(shares, sampler_shares),
        displacement=metrics.summary(metrics.displacement(run.samples)),
        makespan_s=run.makespan_s, throughput=metrics.steady_throughput(run.handout_s, sizes),
        stall_fraction=metrics.stall_fraction(run.request_s, run.handout_s),
        cold_start_s=metrics.time_to_first(run.handout_s))


def compare_orders(trace: Trace, loader: LoaderModelConfig, step: StepTime,
                   window: int) -> tuple[SkewResult, SkewResult]:
    """The same trace and loader with in_order=True and in_order=False (one epoch, no shuffle)."""
    if loader.shuffle_seed is not None or loader.dataset != "map":
        loader = replace(loader, shuffle_seed=None, dataset="map")
    out = []
    for in_order in (True, False):
        cfg = replace(loader, in_order=in_order)
        out.append(analyse(trace, simulate(trace, cfg, step=step), window))
    return out[0], out[1]
