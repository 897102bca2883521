"""Loader configuration: the torch/torchdata scheduling knobs plus DP, seed and runtime."""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, replace
from typing import Any

from .costs import CostModel
from .errors import ConfigError, check_choice, check_int

RUNTIMES = ("main", "worker")
#: How tokens are counted against the budget: all of them, or only those that carry loss.
TOKEN_COUNTS = ("total", "effective")
MODALITIES = ("text", "multimodal", "diffusion")
#: 'sampler': the (seed, epoch) order as it is; 'balanced': reordered within ``lookahead`` positions so
#: torch's round-robin dispatch keeps the workers level (``dynbsz.order.balanced_order``).
ORDERS = ("sampler", "balanced")
START_METHODS = (None, "fork", "spawn", "forkserver")
#: 'auto': derived from the cost estimates and the worker count (``dynbsz.order.auto_lookahead``)
AUTO = "auto"


class LoaderWarning(UserWarning):
    """A loader setting was adjusted, or costs something the user should know about."""


IN_ORDER_FALSE_COST = (
    "in_order=False hands batches out in arrival order. What it costs: (1) reproducibility: the order "
    "depends on timing, so two runs with the same seed differ; (2) distribution skew: with uneven decode "
    "costs cheap samples (e.g. text) arrive early and slow ones (e.g. video) late, so per-step source "
    "shares drift from the sampler's; (3) resume: dynbsz checkpoints what was actually delivered, so a "
    "resume re-issues exactly the undelivered samples of the epoch (nothing lost or repeated), but not in "
    "the uninterrupted order. A plain StatefulDataLoader gives no such guarantee."
)


def check_lookahead(value: Any, setting: str = "lookahead") -> None:
    """``'auto'`` or an integer >= 0: the one rule for a balanced order's lookahead, wherever it is given."""
    if value == AUTO:
        return
    if isinstance(value, str):
        raise ConfigError(f"{setting}={value!r} is not supported; allowed values: {AUTO!r} or an integer >= 0")
    try:
        check_int(setting, value, minimum=0)
    except ConfigError as e:
        raise ConfigError(f"{e}; allowed values: {AUTO!r} or an integer >= 0") from None


