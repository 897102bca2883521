"""The job's configuration: one frozen dataclass, two presets (SMALL for CPU/CI, LARGE for a GPU).

Everything that decides *what* the job computes lives here, so the resumed process can be
handed the exact same configuration as JSON and rebuild the same trace, loader and model.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from dynbsz.errors import ConfigError, check_choice, check_fields, check_int
from dynbsz.workload import SourceSpec, Trace, Workload

SDPA_CHOICES = ("auto", "math", "flash", "efficient")


@dataclass(frozen=True)
class JobConfig:
    """One end-to-end configuration.

    sources, n_samples, trace_seed   the synthetic workload (``dynbsz.workload``): token lengths and
                                     real decode costs, slept by ``TraceMapDataset`` in the workers
    budget, gate                     packer token budget and readiness gate (``simulator.gatespec`` form)
    num_workers, prefetch_factor     loader workers; one micro-batch per optimizer step
    loader_seed                      the loader's epoch-order seed
    vocab_size .. mlp_ratio          the model; ``max positions`` is the budget (no sample exceeds it)
    model_seed, lr .. grad_clip      initialisation seed and AdamW settings; the learning-rate warm-up
                                     is a pure function of the step index, so resuming needs no scheduler state
    steps, resume_at                 optimizer steps of the run, and where the resume check checkpoints
    threads                          torch intra-op threads (None: torch's default). Fixed so the
                                     resumed process reduces in the same order as the original one
    bf16                             bfloat16 autocast (CUDA only; the CPU always runs float32)
    sdpa                             attention kernels: ``auto`` (torch picks; in strict deterministic
                                     mode it picks deterministic backward kernels) or one of
                                     ``math``, ``flash``, ``efficient``: an escape hatch for a torch
                                     build whose pick raises under deterministic algorithms
    """

    name: str
    sources: tuple[SourceSpec, ...]
    n_samples: int
    trace_seed: int
    budget: int
    gate: str
    num_workers: int
    prefetch_factor: int
    loader_seed: int
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    mlp_ratio: int
    model_seed: int
    lr: float
    weight_decay: float
    lr_warmup_steps: int
    grad_clip: float
    steps: int
    resume_at: int
    threads: int | None
    bf16: bool
    sdpa: str = "auto"

    def __post_init__(self) -> None:
        if not self.sources:
            raise ConfigError("sources: the workload needs at least one SourceSpec")
        for s in self.sources:
            if not isinstance(s, SourceSpec):
                raise ConfigError(f"sources must be SourceSpec objects, got {type(s).__name__}")
            # The position table has `budget` rows and the packer would emit an overlong sample
            # alone, beyond the budget: both are avoided by clipping every source to the budget.
            if s.max_tokens is None or s.max_tokens > self.budget:
                raise ConfigError(f"source {s.name!r}: max_tokens must be set and <= budget={self.budget} "
                                  f"(got {s.max_tokens!r}); the model has one position per budget token")
        Workload(self.sources)  # validates names and weights
        for setting, minimum in (("n_samples", 1), ("trace_seed", 0), ("budget", 2), ("num_workers", 1),
                                 ("prefetch_factor", 1), ("loader_seed", 0), ("vocab_size", 2), ("d_model", 1),
                                 ("n_layers", 1), ("n_heads", 1), ("mlp_ratio", 1), ("model_seed", 0),
                                 ("lr_warmup_steps", 1), ("steps", 2), ("resume_at", 1)):
            check_int(setting, getattr(self, setting), minimum=minimum)
        if self.d_model % self.n_heads:
            raise ConfigError(f"d_model={self.d_model} must be a multiple of n_heads={self.n_heads}")
        if self.resume_at >= self.steps:
            raise ConfigError(f"resume_at={self.resume_at} must be below steps={self.steps}: the resume check "
                              "checkpoints after resume_at steps and continues to steps")
        for setting in ("lr", "weight_decay", "grad_clip"):
            value = getattr(self, setting)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"{setting} must be a finite number >= 0, got {value!r}")
        if self.lr == 0:
            raise ConfigError("lr must be > 0")
        if self.threads is not None:
            check_int("threads", self.threads, minimum=1)
        if not isinstance(self.bf16, bool):
            raise ConfigError(f"bf16 must be True or False, got {self.bf16!r}")
        check_choice("sdpa", self.sdpa, SDPA_CHOICES)
        from simulator.gatespec import parse_gate

        parse_gate(self.gate)  # fails here, naming the gate, rather than in a worker

    # ---- derived objects ---------------------------------------------------------------------

    @property
    def workload(self) -> Workload:
        return Workload(self.sources)

    def trace(self) -> Trace:
        """The samples, in dataset order: a pure function of (sources, n_samples, trace_seed)."""
        return self.workload.sample(self.n_samples, self.trace_seed)

    def make_gate(self):
        """A fresh gate object (one per loader / per simulated packer: gates may keep state)."""
        from simulator.gatespec import parse_gate

        return parse_gate(self.gate).gate_for(self.budget)

    def with_run(self, steps: int | None = None, resume_at: int | None = None, sdpa: str | None = None) -> "JobConfig":
        """The same job with other run lengths or attention kernels (validated again)."""
        steps = self.steps if steps is None else steps
        if resume_at is None:
            # keep the checkpoint mid-run when only the length changes
            resume_at = self.resume_at if self.resume_at < steps else max(1, steps // 2 - 1)
        return replace(self, steps=steps, resume_at=resume_at, sdpa=self.sdpa if sdpa is None else sdpa)

    # ---- JSON, for the resumed process ------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["sources"] = [asdict(s) for s in self.sources]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "JobConfig":
        check_fields("job config", d, cls)
        d = dict(d)
        d["sources"] = tuple(SourceSpec(**s) for s in d["sources"])
        return cls(**d)


#: CPU / CI: tiny model, 512-token micro-batches, decode costs of 1-5 ms, ~40 steps in a few seconds.
SMALL = JobConfig(
    name="small",
    sources=(SourceSpec("text", 0.75, median_tokens=48.0, sigma=0.8, min_tokens=2, max_tokens=512,
                        cost_base_s=0.001, cost_per_token_s=2e-6, cost_noise=0.2),
             SourceSpec("image", 0.25, median_tokens=160.0, sigma=0.5, min_tokens=16, max_tokens=512,
                        cost_base_s=0.004, cost_per_token_s=2e-6, cost_noise=0.2)),
    n_samples=400, trace_seed=7, budget=512, gate="token_aware:1.0:32", num_workers=2, prefetch_factor=2,
    loader_seed=0, vocab_size=1024, d_model=32, n_layers=2, n_heads=2, mlp_ratio=4, model_seed=0, lr=3e-3,
    weight_decay=0.1, lr_warmup_steps=10, grad_clip=1.0, steps=40, resume_at=17, threads=1, bf16=False,
)

#: GPU: 16K-token micro-batches, a 6-layer d=512 model, 4 workers, a few hundred steps, text plus slow video.
LARGE = JobConfig(
    name="large",
    sources=(SourceSpec("text", 0.8, median_tokens=1024.0, sigma=1.0, min_tokens=8, max_tokens=16384,
                        cost_base_s=0.002, cost_per_token_s=1e-6, cost_noise=0.3),
             SourceSpec("video", 0.2, median_tokens=4096.0, sigma=0.6, min_tokens=256, max_tokens=16384,
                        cost_base_s=0.020, cost_per_token_s=2e-6, cost_noise=0.3)),
    n_samples=3000, trace_seed=7, budget=16384, gate="token_aware:1.0:64", num_workers=4, prefetch_factor=2,
    loader_seed=0, vocab_size=32000, d_model=512, n_layers=6, n_heads=8, mlp_ratio=4, model_seed=0, lr=6e-4,
    weight_decay=0.1, lr_warmup_steps=50, grad_clip=1.0, steps=300, resume_at=137, threads=None, bf16=True,
)

PRESETS = {"small": SMALL, "large": LARGE}
