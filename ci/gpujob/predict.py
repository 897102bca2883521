"""The simulator's prediction for the job's own trace and loader config.

Inputs, all measured or configured, none fitted to the run being predicted:

* decode costs: the trace's (the workers sleep exactly those);
* num_workers, prefetch_factor, in_order=True, persistent workers: the loader config;
* consumer step time: the run's own mean compute time per step (device copy, forward,
  backward, optimizer, synchronised);
* worker start-up: when each worker began its first fetch, in a separate probe of the same
  loader over the same trace at zero decode cost (``train.probe``), averaged over workers;
* per-task overhead (IPC, sleep overshoot): ``simulator.fidelity.measure_overhead``.

The simulator models the workers and torch's scheduling, not the main process's own work
(unpickling results, packing in runtime='main', collating) nor the result path's latency. The
probe measures that too, at zero decode cost, and two first-order corrections are reported
*beside* the pure prediction, never instead of it:

* ``stall_fraction_plus_floor``: every predicted wait plus the probe's median time per step in
  ``next()`` (the floor no worker can hide);
* ``first_micro_batch_plus_floor_s``: the prediction plus (the probe's real first step at zero
  cost minus the simulator's own first step at zero cost).

runtime='main' goes through ``simulator.dynbatch.run_rank`` (dynbsz's real packer in the
modelled fetch loop). runtime='worker' is an iterable dataset to torch: worker k iterates
stream k's micro-batches (``plan.plan_streams``), each costing the decodes needed to cut it,
so it goes through ``simulator.loader_model.simulate`` with one contiguous shard per worker.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dynbsz import PackerConfig
from dynbsz.workload import Trace
from simulator.config import LoaderConfig as SimLoaderConfig, StepTime
from simulator.dynbatch import run_rank
from simulator.loader_model import simulate
from simulator.metrics import stall_fraction

from .config import JobConfig
from .plan import epoch_order, plan_streams


@dataclass(frozen=True)
class Prediction:
    first_micro_batch_s: float
    stall_fraction: float
    first_micro_batch_plus_floor_s: float
    stall_fraction_plus_floor: float
    handout_s: list[float]
    ids: list[list[int]]              # sample ids of each predicted step, in hand-out order
    step_s: float
    worker_startup_s: float
    task_overhead_s: float
    floor_s: float

    def to_json(self) -> dict:
        d = asdict(self)
        del d["handout_s"], d["ids"]  # per-step detail stays in memory; the report keeps figures
        return d


def _loader(cfg: JobConfig, startup_s: float, overhead_s: float, **kw) -> SimLoaderConfig:
    return SimLoaderConfig(num_workers=cfg.num_workers, prefetch_factor=cfg.prefetch_factor, batch_size=1,
                           in_order=True, persistent_workers=True, worker_startup_s=startup_s,
                           task_overhead_s=overhead_s, **kw)


def _simulate(cfg: JobConfig, runtime: str, steps: int, step_s: float, startup_s: float, overhead_s: float,
              cost_scale: float = 1.0) -> tuple[np.ndarray, list[list[int]]]:
    """Hand-out times and sample ids of the first ``steps`` steps (``cost_scale`` 0: zero decode cost)."""
    step = StepTime(base_s=step_s)
    if runtime == "main":
        t = cfg.trace()
        trace = Trace(t.ids, t.tokens, t.cost_s * cost_scale, t.source, t.source_names).subset(epoch_order(cfg))
        run = run_rank(trace, PackerConfig(budget=cfg.budget), cfg.make_gate(), _loader(cfg, startup_s, overhead_s),
                       step, max_cuts=steps)
        return run.cut_s[:steps], [list(map(int, x)) for x in run.ids[:steps]]
    streams = plan_streams(cfg)
    items = [item for s in streams for item in s]
    n = len(items)
    # One row per micro-batch; the per-task overhead is charged per *sample* read, since in this
    # runtime every sample read is a dataset call inside the worker.
    costs = np.array([it.cost_s * cost_scale + overhead_s * len(it.ids) for it in items], dtype=np.float64)
    rows = Trace(np.arange(n, dtype=np.int64), np.array([it.tokens for it in items], dtype=np.int64), costs,
                 np.zeros(n, dtype=np.int64), ("microbatch",))
    sim = simulate(rows, _loader(cfg, startup_s, 0.0, dataset="iterable", shard_sizes=tuple(len(s) for s in streams)),
                   step=step)
    ids = [list(items[int(sim.batch_samples(i)[0])].ids) for i in range(min(steps, len(sim)))]
    return sim.handout_s[:steps], ids


def predict(cfg: JobConfig, runtime: str, steps: int, step_s: float, startup_s: float, overhead_s: float,
            floor_s: float = 0.0, zero_cost_first_step_s: float | None = None) -> Prediction:
    """Predict the first ``steps`` steps, timed from the moment the training loop calls ``iter()``.

    ``floor_s`` and ``zero_cost_first_step_s`` (the probe's) feed only the ``*_plus_floor`` figures.
    """
    handout, ids = _simulate(cfg, runtime, steps, step_s, startup_s, overhead_s)
    # The consumer asks for step i+1 one step time after it got step i (it asks for step 0 at 0).
    request = np.concatenate([[0.0], handout[:-1] + step_s])
    waits = np.maximum(handout[1:] - request[1:], 0.0)
    span = float(handout[-1] - handout[0]) if len(handout) > 1 else 0.0
    extra = floor_s * len(waits)
    plus_floor = float((waits.sum() + extra) / (span + extra)) if span + extra > 0 else 0.0
    first = float(handout[0])
    first_plus = first
    if zero_cost_first_step_s is not None:
        zero, _ = _simulate(cfg, runtime, 1, step_s, startup_s, overhead_s, cost_scale=0.0)
        first_plus = first + (zero_cost_first_step_s - float(zero[0]))
    return Prediction(first_micro_batch_s=first, stall_fraction=stall_fraction(request, handout),
                      first_micro_batch_plus_floor_s=first_plus, stall_fraction_plus_floor=plus_floor,
                      handout_s=handout.tolist(), ids=ids, step_s=step_s, worker_startup_s=startup_s,
                      task_overhead_s=overhead_s, floor_s=floor_s)


def measure_task_overhead(num_workers: int) -> float:
    """The simulator's own calibration routine: worker seconds per task beyond the sleeps."""
    from simulator.fidelity import measure_overhead

    return measure_overhead(num_workers=num_workers, samples=120)


def relative_error(predicted: float, measured: float) -> float | None:
    """(predicted - measured) / measured; None where the measured value is zero (undefined)."""
    if not measured:
        return None
    return (predicted - measured) / measured
