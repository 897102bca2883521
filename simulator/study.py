"""The cold-start study (the seed PR's table, extended) and gate sweeps.

A *point* is (token budget, gate, DP size). Each DP rank reads its own shard of
one seeded stream (rows ``rank::dp``, a DistributedSampler without shuffle)
through its own modelled loader into its own real ``GreedyPacker``; ranks are
independent, as in the seed's probe (one process per DP stream, no collectives).
Per point we report the ready time of the first micro-batch (p50 across ranks),
the candidates fetched before it, its global fill, and the global fill over the
next ``steps`` micro-batches: the reviewers' open question of whether a small
buffer costs fill in steady state, not just at the first step.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import Executor
from dataclasses import asdict, dataclass, field, replace
from typing import Callable

import numpy as np

from dynbsz import PackerConfig
from dynbsz.config import OVERLONG_POLICIES
from dynbsz.errors import ConfigError, check_choice, check_int
from dynbsz.tables import budget_label
from dynbsz.workload import Trace, Workload

from . import metrics
from .config import LoaderModelConfig, StepTime
from .dynbatch import check_overlong, run_rank, shard, truncate
from .executors import ExecutorSpec, open_executor, run_points
from .gatespec import GateSpec, parse_gate
from .workloads import SEED_STREAM, SEED_TEXT, Stream, mean_tokens, smallest_sample

K = 1024
DEFAULT_BUDGETS = (512 * K, 1024 * K, 128 * K, 256 * K, 2048 * K)
DEFAULT_GATES = ("fixed:200", "fixed:24", "context_aware", "token_aware", "fixed:8", "fixed:16", "fixed:32")
DEFAULT_DP = (1, 2, 4, 8)

#: How the calibrated study models each rank's fetching: one decode in flight at a time
#: (one worker; prefetch keeps it busy), so ready time is the sum of the costs of the
#: candidates fetched: exactly linear, as the seed measured. docs/simulator.md explains.
CALIBRATED_LOADER = LoaderModelConfig(num_workers=1, prefetch_factor=2, batch_size=1, in_order=True)

#: The seed PR's DP1 natural-completion measurements (shuffle seed 42): (budget, gate) -> seconds.
SEED_READY_S = {(512 * K, "fixed:200"): 5861.24, (512 * K, "fixed:24"): 576.75,
                (1024 * K, "fixed:200"): 5063.80, (1024 * K, "fixed:24"): 589.63}
#: ... and first-micro-batch source fill at buffer 24.
SEED_FILL = {(512 * K, "fixed:24"): 0.997480, (1024 * K, "fixed:24"): 0.996184}
#: The seed's 512K / shuffle seed 43 table (another stream; for comparison, not calibrated):
#: (dp, gate) -> (ready p50 s, global fill).
SEED_512K_SEED43 = {(1, "fixed:8"): (191.61, 0.931940), (1, "fixed:24"): (478.76, 0.987411),
                    (2, "fixed:8"): (244.67, 0.955143), (2, "fixed:16"): (392.61, 0.982879),
                    (2, "fixed:24"): (567.99, 0.982879), (4, "fixed:16"): (351.15, 0.979949),
                    (4, "fixed:24"): (547.36, 0.984475), (4, "fixed:32"): (696.47, 0.984475),
                    (8, "fixed:32"): (667.50, 0.986668)}
#: Calibration tolerances the issue sets: ready time within 10%, fill within 1.5 points.
READY_TOLERANCE = 0.10
FILL_TOLERANCE_POINTS = 1.5

MAX_STREAM = 1 << 24


@dataclass(frozen=True)
class StudyConfig:
    budgets: tuple[int, ...] = DEFAULT_BUDGETS
    gates: tuple[str, ...] = DEFAULT_GATES
    dp_sizes: tuple[int, ...] = DEFAULT_DP
    steps: int = 500                      # steady-state micro-batches after the first
    seed: int = SEED_STREAM
    workload: Workload = SEED_TEXT
    loader: LoaderModelConfig = CALIBRATED_LOADER
    step: StepTime = StepTime()
    truncate: bool = True                 # samples longer than the budget are cut to it (VeOmni's transforms)
    overlong: str = "emit_alone"          # the packer's policy for samples the budget cannot hold
    trace: Trace | None = None            # a fixed stream (sampler order) instead of the generated workload

    def __post_init__(self) -> None:
        for name in ("budgets", "gates", "dp_sizes"):
            if not isinstance(getattr(self, name), tuple) or not getattr(self, name):
                raise ConfigError(f"{name} must be a non-empty tuple, got {getattr(self, name)!r}")
        for b in self.budgets:
            check_int("budget", b, minimum=1)
        for d in self.dp_sizes:
            check_int("dp size", d, minimum=1, maximum=1024)
        check_int("steps", self.steps, minimum=0)
        check_int("seed", self.seed, minimum=0)
        check_choice("overlong", self.overlong, OVERLONG_POLICIES)
        if not isinstance(self.loader, LoaderModelConfig):
            raise ConfigError(f"loader must be a LoaderModelConfig, got {type(self.loader).__name__}")
        for g in self.gates:
            parse_gate(g)
        if self.trace is not None and not isinstance(self.trace, Trace):
            raise ConfigError(f"trace must be a dynbsz.workload.Trace, got {type(self.trace).__name__}")
        if not self.truncate:
            smallest, where = ((int(self.trace.tokens.min()), "in the trace") if self.trace is not None
                               else (smallest_sample(self.workload), "the workload's smallest min_tokens"))
            for b in self.budgets:
                check_overlong(smallest, PackerConfig(b, overlong=self.overlong), where)


@dataclass(frozen=True)
class StudyRow:
    budget: int
    gate: str
    dp: int
    ready_p50_s: float = math.nan
    ready_s: tuple = ()
    candidates_p50: float = math.nan     # samples fetched before the first micro-batch (p50 across ranks)
    first_fill: float = math.nan         # global fill of the first micro-batch
    steady_fill: float = math.nan        # mean global fill over the next `steps` micro-batches
    steady_fill_min: float = math.nan
    steps: int = 0                       # steady-state micro-batches measured (fewer if a trace ran out)
    gate_spec: dict | None = None
    error: str | None = None             # why the point could not run (e.g. a gate that fails closed)
    wall_s: float = 0.0

    def to_json(self) -> dict:
        d = asdict(self)
        d["ready_s"] = list(self.ready_s)
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}


@dataclass
class Study:
    """Runs points of a ``StudyConfig``; one stream shared by every point (prefix-stable)."""

    config: StudyConfig = field(default_factory=StudyConfig)

    def __post_init__(self) -> None:
        self.stream = Stream(self.config.workload, self.config.seed)
        self._mean_tokens: dict[int, float] = {}

    def specs(self) -> list[GateSpec]:
        return [parse_gate(g) for g in self.config.gates]

    def _per_rank_estimate(self, budget: int) -> int:
        if budget not in self._mean_tokens:
            self._mean_tokens[budget] = mean_tokens(self.config.workload, budget if self.config.truncate else None)
        per_cut = budget / max(self._mean_tokens[budget], 1.0)
        return int(1.2 * (self.config.steps + 1) * per_cut) + 256

    def point(self, budget: int, gate: str | GateSpec, dp: int) -> StudyRow:
        cfg = self.config
        spec = gate if isinstance(gate, GateSpec) else parse_gate(gate)
        check_int("budget", budget, minimum=1)
        check_int("dp size", dp, minimum=1)
        t0 = time.perf_counter()
        try:
            gates = [spec.gate_for(budget) for _ in range(dp)]   # one per rank: a user gate may keep state
        except ConfigError as e:
            return StudyRow(budget, spec.label, dp, error=str(e))
        packer_cfg = PackerConfig(budget, overlong=cfg.overlong)
        fixed = cfg.trace is not None
        if fixed and len(cfg.trace) < dp:
            return StudyRow(budget, spec.label, dp, error=f"the trace has {len(cfg.trace)} samples, fewer than "
                                                          f"dp size {dp}")
        n = len(cfg.trace) if fixed else dp * self._per_rank_estimate(budget)
        while True:
            trace = cfg.trace if fixed else self.stream.take(n)
            if cfg.truncate:
                trace = truncate(trace, budget)
            else:
                check_overlong(int(trace.tokens.min()), packer_cfg, "in this stream")
            runs = [run_rank(shard(trace, r, dp), packer_cfg, gates[r], cfg.loader, cfg.step,
                             max_cuts=cfg.steps + 1, rank=r) for r in range(dp)]
            if fixed or not any(run.stream_ended for run in runs):
                break    # a trace file is what it is: a short one is measured as far as it goes
            if n >= MAX_STREAM:
                return StudyRow(budget, spec.label, dp, gate_spec=gates[0].spec(),
                                error=f"the gate did not cut {cfg.steps + 1} micro-batches within {n} samples")
            n = min(2 * n, MAX_STREAM)
            gates = [spec.gate_for(budget) for _ in range(dp)]
        if any(len(run) == 0 for run in runs):
            return StudyRow(budget, spec.label, dp, gate_spec=_jsonable(gates[0].spec()),
                            error="a rank's stream held no sample to cut")
        ready = np.array([run.ready_s for run in runs])
        first = np.array([[run.tokens[0]] for run in runs])
        steps = min([cfg.steps] + [len(run) - 1 for run in runs])
        row = dict(ready_p50_s=float(np.median(ready)), ready_s=tuple(ready.tolist()),
                   candidates_p50=float(np.median([run.candidates_before_first for run in runs])),
                   first_fill=float(metrics.global_fill(first, budget)[0]), steps=steps)
        if steps:
            steady = metrics.global_fill(np.stack([run.tokens[1:steps + 1] for run in runs]), budget)
            row.update(steady_fill=float(steady.mean()), steady_fill_min=float(steady.min()))
        return StudyRow(budget, spec.label, dp, gate_spec=_jsonable(gates[0].spec()),
                        wall_s=time.perf_counter() - t0, **row)

    def points(self) -> list[tuple[int, GateSpec, int]]:
        return [(b, s, d) for b in self.config.budgets for s in self.specs() for d in self.config.dp_sizes]

    def run(self, progress: Callable[[int, int, str], None] | None = None,
            executor: str | ExecutorSpec | Executor = "serial") -> list[StudyRow]:
        """Every point, on ``executor`` (``simulator.executors``); the same rows on any of them but for
        ``wall_s``. A gate travels as its label and is parsed where the point runs, so a ``MODULE:FACTORY``
        gate must import there (and an ``auto:FILE.json`` be readable there)."""
        pts = self.points()
        with open_executor(executor) as ex:
            rows = run_points(_point, [(self.config, b, s.label, d) for b, s, d in pts], ex, progress,
                              labels=[f"{budget_label(b)} {s.label} dp{d}" for b, s, d in pts])
        if progress:
            progress(len(pts), len(pts), "done")
        return rows


def _point(config: StudyConfig, budget: int, gate: str, dp: int) -> StudyRow:
    # module level, with the gate's label rather than its GateSpec (which holds lambdas): an executor
    # pickles both to run the point in another process
    return Study(config).point(budget, gate, dp)


def _jsonable(spec) -> dict | None:
    import json

    try:
        json.dumps(spec)
        return spec
    except (TypeError, ValueError):
        return {"repr": repr(spec)}


def calibration(config: StudyConfig | None = None) -> list[dict]:
    """The four DP1 points the default workload is calibrated on, model against seed."""
    base = config or StudyConfig()
    study = Study(replace(base, dp_sizes=(1,), steps=0))
    out = []
    for (budget, gate), seed_ready in SEED_READY_S.items():
        row = study.point(budget, gate, 1)
        seed_fill = SEED_FILL.get((budget, gate))
        ready_err = row.ready_p50_s / seed_ready - 1.0
        fill_diff = None if seed_fill is None else 100.0 * (row.first_fill - seed_fill)
        out.append({"budget": budget, "gate": gate, "seed_ready_s": seed_ready, "model_ready_s": row.ready_p50_s,
                    "ready_error": ready_err, "seed_fill": seed_fill, "model_fill": row.first_fill,
                    "fill_diff_points": fill_diff, "candidates": row.candidates_p50,
                    "ok": abs(ready_err) <= READY_TOLERANCE and (fill_diff is None or
                                                                 abs(fill_diff) <= FILL_TOLERANCE_POINTS)})
    return out


# ---- the answer at a glance ------------------------------------------------------------------------

#: The seed PR's question: what its gate buys at the first step, and costs in steady fill, against the
#: default buffer it replaces.
SEED_GATE = "context_aware"
BASELINE_GATE = "fixed:200"


def summary_scope(budgets, dp_sizes) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The points the summary shows: the seed's budgets among those run (all of them when the run has none
    of the seed's), at the smallest and the largest DP size: the two ends of the DP range the seed asked about."""
    seed_budgets = {b for b, _ in SEED_READY_S}
    shown = tuple(b for b in budgets if b in seed_budgets) or tuple(budgets)
    return shown, tuple(sorted({min(dp_sizes), max(dp_sizes)}))


