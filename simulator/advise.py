"""``simulator advise``: the loader settings and gate that train the most tokens on *your* trace.

The search runs the training model (``simulator.training``: DP ranks in lockstep, the step-time
model) over the user's trace, in two stages so it stays under a minute on 2 cores:

1. the loader: ``num_workers`` x ``prefetch_factor`` x delivery: in order (torch's round robin),
   any order (``in_order=False``), ``order='balanced'`` on a ``CostModel`` fitted on the trace at
   each lookahead of ``lookaheads`` (default 32, 64 and 96; ``'auto'`` is searched as the integer
   ``dynbsz.order.auto_lookahead`` gives on the trace), and dynbsz's reorder buffer
   (``in_order=True, reorder_buffer=N``: torch out of order, the sampler's order restored in the
   main process), each with the same reference gate
   (``fixed:24``); the best by tokens at the last hour, among those within the memory cap;
2. the gate, on that loader: ``policy.advise_gate`` (the fixed sizes, then warm-up ramps between
   the per-hour winners; the best worst-ratio to the per-hour best fixed size).

Lookaheads: the balanced order levels the workers with the samples within ``lookahead`` places, and
absorbs what the estimates miss with runs of slow rounds, which need enough slow samples in reach.
32 is enough where the slowest source is a fifth of the samples (the loader benchmark's mix); where
it is rarer, it is not: on ``simulator.skew_sweep``'s ``three_source`` trace (10% video at 40 ms)
the model puts lookahead 32 at 0.86x in_order=False on estimated costs and 64 at 0.90x (prefetch 2;
at prefetch 4: 0.89x, 0.91x, and 0.92x at 96), and the real loader agrees (docs/ordering.md). A
longer lookahead moves samples farther from the sampler's order, so at equal tokens the shorter
wins (``preference``). ``LoaderConfig``'s default, ``lookahead='auto'``, derives it from the
estimates and the worker count (``dynbsz.order.auto_lookahead``: 6 slow samples per worker in reach);
pass ``auto`` among ``--lookaheads`` to search it (resolved to its integer on the trace).

Reorder-buffer sizes: ``N = m * num_workers * prefetch_factor`` for each multiple ``m`` in
``reorder_buffers`` (default 8), with 2 or more workers (one worker delivers in send order, so
there is nothing to reorder). The held samples are bounded by what is in flight as much as by
``N``: on ``ci.bench_advise``'s trace 8x the tasks in flight is never the binding limit (16x and 32x
predict the same run), while 1-4x trains fewer tokens and makes the model time every 2 ms pause
a full buffer dispatches (up to 100 s for one run of ``ci.bench_advise``'s trace). The samples
it holds count in the predicted peak buffer (``peak_buffer_samples``/``_tokens``: what reached
the main process and is not yet cut, reorder buffer included), so ``memory_cap_tokens`` sees them.

Tokens. Loaders are ranked on their tokens at the last hour; one that uses up the trace before it
(a fast loader on a short trace) is ranked at its own rate, ``tokens x horizon / when it ran out``
(``projected_tokens``), not at the trace's total, where every such loader would tie.

Ties. Tokens within ``tie_fraction`` (0.5%) of the most are *equal*: below the model's fidelity
(makespan within a few percent of the real loader, ``simulator fidelity``) and half the gap
measured between the real reorder buffer and ``in_order=False`` (0.99x, docs/ordering.md). Among
equal loaders the simplest wins, in this order: a deterministic order (the sampler's order or
the balanced permutation: the same batches every run and an exact resume) before
``in_order=False`` (arrival order: neither), then fewer workers, then a shallower prefetch, then
plain ``in_order=True`` before a reorder buffer (smaller first: it holds host memory) before
``order='balanced'`` (it needs a cost model). So ``in_order=False`` is recommended only where it
trains more than 0.5% more than every deterministic loader; the output then names the best
deterministic loader and its ratio (``deterministic_alternative``), and ``deterministic=True``
(``--deterministic``) searches only loaders that deliver a deterministic order. Loaders below the
tie band follow by tokens. The runner-up is the second loader of this ranking, with its
reference-gate run.

The recommendation, the runner-up and the defaults (``LoaderConfig()``'s knobs with 2 workers,
``fixed:200``) are each predicted in full: first step, tokens by hour, stall, peak memory.
"""

