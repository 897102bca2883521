"""Frozen, validated configurations of the modelled loader and consumer.

Errors name the setting and what it allows (``dynbsz.errors``), and combinations
torch itself refuses (prefetch or persistent workers without workers) are
refused here too, with the fix in the message, rather than silently modelled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dynbsz.errors import ConfigError, check_choice, check_int

DATASET_KINDS = ("map", "iterable")


def check_seconds(setting: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) or \
            not math.isfinite(value) or value < 0:
        raise ConfigError(f"{setting} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class LoaderModelConfig:
    """A ``torch.utils.data.DataLoader`` / torchdata ``StatefulDataLoader`` as far as timing and order go.

    num_workers          0: every fetch runs synchronously in the caller (torch's single-process path)
    prefetch_factor      tasks per worker kept in flight; ``None`` means torch's default (2) when
                         there are workers, and must stay ``None`` when there are none
    batch_size           samples per task (the index sampler's batch); the last batch may be short
    in_order             True: strict round-robin dispatch, hand-out in send order (reorder buffer);
                         False: capacity-aware dispatch, hand-out in arrival order
    reorder_buffer       0, or dynbsz's ``LoaderConfig(in_order=True, reorder_buffer=N)``: torch
                         dispatches and hands out as with in_order=False, and the main process
                         releases batches in send order, holding early arrivals; while ``N``
                         samples or more are held, each dispatch is a pause (``pause_s`` in a
                         worker, no sample) instead of the next batch. Needs in_order=True
                         (the delivered order is the sampler's), a map dataset and workers
    pause_s              a pause's worker seconds: ``dynbsz.loader.PAUSE_S`` (a 2 ms sleep)
    persistent_workers   workers survive the end of an epoch: no start-up cost after epoch 0, and
                         an iterable dataset replica keeps the epoch it was forked with
    worker_startup_s     seconds from ``iter()`` until a freshly started worker can fetch
                         (fork, seeding, ``worker_init_fn``, opening the dataset); no effect
                         with num_workers=0 (nothing is started)
    result_latency_s     seconds from a worker finishing a batch to the main process seeing it (IPC)
    task_overhead_s      worker seconds per task on top of its samples' costs (queue get, collate,
                         pickling, sleep overshoot): small, but it accumulates per worker
    dataset              ``map`` (main-process sampler, in order unless ``shuffle_seed``) or
                         ``iterable`` (each worker iterates its own interleaved shard and runs dry)
    drop_last            drop a final short batch (map: the BatchSampler; iterable: each worker's)
    shuffle_seed         None: sampler order is trace order; else a seeded permutation per epoch
                         (for an iterable dataset it is drawn inside the worker's replica, so
                         persistent workers replay epoch 0's permutation, exactly like torch)
    shard_sizes          iterable only: contiguous shards of the epoch order, one size per worker
                         (uneven shards make workers run dry at different times); default:
                         interleaved shards, worker w reading positions w, w+nw, ...
    """

    num_workers: int = 2
    prefetch_factor: int | None = None
    batch_size: int = 1
    in_order: bool = True
    persistent_workers: bool = False
    worker_startup_s: float = 0.0
    result_latency_s: float = 0.0
    task_overhead_s: float = 0.0
    dataset: str = "map"
    drop_last: bool = False
    shuffle_seed: int | None = None
    shard_sizes: tuple[int, ...] | None = None
    reorder_buffer: int = 0
    pause_s: float = 0.002

    def __post_init__(self) -> None:
        check_int("num_workers", self.num_workers, minimum=0)
        if self.prefetch_factor is not None:
            check_int("prefetch_factor", self.prefetch_factor, minimum=1)
            if self.num_workers == 0:
                raise ConfigError(f"prefetch_factor={self.prefetch_factor} needs num_workers >= 1: with "
                                  "num_workers=0 torch fetches synchronously and has nothing to prefetch with; "
                                  "set num_workers >= 1 or leave prefetch_factor unset (None)")
        if self.persistent_workers and self.num_workers == 0:
            raise ConfigError("persistent_workers=True needs num_workers >= 1 (torch raises the same); "
                              "set num_workers >= 1 or persistent_workers=False")
        check_int("batch_size", self.batch_size, minimum=1)
        for flag in ("in_order", "persistent_workers", "drop_last"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(f"{flag} must be True or False, got {getattr(self, flag)!r}")
        check_seconds("worker_startup_s", self.worker_startup_s)
        check_seconds("result_latency_s", self.result_latency_s)
        check_seconds("task_overhead_s", self.task_overhead_s)
        check_choice("dataset", self.dataset, DATASET_KINDS)
        if self.shuffle_seed is not None:
            check_int("shuffle_seed", self.shuffle_seed, minimum=0)
        if self.shard_sizes is not None:
            if self.dataset != "iterable" or self.num_workers == 0:
                raise ConfigError("shard_sizes applies to dataset='iterable' with num_workers >= 1 "
                                  "(each worker iterates its own shard); remove it or change the dataset")
            if not isinstance(self.shard_sizes, tuple) or len(self.shard_sizes) != self.num_workers:
                raise ConfigError(f"shard_sizes must be a tuple of one size per worker ({self.num_workers}), "
                                  f"got {self.shard_sizes!r}")
            for s in self.shard_sizes:
                check_int("shard size", s, minimum=0)
        check_int("reorder_buffer", self.reorder_buffer, minimum=0)
        check_seconds("pause_s", self.pause_s)
        if self.reorder_buffer and (not self.in_order or self.dataset != "map" or self.num_workers == 0):
            raise ConfigError(f"reorder_buffer={self.reorder_buffer} restores the sampler's order behind torch's "
                              "out-of-order dispatch: it needs in_order=True, dataset='map' and num_workers >= 1 "
                              f"(got in_order={self.in_order}, dataset={self.dataset!r}, "
                              f"num_workers={self.num_workers}); set reorder_buffer=0 otherwise")

    @classmethod
    def for_loader(cls, config: Any, *, sampler: bool = True, **timing: Any) -> "LoaderModelConfig":
        """The model of a dynbsz loader (``dynbsz.loader_config.LoaderConfig``, main runtime): same
        knobs, map-style; ``timing`` sets the model-only fields (``worker_startup_s``,
        ``task_overhead_s``, ``result_latency_s``). A reorder buffer is modelled (``reorder_buffer``).

        ``sampler=True``: the model's own sampler reads the loader's (seed, epoch) order, which it
        can for one rank in sampler order; a DP rank's share or ``order='balanced'`` is refused
        rather than modelled wrong. ``sampler=False``: the scheduling knobs alone, for a model
        whose order comes from dynbsz (``simulator.bridge.LoaderOrder`` as ``order_fn``; or
        ``simulator.bridge.simulate_loader``, which does both).
        """
        if config.runtime != "main":
            raise ConfigError(f"runtime={config.runtime!r}: the model covers the main runtime (the packer in the main "
                              "process); model a worker-runtime job with simulator.predict")
        if sampler and (config.order != "sampler" or config.dp_size != 1):
            raise ConfigError(f"the model's own sampler cannot read order={config.order!r} with dp_size="
                              f"{config.dp_size}; give the model dynbsz's order instead: "
                              "simulator.bridge.simulate_loader(trace, config, estimates=...), or "
                              "for_loader(config, sampler=False) with order_fn=simulator.bridge.LoaderOrder(...)")
        shuffle_seed = config.seed if sampler and config.shuffle else None
        return cls(num_workers=config.num_workers, prefetch_factor=config.prefetch_factor if config.num_workers else None,
                   batch_size=config.fetch_batch_size, in_order=config.in_order,
                   persistent_workers=config.persistent_workers and config.num_workers > 0,
                   shuffle_seed=shuffle_seed, reorder_buffer=config.reorder_buffer, **timing)

    @property
    def prefetch(self) -> int:
        """The effective prefetch factor (0 without workers)."""
        if self.num_workers == 0:
            return 0
        return 2 if self.prefetch_factor is None else self.prefetch_factor

    @property
    def max_tasks(self) -> int:
        """Tasks in flight or buffered at once: ``prefetch_factor * num_workers``."""
        return self.prefetch * self.num_workers


@dataclass(frozen=True)
class StepTime:
    """The consumer's time per delivered batch (or training step): ``base_s + per_token_s * tokens``."""

    base_s: float = 0.0
    per_token_s: float = 0.0

    def __post_init__(self) -> None:
        check_seconds("step time base_s", self.base_s)
        check_seconds("step time per_token_s", self.per_token_s)

    def of(self, tokens):
        """Seconds for a batch of ``tokens`` tokens (scalar or numpy array)."""
        return self.base_s + self.per_token_s * tokens
