"""runtime='worker': a packer inside each DataLoader worker, its buffer in the worker's state.

Each worker owns a *logical stream*: logical worker k of n reads positions
k, k+n, k+2n, ... of this rank's epoch order, packs them with its own packer and
yields micro-batches. Every micro-batch carries its worker's state right after
the cut (stream position, packer buffer by id), so the main process always
knows, per logical stream, exactly what was handed out.

A stream's output is a pure function of (epoch, stream, its state), so:

* in_order=True hands streams out round-robin; a resume restarts each stream
  from the state of its last handed-out micro-batch and rotates the
  logical-to-physical mapping so the round robin continues with the right
  stream: the resumed output equals the uninterrupted one;
* in_order=False hands micro-batches out in arrival order, but a worker's own
  results still arrive in its production order, so what was handed out is a
  prefix of each stream: the resume re-produces exactly the rest (same
  micro-batches, possibly interleaved differently).

The epoch and a "generation" counter live in a small shared-memory tensor that
workers read at the start of every epoch, so ``set_epoch`` reaches persistent
workers, under fork and spawn alike.

Batch-size warm-up is refused here: it needs the global step, which a worker
producing ahead of the consumer cannot know.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Iterator

import torch
from torch.utils.data import IterableDataset, get_worker_info
from torchdata.stateful_dataloader import StatefulDataLoader

from .config import PackerConfig
from .errors import ConfigError, SampleFetchError
from .gates import Gate, WarmupRampGate
from .loader_base import EpochLoader, Step, dataset_identity, default_source, default_tokens, inner_loader
from .loader_config import LoaderConfig
from .order import rank_order
from .packer import GreedyPacker, MicroBatch, Packer, PackerFactory
from .packing import pack


class PackingStream(IterableDataset):
    """The worker side. Reads the epoch and generation from shared memory at every ``iter()``."""

    def __init__(self, dataset: Any, packer_config: PackerConfig, gate: Gate, config: LoaderConfig,
                 num_streams: int, control: torch.Tensor, plan: dict | None, collate_fn: Callable | None,
                 tokens_fn: Callable, source_fn: Callable, packer_factory: PackerFactory = GreedyPacker):
        self.dataset = dataset
        self.packer_config = packer_config
        self.gate = gate
        self.seed, self.shuffle, self.dp_rank, self.dp_size = config.seed, config.shuffle, config.dp_rank, config.dp_size
        self.num_streams = num_streams
        self.control = control
        self.plan = plan
        self.collate_fn = collate_fn
        self.tokens_fn = tokens_fn
        self.source_fn = source_fn
        self.packer_factory = packer_factory

    def current_epoch(self) -> tuple[int, int]:
        return int(self.control[0]), int(self.control[1])

    def __iter__(self) -> Iterator[dict]:
        info = get_worker_info()
        physical = info.id if info is not None else 0
        epoch, generation = self.current_epoch()
        plan = self.plan if self.plan is not None and self.plan["generation"] == generation else None
        offset = plan["rr_offset"] if plan else 0
        logical = (physical + offset) % self.num_streams
        saved = plan["streams"].get(str(logical)) if plan else None
        return self._stream(epoch, logical, saved)

    def _stream(self, epoch: int, logical: int, saved: dict | None) -> Iterator[dict]:
        order = rank_order(len(self.dataset), self.seed, epoch, self.dp_rank, self.dp_size, self.shuffle)
        indices = order[logical::self.num_streams].tolist()
        packer = self.packer_factory(self.packer_config, copy.deepcopy(self.gate))
        consumed, seq = 0, 0
        if saved is not None:
            consumed, seq = saved["consumed"], saved["seq"] + 1
            packer.load_state_dict(saved["packer"])
            for sid in packer.buffered_ids():
                packer.attach_payload(sid, self._fetch(epoch, sid))
        tokens_fn, source_fn = self.tokens_fn, self.source_fn

        def items() -> Iterator[list]:
            # One sample per loop turn; ``consumed`` is read when a micro-batch comes out, so it
            # counts exactly the samples that were fetched before that cut.
            nonlocal consumed
            for index in indices[consumed:]:
                sample = self._fetch(epoch, index)
                consumed += 1
                yield [(index, tokens_fn(sample), None, source_fn(sample), sample)]

        for mb in pack(packer, items()):
            yield self._item(logical, seq, consumed, packer, mb)
            seq += 1

    def _fetch(self, epoch: int, index: int) -> Any:
        try:
            return self.dataset[index]
        except Exception as e:
            raise SampleFetchError(f"fetching sample {index} (epoch {epoch}) failed in the worker: "
                                   f"{type(e).__name__}: {e}") from e

    def _item(self, logical: int, seq: int, consumed: int, packer: Packer, mb: MicroBatch) -> dict:
        # A dict, so pin_memory pins the collated tensors in "data" and leaves the rest alone.
        return {"stream": logical, "seq": seq, "consumed": consumed, "packer": packer.state_dict(), "mb": mb,
                "data": self.collate_fn(mb) if self.collate_fn is not None else None}


class WorkerRuntimeLoader(EpochLoader):
    """Loader with runtime='worker'. Same interface as ``DynamicBatchLoader``."""

    runtime = "worker"
    #: What each worker runs (a class attribute, so a variant can swap it).
    stream_class = PackingStream

    def __init__(self, dataset: Any, packer_config: PackerConfig | None, gate: Gate | str | None = None,
                 config: LoaderConfig = LoaderConfig(runtime="worker"), *, collate_fn: Callable | None = None,
                 tokens_fn: Callable[[Any], int] = default_tokens, source_fn: Callable[[Any], Any] = default_source,
                 packer_factory: PackerFactory = GreedyPacker, process_group: Any = None):
        if packer_config is None:
            raise ConfigError("runtime='worker' packs inside the workers and needs a PackerConfig; for a plain "
                              "loader use runtime='main' with packer_config=None")
        if packer_config.warmup_steps:
            raise ConfigError("batch-size warm-up (warmup_steps > 0) needs the global step, which a worker packing "
                              "ahead of the trainer does not know; use runtime='main', or warmup_steps=0")
        if config.fetch_batch_size != 1:
            raise ConfigError("fetch_batch_size applies to runtime='main' only; a worker hands over micro-batches")
        super().__init__(dataset, packer_config, gate, config, collate_fn=collate_fn, tokens_fn=tokens_fn,
                         source_fn=source_fn, process_group=process_group)
        g = self.gate
        if isinstance(g, WarmupRampGate) and g.start != g.full:
            # Each worker's packer counts only its own stream's micro-batches, from 0 every epoch, so
            # its view's step is not the trainer's: the ramp would restart per worker and per epoch.
            named = "gate='auto' resolved to a warm-up ramp" if g.policy == "auto" else "gate='warmup_ramp'"
            raise ConfigError(
                f"{named} ({g.start} -> {g.full} candidates by optimizer step) needs the global step, which a "
                f"worker packing ahead of the trainer does not know; use runtime='main', or a gate that does "
                f"not read the step (e.g. gate=FixedGate({g.full}))")
        self.packer_factory = packer_factory
        self.num_streams = max(1, self.config.num_workers)
        self.control = torch.zeros(2, dtype=torch.int64).share_memory_()  # [epoch, generation]
        self._streams: dict[str, dict] = {}   # logical stream -> state of its last handed-out micro-batch
        self._last_stream: int | None = None
        self._plan: dict | None = None       # what a restored loader's workers resume from
        self._generation = 0

    # ---- epochs ------------------------------------------------------------------------------

    def _done(self) -> bool:
        if self._finished:
            return True
        if len(self._streams) != self.num_streams:
            return False
        return all(s["consumed"] == len(range(int(k), self.epoch_length(), self.num_streams)) and not s["packer"]["buffer"]["ids"]
                   for k, s in self._streams.items())

    def _reset_progress(self) -> None:
        self._streams, self._last_stream, self._plan = {}, None, None

    def _progress_note(self) -> str:
        return f"{len(self._streams)}/{self.num_streams} worker streams under way"

    # ---- iteration ---------------------------------------------------------------------------

    def _before_run(self) -> None:
        if self._started and self._plan is None:
            # The previous iterator was dropped mid-epoch: its workers' unhanded output is gone,
            # so the streams restart from what was handed out, exactly as after a restore.
            self._plan = self._plan_from_progress()

    def _inner(self) -> StatefulDataLoader:
        if not self.config.persistent_workers or self._plan is not None:
            self._dl = None  # a plan is baked into the dataset replica: fresh workers carry it
        if self._dl is None:
            stream = self.stream_class(self.dataset, self.packer_config, self.gate, self.config, self.num_streams,
                                       self.control, self._plan, self.collate_fn, self.tokens_fn, self.source_fn,
                                       self.packer_factory)
            self._dl = inner_loader(stream, self.config, batch_size=None)
        return self._dl

    def _run(self) -> Iterator[Step]:
        mbps = self.packer_config.micro_batches_per_step
        self._generation += 1
        if self._plan is not None:
            self._plan["generation"] = self._generation
        self.control[0] = self.epoch
        self.control[1] = self._generation
        it = iter(self._inner())
        self._plan = None
        self._started = True
        pending: list = []
        datas: list = []
        for item in it:
            if self._at_max_steps() and not pending:
                return
            key = str(item["stream"])
            expected = self._streams[key]["seq"] + 1 if key in self._streams else 0
            if item["seq"] != expected:
                raise RuntimeError(f"worker stream {key} handed out micro-batch {item['seq']}, expected {expected}: "
                                   "a micro-batch was lost between worker and trainer")
            self._streams[key] = {"consumed": item["consumed"], "seq": item["seq"], "packer": item["packer"]}
            self._last_stream = item["stream"]
            pending.append(item["mb"])
            datas.append(item["data"])
            if len(pending) == mbps:
                yield from self._emit(pending, False, datas if self.collate_fn is not None else None)
                pending, datas = [], []
        if pending:
            yield from self._emit(pending, True, datas if self.collate_fn is not None else None)
        self._finished = True
        self._after_yield = False

    # ---- checkpointing -----------------------------------------------------------------------

    def _fingerprint(self) -> dict[str, Any]:
        c = self.config
        return {"runtime": "worker", "num_samples": self.num_samples, "seed": c.seed, "shuffle": c.shuffle,
                "dp_size": c.dp_size, "dp_rank": c.dp_rank, "streams": self.num_streams,
                "packer": self.packer_config.to_dict(), "gate": self.gate.spec(), **dataset_identity(self.dataset)}

    def state_dict(self) -> dict[str, Any]:
        return {**self._state_common(), "streams": copy.deepcopy(self._streams), "last_stream": self._last_stream}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._restore_common(state)
        self._streams = copy.deepcopy(state["streams"])
        self._last_stream = state["last_stream"]
        self._plan = self._plan_from_progress()

    def _plan_from_progress(self) -> dict:
        """Where each worker stream resumes: after its last handed-out micro-batch, with the round
        robin rotated to start at the stream after the last one handed out."""
        last = self._last_stream
        return {"generation": None, "streams": copy.deepcopy(self._streams),
                "rr_offset": 0 if last is None else (last + 1) % self.num_streams}
