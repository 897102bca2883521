"""The in_order skew property: what the loader does to sampler order and the data mix.

in_order=True must deliver exactly sampler order whatever the costs. With
in_order=False and uneven costs (fast text, slow video) cheap sources arrive
early; the property measures that skew on the *real* loader (displacement from
sampler order, per-source share over windows of steps against the same windows
in sampler order) and requires it to agree with what the simulator predicts for
the same trace and knobs. A real loader that reorders more (or less) than torch's
dispatch rules allow breaks the agreement; so does a model that drifts from torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from dynbsz.order import epoch_order
from dynbsz.workload import SourceSpec, Trace, Workload
from simulator import metrics
from simulator.config import LoaderModelConfig as ModelConfig
from simulator.loader_model import simulate

from .coverage import reached
from .errors import PropertyViolation
from .scenarios import SkewScenario

SKEW_DISPLACED = "samples displaced by out-of-order delivery"

#: Fast text, slow video: the mix in_order=False is meant for, slow enough that scheduling
#: jitter (a few ms on a loaded 2-core machine) is small against the cost gaps.
SKEW_WORKLOAD = Workload((SourceSpec("text", 0.75, median_tokens=800, sigma=0.5, cost_base_s=0.004, cost_noise=0.3),
                          SourceSpec("video", 0.25, median_tokens=8000, sigma=0.3, cost_base_s=0.040,
                                     cost_noise=0.2)))


@dataclass(frozen=True)
class SkewMeasure:
    mean_displacement: float     # mean |delivered index - sampler position|
    max_displacement: int
    shift: float                 # max over windows and sources of |share - share in sampler order|

    def to_json(self) -> dict:
        return {"mean_displacement": self.mean_displacement, "max_displacement": self.max_displacement,
                "shift": self.shift}


@dataclass(frozen=True)
class SkewRun:
    """One epoch of a real loader: the order its sampler read the samples in, and the order the
    loader delivered them. A runner for a loader whose sampler is not dynbsz's epoch order
    (torchdata's RandomSampler, VeOmni's StatefulDistributedSampler) returns one of these."""

    sampler_ids: tuple
    delivered_ids: tuple


def sampler_trace(sc: SkewScenario, sampler_ids=None) -> Trace:
    """The scenario's samples in the order the loader's sampler reads them (epoch 0): dynbsz's
    epoch order unless the loader reports its own (sample id = row of the sampled trace)."""
    trace = SKEW_WORKLOAD.sample(sc.num_samples, sc.data_seed)
    if sampler_ids is None:
        return trace.subset(epoch_order(sc.num_samples, sc.shuffle_seed, 0))
    return trace.subset(np.asarray(sampler_ids, dtype=np.int64))


def measure(trace: Trace, delivered_rows: np.ndarray, window: int) -> SkewMeasure:
    """Skew of a delivery order given as rows of ``trace`` (which is in sampler order). Pure."""
    rows = np.asarray(delivered_rows, dtype=np.int64)
    disp = np.abs(metrics.displacement(rows))
    k = len(trace.source_names)
    steps = np.arange(len(rows))
    shares = metrics.source_shares(trace.source[rows], steps, window, k)
    reference = metrics.source_shares(trace.source[np.arange(len(rows))], steps, window, k)
    return SkewMeasure(float(disp.mean()) if len(disp) else 0.0, int(disp.max()) if len(disp) else 0,
                       metrics.share_shift(shares, reference))


def predict(sc: SkewScenario, trace: Trace, task_overhead_s: float = 0.0) -> SkewMeasure:
    run = simulate(trace, ModelConfig(num_workers=sc.num_workers, prefetch_factor=sc.prefetch_factor, batch_size=1,
                                      in_order=sc.in_order, task_overhead_s=task_overhead_s))
    return measure(trace, run.samples, sc.window)


RealRunner = Callable[[SkewScenario], "list | SkewRun"]   # -> delivered sample ids (or a SkewRun), one epoch


def check_in_order_skew(run_real: RealRunner, sc: SkewScenario, *, task_overhead_s: float = 0.0,
                        rel_tol: float = 0.35, abs_tol: float = 1.0, shift_tol: float = 0.1) -> dict[str, Any]:
    """in_order=True: zero displacement. in_order=False: real skew within tolerance of the prediction."""
    out = run_real(sc)
    if isinstance(out, SkewRun):
        trace, ids = sampler_trace(sc, out.sampler_ids), list(out.delivered_ids)
    else:
        trace, ids = sampler_trace(sc), list(out)
    row_of = {int(sid): r for r, sid in enumerate(trace.ids.tolist())}
    if sorted(ids) != sorted(row_of):
        lost = sorted(set(row_of) - set(ids))[:10]
        dup = sorted({i for i in ids if ids.count(i) > 1})[:10]
        raise PropertyViolation(f"in_order skew: the loader did not deliver the epoch exactly once (lost {lost}, "
                                f"repeated {dup}, {len(ids)} delivered of {len(row_of)})")
    real = measure(trace, np.array([row_of[int(i)] for i in ids]), sc.window)
    if real.max_displacement > 0:
        reached(SKEW_DISPLACED)
    if sc.in_order:
        if real.max_displacement != 0:
            raise PropertyViolation(f"in_order skew: in_order=True moved samples off sampler order "
                                    f"(max displacement {real.max_displacement}, mean {real.mean_displacement:.2f})")
        return {"real": real.to_json()}
    predicted = predict(sc, trace, task_overhead_s)
    bound = abs_tol + rel_tol * predicted.mean_displacement
    if abs(real.mean_displacement - predicted.mean_displacement) > bound:
        raise PropertyViolation(f"in_order skew: mean displacement {real.mean_displacement:.2f} on the real loader, "
                                f"{predicted.mean_displacement:.2f} predicted (allowed difference {bound:.2f})")
    if abs(real.shift - predicted.shift) > shift_tol:
        raise PropertyViolation(f"in_order skew: source-share shift {real.shift:.3f} on the real loader, "
                                f"{predicted.shift:.3f} predicted (allowed difference {shift_tol})")
    return {"real": real.to_json(), "predicted": predicted.to_json()}


def dynbsz_skew_runner(sc: SkewScenario) -> list:
    """dynbsz's loader in plain mode (no packing), one epoch, batch 1."""
    import warnings

    from dynbsz.datasets import TraceMapDataset
    from dynbsz.loader import build_loader
    from dynbsz.loader_config import LoaderConfig

    trace = SKEW_WORKLOAD.sample(sc.num_samples, sc.data_seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loader = build_loader(TraceMapDataset(trace), None, None,
                              LoaderConfig(num_workers=sc.num_workers, prefetch_factor=sc.prefetch_factor,
                                           in_order=sc.in_order, seed=sc.shuffle_seed))
        try:
            return [sid for step in loader for sid in step.sample_ids]
        finally:
            loader.close()
