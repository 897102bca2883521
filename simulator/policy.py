"""Which buffer policy trains the most tokens by a given hour: the ``simulator policy`` study.

A point is (token budget, DP size, training workload). At each point every requested gate runs
on the *scored* stream through the training model (``simulator.training``: ranks in lockstep,
the step-time model), and so does every fixed buffer size in ``FIXED_SEARCH``: the best of
those, hour by hour, is the oracle (``best_fixed``), a bound no fixed size set in advance can
beat on this stream.

The advised gate is chosen by ``advise_gate`` on *other* streams of the same workload (the
advice streams: other seeds), never on a stream it is judged on: it searches the fixed sizes
and warm-up ramps (``WarmupRampGate``) built from them, and keeps the gate whose worst ratio to
the advice streams' per-hour best fixed size is the highest. Then it is run on the scored streams
and compared with the oracle there (``advised_ratio``, per hour).

With ``streams=S`` there are S scored and S advice streams, and every gate's tokens are the mean
over them. One stream is noisy: by hour 1 a run has trained 5-40 steps, so one step is 2-20% of
its tokens, and between sizes 2-64 which size is best at an hour is mostly that noise. An oracle
that takes the best of 12 sizes on one stream collects the noise (the maximum of 12 noisy
figures is biased upwards), and an advice chosen on one stream fits its own noise; the mean
over S streams shrinks both by about sqrt(S).

Token parity (``max_tokens=N``, ``--tokens N``): every run still goes to the last hour, and each row
also gets the time its mean trained tokens first reached N (``time_to_tokens_s``; None, JSON null,
when not within the horizon); the ``best`` entry gets the fixed size that reached N first
(``best_fixed_gate_to_tokens``, an oracle like the hour one) and the advised gate's ratio oracle
time / advised time (``advised_ratio_to_tokens``: 1.0 at best, as the hour ratios).
"""

from __future__ import annotations

import math
import time
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from dynbsz.errors import ConfigError, check_int
from dynbsz.tables import budget_label

from .executors import ExecutorSpec, SerialExecutor, open_executor, run_points
from .gatespec import parse_gate, ramp_label, ramp_row
from .training import (
    DEFAULT_STEP,
    HOUR,
    STEP_PRESETS,
    TRAINING_WORKLOADS,
    StepModel,
    Trainer,
    TrainingConfig,
    TrainingRun,
    hour_key,
    time_to_mean_tokens,
)
from .workloads import SEED_STREAM

K = 1024
DEFAULT_BUDGETS = (128 * K, 256 * K, 512 * K, 1024 * K, 2048 * K)
DEFAULT_DP = (1, 2, 4, 8)
DEFAULT_WORKLOADS = ("seed", "seed_8w", "mix")
DEFAULT_GATES = ("fixed:200", "context_aware", "token_aware", "warmup_ramp:24:200:0:100", "auto")
DEFAULT_HOURS = (1.0, 6.0, 24.0)
#: The fixed sizes the oracle (and advise) search.
FIXED_SEARCH = (2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 100, 200)
#: Ramp lengths (optimizer steps) advise tries between two fixed sizes.
RAMP_STEPS = (10, 50, 200)
#: The advice stream's seed is the scored stream's plus this: another stream of the same workload.
ADVICE_SEED_OFFSET = 1000
#: scored streams per point by default (and as many advice streams); ``--streams`` sets it
DEFAULT_STREAMS = 3
#: The goal: the advised gate reaches this share of the per-hour best fixed size.
GOAL_RATIO = 0.99


