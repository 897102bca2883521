"""What a property's examples are made of, and their JSON form.

Plain frozen dataclasses, so a failure is saved as a few lines of JSON (``properties.corpus``)
and replays exactly, on the target that failed or on any other with the same component:

* ``Sample``: one sample of a packer's stream (id, tokens, physical tokens, source).
* ``PackerExample``: a packer config, a gate spec, a stream and restore points (the packer and
  gate properties, ``properties.packer_suite``).
* ``LoaderScenario``: everything a loader target needs to build one loader, plus the checkpoint
  schedule (the loader properties, ``properties.loader_suite``).
* ``LoaderProgram``: a scenario and a sequence of operations on its loader (steps, restores,
  dropped iterators, epoch changes): the loader state machine's runs (``properties.loader_machine``).
* ``SkewScenario``: one epoch of fast-text/slow-video samples for the in_order skew property
  (``properties.skew_props``).

Each example type has an ``encode_*`` / ``decode_*`` pair: a JSON dict with a ``format`` field
that names the type, which ``decode_*`` checks (a ValueError for anything else).
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from typing import Any

from dynbsz.config import PackerConfig
from dynbsz.costs import CostModel, TraceMeta, estimate_costs
from dynbsz.datasets import TraceMapDataset
from dynbsz.errors import check_fields
from dynbsz.loader_config import LoaderConfig
from dynbsz.order import resolve_lookahead
from dynbsz.workload import SourceSpec, Trace, Workload

PACKER_FORMAT = "properties.packer_example/1"
LOADER_FORMAT = "properties.loader_scenario/1"
SKEW_FORMAT = "properties.skew_scenario/1"
PROGRAM_FORMAT = "properties.loader_program/1"


# ---- packers ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sample:
    id: int
    tokens: int
    physical: int | None = None
    source: str = "text"


@dataclass(frozen=True)
class PackerExample:
    config: PackerConfig
    gate: dict[str, Any]
    stream: tuple[Sample, ...]
    restore_after: tuple[int, ...] = field(default=())


def encode_packer_example(ex: PackerExample) -> dict:
    return {"format": PACKER_FORMAT, "config": ex.config.to_dict(), "gate": dict(ex.gate),
            # [id, tokens, physical or null, source]: one short row per sample
            "stream": [[s.id, s.tokens, s.physical, s.source] for s in ex.stream],
            "restore_after": list(ex.restore_after)}


def decode_packer_example(d: dict) -> PackerExample:
    if d.get("format") != PACKER_FORMAT:
        raise ValueError(f"not a packer example (format {d.get('format')!r}, expected {PACKER_FORMAT!r})")
    return PackerExample(PackerConfig(**d["config"]), dict(d["gate"]),
                         tuple(Sample(*row) for row in d["stream"]), tuple(d["restore_after"]))


# ---- loaders ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class LoaderScenario:
    """Everything a loader target needs to build one loader, plus the checkpoint schedule."""

    num_samples: int = 40
    data_seed: int = 0
    shuffle_seed: int = 0
    num_workers: int = 0
    prefetch_factor: int | None = None
    persistent_workers: bool = False
    in_order: bool = True
    runtime: str = "main"
    fetch_batch_size: int = 1
    budget: int = 512
    buffer_size: int = 4
    micro_batches_per_step: int = 1
    warmup_steps: int = 0
    epochs: int = 2
    dp_rank: int = 0
    dp_size: int = 1
    #: global step counts after which to checkpoint and restore into a fresh loader (0: before the first)
    checkpoints: tuple[int, ...] = ()
    #: also checkpoint and restore after every epoch's last step was consumed and its iterator
    #: ran out, before the next set_epoch (torchdata's end-of-epoch state, meta-pytorch/data#1437)
    restore_at_epoch_end: bool = False
    #: text samples cost ``fast_s``, video ``slow_s`` (real sleeps in the dataset)
    fast_s: float = 0.0005
    slow_s: float = 0.004
    video_share: float = 0.2
    #: the epoch order: 'sampler', or 'balanced' (a rearrangement in which no sample moves more than
    #: ``lookahead`` places, on decode-cost estimates: the trace's own costs ('exact') or a cost
    #: model fitted on the trace ('fitted'))
    order: str = "sampler"
    #: or 'auto' (``dynbsz.order.auto_lookahead``; ``resolved_lookahead`` is the value it runs with)
    lookahead: int | str = 4
    cost_estimates: str = "exact"
    #: with in_order=True: samples that may wait to be put back in sampler order (0: torch keeps it)
    reorder_buffer: int = 0
    #: stop after this many steps in total, over epochs (the stopping rule of a bounded run)
    max_steps: int | None = None
    #: the workers' multiprocessing start method (None: the platform's default)
    start_method: str | None = None
    #: after every restore the trainer writes a checkpoint at once (``state_dict()`` before
    #: ``set_epoch`` and ``iter()``), and a restore before the epoch's next step loads that one
    #: (``loader_props.run_schedule``). Written only when on: an example saved before the field decodes
    #: without it, to the same schedule, and keeps its name in the corpus.
    checkpoint_on_resume: bool = False

    def workload(self) -> Workload:
        return Workload((SourceSpec("text", 1 - self.video_share, median_tokens=self.budget / 6, sigma=0.6,
                                    cost_base_s=self.fast_s),
                         SourceSpec("video", self.video_share, median_tokens=self.budget / 2, sigma=0.4,
                                    cost_base_s=self.slow_s)))

    def estimates(self):
        """What the balanced order is computed on: the trace's costs, or a cost model fitted on it."""
        trace = self.trace()
        if self.cost_estimates == "exact":
            return trace.cost_s
        return estimate_costs(len(trace), TraceMeta(trace), CostModel.fit(trace).estimate)

    def resolved_lookahead(self) -> int:
        """The lookahead a balanced loader of this scenario runs with: 'auto' resolved by dynbsz."""
        if self.lookahead != "auto":
            return self.lookahead
        config = LoaderConfig(num_workers=self.num_workers, order="balanced", lookahead="auto")
        return resolve_lookahead(config, self.estimates())

    def trace(self) -> Trace:
        """The scenario's samples (ids, token counts, sources, decode costs), drawn from ``workload()``
        with ``data_seed``; the same scenario gives the same trace (cached: loaders are built often)."""
        return _trace(self.num_samples, self.data_seed, self.workload())

    def dataset(self) -> TraceMapDataset:
        """The map-style dataset a loader under test reads: ``dataset[i]`` is a dict with ``id``,
        ``tokens``, ``source`` and ``cost_s``, returned after sleeping ``cost_s`` (a decode cost)."""
        return TraceMapDataset(self.trace())

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["checkpoints"] = list(self.checkpoints)
        if not self.checkpoint_on_resume:
            del d["checkpoint_on_resume"]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "LoaderScenario":
        check_fields("LoaderScenario", d, cls)
        return cls(**{**d, "checkpoints": tuple(d.get("checkpoints", ()))})


