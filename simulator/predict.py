"""A training job's data stall and cold start, predicted for its own trace and loader settings.

The job (e.g. ``ci/gpu_job.py``) hands over what it configured and measured, nothing fitted to
the run being predicted:

* decode costs: its trace's (its workers sleep exactly those);
* num_workers, prefetch_factor; the loader runs in_order=True with persistent workers and
  one sample per fetch;
* consumer step time: the run's own mean compute time per step (device copy, forward,
  backward, optimizer, synchronised);
* worker start-up: when each worker began its first fetch, in a separate probe of the same
  loader over the same trace at zero decode cost, averaged over workers;
* per-task overhead (IPC, sleep overshoot): ``measure_task_overhead``, the fidelity suite's
  calibration run.

The simulator models the workers and torch's scheduling, not the main process's own work
(unpickling results, packing in runtime='main', collating) nor the result path's latency. The
job's probe measures that too, at zero decode cost, and two first-order corrections are
reported *beside* the pure prediction, never instead of it:

* ``stall_fraction_plus_floor``: every predicted wait plus the probe's median time per step in
  ``next()`` (the floor no worker can hide);
* ``first_micro_batch_plus_floor_s``: the prediction plus (the probe's real first step at zero
  cost minus the simulator's own first step at zero cost).

dynbsz's two runtimes:

* runtime='main' (``predict_main_runtime``): the rank's samples, in epoch order, go through
  ``dynbatch.run_rank`` (dynbsz's real packer in the modelled fetch loop).
* runtime='worker' (``predict_worker_runtime``): an iterable dataset to torch; worker k
  iterates stream k's micro-batches, each costing the decodes its worker spent to cut it. The
  job passes its per-stream plan as data, ``(sample ids, tokens, decode seconds)`` per
  micro-batch, and the streams go through ``loader_model.simulate`` with one contiguous shard
  per worker.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable, Sequence

import numpy as np

from dynbsz import PackerConfig
from dynbsz.gates import Gate
from dynbsz.workload import Trace

from .config import LoaderModelConfig, StepTime
from .dynbatch import run_rank
from .fidelity import measure_overhead
from .loader_model import simulate
from .metrics import stall_fraction

#: One planned micro-batch of a worker's stream: (sample ids, tokens, decode seconds spent to cut it).
PlannedItem = tuple[Sequence[int], int, float]


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


def job_loader(num_workers: int, prefetch_factor: int, startup_s: float, overhead_s: float,
               **kw) -> LoaderModelConfig:
    """The job's loader as the model sees it: in order, persistent workers, one sample per task."""
    return LoaderModelConfig(num_workers=num_workers, prefetch_factor=prefetch_factor, batch_size=1, in_order=True,
                             persistent_workers=True, worker_startup_s=startup_s, task_overhead_s=overhead_s, **kw)


def predict_main_runtime(trace: Trace, packer_config: PackerConfig, make_gate: Callable[[], Gate], *,
                         num_workers: int, prefetch_factor: int, steps: int, step_s: float, startup_s: float,
                         overhead_s: float, floor_s: float = 0.0,
                         zero_cost_first_step_s: float | None = None) -> Prediction:
    """runtime='main': ``trace`` is the rank's samples in epoch order; ``make_gate()`` a fresh gate per run."""
    loader = job_loader(num_workers, prefetch_factor, startup_s, overhead_s)
    step = StepTime(base_s=step_s)

    def handouts(n: int, cost_scale: float) -> tuple[np.ndarray, list[list[int]]]:
        scaled = Trace(trace.ids, trace.tokens, trace.cost_s * cost_scale, trace.source, trace.source_names)
        run = run_rank(scaled, packer_config, make_gate(), loader, step, max_cuts=n)
        return run.cut_s[:n], [list(map(int, x)) for x in run.ids[:n]]

    return _predict(handouts, steps, step_s, startup_s, overhead_s, floor_s, zero_cost_first_step_s)


def predict_worker_runtime(streams: Sequence[Sequence[PlannedItem]], *, prefetch_factor: int, steps: int,
                           step_s: float, startup_s: float, overhead_s: float, floor_s: float = 0.0,
                           zero_cost_first_step_s: float | None = None) -> Prediction:
    """runtime='worker': ``streams[k]`` is worker k's planned micro-batches, in the order it yields them."""
    items = [item for s in streams for item in s]
    n = len(items)
    step = StepTime(base_s=step_s)
    loader = job_loader(len(streams), prefetch_factor, startup_s, 0.0, dataset="iterable",
                        shard_sizes=tuple(len(s) for s in streams))

    def handouts(k: int, cost_scale: float) -> tuple[np.ndarray, list[list[int]]]:
        # One row per micro-batch; the per-task overhead is charged per *sample* read, since in this
        # runtime every sample read is a dataset call inside the worker.
        costs = np.array([cost * cost_scale + overhead_s * len(ids) for ids, _, cost in items], dtype=np.float64)
        rows = Trace(np.arange(n, dtype=np.int64), np.array([tokens for _, tokens, _ in items], dtype=np.int64),
                     costs, np.zeros(n, dtype=np.int64), ("microbatch",))
        sim = simulate(rows, loader, step=step)
        ids = [list(items[int(sim.batch_samples(i)[0])][0]) for i in range(min(k, len(sim)))]
        return sim.handout_s[:k], ids

    return _predict(handouts, steps, step_s, startup_s, overhead_s, floor_s, zero_cost_first_step_s)


def _predict(handouts: Callable[[int, float], tuple[np.ndarray, list[list[int]]]], steps: int, step_s: float,
             startup_s: float, overhead_s: float, floor_s: float,
             zero_cost_first_step_s: float | None) -> Prediction:
    """Predict the first ``steps`` steps, timed from the moment the training loop calls ``iter()``.

    ``handouts(n, cost_scale)``: hand-out times and sample ids of the first ``n`` steps
    (``cost_scale`` 0: zero decode cost). ``floor_s`` and ``zero_cost_first_step_s`` (the
    probe's) feed only the ``*_plus_floor`` figures.
    """
    handout, ids = handouts(steps, 1.0)
    # The consumer asks for step i+1 one step time after it got step i (it asks for step 0 at 0).
    request = np.concatenate([[0.0], handout[:-1] + step_s])
    waits = np.maximum(handout[1:] - request[1:], 0.0)
    span = float(handout[-1] - handout[0]) if len(handout) > 1 else 0.0
    extra = floor_s * len(waits)
    plus_floor = float((waits.sum() + extra) / (span + extra)) if span + extra > 0 else 0.0
    first = float(handout[0])
    first_plus = first
    if zero_cost_first_step_s is not None:
        zero, _ = handouts(1, 0.0)
        first_plus = first + (zero_cost_first_step_s - float(zero[0]))
    return Prediction(first_micro_batch_s=first, stall_fraction=stall_fraction(request, handout),
                      first_micro_batch_plus_floor_s=first_plus, stall_fraction_plus_floor=plus_floor,
                      handout_s=handout.tolist(), ids=ids, step_s=step_s, worker_startup_s=startup_s,
                      task_overhead_s=overhead_s, floor_s=floor_s)


def measure_task_overhead(num_workers: int, samples: int = 120) -> float:
    """Worker seconds per task beyond the sleeps, on this machine (``fidelity.measure_overhead``)."""
    return measure_overhead(num_workers=num_workers, samples=samples)
