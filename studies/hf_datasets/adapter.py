"""Hugging Face ``datasets.IterableDataset`` under torchdata's ``StatefulDataLoader``, as torchtitan
assembles it, as a ``stream`` component.

Each source is ``Dataset.from_dict({"id": ...}).to_iterable_dataset(num_shards=...)`` with
``ceil(size / chunk_size)`` shards (so workers hold uneven shard counts); ``shuffle(seed=...,
buffer_size=...)`` where the scenario shuffles; ``interleave_datasets(probabilities=..., seed=...)``
for a mixture; ``split_dataset_by_node(rank, world_size)`` for DP ranks; ``set_epoch(e)`` before
each epoch; ``StatefulDataLoader(batch_size, num_workers, persistent_workers, drop_last)`` and its
``state_dict()`` (which holds each worker's ``IterableDataset.state_dict()``).

What datasets does not promise, in its own words:

* ``IterableDataset.state_dict``: "Resuming returns exactly where the checkpoint was saved except in two
  cases: 1. examples from shuffle buffers are lost when resuming and the buffers are refilled with new
  data" -- so with a shuffle buffer a resume promises nothing about the samples in the buffer.
* ``interleave_datasets`` with the default ``stopping_strategy="first_exhausted"``: "the dataset
  construction is stopped as soon as one dataset has ran out of samples", so a mixture promises no
  sample once per epoch.
* ``split_dataset_by_node``: "`"examples"`: each node keeps 1 example out of `world_size`, skipping the
  other examples" (used when shards do not divide by the world size): complete and disjoint.
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from properties.loader_targets import DelegatingLoader
from properties.stream_scenarios import StreamScenario
from properties.targets.stream import ReproSetup, StreamComponent


@functools.lru_cache(maxsize=1)
def lib() -> SimpleNamespace:
    with contextlib.redirect_stdout(sys.stderr):
        import datasets
        from datasets import Dataset, interleave_datasets
        from datasets.distributed import split_dataset_by_node
        from torchdata.stateful_dataloader import StatefulDataLoader
    return SimpleNamespace(version=datasets.__version__, Dataset=Dataset, interleave_datasets=interleave_datasets,
                           split_dataset_by_node=split_dataset_by_node, StatefulDataLoader=StatefulDataLoader)


def version() -> str:
    try:
        return lib().version
    except ImportError:
        return "?"


MISSING = "Hugging Face datasets is not importable (install the extra: bash ci/install.sh --hf)"


def available() -> bool:
    try:
        lib()
    except ImportError:
        return False
    return True


def _source(sc: StreamScenario, k: int):
    from properties.stream_scenarios import sample_id

    v = lib()
    ds = v.Dataset.from_dict({"id": [sample_id(k, i) for i in range(sc.sources[k])]})
    return ds.to_iterable_dataset(num_shards=_source_shards(sc, k))


def _probabilities(sc: StreamScenario) -> list[float] | None:
    return None if sc.weights is None else [w / sum(sc.weights) for w in sc.weights]


def build_dataset(sc: StreamScenario):
    v = lib()
    sources = [_source(sc, k) for k in range(len(sc.sources))]
    if sc.mix == "single":
        ds = sources[0]
    else:
        ds = v.interleave_datasets(sources, probabilities=_probabilities(sc), seed=sc.seed)
    if sc.shuffle:
        ds = ds.shuffle(seed=sc.seed, buffer_size=sc.shuffle_buffer)
    if sc.dp_size > 1:
        ds = v.split_dataset_by_node(ds, rank=sc.dp_rank, world_size=sc.dp_size)
    return ds


def ids_of(batch: Any) -> tuple:
    return tuple(int(x) for x in batch["id"].reshape(-1).tolist())


class HFLoader(DelegatingLoader):
    """``datasets.IterableDataset`` under torchdata's StatefulDataLoader; set_epoch goes to the dataset."""

    def __init__(self, sc: StreamScenario):
        self.ds = build_dataset(sc)
        self.dl = lib().StatefulDataLoader(
            self.ds, batch_size=sc.batch_size, num_workers=sc.num_workers,
            persistent_workers=sc.persistent_workers and sc.num_workers > 0, drop_last=sc.drop_last)

    def set_epoch(self, epoch: int) -> None:
        self.ds.set_epoch(epoch)


def make_loader(sc: StreamScenario) -> HFLoader:
    return HFLoader(sc)


def _source_shards(sc: StreamScenario, k: int) -> int:
    n = sc.sources[k]
    return max(1, min(n, math.ceil(n / sc.chunk_size)))