from __future__ import annotations

import os
import time
import warnings
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from dynbsz.costs import CostModel
from dynbsz.errors import ConfigError, check_int
from dynbsz.loader_config import LoaderConfig
from dynbsz.order import MAX_LOOKAHEAD, resolve_lookahead
from dynbsz.workload import Trace, Workload

from .bridge import trace_estimates
from .config import LoaderModelConfig
from .executors import ExecutorSpec, open_executor, run_points
from .gatespec import parse_gate
from .policy import FIXED_SEARCH, advise_gate
from .training import HOUR, StepModel, Trainer, TrainingConfig, TrainingRun, TrainingWorkload

WORKERS = (1, 2, 4, 8)
PREFETCH = (2, 4)
#: reorder_buffer candidates, as multiples of ``num_workers * prefetch_factor`` (the tasks in flight)
REORDER_BUFFERS = (8,)
#: the balanced order's lookahead candidates (the module docstring says why several)
LOOKAHEADS = (32, 64, 96)
#: loaders within this fraction of the most tokens are tied, and the simplest of them wins
TIE_FRACTION = 0.005
REFERENCE_GATE = "fixed:24"
DEFAULT_GATE = "fixed:200"
DEFAULT_LOADER = LoaderConfig(num_workers=2, prefetch_factor=2, shuffle=False)


def describe(lc: LoaderConfig) -> str:
    """How a loader delivers, in a few words: 'in order', 'any order', 'balanced, lookahead L', 'reorder buffer N'."""
    if lc.order == "balanced":
        return f"balanced, lookahead {lc.lookahead}"
    if lc.reorder_buffer:
        return f"reorder buffer {lc.reorder_buffer}"
    return "in order" if lc.in_order else "any order"


def preference(lc: LoaderConfig) -> tuple:
    """The tie-break among loaders of equal tokens, smallest first (the module docstring says why)."""
    balanced = lc.order == "balanced"
    simplicity = 2 if balanced else 1 if lc.reorder_buffer else 0
    # a shorter lookahead keeps samples closer to the sampler's order; an unresolved 'auto' (advise
    # resolves it before ranking) may be as long as its bound
    lookahead = lc.lookahead if lc.lookahead != "auto" else MAX_LOOKAHEAD
    return (not lc.in_order, lc.num_workers, lc.prefetch_factor or 0, simplicity, lc.reorder_buffer,
            lookahead if balanced else 0)


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
        """The searched knobs under LoaderConfig's names (``LoaderConfig(**loader_json())`` builds it);
        ``reorder_buffer`` is always there, 0 when off."""
        lc = self.loader
        d = {"num_workers": lc.num_workers, "prefetch_factor": lc.prefetch_factor, "in_order": lc.in_order,
             "order": lc.order, "reorder_buffer": lc.reorder_buffer}
        if lc.order == "balanced":
            d["lookahead"] = lc.lookahead
            d["cost_model"] = lc.cost_model.to_dict() if lc.cost_model is not None else None
        return d

    def gate_json(self, budget: int) -> dict:
        return parse_gate(self.gate).gate_for(budget).spec()    # 'auto' resolves per budget

    def code(self, budget: int, dp: int) -> str:
        lc = self.loader
        extra = f", order='balanced', lookahead={lc.lookahead}, cost_model=COST_MODEL" if lc.order == "balanced" else ""
        if lc.reorder_buffer:
            extra += f", reorder_buffer={lc.reorder_buffer}"
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