@dataclass(frozen=True)
class PolicyConfig:
    budgets: tuple[int, ...] = DEFAULT_BUDGETS
    dp_sizes: tuple[int, ...] = DEFAULT_DP
    workloads: tuple[str, ...] = DEFAULT_WORKLOADS
    gates: tuple[str, ...] = DEFAULT_GATES
    hours: tuple[float, ...] = DEFAULT_HOURS
    step: StepModel = STEP_PRESETS[DEFAULT_STEP]
    seed: int = SEED_STREAM
    fixed_search: tuple[int, ...] = FIXED_SEARCH
    max_tokens: int | None = None     # token parity: also report when each gate reached this many tokens,
    #                                   and the best fixed size and the advised gate's ratio on that measure
    streams: int = DEFAULT_STREAMS    # scored streams per point (seeds seed..seed+S-1), as many advice streams

    def __post_init__(self) -> None:
        for name in ("budgets", "dp_sizes", "workloads", "gates", "hours", "fixed_search"):
            v = getattr(self, name)
            if not isinstance(v, tuple) or (not v and name != "gates"):
                raise ConfigError(f"{name} must be a non-empty tuple, got {v!r}")
        for b in self.budgets:
            check_int("budget", b, minimum=1)
        for d in self.dp_sizes:
            check_int("dp size", d, minimum=1, maximum=1024)
        for w in self.workloads:
            if w not in TRAINING_WORKLOADS:
                raise ConfigError(f"workload={w!r} is not known; allowed values: "
                                  f"{', '.join(map(repr, TRAINING_WORKLOADS))}")
        for h in self.hours:
            if isinstance(h, bool) or not isinstance(h, (int, float)) or not math.isfinite(h) or h <= 0:
                raise ConfigError(f"hours must be positive numbers, got {h!r}")
        if list(self.hours) != sorted(set(self.hours)):
            raise ConfigError(f"hours must be increasing and distinct, got {self.hours!r}")
        for n in self.fixed_search:
            check_int("fixed search size", n, minimum=1)
        for g in self.gates:
            parse_gate(g)
        check_int("seed", self.seed, minimum=0)
        if self.max_tokens is not None:
            check_int("max_tokens", self.max_tokens, minimum=1)
        check_int("streams", self.streams, minimum=1, maximum=ADVICE_SEED_OFFSET - 1)

    @property
    def horizon_s(self) -> float:
        return max(self.hours) * HOUR

    @property
    def scored_seeds(self) -> tuple[int, ...]:
        return tuple(self.seed + i for i in range(self.streams))

    @property
    def advice_seeds(self) -> tuple[int, ...]:
        return tuple(self.seed + ADVICE_SEED_OFFSET + i for i in range(self.streams))


@dataclass(frozen=True)
class GateAdvice:
    """What ``advise_gate`` chose, and the table it chose from (on the advice stream)."""

    label: str
    score: float                       # worst ratio over hours to the advice streams' best fixed size
    best_fixed: dict                   # hour -> (label, mean tokens) on the advice streams
    candidates: dict                   # label -> {hour: mean tokens, the step in progress pro rata}
    runs: dict                         # label -> TrainingRun (the first advice stream)
    pruned: dict = field(default_factory=dict)   # label -> the hour after which it could no longer win


def _tokens(run: TrainingRun, hours: Sequence[float]) -> dict[str, int]:
    return run.tokens_by_hour(hours)


def _rate_tokens(run: TrainingRun, hours: Sequence[float]) -> dict[str, float]:
    """What advice is chosen on: tokens by each hour with the step in progress counted pro rata
    (``TrainingRun.tokens_at_rate_by``), so the choice follows the advice stream's rate and not where
    its step ends happen to fall; the scored stream is judged on whole steps."""
    return {hour_key(h): run.tokens_at_rate_by(h * HOUR) for h in hours}


def best_by_hour(table: dict[str, dict[str, int]], hours: Sequence[float]) -> dict[str, tuple[str, int]]:
    """Per hour, the label with the most tokens (ties: the first in ``table``'s order)."""
    out = {}
    for h in hours:
        k = hour_key(h)
        label = max(table, key=lambda lab: table[lab][k])
        out[k] = (label, table[label][k])
    return out


def worst_ratio(tokens: dict[str, int], best: dict[str, tuple[str, int]]) -> float:
    ratios = [tokens[k] / b if b > 0 else (1.0 if tokens[k] >= 0 else 0.0) for k, (_, b) in best.items()]
    return min(ratios) if ratios else math.nan


def ramp_candidates(best: dict[str, tuple[str, int]], sizes: Sequence[int]) -> list[str]:
    """Warm-up ramps from a size that wins early to one that wins later (from the advice streams' best sizes)."""
    fixed = [int(lab.split(":")[1]) for lab, _ in best.values()]
    out = []
    starts = sorted(set(fixed))
    for i, s in enumerate(starts):
        for f in starts[i + 1:]:
            for r in RAMP_STEPS:
                out.append(ramp_label(s, f, 0, r))
    # a ramp from the early winner one size up: the smallest step of pool growth
    first = fixed[0]
    up = [n for n in sizes if n > first]
    if up:
        for r in RAMP_STEPS:
            lab = ramp_label(first, up[0], 0, r)
            if lab not in out:
                out.append(lab)
    return out