def repro_setup(sc: StreamScenario) -> ReproSetup:
    """``build_dataset`` and ``HFLoader`` as standalone code, the scenario's values as literals."""
    imports = ["from datasets import Dataset" + (", interleave_datasets" if sc.mix != "single" else "")]
    if sc.dp_size > 1:
        imports.append("from datasets.distributed import split_dataset_by_node")
    imports.append("from torchdata.stateful_dataloader import StatefulDataLoader")
    shards = [_source_shards(sc, k) for k in range(len(sc.sources))]
    if sc.mix == "single":
        code = ["", "def make():", f"    ds = Dataset.from_dict({{'id': list(range({sc.sources[0]}))}})"
                f".to_iterable_dataset(num_shards={shards[0]})  # ceil(size / {sc.chunk_size}) shards"]
    else:
        code = [f"SOURCES = {list(sc.sources)}  # source k's sample i is {{'id': 1000 * k + i}}",
                f"SHARDS = {shards}  # ceil(size / {sc.chunk_size}) shards each", "", "def make():",
                "    parts = [Dataset.from_dict({'id': [1000 * k + i for i in range(n)]}).to_iterable_dataset(num_shards=s)",
                "             for k, (n, s) in enumerate(zip(SOURCES, SHARDS))]"]
        code += [f"    ds = interleave_datasets(parts, probabilities={_probabilities(sc)}, seed={sc.seed})"]
    if sc.shuffle:
        code += [f"    ds = ds.shuffle(seed={sc.seed}, buffer_size={sc.shuffle_buffer})"]
    if sc.dp_size > 1:
        code += [f"    ds = split_dataset_by_node(ds, rank={sc.dp_rank}, world_size={sc.dp_size})"]
    persistent = sc.persistent_workers and sc.num_workers > 0
    code += [f"    return StatefulDataLoader(ds, batch_size={sc.batch_size}, num_workers={sc.num_workers}, "
             f"persistent_workers={persistent}, drop_last={sc.drop_last})"]
    return ReproSetup(f"datasets {lib().version}", (), tuple(imports), "\n".join(code), "tuple(batch['id'].tolist())",
                      epoch_hook="loader.dataset.set_epoch(epoch)")


BUFFER = ("IterableDataset.state_dict: 'Resuming returns exactly where the checkpoint was saved except in two "
          "cases: 1. examples from shuffle buffers are lost when resuming and the buffers are refilled with new data'")
FIRST_EXHAUSTED = ("interleave_datasets(stopping_strategy='first_exhausted'): 'the dataset construction is stopped as "
                   "soon as one dataset has ran out of samples'")


def resume_promise(sc: StreamScenario):
    if sc.shuffle and sc.shuffle_buffer > 1:
        return "none", BUFFER
    return "exact", ""


def epoch_loss(sc: StreamScenario):
    if sc.mix == "combined":
        return None, FIRST_EXHAUSTED
    restores = len(sc.checkpoints) + sc.restore_at_epoch_end
    if sc.shuffle and sc.shuffle_buffer > 1 and restores:
        # each resume may lose what its buffer held; drop_last's loss comes on top
        held = restores * sc.shuffle_buffer
        dropped = max(1, sc.num_workers) * sc.batch_size - 1 if sc.drop_last else 0
        return held + dropped, BUFFER
    if sc.drop_last:
        return max(1, sc.num_workers) * sc.batch_size - 1, "StatefulDataLoader(drop_last=True) drops each " \
                                                           "worker's incomplete last batch of an iterable dataset"
    return 0, ""


def dp_loss(sc: StreamScenario):
    plain = replace(sc, checkpoints=(), restore_at_epoch_end=False)   # the DP property runs no checkpoint
    return epoch_loss(plain)[0] * sc.dp_size if sc.drop_last else 0, epoch_loss(plain)[1]


#: with a shuffle buffer of one sample an epoch's order is its shard order; k shards have k! orders, and
#: two epochs agree by chance with probability 1/k!: below 8 shards (1/40,320) that is no evidence
MIN_SHARDS_TO_DIFFER = 8


def _shards(sc: StreamScenario) -> int:
    return sum(_source_shards(sc, k) for k in range(len(sc.sources)))


def epoch_orders(sc: StreamScenario) -> int | None:
    """k! for a one-sample shuffle buffer over k shards (the epoch's order is its shard order); else None."""
    return math.factorial(_shards(sc)) if sc.shuffle and sc.shuffle_buffer <= 1 else None


def reshuffles(sc: StreamScenario):
    if not sc.shuffle:
        return False, "shuffle=False keeps one order"
    orders = epoch_orders(sc)
    if orders is not None and orders < math.factorial(MIN_SHARDS_TO_DIFFER):
        return False, (f"a shuffle buffer of one sample orders an epoch by its {_shards(sc)} shards only: two epochs "
                       f"agree by chance too often to tell (fewer than {MIN_SHARDS_TO_DIFFER} shards)")
    return True, ""


def mixture_weights(sc: StreamScenario) -> tuple[float, ...]:
    # probabilities=None: 'alternating between sources', one example of each in turn
    return tuple(sc.weights) if sc.weights else tuple(1.0 for _ in sc.sources)


def component() -> StreamComponent:
    return StreamComponent(name="stream:hf-iterable", make_loader=make_loader, ids_of=ids_of, state_codec="pickle",
                           mixes=("single", "combined"), resume_promise=resume_promise, epoch_loss=epoch_loss,
                           reshuffles=reshuffles, epoch_orders=epoch_orders,
                           dp_loss=dp_loss, mixture_weights=mixture_weights,
                           knob_notes={"mix": "datasets has no parallel (zip) mixture"}, repro_setup=repro_setup)


def target():
    from properties.targets.base import Target

    description = (f"Hugging Face datasets {version()} IterableDataset (split_dataset_by_node, shuffle buffer, "
                   "interleave_datasets, set_epoch) under torchdata's StatefulDataLoader (studies.hf_datasets.adapter)")
    if not available():
        return Target(name="hf-iterable", description=description, unavailable=MISSING)
    return Target(name="hf-iterable", description=description, components=(component(),))
