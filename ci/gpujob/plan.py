"""What the loader must deliver in epoch 0, computed offline with dynbsz's real packer and gate.

Nothing here decides which samples are packed: the epoch order is ``dynbsz.order.rank_order``
and every cut is ``GreedyPacker.put/ready/cut/drain``, called as the loader calls them.

* runtime='main' packs the rank's epoch order in one packer, one sample per fetch, cutting at
  most one micro-batch per fetch (``plan_main``).
* runtime='worker' gives logical stream k the positions k, k+n, ... and packs each stream in
  its own packer (``plan_streams``); each item's decode cost is the cost of the samples its
  worker had to read to cut it (drained items cost nothing more).

The job uses the plans to refuse a run longer than one epoch (the simulator comparison covers
epoch 0), and ``predict`` hands them to the simulator's prediction (``simulator.predict``): the
rank's epoch order for runtime='main', the per-stream plan as data for runtime='worker'.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from dynbsz import GreedyPacker, PackerConfig
from dynbsz.errors import ConfigError
from dynbsz.order import rank_order
from dynbsz.packing import pack
from dynbsz.workload import Trace
from simulator.predict import Prediction, predict_main_runtime, predict_worker_runtime
from simulator.training import stall_with_floor

from .config import JobConfig


@dataclass(frozen=True)
class PlannedItem:
    ids: tuple[int, ...]
    tokens: int
    cost_s: float        # decode seconds its producer spent on samples read for it


def epoch_order(cfg: JobConfig, epoch: int = 0) -> np.ndarray:
    return rank_order(cfg.n_samples, cfg.loader_seed, epoch, 0, 1, True)


def _pack(trace, indices: list[int], packer: GreedyPacker) -> list[PlannedItem]:
    """The loader's packing loop (``dynbsz.packing.pack``) over ``indices``, one sample per fetch,
    with the decode time spent per micro-batch: the fetches since the previous one."""
    spent = 0.0

    def fetches():
        nonlocal spent
        for index in indices:
            spent += float(trace.cost_s[index])     # pack() asks for a fetch only when it needs one
            yield [(int(trace.ids[index]), int(trace.tokens[index]))]

    items = []
    for mb in pack(packer, fetches()):
        items.append(PlannedItem(tuple(mb.ids), mb.total_tokens, spent))
        spent = 0.0
    return items


def plan_main(cfg: JobConfig) -> list[PlannedItem]:
    packer = GreedyPacker(PackerConfig(budget=cfg.budget), cfg.make_gate())
    return _pack(cfg.trace(), epoch_order(cfg).tolist(), packer)


def plan_streams(cfg: JobConfig) -> list[list[PlannedItem]]:
    trace, order, gate = cfg.trace(), epoch_order(cfg), cfg.make_gate()
    return [_pack(trace, order[k::cfg.num_workers].tolist(),
                  GreedyPacker(PackerConfig(budget=cfg.budget), copy.deepcopy(gate)))
            for k in range(cfg.num_workers)]


def micro_batches_per_epoch(cfg: JobConfig, runtime: str) -> int:
    if runtime == "main":
        return len(plan_main(cfg))
    return sum(len(s) for s in plan_streams(cfg))


def check_fits_one_epoch(cfg: JobConfig, runtimes: tuple[str, ...]) -> None:
    """The measured run and its prediction both cover epoch 0 only: refuse anything longer."""
    for runtime in runtimes:
        n = micro_batches_per_epoch(cfg, runtime)
        if n < cfg.steps:
            raise ConfigError(f"config {cfg.name!r}: epoch 0 holds {n} micro-batches with runtime={runtime!r}, fewer "
                              f"than steps={cfg.steps}; lower --steps or raise n_samples (now {cfg.n_samples})")


def predict(cfg: JobConfig, runtime: str, steps: int, step_s: float, startup_s: float, overhead_s: float,
            floor_s: float = 0.0, zero_cost_first_step_s: float | None = None, cost_scale: float = 1.0) -> Prediction:
    """The simulator's prediction of the first ``steps`` steps of ``runtime`` for this job
    (``cost_scale`` 0: the probe's zero-cost copy of the trace)."""
    timing = dict(prefetch_factor=cfg.prefetch_factor, steps=steps, step_s=step_s, startup_s=startup_s,
                  overhead_s=overhead_s, floor_s=floor_s, zero_cost_first_step_s=zero_cost_first_step_s)
    if runtime == "main":
        trace = cfg.trace().subset(epoch_order(cfg))
        trace = Trace(trace.ids, trace.tokens, trace.cost_s * cost_scale, trace.source, trace.source_names)
        return predict_main_runtime(trace, PackerConfig(budget=cfg.budget), cfg.make_gate,
                                    num_workers=cfg.num_workers, **timing)
    streams = [[(it.ids, it.tokens, it.cost_s * cost_scale) for it in s] for s in plan_streams(cfg)]
    return predict_worker_runtime(streams, **timing)


def model_probe_wait(cfg: JobConfig, runtime: str, probed: dict, overhead_s: float) -> float:
    """The median wait per step the loader model itself predicts for the probe (zero decode cost, its
    pace between steps, its start-up): the part of the probe's ``next()`` time the model already
    explains (workers' per-task time, hand-out), which the floor must not count again."""
    steps = int(probed.get("steps", 12))
    pred = predict(cfg, runtime, steps, float(probed.get("pace_s", 0.0)), probed["startup_s"], overhead_s,
                   cost_scale=0.0)
    hand = np.asarray(pred.handout_s, dtype=np.float64)
    waits = np.maximum(hand[1:] - (hand[:-1] + float(probed.get("pace_s", 0.0))), 0.0)
    return float(np.median(waits)) if len(waits) else 0.0


#: The goals the job's one prediction is held to (issue 14): stall within 5 points of the measured one,
#: first step within 15% of it (both on the median of the job's repeats).
STALL_TOLERANCE_POINTS = 0.05
FIRST_STEP_TOLERANCE = 0.15


def model_prediction(cfg: JobConfig, runtime: str, steps: int, step_s: float, probed: dict,
                     overhead_s: float) -> tuple[Prediction, dict]:
    """The job's one reported prediction: the loader model with the main process's floor in it.

    Inputs, each measured the same way in every run and none fitted to the run predicted: the run's
    mean step compute (``step_s``), and from the zero-cost probe of the same loader (paced by that
    step compute) the floor, the workers' start-up and the real first step at zero cost. The floor
    is the probe's median wait per step in ``next()`` less the wait the loader model predicts for
    the probe itself (``model_probe_wait``): what the model does not explain, counted once.

    * stall: the loader model with a consumer step of ``step_s + floor`` and the floor as part of
      every wait (``simulator.training.stall_with_floor``);
    * first step: the probe's real first step at zero decode cost combined with the model's first
      step at the trace's costs: the fork and the main process's start-up are measured, the
      decode-bound part is modelled. How they combine depends on where the start-up the model does
      not know about runs. In the worker runtime the micro-batch is packed in the worker after its
      decodes, so that time adds (the probe's first step plus what the decodes add in the model).
      In the main runtime it is the main process's own (iterator, pin-memory thread), which runs
      while the workers decode, so the first step is the later of the two: on the quiet machine
      (3 runs x 3 repeats, docs/gpu-job.md) the sum came out +20/+23/+20% in the main runtime and
      +1 to +3% in the worker's, the later-of-the-two +1/-10/-2% and -14 to -18%.
    """
    # the floor: what the probe waited per step beyond what the model predicts for the probe itself
    explained = model_probe_wait(cfg, runtime, probed, overhead_s)
    floor = max(0.0, float(probed["floor_s"]) - explained)
    pred = predict(cfg, runtime, steps, step_s + floor, probed["startup_s"], overhead_s, 0.0, probed["first_step_s"])
    first = (max(float(probed["first_step_s"]), pred.first_micro_batch_s) if runtime == "main"
             else pred.first_micro_batch_plus_floor_s)
    one = {"first_micro_batch_s": first,
           "stall_fraction": stall_with_floor(pred.handout_s, step_s, floor),
           "step_s": step_s, "floor_s": floor, "probe_wait_s": probed["floor_s"], "probe_wait_modelled_s": explained,
           "worker_startup_s": probed["startup_s"],
           "zero_cost_first_step_s": probed["first_step_s"], "task_overhead_s": overhead_s,
           # the loader model alone (no floor), for reference: what the floor adds
           "loader_only_stall_fraction": pred.stall_fraction, "loader_only_first_micro_batch_s": pred.first_micro_batch_s}
    return pred, one


def compare(measured_stall: float, measured_first: float, predicted_stall: float, predicted_first: float) -> dict:
    """The prediction against the measurement: stall in points, first step relative, and whether each is in tolerance."""
    points = predicted_stall - measured_stall
    rel = (predicted_first - measured_first) / measured_first if measured_first > 0 else float("inf")
    stall_ok, first_ok = abs(points) <= STALL_TOLERANCE_POINTS, abs(rel) <= FIRST_STEP_TOLERANCE
    return {"stall_measured": measured_stall, "stall_predicted": predicted_stall, "stall_error_points": points,
            "stall_ok": bool(stall_ok), "first_step_measured_s": measured_first,
            "first_step_predicted_s": predicted_first, "first_step_rel_error": rel, "first_step_ok": bool(first_ok),
            "ok": bool(stall_ok and first_ok), "tolerance": {"stall_points": STALL_TOLERANCE_POINTS,
                                                             "first_step_rel": FIRST_STEP_TOLERANCE}}