def _mean(values: Sequence[float]) -> float:
    """The mean over streams; one stream's figure as it is (an int stays an int)."""
    return values[0] if len(values) == 1 else sum(values) / len(values)


def mean_per_key(tables: Sequence[dict[str, float]]) -> dict[str, float]:
    """Per key (an hour, a source), the mean over streams."""
    return {k: _mean([t[k] for t in tables]) for k in tables[0]}


def advise_gate(trainer: Trainer | Sequence[Trainer], budget: int, dp: int, hours: Sequence[float],
                sizes: Sequence[int] = FIXED_SEARCH, executor: Executor | None = None, *,
                prune: bool = False) -> GateAdvice:
    """Choose a gate on the streams of ``trainer`` (one, or several: the mean over them): the fixed
    sizes, then ramps between the per-hour winners.

    The score of a gate is its worst ratio, over ``hours``, to the best fixed size at that hour, on
    tokens with the step in progress counted pro rata (``_rate_tokens``);
    the highest score wins (ties: fixed before ramps, smaller before larger: the simpler gate).
    The runs of each of the two rounds go to ``executor`` together (default: one after another here).

    ``prune``: the ramps run hour by hour in this process (no executor), and one whose ratio at an
    hour already falls to the best fixed size's score or below is dropped there: its score (the
    worst hour) can only be lower, and a ramp ties a fixed size only to lose to it. The choice and
    its score are the same as without; ``candidates`` and ``runs`` then hold only the gates run to
    the end, ``pruned`` the rest.
    """
    trainers = [trainer] if isinstance(trainer, Trainer) else list(trainer)
    if not trainers:
        raise ConfigError("advise_gate needs at least one advice stream")
    runs: dict[str, TrainingRun] = {}
    table: dict[str, dict[str, float]] = {}

    def add(labels: Sequence[str]) -> None:
        done = run_points(_train, [(t, budget, lab, dp) for lab in labels for t in trainers],
                          executor or SerialExecutor())
        for j, lab in enumerate(labels):
            each = done[j * len(trainers):(j + 1) * len(trainers)]
            runs[lab] = each[0]
            table[lab] = mean_per_key([_rate_tokens(r, hours) for r in each])

    add([f"fixed:{n}" for n in sizes])
    best = best_by_hour(table, hours)
    # dynbsz's gate='auto' (the grid's maximin schedule for the budget) is a candidate too: a robust prior
    ramps = ramp_candidates(best, sizes) + ["auto"]
    pruned: dict[str, str] = {}
    if prune:
        if executor is not None:
            raise ConfigError("advise_gate(prune=True) runs the ramps hour by hour in this process: pass no executor")
        to_beat = max(worst_ratio(table[lab], best) for lab in table)
        # One ramp at a time, to its end or to the hour that prunes it: whether a ramp is dropped depends on
        # its own tokens only (``best`` and ``to_beat`` are the fixed sizes'), so the order changes nothing,
        # and only one ramp's runs are held at once (a run holds its ranks' loader records: ~90 MB at DP8)
        checks = sorted(hours)[:-1]
        for lab in ramps:
            started = [t.start(budget, lab, dp) for t in trainers]
            for h in checks:
                k = hour_key(h)
                tokens = _mean([r.advance(h * HOUR).tokens_at_rate_by(h * HOUR) for r in started])
                if worst_ratio({k: tokens}, {k: best[k]}) <= to_beat:
                    pruned[lab] = k
                    break
            else:
                each = [r.advance().result() for r in started]
                runs[lab] = each[0]
                table[lab] = mean_per_key([_rate_tokens(r, hours) for r in each])
    else:
        add(ramps)
    scored = [(worst_ratio(table[lab], best), -i, lab) for i, lab in enumerate(table)]
    score, _, label = max(scored)
    return GateAdvice(label, score, best, table, runs, pruned)


def _train(trainer: Trainer, budget: int, gate: str, dp: int) -> TrainingRun:
    # module level: an executor pickles it (and the trainer) to run it in another process
    return trainer.run(budget, gate, dp)


def point_weights(points: Sequence[tuple[int, int, str]]) -> list[float]:
    """A rough cost per (budget, DP, workload) point, for submitting the heaviest first: DP sizes run that many
    ranks, and a smaller budget cuts more micro-batches a token. In the measured per-point CPU seconds of the
    default grid (docs/data/bench-floor-2026-12-06.json), this order scheduled on 8 processes ends at 110 s
    against 125 s in grid order and 108 s heaviest-measured-first."""
    return [dp + 1.0 / budget for budget, dp, _ in points]