@dataclass(frozen=True)
class LoaderConfig:
    """How samples are fetched and delivered.

    num_workers, prefetch_factor, persistent_workers, in_order, pin_memory, start_method
                      forwarded to torchdata's StatefulDataLoader (start_method is its
                      multiprocessing_context); prefetch_factor defaults to 2 with workers
    seed, shuffle     the epoch order is a pure function of (seed, epoch)
    dp_rank, dp_size  this rank reads positions dp_rank, dp_rank + dp_size, ... of the epoch order
    runtime           'main': packer in the main process (VeOmni's DynamicBatchSizeDataLoader);
                      'worker': a packer inside each worker, its buffer in the worker's state
    fetch_batch_size  samples per worker task in the main runtime
    max_steps         stop after this many steps in total (all epochs), None: no limit
    max_tokens        stop after the step at which the tokens trained, summed over every DP rank
                      (``torch.distributed`` all-reduce, one per step), reach this count: runs of
                      different policies compare at equal training. None: no limit
    timeout_s         per-batch timeout for worker results (0: wait forever)
    reorder_buffer    with in_order=True: 0 (default) lets torch keep the order, which ties each dispatch
                      to a hand-out in strict round robin (one slow sample idles every worker); N > 0
                      lets torch dispatch out of order and dynbsz restores the sampler's order in the
                      main process, holding at most about N early samples (main runtime, workers).
                      The delivered sequence, and so resume, is the same either way.
    order, lookahead, cost_model
                      'sampler' (default) or 'balanced': each epoch's order is then a permutation of
                      the sampler's in which no sample moves more than ``lookahead`` positions
                      ('auto', the default: ``dynbsz.order.auto_lookahead`` of the cost estimates and
                      the worker count, 16-256; or an integer >= 0),
                      levelling the workers' loads on cost estimates known before the epoch: from
                      ``cost_model`` (a ``dynbsz.costs.CostModel`` or its JSON dict, as
                      ``python -m dynbsz profile`` writes it) or a ``cost_fn`` given to
                      ``build_loader``, applied to ``meta_fn(index)``. Main runtime, with workers.
    token_count, modality, micro_batch_size
                      what is being trained: tokens counted 'total' or 'effective' (loss-bearing),
                      'text', 'multimodal' or 'diffusion' data, and VeOmni's micro_batch_size (its
                      budget is micro_batch_size x max_seq_len). A gate measured only for some of
                      them (the seed's context_aware) is checked against them and fails closed.
    """

    num_workers: int = 0
    prefetch_factor: int | None = None
    persistent_workers: bool = False
    in_order: bool = True
    pin_memory: bool = False
    seed: int = 0
    shuffle: bool = True
    dp_rank: int = 0
    dp_size: int = 1
    runtime: str = "main"
    fetch_batch_size: int = 1
    start_method: str | None = None
    max_steps: int | None = None
    max_tokens: int | None = None
    timeout_s: float = 0.0
    token_count: str = "total"
    modality: str = "text"
    micro_batch_size: int = 1
    order: str = "sampler"
    lookahead: int | str = AUTO
    cost_model: CostModel | None = None
    reorder_buffer: int = 0

    def __post_init__(self) -> None:
        check_int("num_workers", self.num_workers, minimum=0)
        if self.prefetch_factor is not None:
            check_int("prefetch_factor", self.prefetch_factor, minimum=1)
            if self.num_workers == 0:
                raise ConfigError("prefetch_factor needs worker processes: set num_workers >= 1, or leave "
                                  "prefetch_factor=None with num_workers=0")
        for flag in ("persistent_workers", "in_order", "pin_memory", "shuffle"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(f"{flag} must be True or False, got {getattr(self, flag)!r}")
        check_int("seed", self.seed, minimum=0)
        check_int("dp_size", self.dp_size, minimum=1)
        check_int("dp_rank", self.dp_rank, minimum=0, maximum=self.dp_size - 1)
        check_choice("runtime", self.runtime, RUNTIMES)
        check_int("fetch_batch_size", self.fetch_batch_size, minimum=1)
        check_choice("start_method", self.start_method, START_METHODS)
        if self.max_steps is not None:
            check_int("max_steps", self.max_steps, minimum=1)
        if self.max_tokens is not None:
            check_int("max_tokens", self.max_tokens, minimum=1)
        if isinstance(self.timeout_s, bool) or not isinstance(self.timeout_s, (int, float)) or self.timeout_s < 0:
            raise ConfigError(f"timeout_s must be a number of seconds >= 0, got {self.timeout_s!r}")
        check_choice("token_count", self.token_count, TOKEN_COUNTS)
        check_choice("modality", self.modality, MODALITIES)
        check_int("micro_batch_size", self.micro_batch_size, minimum=1)
        check_choice("order", self.order, ORDERS)
        check_lookahead(self.lookahead)
        if self.cost_model is not None and not isinstance(self.cost_model, CostModel):
            object.__setattr__(self, "cost_model", CostModel.from_dict(self.cost_model))
        if self.order == "balanced":
            if self.runtime != "main":
                raise ConfigError("order='balanced' is supported with runtime='main' only: in runtime='worker' each "
                                  "worker packs its own stream, so there is no dispatch order to balance; use "
                                  "order='sampler' there")
            if self.num_workers == 0:
                raise ConfigError("order='balanced' levels the loads of worker processes, and num_workers=0 has "
                                  "none; set num_workers >= 1 or order='sampler'")
        elif self.cost_model is not None:
            raise ConfigError("cost_model is used by order='balanced' only; set order='balanced' or drop cost_model")
        check_int("reorder_buffer", self.reorder_buffer, minimum=0)
        if self.reorder_buffer:
            problems = [p for p, bad in (("in_order=True", not self.in_order), ("runtime='main'", self.runtime != "main"),
                                         ("num_workers >= 1", self.num_workers == 0)) if bad]
            if problems:
                raise ConfigError(f"reorder_buffer={self.reorder_buffer} restores the sampler's order in the main "
                                  f"process behind out-of-order workers; it needs {', '.join(problems)} (or set "
                                  "reorder_buffer=0)")

    def gate_context(self) -> dict[str, Any]:
        """Where a gate runs, in ``dynbsz.gates.context_aware``'s terms (dynamic batching on)."""
        return {"runtime": self.runtime, "count": self.token_count, "modality": self.modality,
                "micro_batch_size": self.micro_batch_size, "dyn_bsz": True}

    def resolved(self) -> "LoaderConfig":
        """The settings the loader really runs with. The one place knobs are adjusted and warned about."""
        cfg = self
        if cfg.persistent_workers and cfg.num_workers == 0:
            warnings.warn("persistent_workers=True has no effect with num_workers=0 (there are no workers to "
                          "keep); running with persistent_workers=False", LoaderWarning, stacklevel=3)
            cfg = replace(cfg, persistent_workers=False)
        if cfg.num_workers > 0 and cfg.prefetch_factor is None:
            cfg = replace(cfg, prefetch_factor=2)
        if not cfg.in_order and cfg.num_workers > 0:
            warnings.warn(IN_ORDER_FALSE_COST, LoaderWarning, stacklevel=3)
        return cfg

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cost_model"] = self.cost_model.to_dict() if self.cost_model is not None else None
        return d
