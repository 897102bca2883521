"""``simulator advise``: the loader settings and gate that train the most tokens on *your* trace.

The search runs the training model (``simulator.training``: DP ranks in lockstep, the step-time
model) over the user's trace, in two stages so it stays under a minute on 2 cores:

1. the loader: ``num_workers`` x ``prefetch_factor`` x ``in_order`` x ``order`` ('sampler', and
   'balanced' on a ``CostModel`` fitted on the trace), each with the same reference gate
   (``fixed:24``); the best by tokens at the last hour, among those within the memory cap;
2. the gate, on that loader: ``policy.advise_gate`` (the fixed sizes, then warm-up ramps between
   the per-hour winners; the best worst-ratio to the per-hour best fixed size).

The recommendation, the runner-up and the defaults (``LoaderConfig()``'s knobs with 2 workers,
``fixed:200``) are each predicted in full: first step, tokens by hour, stall, peak memory.
``reorder_buffer`` is not searched yet, although the loader model covers it (docs/simulator.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from dynbsz.costs import CostModel
from dynbsz.errors import ConfigError, check_int
from dynbsz.loader_config import LoaderConfig
from dynbsz.workload import Trace, Workload

from .bridge import trace_estimates
from .config import LoaderModelConfig
from .gatespec import parse_gate
from .policy import FIXED_SEARCH, advise_gate
from .training import HOUR, StepModel, Trainer, TrainingConfig, TrainingRun, TrainingWorkload

WORKERS = (1, 2, 4, 8)
PREFETCH = (2, 4)
REFERENCE_GATE = "fixed:24"
DEFAULT_GATE = "fixed:200"
DEFAULT_LOADER = LoaderConfig(num_workers=2, prefetch_factor=2, shuffle=False)


@dataclass(frozen=True)
class Candidate:
    loader: LoaderConfig
    gate: str
    run: TrainingRun

    def predicted(self, hours: Sequence[float]) -> dict:
        s = self.run.summary(hours)
        return {k: s[k] for k in ("first_step_s", "first_step_p50_s", "tokens_by_hour", "stall_fraction",
                                  "straggle_fraction", "steady_fill", "peak_buffer_tokens", "peak_buffer_samples")}

    def loader_json(self) -> dict:
        lc = self.loader
        d = {"num_workers": lc.num_workers, "prefetch_factor": lc.prefetch_factor, "in_order": lc.in_order,
             "order": lc.order}
        if lc.order == "balanced":
            d["lookahead"] = lc.lookahead
            d["cost_model"] = lc.cost_model.to_dict() if lc.cost_model is not None else None
        return d

    def gate_json(self, budget: int) -> dict:
        return parse_gate(self.gate).gate_for(budget).spec()    # 'auto' resolves per budget

    def code(self, budget: int, dp: int) -> str:
        lc = self.loader
        extra = f", order='balanced', lookahead={lc.lookahead}, cost_model=COST_MODEL" if lc.order == "balanced" else ""
        g = self.gate_json(budget)
        args = ", ".join(f"{k}={v!r}" for k, v in g.items() if k not in ("kind", "policy"))
        cls = {"fixed": "FixedGate", "warmup_ramp": "WarmupRampGate", "token_aware": "TokenAwareGate"}[g["kind"]]
        if g.get("policy") == "auto":
            cls, line = "resolve_gate", f"gate = resolve_gate('auto', budget={budget})   # {args}"
        else:
            line = f"gate = {cls}({args})"
        return (f"from dynbsz import PackerConfig, {cls}\n"
                f"from dynbsz.loader_config import LoaderConfig\n"
                f"packer = PackerConfig(budget={budget})\n"
                f"{line}\n"
                f"loader = LoaderConfig(num_workers={lc.num_workers}, prefetch_factor={lc.prefetch_factor}, "
                f"in_order={lc.in_order}{extra}, dp_size={dp})")


def check_trace_covers(run: TrainingRun, trace: Trace, dp: int, hours: Sequence[float], where: str) -> None:
    if run.stream_ended:
        got = float(run.step_end_s[-1]) / HOUR if run.steps else 0.0
        raise ConfigError(f"{where}: {len(trace)} samples run out after {got:.2f} h of training at dp={dp}, before "
                          f"the requested horizon of {max(hours):g} h; give a longer trace or a shorter --hours")


def advise(trace: Trace, budget: int, dp: int, step: StepModel, *, hours: Sequence[float] = (24.0,),
           memory_cap_tokens: int | None = None, where: str = "trace",
           progress: Callable[[int, int, str], None] | None = None) -> dict:
    t0 = time.perf_counter()
    check_int("budget", budget, minimum=1)
    check_int("dp", dp, minimum=1, maximum=1024)
    if memory_cap_tokens is not None:
        check_int("memory_cap_tokens", memory_cap_tokens, minimum=1)
    if len(trace) < 2 * dp:
        raise ConfigError(f"{where}: {len(trace)} samples is too short for dp={dp} (each rank needs at least 2)")
    hours = tuple(sorted(hours))
    horizon = max(hours) * HOUR
    cost_model = CostModel.fit(trace)
    estimates = trace_estimates(trace, cost_model)
    searched = 0

    def trainer(lc: LoaderConfig) -> Trainer:
        wl = TrainingWorkload("trace", Workload(), LoaderModelConfig.for_loader(lc, sampler=False), where)
        return Trainer(TrainingConfig(workload=wl, step=step, horizon_s=horizon, trace=trace, loader_config=lc,
                                      estimates=estimates))

    def fits(run: TrainingRun) -> bool:
        return memory_cap_tokens is None or run.peak_buffer_tokens <= memory_cap_tokens

    default_run = trainer(DEFAULT_LOADER).run(budget, DEFAULT_GATE, dp)
    check_trace_covers(default_run, trace, dp, hours, where)
    default = Candidate(DEFAULT_LOADER, DEFAULT_GATE, default_run)
    searched += 1
    loaders = []
    for w in WORKERS:
        for pf in PREFETCH:
            for in_order in (True, False):
                loaders.append(LoaderConfig(num_workers=w, prefetch_factor=pf, in_order=in_order, shuffle=False))
            loaders.append(LoaderConfig(num_workers=w, prefetch_factor=pf, in_order=True, shuffle=False,
                                        order="balanced", cost_model=cost_model))
    stage1: list[Candidate] = []
    total = len(loaders) + 1
    for i, lc in enumerate(loaders):
        if progress:
            progress(i, total, f"loader {lc.num_workers}w pf{lc.prefetch_factor} "
                               f"{'balanced' if lc.order == 'balanced' else 'in_order' if lc.in_order else 'any order'}")
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = trainer(lc).run(budget, REFERENCE_GATE, dp)
        searched += 1
        stage1.append(Candidate(lc, REFERENCE_GATE, run))
    ok = [c for c in stage1 if fits(c.run)] or stage1

    def key(c: Candidate):   # most tokens at the last hour; ties: fewer workers, shallower prefetch, in order
        return (c.run.tokens_by(horizon), -c.loader.num_workers, -(c.loader.prefetch_factor or 0),
                c.loader.in_order, c.loader.order == "sampler")

    ok.sort(key=key, reverse=True)
    best_loader = ok[0].loader
    if progress:
        progress(len(loaders), total, "gate")
    gate_advice = advise_gate(trainer(best_loader), budget, dp, hours, FIXED_SEARCH)
    searched += len(gate_advice.runs)
    gate_cands = [Candidate(best_loader, lab, run) for lab, run in gate_advice.runs.items() if fits(run)]
    rec_label = gate_advice.label
    rec = next((c for c in gate_cands if c.gate == rec_label), None)
    if rec is None:   # the advised gate holds more than the cap: the best that fits
        gate_cands.sort(key=lambda c: c.run.tokens_by(horizon), reverse=True)
        rec = gate_cands[0] if gate_cands else ok[0]
    # runner-up: the second loader with the recommended gate's run replaced by its own reference run
    runner = ok[1] if len(ok) > 1 else None
    if progress:
        progress(total, total, "done")
    out = {
        "recommended": _entry(rec, hours, budget, dp),
        "runner_up": _entry(runner, hours, budget, dp) if runner is not None else None,
        "default": _entry(default, hours, budget, dp),
        "configs_searched": searched,
        # every loader of stage 1 with its reference-gate tokens at the last hour: the order (sampler or
        # 'balanced') is searched like workers, prefetch and in_order
        "loaders_searched": [{**c.loader_json(), "tokens": c.run.tokens_by(horizon),
                              "peak_buffer_tokens": c.run.peak_buffer_tokens} for c in stage1],
        "seconds": time.perf_counter() - t0,
        "trace": {"samples": len(trace), "sources": list(trace.source_names)},
        "budget": budget, "dp": dp, "hours": list(hours), "step_time": step.to_json(),
        "memory_cap_tokens": memory_cap_tokens,
        "gate_score": gate_advice.score,
    }
    return out


def _entry(c: Candidate, hours, budget: int, dp: int) -> dict:
    return {"loader": c.loader_json(), "gate": c.gate_json(budget), "gate_label": c.gate, "predicted": c.predicted(hours),
            "code": c.code(budget, dp)}


def read_trace(path: str) -> Trace:
    """The user's trace; a missing or malformed file is a one-line ConfigError naming the problem."""
    import os

    if not os.path.exists(path):
        raise ConfigError(f"--trace {path}: no such file")
    trace = Trace.read_csv(path)
    if np.all(trace.cost_s == 0):
        raise ConfigError(f"--trace {path}: every cost_s is 0; advise needs the decode costs "
                          "(python -m dynbsz profile measures them)")
    return trace


__all__ = ["advise", "read_trace"]