@dataclass
class PolicyStudy:
    config: PolicyConfig

    def __post_init__(self) -> None:
        self._trainers: dict[tuple[str, int], Trainer] = {}

    def trainer(self, workload: str, seed: int) -> Trainer:
        key = (workload, seed)
        if key not in self._trainers:
            cfg = self.config
            self._trainers[key] = Trainer(TrainingConfig(workload=TRAINING_WORKLOADS[workload], step=cfg.step,
                                                         seed=seed, horizon_s=cfg.horizon_s))
        return self._trainers[key]

    def points(self) -> list[tuple[int, int, str]]:
        c = self.config
        return [(b, d, w) for w in c.workloads for b in c.budgets for d in c.dp_sizes]

    def point(self, budget: int, dp: int, workload: str) -> tuple[list[dict], dict]:
        cfg = self.config
        hours = cfg.hours
        advice = advise_gate([self.trainer(workload, s) for s in cfg.advice_seeds], budget, dp, hours,
                             cfg.fixed_search, prune=True)
        rows = []
        table: dict[str, dict[str, float]] = {}
        reach: dict[str, float | None] = {}     # label -> time to cfg.max_tokens (None: not within the horizon)

        done: dict[str, list[TrainingRun]] = {}

        def scored(label: str) -> list[TrainingRun]:
            # with --tokens N too: every run goes to the horizon (the hour figures need it), and the time
            # to N is read off the same runs (a run stopped at N could not report the later hours). A run is a
            # pure function of (stream, budget, gate, dp): the advised gate, most often a searched fixed size or
            # one of the gates, is not run again
            if label not in done:
                done[label] = [self.trainer(workload, s).run(budget, label, dp) for s in cfg.scored_seeds]
            return done[label]

        def add(label: str, runs: list[TrainingRun] | None, error: str | None = None, kind: str = "gate") -> None:
            row = {"budget": budget, "dp": dp, "workload": workload, "gate": label, "kind": kind}
            if runs is None:
                row.update(error=error)
            else:
                row.update(streams_summary([r.summary(hours) for r in runs]))
                if cfg.max_tokens is not None:
                    row["time_to_tokens_s"] = time_to_mean_tokens(runs, cfg.max_tokens)
                    if len(runs) > 1:
                        row["time_to_tokens_s_per_stream"] = [time_to_mean_tokens([r], cfg.max_tokens)
                                                              for r in runs]
                    reach[label] = row["time_to_tokens_s"]
                table[label] = row["tokens_by_hour"]
            rows.append(row)

        searched = set()
        for n in cfg.fixed_search:
            lab = f"fixed:{n}"
            add(lab, scored(lab), kind="search")
            searched.add(lab)
        best = best_by_hour(dict(table), hours)
        for g in cfg.gates:
            if g in searched:
                for r in rows:
                    if r["gate"] == g:
                        r["kind"] = "gate"
                continue
            try:
                runs = scored(g)
            except ConfigError as e:     # context_aware fails closed off 512K/1M
                add(g, None, error=str(e).split(";")[0])
                continue
            add(g, runs)
        advised = f"advised={advice.label}"
        add(advised, scored(advice.label), kind="advised")
        ratio = {k: (table[advised][k] / b if b else 1.0) for k, (_, b) in best.items()}

        def ratio_of(label):
            if label not in table:
                return None
            return {k: (table[label][k] / b if b else 1.0) for k, (_, b) in best.items()}

        last = hour_key(hours[-1])
        entry = {"budget": budget, "dp": dp, "workload": workload, "best_fixed_gate": best[last][0],
                 "best_fixed_by_hour": {k: lab for k, (lab, _) in best.items()},
                 "advised_gate": advice.label, "advised_ratio": ratio,
                 "advised_score_on_advice_stream": advice.score,
                 "fixed_200_ratio": ratio_of("fixed:200"), "context_aware_ratio": ratio_of("context_aware"),
                 "warmup_ramp_ratio": {g: ratio_of(g) for g in cfg.gates if g.startswith("warmup_ramp")},
                 "auto_ratio": ratio_of("auto")}
        entry["goal_met"] = all(r >= GOAL_RATIO for r in ratio.values())
        beats = {}
        for other in ("fixed:200", "context_aware"):
            theirs = ratio_of(other)
            if theirs is None:
                continue
            if all(v >= 1.0 - 1e-12 for v in theirs.values()):
                beats[other] = "is best"
            else:
                beats[other] = all(ratio[k] >= theirs[k] for k in ratio)
        entry["beats"] = beats
        entry["miss"] = None if entry["goal_met"] else _miss_reason(ratio, advice, best, table[advised],
                                                                      dp * budget)
        if cfg.max_tokens is not None:
            entry.update(_to_tokens_entry(reach, advised, [f"fixed:{n}" for n in cfg.fixed_search]))
        return rows, entry

    def run(self, progress: Callable[[int, int, str], None] | None = None,
            executor: str | ExecutorSpec | Executor = "serial") -> dict:
        """Every point, on ``executor`` (``simulator.executors``: serial, processes:N, dask://HOST:PORT);
        the same results on any of them: each point is a pure function of the config."""
        pts = self.points()
        t0 = time.perf_counter()
        with open_executor(executor) as ex:
            results = run_points(_point, [(self.config, *p) for p in pts], ex, progress, weights=point_weights(pts),
                                 labels=[f"{w} {budget_label(b)} dp{d}" for b, d, w in pts])
        if progress:
            progress(len(pts), len(pts), "done")
        rows = [r for rs, _ in results for r in rs]
        return {"rows": rows, "best": [e for _, e in results], "seconds": time.perf_counter() - t0}