def _figures(row: StudyRow | None) -> tuple:
    # what a reader of the summary compares; two gates equal in all of it are one policy there
    if row is None:
        return ("missing",)
    if row.error:
        return ("error", row.error)
    return tuple(None if isinstance(v, float) and math.isnan(v) else v for v in
                 (row.ready_p50_s, row.ready_s, row.candidates_p50, row.first_fill, row.steady_fill,
                  row.steady_fill_min, row.steps))


def summarize(rows, budgets, dp_sizes, gate: str = SEED_GATE, baseline: str = BASELINE_GATE) -> dict:
    """The study's answer at a glance, a pure function of its rows.

    ``table``: per budget of ``budgets``, one entry per distinct policy at the DP sizes ``dp_sizes``: gates
    whose figures are identical at every one of those points share an entry (``gates``, ``baseline`` and
    ``gate`` first, then the run's order). ``conclusion``: ``gate`` against ``baseline`` at the smallest
    budget and DP size where both ran, and the range of the ready-time ratio and steady-fill cost over
    every DP size run at ``budgets``; None (and ``no_conclusion`` says why) when no such pair ran.
    """
    by_point = {(r.budget, r.gate, r.dp): r for r in rows}
    run_gates = list(dict.fromkeys(r.gate for r in rows))
    order = [g for g in (baseline, gate) if g in run_gates] + [g for g in run_gates if g not in (baseline, gate)]
    table = []
    for b in budgets:
        groups: dict[tuple, list[str]] = {}
        for g in order:
            key = tuple(_figures(by_point.get((b, g, d))) for d in dp_sizes)
            groups.setdefault(key, []).append(g)
        for names in groups.values():
            points = []
            for d in dp_sizes:
                r = by_point.get((b, names[0], d))
                points.append({"dp": d, "ready_p50_s": r.ready_p50_s, "candidates_p50": r.candidates_p50,
                               "first_fill": r.first_fill, "steady_fill": r.steady_fill,
                               "steady_fill_min": r.steady_fill_min, "error": r.error} if r is not None
                              else {"dp": d, "error": "not run"})
            table.append({"budget": b, "gates": names, "points": points})
    all_dp = sorted({r.dp for r in rows})
    pairs = []
    for b in sorted(budgets):
        for d in all_dp:
            g, base = by_point.get((b, gate, d)), by_point.get((b, baseline, d))
            if g is not None and base is not None and not g.error and not base.error:
                pairs.append((b, d, g, base))
    out = {"budgets": list(budgets), "dp_sizes": list(dp_sizes), "gate": gate, "baseline": baseline,
           "table": table, "conclusion": None, "no_conclusion": None}
    if not pairs:
        missing = [name for name in (gate, baseline) if name not in run_gates]
        out["no_conclusion"] = (f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not among the gates run" if missing else
                                f"{gate} and {baseline} did not both run at any of "
                                f"{','.join(budget_label(b) for b in budgets)}")
        return out
    # a zero-cost trace readies both at 0 s: no ratio, rather than a division by zero
    speedups = [base.ready_p50_s / g.ready_p50_s if g.ready_p50_s > 0 else math.nan for _, _, g, base in pairs]
    costs = [100.0 * (base.steady_fill - g.steady_fill) for _, _, g, base in pairs]
    known_speedups = [x for x in speedups if not math.isnan(x)]
    known_costs = [x for x in costs if not math.isnan(x)]    # NaN where --steps 0 measured no steady state
    b, d, g, base = pairs[0]
    out["conclusion"] = {
        "budget": b, "dp": d, "gate_ready_s": g.ready_p50_s, "baseline_ready_s": base.ready_p50_s,
        "speedup": speedups[0], "gate_steady_fill": g.steady_fill, "baseline_steady_fill": base.steady_fill,
        "fill_cost_points": costs[0], "steps": min(g.steps, base.steps),
        "over_budgets": sorted({p[0] for p in pairs}), "over_dp_sizes": sorted({p[1] for p in pairs}),
        "speedup_range": [min(known_speedups), max(known_speedups)] if known_speedups else None,
        "fill_cost_points_range": [min(known_costs), max(known_costs)] if known_costs else None,
    }
    return out