def stage1_loaders(cost_model: CostModel, workers: Sequence[int] = WORKERS, prefetch: Sequence[int] = PREFETCH,
                   reorder_buffers: Sequence[int] = REORDER_BUFFERS,
                   lookaheads: Sequence[int] = LOOKAHEADS) -> list[LoaderConfig]:
    """Every loader stage 1 runs: per workers x prefetch, in order, any order, balanced at each lookahead,
    and a reorder buffer of each multiple of the tasks in flight (2 or more workers)."""
    loaders = []
    for w in workers:
        for pf in prefetch:
            common = dict(num_workers=w, prefetch_factor=pf, shuffle=False)
            loaders.append(LoaderConfig(**common, in_order=True))
            loaders.append(LoaderConfig(**common, in_order=False))
            loaders.extend(LoaderConfig(**common, order="balanced", lookahead=la, cost_model=cost_model)
                           for la in lookaheads)
            if w >= 2:
                loaders.extend(LoaderConfig(**common, reorder_buffer=m * w * pf) for m in reorder_buffers)
    return loaders


def ended_h(run: TrainingRun, horizon_s: float) -> float | None:
    """The hour at which the run's trace ran out, if before ``horizon_s`` (else None)."""
    if run.stream_ended and run.steps and float(run.step_end_s[-1]) < horizon_s:
        return float(run.step_end_s[-1]) / HOUR
    return None


def projected_tokens(run: TrainingRun, horizon_s: float) -> float:
    """What the loaders are ranked on: tokens trained by ``horizon_s``; for a run that used up the trace
    before it, its tokens at its own rate to the horizon (``tokens x horizon / its last step's end``),
    what a longer trace would show. Without this every loader fast enough to finish the trace ties at
    the trace's total (on ``ci.bench_advise``'s trace 8 workers finish it at 18.2 h, 4 at 22.9 h)."""
    end = ended_h(run, horizon_s)
    if end is None:
        return float(run.tokens_by(horizon_s))
    return run.tokens * horizon_s / (end * HOUR)


#: the gate stage judges a trace the recommended loader uses up early only up to this share of that time:
#: gates take it at different rates, and once a gate has used it up it stops gaining
TRACE_END_SHARE = 0.9


def judged_hours(hours: Sequence[float], end_h: float | None) -> tuple[float, ...]:
    """The hours the gate stage compares gates at: ``hours``, but where the loader's trace runs out
    (at ``end_h``) before some of them, those become one hour at ``TRACE_END_SHARE`` of ``end_h``.
    After the trace ends every gate has trained all of it, so tokens there no longer tell gates apart."""
    if end_h is None:
        return tuple(hours)
    cut = round(TRACE_END_SHARE * end_h, 2)
    return tuple(sorted({h for h in hours if h < cut} | {cut}))


def rank(cands: Sequence[Candidate], horizon_s: float, tie_fraction: float = TIE_FRACTION) -> list[Candidate]:
    """Best first: the loaders within ``tie_fraction`` of the most ``projected_tokens`` at ``horizon_s``,
    simplest first (``preference``), then the rest by those tokens (ties there: ``preference`` too)."""
    if not cands:
        return []
    score = {id(c): projected_tokens(c.run, horizon_s) for c in cands}
    floor = max(score.values()) * (1.0 - tie_fraction)
    tied = [c for c in cands if score[id(c)] >= floor]
    rest = [c for c in cands if score[id(c)] < floor]
    return (sorted(tied, key=lambda c: preference(c.loader))
            + sorted(rest, key=lambda c: (-score[id(c)], preference(c.loader))))


def _distinct_ints(name: str, values: Sequence[int], maximum: int | None = None) -> tuple[int, ...]:
    """Each value once, in the order given, every one an integer >= 1 (and <= ``maximum``)."""
    values = tuple(dict.fromkeys(values))
    for v in values:
        check_int(name, v, minimum=1, maximum=maximum)
    return values


