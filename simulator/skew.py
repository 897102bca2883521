"""The in_order skew study: what ``in_order=False`` does to the data mix when costs are uneven, and
what dynbsz's ``order='balanced'`` (in_order=True) does instead.

Every setting reads the same trace through the same modelled loader; we report
per-source share over windows of steps (and its largest deviation from the
overall mix), displacement from sampler order, and what each buys: makespan,
throughput (also as a fraction of the limit), consumer stall fraction, cold start.

``study`` adds the balanced order, as ``python -m dynbsz bench-loader`` runs it:
the workers spend the **true** costs, the trace's times a seeded lognormal factor
(``cost_noise``; 0 takes the trace's costs as true), and the balanced order is
computed by ``dynbsz.order.loader_order`` on **estimates**: the true costs themselves
("exact"), or a ``dynbsz.costs.CostModel`` fitted on the trace and applied to each
sample's (tokens, source) ("estimated": it knows each source's cost, not the noise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from dynbsz.costs import CostModel
from dynbsz.errors import check_int
from dynbsz.loader_config import LoaderConfig, check_lookahead
from dynbsz.order import resolve_lookahead
from dynbsz.workload import Trace, with_cost_noise

from . import metrics
from .bridge import LoaderOrder, trace_estimates
from .config import LoaderModelConfig, StepTime
from .loader_model import LoaderRun, physical_bound_s, simulate

#: The study's defaults. The cost noise is ``python -m dynbsz bench-loader``'s (0.3); the lookahead is
#: not: bench-loader and LoaderConfig default to 'auto' (``dynbsz.order.auto_lookahead``), the skew study to 16, the lookahead its figures in
#: docs/simulator.md were taken at (and docs/ordering.md's choice when the source mix must stay closer to
#: the sampler's: on the bench mix, prefetch 2, going to 32 lifts estimated costs only 84.1% -> 84.4% of
#: the limit while the share shift on exact costs grows 0.20 -> 0.32).
#: Pass ``--lookahead auto`` to study bench-loader's setting.
DEFAULT_COST_NOISE = 0.3
DEFAULT_LOOKAHEAD = 16


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
    limit_s: float = math.nan    # no schedule ends sooner: max(decode cost / workers, consumer time)
    order: str = "sampler"       # 'sampler' or 'balanced' (dynbsz's order, in_order=True)
    costs: str | None = None     # balanced: what it was ordered on, 'exact' or 'estimated'
    lookahead: int | None = None

    @property
    def mode(self) -> str:
        if self.order == "balanced":
            return f"balanced, {self.costs} costs"
        return f"in_order={self.in_order}"

    @property
    def fraction_of_limit(self) -> float:
        return self.limit_s / self.makespan_s if self.makespan_s > 0 else math.nan

    @property
    def max_displacement(self) -> int:
        return int(self.displacement["max"])

    def to_json(self, names) -> dict:
        return {"in_order": self.in_order, "makespan_s": self.makespan_s, "throughput_per_s": self.throughput,
                "stall_fraction": self.stall_fraction, "cold_start_s": self.cold_start_s, "skew": self.skew,
                "shift_vs_sampler": self.shift,
                "displacement": self.displacement, "overall_share": dict(zip(names, self.overall.tolist())),
                "window_shares": {n: self.shares[:, i].tolist() for i, n in enumerate(names)},
                "mode": self.mode, "order": self.order, "costs": self.costs, "lookahead": self.lookahead,
                "limit_s": self.limit_s, "fraction_of_limit": self.fraction_of_limit}


def makespan_limit_s(trace: Trace, run: LoaderRun, step: StepTime) -> float:
    """A lower bound on ``run``'s makespan (its last hand-out): the decode cost over the workers, or the
    consumer's steps between its batches (all but the last), whichever is longer."""
    consumer = 0.0
    if len(run) > 1 and (step.base_s or step.per_token_s):
        tokens = np.add.reduceat(trace.tokens[run.samples], run.offsets[:-1]) if len(run.samples) else np.zeros(0)
        consumer = float(np.sum(step.of(tokens[:-1].astype(np.float64))))
    return max(physical_bound_s(trace, run.config), consumer)