#: a row's figures over the scored streams: the mean, except the peaks (the largest) and the drift
#: (the largest: the worst window of any stream)
_MEAN_KEYS = ("first_step_s", "first_step_p50_s", "stall_fraction", "straggle_fraction", "steady_fill", "steps")
_MAX_KEYS = ("peak_buffer_tokens", "peak_buffer_samples")


def streams_summary(summaries: Sequence[dict]) -> dict:
    """One row from the summaries of the same gate on each scored stream (``TrainingRun.summary``);
    with one stream, that stream's figures."""
    out = {k: _mean([s[k] for s in summaries]) for k in _MEAN_KEYS}
    out.update({k: max(s[k] for s in summaries) for k in _MAX_KEYS})
    out["tokens_by_hour"] = mean_per_key([s["tokens_by_hour"] for s in summaries])
    if len(summaries) > 1:
        out["tokens_by_hour_per_stream"] = [s["tokens_by_hour"] for s in summaries]
    if "source_shares" in summaries[0]:
        out["source_shares"] = mean_per_key([s["source_shares"] for s in summaries])
        names = summaries[0]["source_share_drift"]
        out["source_share_drift"] = {k: max(s["source_share_drift"][k] for s in summaries) for k in names}
    return out


def _to_tokens_entry(reach: dict[str, float | None], advised: str, fixed: Sequence[str]) -> dict:
    """The ``best`` entry's figures on time to N tokens: the fixed size that reached N first (the
    oracle; ties: the first searched), and the advised gate's ratio oracle time / advised time (1.0
    at best, as the hour ratios; 0.0 when the advised gate does not reach N within the horizon and
    the oracle does; None when no fixed size reaches it: no oracle)."""
    got = {lab: reach[lab] for lab in fixed if reach.get(lab) is not None}
    best = min(got, key=got.get) if got else None
    best_t = got.get(best)
    adv_t = reach.get(advised)
    if best_t is None:
        ratio = None
    elif adv_t is None:
        ratio = 0.0
    else:
        ratio = best_t / adv_t if adv_t > 0 else 1.0
    return {"best_fixed_gate_to_tokens": best, "best_fixed_time_to_tokens_s": best_t,
            "advised_time_to_tokens_s": adv_t, "advised_ratio_to_tokens": ratio,
            "tokens_not_reached": [lab for lab, t in reach.items() if t is None]}


def _point(config: PolicyConfig, budget: int, dp: int, workload: str):
    return PolicyStudy(config).point(budget, dp, workload)


def _miss_reason(ratio: dict, advice: GateAdvice, best: dict, advised: dict, step_quantum: int) -> str:
    """Why the advised gate fell short of the scored stream's per-hour best fixed size."""
    worst = min(ratio, key=ratio.get)
    short = best[worst][1] - advised[worst]
    steps = short / step_quantum
    chosen_best = advice.best_fixed.get(worst, ("?", 0))[0]
    scored_best = best[worst][0]
    why = (f"hour {worst}: {ratio[worst]:.3f} of {scored_best}, {steps:.1f} full steps' tokens short")
    if steps <= 1.0:
        return why + "; within one optimizer step (tokens count whole steps)"
    if chosen_best != scored_best:
        return why + (f"; the advice streams' best there is {chosen_best}: the best fixed size differs between "
                      "streams of the same workload")
    return why + "; stream-to-stream variance"


