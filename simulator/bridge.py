"""A dynbsz loader as the model sees it: torch's knobs from its config, its epoch order from dynbsz.

The model's one job is time. What a dynbsz loader reads in an epoch, and in which order, is
dynbsz's business: ``LoaderOrder`` calls ``dynbsz.order.loader_order`` (the (seed, epoch)
order, a DP rank's share, ``order='balanced'``) and hands the result to the model as its
sampler (``order_fn``). Nothing here rearranges anything.

Two cost vectors, kept apart on purpose:

* the **durations** are the trace's ``cost_s``: what the workers really spend, the model's clock;
* the **estimates** (``order='balanced'`` only) are what the loader knows before the epoch and
  orders by: ``trace_estimates(trace, cost_model)`` applies a ``dynbsz.costs.CostModel`` (or any
  ``meta -> seconds``) to each row's metadata through ``dynbsz.costs.estimate_costs``, exactly as
  ``build_loader`` does with its ``meta_fn``; or pass the true costs for the exact-cost case.

"What if my estimates are off by sigma" is one run with other durations and the same
estimates (``with_cost_noise``), or the same durations and other estimates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from dynbsz.costs import CostModel, TraceMeta, estimate_costs
from dynbsz.errors import ConfigError, check_int
from dynbsz.loader_config import LoaderConfig
from dynbsz.order import loader_order
from dynbsz.workload import Trace

from .config import LoaderModelConfig, StepTime
from .loader_model import LoaderRun, simulate


@dataclass(frozen=True, eq=False)
class LoaderOrder:
    """``order_fn`` of a model of a dynbsz loader: epoch ``e`` of the model reads what the loader reads
    in epoch ``first_epoch + e``, i.e. ``dynbsz.order.loader_order(num_samples, config, epoch, estimates)``.

    ``estimates[i]``: the estimated decode seconds of dataset index ``i``, needed by
    ``order='balanced'`` and refused otherwise (as ``build_loader`` refuses a cost source the
    order does not read). Dataset index ``i`` is trace row ``i``.
    """

    config: LoaderConfig
    num_samples: int
    estimates: np.ndarray | None = None
    first_epoch: int = 0
    # epoch -> its order, read-only: a pure function of the fields above, and a balanced order costs 10-25 us
    # a sample to compute, so the runs of one Trainer (advise's gate search: ~15 gates on one loader) share it
    _epochs: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.config, LoaderConfig):
            raise ConfigError(f"config must be a dynbsz LoaderConfig, got {type(self.config).__name__}")
        check_int("num_samples", self.num_samples, minimum=0)
        check_int("first_epoch", self.first_epoch, minimum=0)
        if self.config.order == "balanced":
            if self.estimates is None:
                raise ConfigError("order='balanced' orders each epoch on estimated decode costs: give estimates= "
                                  "(one per dataset index; trace_estimates(trace, cost_model) computes them)")
            est = np.array(self.estimates, dtype=np.float64)   # a private copy: the order must not change
            if est.shape != (self.num_samples,):
                raise ConfigError(f"estimates must hold one cost per dataset index ({self.num_samples}), got shape "
                                  f"{est.shape}")
            if len(est) and (not np.isfinite(est).all() or est.min() < 0):
                raise ConfigError("estimates must be finite numbers of seconds >= 0")
            est.setflags(write=False)
            object.__setattr__(self, "estimates", est)
        elif self.estimates is not None:
            raise ConfigError(f"estimates feed order='balanced' only, and this loader has order={self.config.order!r}; "
                              "drop estimates or set LoaderConfig(order='balanced')")

    def __call__(self, epoch: int) -> np.ndarray:
        rows = self._epochs.get(epoch)
        if rows is None:
            rows = np.asarray(loader_order(self.num_samples, self.config, self.first_epoch + epoch, self.estimates))
            rows.setflags(write=False)
            self._epochs[epoch] = rows
        return rows


def trace_estimates(trace: Trace, estimator: CostModel | Mapping[str, Any] | Callable[[Mapping], float]) -> np.ndarray:
    """The loader's cost estimate of every trace row: ``dynbsz.costs.estimate_costs`` over ``TraceMeta``
    with a cost model (a ``CostModel`` or its JSON dict) or a ``meta -> seconds`` function."""
    if isinstance(estimator, Mapping):
        estimator = CostModel.from_dict(estimator)
    fn = estimator.estimate if isinstance(estimator, CostModel) else estimator
    if not callable(fn):
        raise ConfigError(f"estimator must be a CostModel, its dict or a callable meta -> seconds, got "
                          f"{type(estimator).__name__}")
    return estimate_costs(len(trace), TraceMeta(trace), fn)


def simulate_loader(trace: Trace, config: LoaderConfig, *, estimates: np.ndarray | None = None,
                    step: StepTime = StepTime(), epochs: int = 1, first_epoch: int = 0, progress=None,
                    **timing: Any) -> LoaderRun:
    """Model a dynbsz loader (main runtime, no packer) over ``trace``: workers spend ``trace.cost_s``
    (the true costs), and each epoch's order is the loader's own (``LoaderOrder``), on ``estimates``
    for ``order='balanced'``. ``timing``: the model-only fields (``task_overhead_s``, ...)."""
    model_config = LoaderModelConfig.for_loader(config, sampler=False, **timing)
    order = LoaderOrder(config, len(trace), estimates, first_epoch)
    return simulate(trace, model_config, step=step, epochs=epochs, progress=progress, order_fn=order)