def analyse(trace: Trace, run: LoaderRun, window: int, step: StepTime | None = None) -> SkewResult:
    """Skew metrics of one loader run over one epoch of ``trace`` (sampler order = trace order), with
    the consumer's ``step`` for the limit (default: an infinitely fast consumer)."""
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
        cold_start_s=metrics.time_to_first(run.handout_s), limit_s=makespan_limit_s(trace, run, step or StepTime()))


def compare_orders(trace: Trace, loader: LoaderModelConfig, step: StepTime,
                   window: int) -> tuple[SkewResult, SkewResult]:
    """The same trace and loader with in_order=True and in_order=False (one epoch, no shuffle)."""
    loader = _in_trace_order(loader)
    out = []
    for in_order in (True, False):
        cfg = replace(loader, in_order=in_order)
        out.append(analyse(trace, simulate(trace, cfg, step=step), window, step))
    return out[0], out[1]


def _in_trace_order(loader: LoaderModelConfig) -> LoaderModelConfig:
    if loader.shuffle_seed is not None or loader.dataset != "map":
        loader = replace(loader, shuffle_seed=None, dataset="map", shard_sizes=None)
    return loader


def balanced_loader(loader: LoaderModelConfig, lookahead: int | str) -> LoaderConfig:
    """The dynbsz loader a model config stands for, with ``order='balanced'`` (one rank, trace order as the
    sampler's: ``shuffle=False``)."""
    return LoaderConfig(num_workers=loader.num_workers, prefetch_factor=loader.prefetch or None, in_order=True,
                        persistent_workers=loader.persistent_workers, fetch_batch_size=loader.batch_size,
                        shuffle=False, order="balanced", lookahead=lookahead)


def run_balanced(true: Trace, estimates: np.ndarray, loader: LoaderModelConfig, step: StepTime, window: int,
                 lookahead: int | str, costs: str) -> SkewResult:
    """dynbsz's balanced order on ``estimates`` through the model of ``loader`` (in_order=True), whose
    workers spend ``true.cost_s``. The order is ``dynbsz.order.loader_order``'s (``bridge.LoaderOrder``)."""
    config = balanced_loader(loader, lookahead)
    model = LoaderModelConfig.for_loader(config, sampler=False, worker_startup_s=loader.worker_startup_s,
                                         task_overhead_s=loader.task_overhead_s,
                                         result_latency_s=loader.result_latency_s)
    run = simulate(true, model, step=step, order_fn=LoaderOrder(config, len(true), estimates))
    # the lookahead the order ran with: 'auto' resolved by dynbsz, as the loader resolves it
    return replace(analyse(true, run, window, step), order="balanced", costs=costs,
                   lookahead=resolve_lookahead(config, estimates))


@dataclass(frozen=True)
class SkewStudy:
    """in_order=True, in_order=False and (with workers) the balanced order on exact and estimated costs,
    all on the same true costs."""

    true: Trace                      # the durations every row spends
    plain: tuple[SkewResult, SkewResult]
    balanced: tuple[SkewResult, ...]
    cost_noise: float
    lookahead: int | str

    @property
    def results(self) -> list[SkewResult]:
        return [*self.plain, *self.balanced]


def study(trace: Trace, loader: LoaderModelConfig, step: StepTime, window: int, *,
          cost_noise: float = DEFAULT_COST_NOISE, lookahead: int | str = DEFAULT_LOOKAHEAD, seed: int = 0,
          balanced: bool = True) -> SkewStudy:
    """The skew study on true costs ``with_cost_noise(trace, cost_noise, seed)`` (as bench-loader draws
    them); the balanced rows (skipped with ``balanced=False`` or without workers) order on the true
    costs ("exact") and on ``CostModel.fit(trace)`` ("estimated")."""
    check_lookahead(lookahead)
    loader = _in_trace_order(loader)
    true = with_cost_noise(trace, cost_noise, seed)
    plain = compare_orders(true, loader, step, window)
    rows: tuple[SkewResult, ...] = ()
    if balanced and loader.num_workers:
        estimated = trace_estimates(trace, CostModel.fit(trace))
        rows = tuple(run_balanced(true, est, loader, step, window, lookahead, costs)
                     for costs, est in (("exact", true.cost_s), ("estimated", estimated)))
    return SkewStudy(true, plain, rows, float(cost_noise), lookahead)
