"""Training as it runs: DP ranks that step together, a step time that depends on what was packed.

The cold-start study treats each DP rank as an independent stream and training as free. Here
the ranks run in lockstep, as data-parallel training does: step ``s`` starts when *every* rank
holds its micro-batches for it (each rank's data-ready time comes from its own ``RankFeed``: the
modelled loader and dynbsz's real packer and gate), and lasts as long as the slowest rank's
compute; then every rank asks its loader for more. The compute of one micro-batch is
``StepModel``: ``base + a * sum(l) + b * sum(l^2)`` over its samples' lengths ``l`` (packed
attention is quadratic per sample).

Per run: first-step time (max across ranks, and p50 for the seed comparison), trained tokens by
any hour, the share of each rank's time spent waiting for data (stall) and for the other ranks
(straggle), steady-state fill, the peak of what a rank holds decoded and not yet trained
(host memory: samples and tokens) and, for a mixture, how far each source's share drifts per
window of steps. Nothing here decides what is packed or when a cut happens: that is dynbsz's
(``dynbatch.RankFeed`` calls ``dynbsz.packing.pack``). Time only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np

from dynbsz import GreedyPacker, PackerConfig
from dynbsz.errors import ConfigError, check_int
from dynbsz.workload import SourceSpec, Trace, Workload

from .bridge import LoaderOrder
from .config import LoaderModelConfig, check_seconds
from .dynbatch import RankFeed, shard, truncate
from .gatespec import GateSpec, parse_gate
from .workloads import SEED_STREAM, SEED_TEXT, Stream

HOUR = 3600.0


# ---- the step-time model ------------------------------------------------------------------------

@dataclass(frozen=True)
class StepModel:
    """Seconds of compute for one micro-batch of sample lengths ``l``: ``base_s + a * sum(l) + b * sum(l^2)``.

    ``a`` is the dense part (about 6 x parameters FLOPs per token over the achieved FLOP/s),
    ``b`` packed attention's per-sample quadratic term (about 12 x layers x hidden FLOPs per
    token squared over the same), ``base_s`` what a micro-batch costs whatever its size
    (optimizer step, gradient all-reduce, launch overheads).
    """

    base_s: float = 0.0
    a: float = 0.0
    b: float = 0.0
    name: str = "custom"
    source: str = ""

    def __post_init__(self) -> None:
        check_seconds("step time base", self.base_s)
        check_seconds("step time a (seconds per token)", self.a)
        check_seconds("step time b (seconds per token squared)", self.b)

    def of(self, lengths: Sequence[int]) -> float:
        """Seconds for one micro-batch holding samples of these lengths."""
        s1 = s2 = 0
        for n in lengths:
            s1 += n
            s2 += n * n
        return self.base_s + self.a * s1 + self.b * s2

    def to_json(self) -> dict:
        return {"name": self.name, "base_s": self.base_s, "a": self.a, "b": self.b}


#: bf16 dense peak of one H100 SXM / H200 SXM (NVIDIA datasheets: 989.4 TFLOP/s without sparsity).
H100_BF16_FLOPS = 989.4e12
#: Model FLOPs utilisation the presets assume: 40% (Llama 3 reports 38-43% on H100 at scale;
#: long-context runs rarely do better).
MFU = 0.40


def first_principles(name: str, params: float, layers: int, hidden: int, flops: float = H100_BF16_FLOPS,
                     mfu: float = MFU, base_s: float = 0.1, source: str = "") -> StepModel:
    """A ``StepModel`` from a model shape and a GPU: ``a = 6 N / (F u)``, ``b = 12 L d / (F u)``."""
    achieved = flops * mfu
    return StepModel(base_s=base_s, a=6.0 * params / achieved, b=12.0 * layers * hidden / achieved, name=name,
                     source=source)


#: Named presets. Each figure's origin is in docs/simulator.md ("The step-time model").
STEP_PRESETS: dict[str, StepModel] = {
    "none": StepModel(name="none", source="training takes no time (the cold-start study's consumer)"),
    "1b-h100": first_principles("1b-h100", 1.24e9, 16, 2048, base_s=0.1,
                                source="Llama-3.2-1B shape (1.24e9 params, 16 layers, hidden 2048), H100 bf16 "
                                       "989.4 TFLOP/s at 40% MFU"),
    "7b-h100": first_principles("7b-h100", 6.74e9, 32, 4096, base_s=0.5,
                                source="Llama-2-7B shape (6.74e9 params, 32 layers, hidden 4096), H100 bf16 "
                                       "989.4 TFLOP/s at 40% MFU"),
    "8b-h200": first_principles("8b-h200", 8.03e9, 32, 4096, base_s=0.5,
                                source="Llama-3-8B shape (8.03e9 params, 32 layers, hidden 4096), H200 bf16 "
                                       "989.4 TFLOP/s (the H100's compute) at 40% MFU"),
}
DEFAULT_STEP = "1b-h100"


def parse_step_model(text: str | StepModel) -> StepModel:
    """A preset name or ``BASE,A,B`` (seconds, seconds per token, seconds per token squared)."""
    if isinstance(text, StepModel):
        return text
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"step time must be a preset ({', '.join(STEP_PRESETS)}) or BASE,A,B, got {text!r}")
    t = text.strip()
    if t in STEP_PRESETS:
        return STEP_PRESETS[t]
    parts = t.split(",")
    try:
        if len(parts) != 3:
            raise ValueError
        base, a, b = (float(x) for x in parts)
    except ValueError:
        raise ConfigError(f"step time {text!r}: use a preset ({', '.join(STEP_PRESETS)}) or BASE,A,B "
                          "(e.g. 0.1,1.9e-5,1e-9: seconds, seconds per token, seconds per token squared)") from None
    for v in (base, a, b):
        if not math.isfinite(v) or v < 0:
            raise ConfigError(f"step time {text!r}: BASE, A and B must be finite numbers >= 0")
    return StepModel(base, a, b, name=t)


# ---- training workloads: a stream and the loader that reads it ------------------------------------

@dataclass(frozen=True)
class TrainingWorkload:
    name: str
    workload: Workload
    loader: LoaderModelConfig
    description: str


#: Short cheap text and long expensive video: different lengths, decode costs and attention costs.
TEXT_VIDEO_LONG = Workload((
    SourceSpec("text", 0.7, median_tokens=6_000.0, sigma=0.9, min_tokens=16, cost_base_s=0.3,
               cost_per_token_s=2e-5, cost_noise=0.3),
    SourceSpec("video", 0.3, median_tokens=100_000.0, sigma=0.5, min_tokens=1024, cost_base_s=15.0,
               cost_per_token_s=2e-4, cost_noise=0.3),
))

TRAINING_WORKLOADS: dict[str, TrainingWorkload] = {
    "seed": TrainingWorkload("seed", SEED_TEXT, LoaderModelConfig(num_workers=1, prefetch_factor=2, in_order=True),
                             "the calibrated seed stream, one decode in flight per rank (data-bound)"),
    "seed_8w": TrainingWorkload("seed_8w", SEED_TEXT,
                                LoaderModelConfig(num_workers=8, prefetch_factor=2, in_order=True),
                                "the seed stream read by 8 workers per rank (compute dominates)"),
    "mix": TrainingWorkload("mix", TEXT_VIDEO_LONG, LoaderModelConfig(num_workers=4, prefetch_factor=2, in_order=True),
                            "70% short text (median 6K tokens, ~0.5 s) and 30% long video (median 100K, ~35 s), "
                            "4 workers per rank"),
}


def get_training_workload(name: str) -> TrainingWorkload:
    if name not in TRAINING_WORKLOADS:
        raise ConfigError(f"workload={name!r} is not known; allowed values: {', '.join(map(repr, TRAINING_WORKLOADS))}")
    return TRAINING_WORKLOADS[name]


# ---- one training run -------------------------------------------------------------------------

@dataclass(frozen=True)
class TrainingRun:
    budget: int
    dp: int
    gate: str
    step_end_s: np.ndarray          # when each step ended
    step_tokens: np.ndarray         # tokens trained by all ranks in each step
    first_step_s: float             # step 0's start: the slowest rank's data-ready time
    first_step_p50_s: float         # ... p50 across ranks (the seed's figure)
    stall_fraction: float           # of the ranks' time from step 0's start to the last step's end
    straggle_fraction: float
    steady_fill: float              # mean global fill of the steps after the first
    peak_buffer_samples: int        # the largest over ranks (per rank)
    peak_buffer_tokens: int
    source_shares: dict = field(default_factory=dict)        # source -> share of trained samples
    source_share_drift: dict = field(default_factory=dict)   # source -> largest |window share - share|
    stream_ended: bool = False      # a rank's stream ran out before the horizon
    horizon_s: float | None = None
    max_tokens: int | None = None

    @property
    def steps(self) -> int:
        return len(self.step_end_s)

    @property
    def tokens(self) -> int:
        return int(self.step_tokens.sum())

    def tokens_by(self, t_s: float) -> int:
        """Tokens trained by steps that ended by ``t_s``."""
        k = int(np.searchsorted(self.step_end_s, t_s, side="right"))
        return int(self.step_tokens[:k].sum())

    def tokens_at_rate_by(self, t_s: float) -> float:
        """Tokens by ``t_s`` counting the step in progress pro rata: the cumulative tokens interpolated
        linearly between step ends (from 0 at the first step's start). ``tokens_by`` counts whole
        steps, so by hour 1, with 5-40 steps trained, it moves in jumps of 2-20%; a choice made on
        it follows where a stream's step ends fall, this one the rate."""
        return rate_tokens_by(self.first_step_s, self.step_end_s, self.step_tokens, t_s)

    def time_to_tokens(self, tokens: int) -> float:
        """When the trained tokens first reached ``tokens`` (inf if never)."""
        t = time_to_mean_tokens([self], tokens)
        return math.inf if t is None else t

    def tokens_by_hour(self, hours: Sequence[float]) -> dict[str, int]:
        return {hour_key(h): self.tokens_by(h * HOUR) for h in hours}

    def summary(self, hours: Sequence[float] = ()) -> dict:
        out = {"budget": self.budget, "dp": self.dp, "gate": self.gate, "first_step_s": self.first_step_s,
               "first_step_p50_s": self.first_step_p50_s, "steps": self.steps, "tokens": self.tokens,
               "end_s": float(self.step_end_s[-1]) if self.steps else 0.0,
               "stall_fraction": self.stall_fraction, "straggle_fraction": self.straggle_fraction,
               "steady_fill": self.steady_fill, "peak_buffer_tokens": self.peak_buffer_tokens,
               "peak_buffer_samples": self.peak_buffer_samples, "stream_ended": self.stream_ended}
        if hours:
            out["tokens_by_hour"] = self.tokens_by_hour(hours)
        if self.max_tokens is not None:
            out["time_to_tokens_s"] = self.time_to_tokens(self.max_tokens)
        if len(self.source_shares) > 1:
            out["source_shares"] = self.source_shares
            out["source_share_drift"] = self.source_share_drift
        return out


def rate_tokens_by(first_step_s: float, step_end_s: Sequence[float], step_tokens: Sequence[int], t_s: float) -> float:
    """Trained tokens by ``t_s`` with the step in progress counted pro rata: the cumulative tokens interpolated
    linearly between step ends, from 0 at the first step's start (0 with no step)."""
    if not len(step_end_s):
        return 0.0
    xs = np.concatenate([[first_step_s], step_end_s])
    ys = np.concatenate([[0.0], np.cumsum(np.asarray(step_tokens, dtype=np.int64), dtype=np.float64)])
    return float(np.interp(t_s, xs, ys, left=0.0))


def hour_key(h: float) -> str:
    return f"{h:g}"


@dataclass(frozen=True)
class TrainingConfig:
    """What one run trains: a stream, a loader per rank, a step model, and where it stops."""

    workload: TrainingWorkload = TRAINING_WORKLOADS["seed"]
    step: StepModel = STEP_PRESETS[DEFAULT_STEP]
    seed: int = SEED_STREAM
    horizon_s: float | None = 24 * HOUR
    max_tokens: int | None = None          # stop at this many trained tokens (token parity) instead / as well
    share_window: int = 50                 # steps per window for the source-share drift
    trace: Trace | None = None             # a fixed stream instead of the workload's generated one
    loader_config: object | None = None    # a dynbsz LoaderConfig: its order (dynbsz.order, balanced included)
    estimates: np.ndarray | None = None    # ... and the cost estimates order='balanced' reads

    def __post_init__(self) -> None:
        if not isinstance(self.workload, TrainingWorkload):
            raise ConfigError(f"workload must be a TrainingWorkload, got {type(self.workload).__name__}")
        if not isinstance(self.step, StepModel):
            raise ConfigError(f"step must be a StepModel, got {type(self.step).__name__}")
        check_int("seed", self.seed, minimum=0)
        if self.horizon_s is None and self.max_tokens is None:
            raise ConfigError("a training run needs an end: horizon_s (seconds), max_tokens, or both")
        if self.horizon_s is not None:
            check_seconds("horizon_s", self.horizon_s)
        if self.max_tokens is not None:
            check_int("max_tokens", self.max_tokens, minimum=1)
        check_int("share_window", self.share_window, minimum=1)


class Trainer:
    """Runs (budget, gate, dp) points of one ``TrainingConfig``; the stream is shared (prefix-stable)."""

    MAX_STREAM = 1 << 23

    def __init__(self, config: TrainingConfig = TrainingConfig()):
        self.config = config
        self.stream = Stream(config.workload.workload, config.seed)
        self._orders: dict = {}     # (dp, rank, trace length) -> bridge.LoaderOrder, with a loader_config
        self._traces: dict = {}     # (budget, dp, length) -> what each rank reads, for one (budget, dp) (_rank_traces)
        self._mean_cost = float(config.workload.workload.sample(4096, 0).cost_s.mean())

    def _samples_per_rank(self, budget: int) -> int:
        cfg = self.config
        workers = max(1, cfg.workload.loader.num_workers)
        if cfg.horizon_s is not None:
            # The loader cannot deliver more than workers x horizon / mean cost samples.
            n = int(1.3 * cfg.horizon_s * workers / max(self._mean_cost, 1e-6)) + 512
        else:
            n = 4096
        return min(n, self.MAX_STREAM)

    def run(self, budget: int, gate: str | GateSpec, dp: int) -> TrainingRun:
        return self.start(budget, gate, dp).advance().result()

    def start(self, budget: int, gate: str | GateSpec, dp: int) -> "TrainerRun":
        """The run of ``(budget, gate, dp)``, not yet advanced: ``TrainerRun.advance(t)`` runs it as far as asked."""
        check_int("budget", budget, minimum=1)
        check_int("dp size", dp, minimum=1, maximum=1024)
        spec = gate if isinstance(gate, GateSpec) else parse_gate(gate)
        n = None if self.config.trace is not None else dp * self._samples_per_rank(budget)
        return TrainerRun(self, budget, spec, dp, n)

    def _rank_traces(self, budget: int, dp: int, n: int | None) -> list[Trace]:
        """Each rank's trace: its DistributedSampler share of the first ``n`` samples of the stream (``n``
        None: the config's fixed trace) truncated to ``budget``; or, with a loader_config, the whole
        truncated trace for every rank (its order gives the share). Kept for the trainer's later runs:
        a study runs dozens of gates on the same (budget, DP size) one after another, and the traces'
        put rows (``Trace.put_rows``) are built once. Only the latest (budget, DP size)'s: a trainer's memory
        stays about one stream's."""
        key = (budget, dp, n)
        if key not in self._traces:
            if any(k[:2] != key[:2] for k in self._traces):
                self._traces.clear()
            whole = truncate(self.config.trace if n is None else self.stream.take(n), budget)
            if len(whole) < dp:
                raise ConfigError(f"the trace has {len(whole)} samples, fewer than dp size {dp}")
            self._traces[key] = [whole] * dp if self.config.loader_config is not None else \
                [shard(whole, r, dp) for r in range(dp)]
        return self._traces[key]

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_traces"] = {}           # a cache: an executor's process rebuilds what it runs
        return state

    def _loader_order(self, dp: int, rank: int, n: int) -> LoaderOrder:
        """Rank ``rank``'s ``bridge.LoaderOrder`` over ``n`` samples, one for every run of this trainer: it keeps
        its epochs' orders, which depend on neither the gate nor the budget."""
        key = (dp, rank, n)
        if key not in self._orders:
            lc, cfg = self.config.loader_config, self.config
            self._orders[key] = LoaderOrder(replace(lc, dp_rank=rank, dp_size=dp), n,
                                            cfg.estimates if lc.order == "balanced" else None)
        return self._orders[key]

    def _lockstep(self, budget: int, spec: GateSpec, dp: int, n: int | None) -> "Lockstep":
        cfg = self.config
        traces = self._rank_traces(budget, dp, n)
        trace = traces[0]
        packer_cfg = PackerConfig(budget)
        gates = [spec.gate_for(budget) for _ in range(dp)]     # one per rank: a user gate may keep state
        if cfg.loader_config is not None:
            # dynbsz's own order for each rank (its DP share, order='balanced'), the trace's costs as durations
            model_cfg = LoaderModelConfig.for_loader(cfg.loader_config, sampler=False)
            feeds = [RankFeed(traces[r], packer_cfg, gates[r], model_cfg, rank=r, track_memory=True,
                              order_fn=self._loader_order(dp, r, len(trace))) for r in range(dp)]
        else:
            feeds = [RankFeed(traces[r], packer_cfg, gates[r], cfg.workload.loader, rank=r,
                              packer_factory=GreedyPacker, track_memory=True) for r in range(dp)]
        return Lockstep(feeds, cfg.step, budget=budget, gate=spec.label, horizon_s=cfg.horizon_s,
                        max_tokens=cfg.max_tokens, source_names=trace.source_names, share_window=cfg.share_window)


class TrainerRun:
    """One ``Trainer`` run, advanced as far as asked (``Lockstep``). Where a rank's stream runs out before
    the run's end, it starts again on a stream twice as long (up to ``Trainer.MAX_STREAM``), so what it
    reports is what a run that had the longer stream from the start reports."""

    def __init__(self, trainer: Trainer, budget: int, spec: GateSpec, dp: int, n: int | None):
        self.trainer, self.budget, self.spec, self.dp, self.n = trainer, budget, spec, dp, n
        self._steps = trainer._lockstep(budget, spec, dp, n)

    @property
    def done(self) -> bool:
        return self._steps.done

    def advance(self, until_s: float = math.inf) -> "TrainerRun":
        """Run the steps up to the first that ends after ``until_s`` (default: to the end)."""
        self._steps.advance(until_s)
        while self._steps.stream_ended and self.n is not None and self.n < Trainer.MAX_STREAM:
            self.n = min(2 * self.n, Trainer.MAX_STREAM)
            self._steps = self.trainer._lockstep(self.budget, self.spec, self.dp, self.n).advance(until_s)
        return self

    def tokens_at_rate_by(self, t_s: float) -> float:
        return self._steps.tokens_at_rate_by(t_s)

    def result(self) -> TrainingRun:
        return self._steps.result()


def lockstep(feeds: Sequence[RankFeed], step: StepModel, *, budget: int, gate: str, horizon_s: float | None,
             max_tokens: int | None = None, source_names: tuple = ("text",),
             share_window: int = 50) -> TrainingRun:
    """Drive one ``RankFeed`` per DP rank in lockstep until ``horizon_s`` or ``max_tokens`` (``Lockstep``
    to the end)."""
    return Lockstep(feeds, step, budget=budget, gate=gate, horizon_s=horizon_s, max_tokens=max_tokens,
                    source_names=source_names, share_window=share_window).advance().result()


class Lockstep:
    """One ``RankFeed`` per DP rank, driven in lockstep, as far as asked: ``advance(t)`` runs the steps
    up to the first that ends after ``t``, so a caller can read a run's early hours and decide whether the
    rest is worth simulating (``policy.advise_gate`` does); ``advance()`` runs it to its end.

    Step s starts at the latest data-ready time over ranks and ends after the slowest rank's
    compute; a step that would end after ``horizon_s`` is not run, and the run ends there, at
    ``max_tokens``, or when a rank's stream runs out. Each rank's time in [step 0's start, last
    end] is data wait + wait for the other ranks + its own compute.
    """

    def __init__(self, feeds: Sequence[RankFeed], step: StepModel, *, budget: int, gate: str,
                 horizon_s: float | None, max_tokens: int | None = None, source_names: tuple = ("text",),
                 share_window: int = 50):
        self.feeds, self.step, self.budget, self.gate = list(feeds), step, budget, gate
        self.horizon_s, self.max_tokens = horizon_s, max_tokens
        self.source_names, self.share_window = source_names, share_window
        dp = len(self.feeds)
        self.ends: list[float] = []
        self.toks: list[int] = []
        self._fills: list[float] = []
        self._sources: list[list[str]] = []
        self._first_ready: list[float] = []
        # per rank, as Python floats (the same double additions as a numpy array's, at a fraction of the
        # cost per step); summed as an array at the end, as before
        self._wait_data = [0.0] * dp
        self._wait_rank = [0.0] * dp
        self._total = 0
        self.done = False
        self.stream_ended = False

    def advance(self, until_s: float = math.inf) -> "Lockstep":
        feeds, budget, horizon_s, max_tokens = self.feeds, self.budget, self.horizon_s, self.max_tokens
        ends, toks, fills, sources = self.ends, self.toks, self._fills, self._sources
        wait_data, wait_rank = self._wait_data, self._wait_rank
        dp = len(feeds)
        of = self.step.of
        per_step = feeds[0].per_step
        mixed = len(self.source_names) > 1
        total = self._total
        while not self.done and (not ends or ends[-1] <= until_s):
            fed = [f.next_step() for f in feeds]
            if any(s is None for s in fed):
                self.done = self.stream_ended = True
                break
            ready = [s.ready_s for s in fed]
            comp = []
            step_tokens = 0
            for s in fed:      # each micro-batch's compute and tokens, read once
                c = 0
                for mb in s.micro_batches:
                    c += of(mb.tokens)
                    step_tokens += mb.total_tokens
                comp.append(c)
            start = max(ready)
            dur = max(comp)
            end = start + dur
            if horizon_s is not None and end > horizon_s:
                self.done = True
                break
            if not ends:
                self._first_ready = ready
                for r in range(dp):
                    wait_rank[r] += dur - comp[r]
            else:
                prev_end = ends[-1]
                for r in range(dp):
                    wait_data[r] += ready[r] - prev_end
                    wait_rank[r] += (start - ready[r]) + (dur - comp[r])
            fills.append(step_tokens / (dp * budget * per_step))
            if mixed:
                sources.append([src for s in fed for mb in s.micro_batches for src in mb.sources])
            ends.append(end)
            toks.append(step_tokens)
            total += step_tokens
            for f in feeds:
                f.finish_step(end)
            if max_tokens is not None and total >= max_tokens:
                self.done = True
        self._total = total
        return self

    def tokens_at_rate_by(self, t_s: float) -> float:
        """``TrainingRun.tokens_at_rate_by`` on the steps run so far: exact once a step has ended after ``t_s``
        (``advance(t_s)``) or the run is done."""
        return rate_tokens_by(max(self._first_ready) if self.ends else 0.0, self.ends, self.toks, t_s)

    def result(self) -> TrainingRun:
        """The run so far as a ``TrainingRun`` (the whole run once ``done``)."""
        feeds, ends, dp = self.feeds, self.ends, len(self.feeds)
        budget, gate, horizon_s, max_tokens = self.budget, self.gate, self.horizon_s, self.max_tokens
        ended = self.stream_ended
        if not ends:
            first = [f.t for f in feeds]
            return TrainingRun(budget, dp, gate, np.zeros(0), np.zeros(0, np.int64), max(first),
                               float(np.median(first)), 0.0, 0.0, math.nan, *_peaks(feeds), stream_ended=ended,
                               horizon_s=horizon_s, max_tokens=max_tokens)
        first_ready, fills = self._first_ready, self._fills
        start0 = max(first_ready)
        span = dp * (ends[-1] - start0)
        shares, drift = _share_drift(self._sources, self.source_names, self.share_window)
        peaks = _peaks(feeds)
        return TrainingRun(
            budget, dp, gate, np.asarray(ends), np.asarray(self.toks, dtype=np.int64), first_step_s=float(start0),
            first_step_p50_s=float(np.median(first_ready)),
            stall_fraction=float(np.asarray(self._wait_data).sum() / span) if span > 0 else 0.0,
            straggle_fraction=float(np.asarray(self._wait_rank).sum() / span) if span > 0 else 0.0,
            steady_fill=float(np.mean(fills[1:])) if len(fills) > 1 else math.nan,
            peak_buffer_samples=peaks[0], peak_buffer_tokens=peaks[1], source_shares=shares,
            source_share_drift=drift, stream_ended=ended, horizon_s=horizon_s, max_tokens=max_tokens)


def _peaks(feeds: Sequence[RankFeed]) -> tuple[int, int]:
    peaks = [f.peak_held() for f in feeds]
    return max(p[0] for p in peaks), max(p[1] for p in peaks)


def _share_drift(sources: list[list[str]], names: tuple, window: int) -> tuple[dict, dict]:
    """Per source: its share of the trained samples, and the largest deviation of a window's share from it."""
    if len(names) < 2 or not sources:
        return {}, {}
    index = {n: k for k, n in enumerate(names)}
    counts = np.zeros((len(sources), len(names)))
    for s, srcs in enumerate(sources):
        for src in srcs:
            counts[s, index[src]] += 1
    overall = counts.sum(axis=0) / max(counts.sum(), 1.0)
    nwin = -(-len(sources) // window)
    drift = np.zeros(len(names))
    for w in range(nwin):
        c = counts[w * window:(w + 1) * window].sum(axis=0)
        if c.sum() and (w + 1) * window <= len(sources):   # full windows only
            drift = np.maximum(drift, np.abs(c / c.sum() - overall))
    return ({n: float(overall[k]) for n, k in index.items()}, {n: float(drift[k]) for n, k in index.items()})


# ---- a real job's data stall: the loader model plus the main process's own per-step work -----------

def stall_with_floor(handout_s: Sequence[float], step_s: float, floor_s: float) -> float:
    """The data-stall fraction of one rank whose main process spends ``floor_s`` of its own work per step.

    The loader model times the workers and torch's hand-out, not the main process's own work per
    step (receiving and unpickling results, packing, collating: the *floor*, which no worker can
    hide). Here the floor is part of the model, not added afterwards: ``handout_s`` must come from
    the loader model run with a consumer step of ``step_s + floor_s`` (the main process is busy for
    both, so that is the cadence at which it asks for data); then step i is in hand
    ``floor_s`` after the model's hand-out, and is asked for ``step_s`` after step i-1 was in hand:

        wait_i = max(0, model hand-out_i - (model hand-out_{i-1} + step_s + floor_s)) + floor_s
        stall  = sum(wait_i, i >= 1) / (hand-out_last - hand-out_0)

    (the first wait is the cold start, reported on its own, as ``metrics.stall_fraction`` does.)
    """
    hand = np.asarray(handout_s, dtype=np.float64)
    check_seconds("step_s", step_s)
    check_seconds("floor_s", floor_s)
    if len(hand) < 2:
        return 0.0
    waits = np.maximum(hand[1:] - (hand[:-1] + step_s + floor_s), 0.0) + floor_s
    span = float(hand[-1] - hand[0])
    return float(waits.sum() / span) if span > 0 else 0.0


def time_to_mean_tokens(runs: Sequence[TrainingRun], tokens: int) -> float | None:
    """When the mean over ``runs`` (the scored streams) of the trained tokens first reached ``tokens``:
    the same mean, counting whole steps, as ``tokens_by_hour``, so a row's mean tokens by hour h are
    at least ``tokens`` exactly when this is at most h hours. None when the mean does not reach
    ``tokens`` within the runs' horizon (a run stops at the study's last hour); one run: that run's
    ``TrainingRun.time_to_tokens``."""
    ends = np.concatenate([r.step_end_s for r in runs])
    if not len(ends):
        return None
    order = np.argsort(ends, kind="stable")
    cum = np.cumsum(np.concatenate([r.step_tokens for r in runs]).astype(np.int64)[order])
    k = int(np.searchsorted(cum, tokens * len(runs), side="left"))     # sum >= N * S: the mean >= N, exactly
    return float(ends[order][k]) if k < len(cum) else None