@functools.lru_cache(maxsize=64)
def _trace(num_samples: int, data_seed: int, workload: Workload) -> Trace:
    return workload.sample(num_samples, data_seed)


def encode_loader_scenario(sc: LoaderScenario) -> dict:
    return {"format": LOADER_FORMAT, "scenario": sc.to_json()}


def decode_loader_scenario(d: dict) -> LoaderScenario:
    if d.get("format") != LOADER_FORMAT:
        raise ValueError(f"not a loader example (format {d.get('format')!r}, expected {LOADER_FORMAT!r})")
    return LoaderScenario.from_json(d["scenario"])


# ---- loader programs (the stateful property) --------------------------------------------------

#: What a loader program may do: take a step, checkpoint and restore into a fresh loader, drop the
#: iterator (and close the loader) and iterate again, move to the next epoch after one ran out.
PROGRAM_OPS = ("step", "restore", "drop", "next_epoch")


@dataclass(frozen=True)
class LoaderProgram:
    """A run of the loader state machine (``properties.loader_machine``) as data: the loader's
    scenario (``checkpoints`` unused: the restores are operations; ``restore_at_epoch_end`` set, to
    say the loader is checkpointed) and the operations, in order."""

    scenario: LoaderScenario
    ops: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        bad = [op for op in self.ops if op not in PROGRAM_OPS]
        if bad:
            raise ValueError(f"unknown loader program operation {bad[0]!r}; allowed values: {', '.join(PROGRAM_OPS)}")


def encode_loader_program(p: LoaderProgram) -> dict:
    return {"format": PROGRAM_FORMAT, "scenario": p.scenario.to_json(), "ops": list(p.ops)}


def decode_loader_program(d: dict) -> LoaderProgram:
    if d.get("format") != PROGRAM_FORMAT:
        raise ValueError(f"not a loader program (format {d.get('format')!r}, expected {PROGRAM_FORMAT!r})")
    return LoaderProgram(LoaderScenario.from_json(d["scenario"]), tuple(d["ops"]))


# ---- in_order skew ---------------------------------------------------------------------------

@dataclass(frozen=True)
class SkewScenario:
    num_samples: int = 160
    data_seed: int = 0
    shuffle_seed: int = 0
    num_workers: int = 3
    prefetch_factor: int = 2
    in_order: bool = False
    window: int = 32


def encode_skew_scenario(sc: SkewScenario) -> dict:
    return {"format": SKEW_FORMAT, "scenario": dict(vars(sc))}


def decode_skew_scenario(d: dict) -> SkewScenario:
    if d.get("format") != SKEW_FORMAT:
        raise ValueError(f"not a skew example (format {d.get('format')!r}, expected {SKEW_FORMAT!r})")
    return SkewScenario(**d["scenario"])