def with_step(config: PolicyConfig, step: StepModel) -> PolicyConfig:
    return replace(config, step=step)


# ---- gate='auto': one schedule per budget, derived over the grid ------------------------------

#: What ``derive_auto`` tries per budget: every fixed size of ``FIXED_SEARCH`` up to 64 (a fixed size
#: is a ramp that starts full) and warm-up ramps from a small minimum to a larger one.
AUTO_STARTS = (2, 4, 8, 16, 32)
AUTO_FULLS = (16, 32, 64)
AUTO_RAMPS = (10, 100)
AUTO_FIXED = (2, 4, 8, 16, 32, 48, 64)


def auto_candidates(sizes: Sequence[int] = FIXED_SEARCH) -> list[str]:
    out = [ramp_label(n, n, 0, 0) for n in AUTO_FIXED if n in sizes]
    out += [ramp_label(s, f, 0, r) for s in AUTO_STARTS for f in AUTO_FULLS if f > s for r in AUTO_RAMPS]
    return out


def _auto_point(config: PolicyConfig, budget: int, dp: int, workload: str, candidates: Sequence[str]) -> dict:
    """Every candidate's worst-hour ratio to the per-hour best fixed size, on the *advice* streams of one
    point (the mean over them)."""
    study = PolicyStudy(config)
    trainers = [study.trainer(workload, s) for s in config.advice_seeds]

    def tokens(lab: str) -> dict[str, float]:
        return mean_per_key([_tokens(t.run(budget, lab, dp), config.hours) for t in trainers])

    fixed = {f"fixed:{n}": tokens(f"fixed:{n}") for n in config.fixed_search}
    best = best_by_hour(fixed, config.hours)
    ratios = {}
    for lab in candidates:
        start, full, _, _ = ramp_row(lab)
        same = f"fixed:{start}" if start == full else None
        ratios[lab] = worst_ratio(fixed[same] if same in fixed else tokens(lab), best)
    return {"budget": budget, "dp": dp, "workload": workload, "ratios": ratios}


def derive_auto(config: PolicyConfig = PolicyConfig(), executor: str | ExecutorSpec | Executor = "serial",
                progress: Callable[[int, int, str], None] | None = None) -> dict:
    """Choose ``gate='auto'``'s row for each budget of ``config``: over its points (every DP size and
    workload), on the advice streams (never the scored ones the study judges it on), the candidate
    whose *lowest* worst-hour ratio to the per-hour best fixed size is highest (maximin: a default must
    not lose badly anywhere); ties go to the higher mean ratio, then to the simpler schedule (fewer
    ramp steps, smaller sizes). Returns every candidate's figures, so the choice can be checked. The
    points run on ``executor`` (``simulator.executors``)."""
    cands = auto_candidates(config.fixed_search)
    pts = [(b, d, w) for b in config.budgets for d in config.dp_sizes for w in config.workloads]
    with open_executor(executor) as ex:
        results = run_points(_auto_point, [(config, *p, cands) for p in pts], ex, progress, weights=point_weights(pts),
                             labels=["auto"] * len(pts))
    table = {}
    for b in config.budgets:
        mine = [r for r in results if r["budget"] == b]
        scored = []
        for i, lab in enumerate(cands):
            rs = [r["ratios"][lab] for r in mine]
            start, full, _, ramp = ramp_row(lab)
            scored.append((min(rs), sum(rs) / len(rs), -ramp, -full, -start, -i, lab))
        scored.sort(reverse=True)
        top = scored[0]
        table[b] = {"row": ramp_row(top[-1]), "label": top[-1], "min_ratio": top[0],
                    "mean_ratio": top[1],
                    "runner_up": {"label": scored[1][-1], "min_ratio": scored[1][0], "mean_ratio": scored[1][1]},
                    "fixed_best": max(((x[0], x[1], x[-1]) for x in scored if x[3] == x[4]),   # full == start: fixed
                                      default=None)}
    return {"table": table, "points": results, "candidates": cands}