def advise(trace: Trace, budget: int, dp: int, step: StepModel, *, hours: Sequence[float] = (24.0,),
           memory_cap_tokens: int | None = None, where: str = "trace",
           reorder_buffers: Sequence[int] = REORDER_BUFFERS, lookaheads: Sequence[int] = LOOKAHEADS,
           tie_fraction: float = TIE_FRACTION,
           deterministic: bool = False, progress: Callable[[int, int, str], None] | None = None,
           executor: str | ExecutorSpec | Executor = "serial") -> dict:
    """The search the module docstring describes. Its runs go to ``executor`` (``simulator.executors``): the
    loaders of stage 1 together, then the gate search's two rounds; the default loader's run (the check
    that the trace covers the horizon) runs here first. The result is the same on any executor but for
    ``seconds``."""
    t0 = time.perf_counter()
    check_int("budget", budget, minimum=1)
    check_int("dp", dp, minimum=1, maximum=1024)
    if memory_cap_tokens is not None:
        check_int("memory_cap_tokens", memory_cap_tokens, minimum=1)
    reorder_buffers = _distinct_ints("reorder_buffers (multiples of num_workers x prefetch_factor)", reorder_buffers,
                                     maximum=1024)
    lookaheads = tuple(dict.fromkeys(lookaheads))
    _distinct_ints("lookaheads (of order='balanced')", [la for la in lookaheads if la != "auto"])
    if isinstance(tie_fraction, bool) or not isinstance(tie_fraction, (int, float)) or not 0 <= tie_fraction < 1:
        raise ConfigError(f"tie_fraction must be a number in [0, 1), got {tie_fraction!r}")
    if not isinstance(deterministic, bool):
        raise ConfigError(f"deterministic must be True or False, got {deterministic!r}")
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
    loaders = stage1_loaders(cost_model, reorder_buffers=reorder_buffers, lookaheads=lookaheads)
    # 'auto' searched as the integer dynbsz resolves it to on this trace (the ranking compares
    # lookaheads); one that resolves to a lookahead already searched is that loader, run once
    seen: set = set()
    resolved = []
    for lc in loaders:
        if lc.order == "balanced":
            lc = replace(lc, lookahead=resolve_lookahead(lc, estimates))
            key = (lc.num_workers, lc.prefetch_factor, lc.lookahead)
            if key in seen:
                continue
            seen.add(key)
        resolved.append(lc)
    loaders = resolved
    if deterministic:
        loaders = [lc for lc in loaders if lc.in_order]
    total = len(loaders) + 1
    with open_executor(executor) as ex:
        runs = run_points(_quiet_run, [(trainer(lc), budget, REFERENCE_GATE, dp) for lc in loaders], ex,
                          None if progress is None else lambda done, _, what: progress(done, total, what),
                          labels=[f"loader {lc.num_workers}w pf{lc.prefetch_factor} {describe(lc)}"
                                  for lc in loaders])
        stage1 = [Candidate(lc, REFERENCE_GATE, run) for lc, run in zip(loaders, runs)]
        within_cap = [c for c in stage1 if fits(c.run)]
        ok = rank(within_cap or stage1, horizon, tie_fraction)   # none fits: the best regardless, and said so
        best_loader = ok[0].loader
        if progress:
            progress(len(loaders), total, "gate")
        gate_hours = judged_hours(hours, ended_h(ok[0].run, horizon))
        gate_advice = advise_gate(trainer(best_loader), budget, dp, gate_hours, FIXED_SEARCH, ex)
    searched += len(loaders) + len(gate_advice.runs)
    gate_cands = [Candidate(best_loader, lab, run) for lab, run in gate_advice.runs.items() if fits(run)]
    rec_label = gate_advice.label
    rec = next((c for c in gate_cands if c.gate == rec_label), None)
    if rec is None:   # the advised gate holds more than the cap: the best that fits
        gate_cands.sort(key=lambda c: c.run.tokens_by(horizon), reverse=True)
        rec = gate_cands[0] if gate_cands else ok[0]
    # runner-up: the second loader of the ranking, with its reference-gate run (its gate is not searched)
    runner = ok[1] if len(ok) > 1 else None
    # in_order=False recommended: what the best deterministic loader would cost (its projected tokens as a
    # fraction of the recommended loader's, both with the reference gate), so the trade is visible
    alternative = None
    if not best_loader.in_order:
        det = rank([c for c in within_cap or stage1 if c.loader.in_order], horizon, tie_fraction)
        if det:
            tokens = projected_tokens(det[0].run, horizon)
            alternative = {"loader": det[0].loader_json(), "delivery": describe(det[0].loader),
                           "tokens": det[0].run.tokens_by(horizon),
                           "ratio": tokens / max(projected_tokens(ok[0].run, horizon), 1.0)}
    if progress:
        progress(total, total, "done")
    out = {
        "recommended": _entry(rec, hours, budget, dp),
        "runner_up": _entry(runner, hours, budget, dp) if runner is not None else None,
        "default": _entry(default, hours, budget, dp),
        "configs_searched": searched,
        # every loader of stage 1 with its reference-gate tokens at the last hour: the delivery (in order,
        # any order, balanced, reorder buffer) is searched like workers and prefetch
        # (projected_tokens: what they are ranked on; trace_ended_h: when a fast loader used up the trace)
        "loaders_searched": [{**c.loader_json(), "tokens": c.run.tokens_by(horizon),
                              "projected_tokens": round(projected_tokens(c.run, horizon)),
                              "trace_ended_h": ended_h(c.run, horizon),
                              "peak_buffer_tokens": c.run.peak_buffer_tokens} for c in stage1],
        "seconds": time.perf_counter() - t0,
        "trace": {"samples": len(trace), "sources": list(trace.source_names)},
        "budget": budget, "dp": dp, "hours": list(hours), "step_time": step.to_json(),
        "memory_cap_tokens": memory_cap_tokens,
        "memory_cap_met": fits(rec.run),
        "reorder_buffers": list(reorder_buffers),
        "lookaheads": list(lookaheads),
        "tie_fraction": tie_fraction,
        "deterministic": deterministic,
        # with in_order=False recommended: the best loader of a deterministic order, its tokens and ratio; else None
        "deterministic_alternative": alternative,
        "trace_ended_loaders": sum(ended_h(c.run, horizon) is not None for c in stage1),
        "gate_score": gate_advice.score,
        # the hours the gate was chosen at: ``hours``, unless the recommended loader used up the trace before
        # the last of them (then up to 90% of the time it lasted: judged_hours)
        "gate_hours": list(gate_hours),
    }
    return out


def _quiet_run(trainer: Trainer, budget: int, gate: str, dp: int) -> TrainingRun:
    # module level: an executor pickles it (and the trainer) to run it in another process
    with warnings.catch_warnings():   # in_order=False's LoaderWarning: its costs are the tie-break's business
        warnings.simplefilter("ignore")
        return trainer.run(budget, gate, dp)


def _entry(c: Candidate, hours, budget: int, dp: int) -> dict:
    return {"loader": c.loader_json(), "delivery": describe(c.loader), "gate": c.gate_json(budget), "gate_label": c.gate,
            "predicted": c.predicted(hours), "code": c.code(budget, dp)}


def read_trace(path: str) -> Trace:
    """The user's trace; a missing or malformed file is a one-line ConfigError naming the problem."""
    if not os.path.exists(path):
        raise ConfigError(f"--trace {path}: no such file")
    trace = Trace.read_csv(path)
    if np.all(trace.cost_s == 0):
        raise ConfigError(f"--trace {path}: every cost_s is 0; advise needs the decode costs "
                          "(python -m dynbsz profile measures them)")
    return trace


__all__ = ["advise", "read_trace", "rank", "preference", "projected_tokens", "stage1_loaders", "describe"]
