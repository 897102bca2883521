"""simulator: a discrete-event model of decode costs and worker scheduling that drives dynbsz's packer.

The model only supplies *time*: packing and readiness decisions are made by
``dynbsz.GreedyPacker`` and ``dynbsz.gates`` objects called from the event loop.

    engine        the clock and event queue
    config        LoaderModelConfig (torch's knobs), StepTime (the consumer)
    loader_model  torch / torchdata dispatch and hand-out rules: LoaderModel, simulate
    bridge        a dynbsz loader in the model: its epoch order (dynbsz.order.loader_order, balanced
                  included) as the model's sampler, cost estimates kept apart from the durations
    dynbatch      main-process dynamic batching over the model: run_rank
    metrics       pure functions: cold start, throughput, stall, fill, source share, displacement
    workloads     the calibrated seed workload, a text/video mixture, a prefix-stable stream
    gatespec      gate specifications: fixed:N, context_aware, token_aware[:M:P], MODULE:FACTORY
    study         the cold-start study and gate sweeps, calibrated on the seed PR
    executors     where a study's points run (--executor serial | processes:N | dask://HOST:PORT)
    skew          in_order=True vs False vs dynbsz's balanced order on uneven costs
    fidelity      the real StatefulDataLoader and dynbsz's balanced loader against the model (and the
                  model replayed on its history)
    predict       a training job's data stall and cold start (the GPU job's prediction)
    plot          optional PNG plots (matplotlib)
    cli           ``python -m simulator run | cold-start | sweep | skew | fidelity``

See docs/simulator.md.
"""

from .config import LoaderModelConfig, StepTime
from .dynbatch import RankRun, run_rank
from .engine import CausalityError, EventQueue
from .loader_model import LoaderModel, LoaderRun, simulate

__all__ = ["CausalityError", "EventQueue", "LoaderModel", "LoaderModelConfig", "LoaderRun", "RankRun",
           "StepTime", "run_rank", "simulate"]
