"""Named workloads (``dynbsz.workload.Workload`` instances) and a prefix-stable sample stream.

``SEED_TEXT`` is calibrated against the seed PR's cold-start measurements; how,
and how well, is in docs/simulator.md ("Calibration"). ``TEXT_VIDEO`` is the
uneven-cost mixture the in_order skew study uses by default; ``bench_mix`` is the
loader benchmark's (``dynbsz.workload.LOADER_BENCH_MIX``).
"""

from __future__ import annotations

import numpy as np

from dynbsz.errors import ConfigError, check_int
from dynbsz.workload import LOADER_BENCH_MIX, SourceSpec, Trace, Workload

#: Long-context text, calibrated to the seed (docs/simulator.md, "Calibration"):
#: token lengths lognormal, median 50K, sigma 1.1 (mean ~92K; VeOmni's transform truncates
#: each to the budget); decode cost 13.5 s + 1.4e-4 s/token (before truncation), lognormal
#: noise 0.25: about 27 s per candidate on average.
SEED_TEXT = Workload((SourceSpec("text", 1.0, median_tokens=50_000.0, sigma=1.1, min_tokens=16,
                                 cost_base_s=13.5, cost_per_token_s=1.4e-4, cost_noise=0.25),))

#: The stream seed of the calibrated study (see docs/simulator.md: chosen, not fitted).
SEED_STREAM = 22

#: Fast text and slow video: what makes in_order=False skew the data mix.
TEXT_VIDEO = Workload((
    SourceSpec("text", 0.75, median_tokens=2_000.0, sigma=0.8, cost_base_s=0.002, cost_per_token_s=2e-6,
               cost_noise=0.3),
    SourceSpec("video", 0.25, median_tokens=16_000.0, sigma=0.5, cost_base_s=0.05, cost_per_token_s=3e-6,
               cost_noise=0.3),
))

#: ``bench_mix`` is the loader benchmark's (``dynbsz.workload.LOADER_BENCH_MIX``: 80% text at 2 ms,
#: 20% video at 20 ms).
WORKLOADS = {"seed_text": SEED_TEXT, "text_video": TEXT_VIDEO, "bench_mix": LOADER_BENCH_MIX}

#: Samples per chunk of a stream; each chunk has its own seed, so a longer stream
#: starts with exactly the samples of a shorter one.
CHUNK = 4096


def get_workload(name: str) -> Workload:
    if name not in WORKLOADS:
        raise ConfigError(f"workload={name!r} is not known; allowed values: {', '.join(map(repr, WORKLOADS))}")
    return WORKLOADS[name]


class Stream:
    """An unbounded, prefix-stable sample stream: ``take(n)`` is the first n samples, for any n.

    ``Workload.sample(n, seed)`` is pure but not prefix-stable (all source choices are
    drawn before any length). Drawing fixed-size chunks, each from its own child seed,
    makes a study that needs more samples see the same first ones.
    """

    def __init__(self, workload: Workload, seed: int):
        if not isinstance(workload, Workload):
            raise ConfigError(f"workload must be a dynbsz.workload.Workload, got {type(workload).__name__}")
        self.workload = workload
        self.seed = check_int("seed", seed, minimum=0)
        self._chunks: list[Trace] = []

    def take(self, n: int) -> Trace:
        check_int("n", n, minimum=1)
        while len(self._chunks) * CHUNK < n:
            i = len(self._chunks)
            self._chunks.append(self.workload.sample(CHUNK, np.random.default_rng([self.seed, i])))
        k = -(-n // CHUNK)
        parts = self._chunks[:k]
        cat = np.concatenate
        return Trace(np.arange(n, dtype=np.int64), cat([p.tokens for p in parts])[:n],
                     cat([p.cost_s for p in parts])[:n], cat([p.source for p in parts])[:n],
                     self.workload.source_names)


def mean_tokens(workload: Workload, budget: int | None = None, n: int = 20_000, seed: int = 0) -> float:
    """Mean sample length (after truncation to ``budget``), estimated from a fixed draw."""
    tokens = workload.sample(n, seed).tokens
    if budget is not None:
        tokens = np.minimum(tokens, budget)
    return float(tokens.mean())


def smallest_sample(workload: Workload) -> int:
    """The shortest sample the workload can produce (over sources with weight > 0)."""
    return min(s.min_tokens for s in workload.sources if s.weight > 0)
