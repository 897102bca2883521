"""VeOmni 0.1.12's real loader classes as loader components, driven the way VeOmni drives them.

Three pipelines, each assembled as ``veomni.data.data_loader.build_native_dataloader`` assembles
it (dyn_bsz=True, count mode "total", snapshot_every_n_steps=1, drop_last=True,
pin_memory off on this CPU-only machine), on synthetic samples that carry their id:

* ``loader:main``: ``TextBatchingStrategy`` inside ``DynamicBatchSizeDataLoader`` over a
  ``DistributedDataloader`` (VeOmni's ``StatefulDataLoader``) with ``StatefulDistributedSampler``,
  ``batch_size=1`` and ``UnpackDataCollator``; ``length=train_steps`` as VeOmni's arguments
  compute it for dynamic batching (below), ``num_micro_batch`` micro-batches per step.
* ``loader:worker``: ``DynamicBatchingSizeDataset`` over ``_MapStyleSamplerWrapper`` inside a
  ``DistributedDataloader`` with ``batch_size=num_micro_batch`` and ``NoopDataCollator``
  (``save_by_idx=False``, the builder's default).
* ``loader:multisource``: the same worker pipeline over ``WeightedMultiSourceDataset`` whose
  sources (text and video samples of the trace) are each a ``_MapStyleSamplerWrapper``: the
  map-style path of VeOmni's multi-source epochs, ``upstream_sharded=True`` and
  ``stopping_strategy="first_exhausted"`` as ``build_weighted_multisource_dataset`` defaults.

The adapters never correct VeOmni. What they add is only what a harness needs: a sample id
in every sample (``NoopDataCollator`` as the collate function keeps samples as dicts), ranks
passed explicitly (no process group; ``WeightedMultiSourceDataset`` reads the parallel state,
which without one clamps to rank 0 of 1, and with ``upstream_sharded=True`` does not shard
itself), and ``close()`` stopping worker processes at once. Knobs a VeOmni class cannot
express are declared unsupported on the component (the scenario is then never drawn for it,
and a replayed one is a skip that names the knob).

``train_steps`` (main runtime): ``compute_train_steps`` for dyn_bsz is
``ceil(train_size * (1 + bsz_warmup_ratio / 2) / (global_batch_size * max_seq_len))`` with
``train_size`` the dataset's tokens; here ``global_batch_size * max_seq_len`` is
``num_micro_batch * dp_size * budget`` (micro_batch_size 1, max_seq_len the budget) and the
warm-up ratio is ``warmup_steps`` over the steps without warm-up. A trainer epoch is that
many steps (``for _ in range(start_step, train_steps)``), which is how the driver's epochs
run: ``set_epoch(e)``, ``iter()``, steps until the loader stops.
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys
import time
from types import SimpleNamespace
from typing import Any

import torch
from torch.utils.data import Dataset

from properties.loader_targets import DelegatingLoader, shutdown_workers, trace_of
from properties.repro_setup import ReproSetup
from properties.scenarios import LoaderScenario, SkewScenario
from properties.skew_props import SKEW_WORKLOAD, SkewRun
from properties.targets.base import LoaderComponent

MISSING = "VeOmni 0.1.12 is not importable (install the extra: bash ci/install.sh --veomni)"


@functools.lru_cache(maxsize=1)
def classes() -> SimpleNamespace:
    """VeOmni's (and torchdata's) classes the adapters drive. Raises ImportError without the extra."""
    # VeOmni's loggers bind sys.stdout when first created: create them pointing at stderr, so a
    # `--json` report on stdout stays parseable.
    with contextlib.redirect_stdout(sys.stderr):
        from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler
        from veomni.data.data_collator import NoopDataCollator, UnpackDataCollator
        from veomni.data.data_loader import DistributedDataloader
        from veomni.data.dataset import (
            DynamicBatchingSizeDataset,
            WeightedMultiSourceDataset,
            _MapStyleSamplerWrapper,
            get_length_fn_by_count_mode,
        )
        from veomni.data.dynamic_batching import DynamicBatchSizeDataLoader, TextBatchingStrategy
    return SimpleNamespace(
        StatefulDistributedSampler=StatefulDistributedSampler, NoopDataCollator=NoopDataCollator,
        UnpackDataCollator=UnpackDataCollator, DistributedDataloader=DistributedDataloader,
        DynamicBatchingSizeDataset=DynamicBatchingSizeDataset, WeightedMultiSourceDataset=WeightedMultiSourceDataset,
        MapStyleSamplerWrapper=_MapStyleSamplerWrapper, get_length_fn_by_count_mode=get_length_fn_by_count_mode,
        DynamicBatchSizeDataLoader=DynamicBatchSizeDataLoader, TextBatchingStrategy=TextBatchingStrategy)


def available() -> bool:
    try:
        classes()
    except ImportError:
        return False
    return True


# ---- synthetic data --------------------------------------------------------------------------

def make_sample(trace, row: int) -> dict[str, Any]:
    """A sample as VeOmni's data paths read it: input_ids and attention_mask tensors (lengths come
    from the attention mask), plus the id and source the properties need."""
    sid, n = int(trace.ids[row]), int(trace.tokens[row])
    return {"input_ids": torch.full((n,), sid % 32000, dtype=torch.long),
            "attention_mask": torch.ones(n, dtype=torch.long), "id": sid,
            "source": trace.source_names[int(trace.source[row])]}


class SampleDataset(Dataset):
    """Map-style over rows of a trace; ``ds[i]`` sleeps row ``rows[i]``'s decode cost and returns
    ``[sample]``, a one-sample list as VeOmni's transforms do."""

    def __init__(self, trace, rows=None, time_scale: float = 1.0):
        self.trace = trace
        self.rows = list(range(len(trace))) if rows is None else list(rows)
        self.time_scale = time_scale

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> list:
        row = self.rows[i]
        cost = float(self.trace.cost_s[row]) * self.time_scale
        if cost > 0:
            time.sleep(cost)
        return [make_sample(self.trace, row)]


def ids_of(step: Any) -> tuple[tuple, ...]:
    """A VeOmni step is ``list[micro batch]``, a micro batch ``list[dict]``: ids per micro-batch."""
    return tuple(tuple(int(s["id"]) for s in mb) for mb in step)


def train_steps(sc: LoaderScenario) -> int:
    tokens = int(trace_of(sc).tokens.sum())
    per_step = sc.micro_batches_per_step * sc.dp_size * sc.budget
    base = math.ceil(tokens / per_step)
    ratio = sc.warmup_steps / base if sc.warmup_steps else 0.0
    return max(1, math.ceil(int(tokens * (1 + ratio / 2)) / per_step))


def _loader_kw(sc: LoaderScenario) -> dict[str, Any]:
    return dict(num_workers=sc.num_workers, pin_memory=False, drop_last=True,
                prefetch_factor=(sc.prefetch_factor or 2) if sc.num_workers else None,
                persistent_workers=sc.persistent_workers and sc.num_workers > 0, in_order=sc.in_order,
                snapshot_every_n_steps=1)


# ---- the arguments each pipeline's classes get: one home for the adapter and its standalone scripts (repro_*) ----

def _sharding_kw(sc: LoaderScenario) -> dict[str, Any]:
    """StatefulDistributedSampler's / _MapStyleSamplerWrapper's, after the dataset."""
    return dict(num_replicas=sc.dp_size, rank=sc.dp_rank, shuffle=True, seed=sc.shuffle_seed)


def _strategy_kw(sc: LoaderScenario, length_fn: Any) -> dict[str, Any]:
    """TextBatchingStrategy's."""
    return dict(token_micro_bsz=sc.budget, buffer_size=sc.buffer_size, bsz_warmup_steps=sc.warmup_steps,
                bsz_warmup_init_mbtoken=max(1, sc.budget // 4), get_length_fn=length_fn)


def _steps_kw(sc: LoaderScenario, collate: Any) -> dict[str, Any]:
    """DynamicBatchSizeDataLoader's, after the inner loader and the strategy (``length``: train_steps)."""
    return dict(collate_fn=collate, num_micro_batch=sc.micro_batches_per_step, length=train_steps(sc), drop_last=True)


def _dynamic_dataset_kw(sc: LoaderScenario, collate: Any, length_fn: Any) -> dict[str, Any]:
    """DynamicBatchingSizeDataset's, after its upstream."""
    return dict(micro_batch_seq_length=sc.budget, ready_for_micro_batch_threshold=sc.buffer_size,
                dynamic_batching_collate_fn=collate, save_by_idx=False, get_length_fn=length_fn,
                physical_token_cap=None, get_physical_length_fn=None)


def _sources(sc: LoaderScenario) -> list[tuple[str, list[int], float]]:
    """The mixture's sources: (name, the trace's rows of it, its weight)."""
    trace = trace_of(sc)
    return [(name, [r for r in range(len(trace)) if int(trace.source[r]) == k],
             sc.video_share if name == "video" else 1.0 - sc.video_share) for k, name in enumerate(trace.source_names)]


def _mixture_kw(sc: LoaderScenario) -> dict[str, Any]:
    """WeightedMultiSourceDataset's, after the sources and their weights."""
    return dict(seed=sc.shuffle_seed, source_names=[name for name, _, _ in _sources(sc)], upstream_sharded=True,
                stopping_strategy="first_exhausted")


# ---- the three pipelines ---------------------------------------------------------------------

class MainRuntime(DelegatingLoader):
    def __init__(self, sc: LoaderScenario):
        v = classes()
        ds = SampleDataset(trace_of(sc))
        sampler = v.StatefulDistributedSampler(ds, **_sharding_kw(sc))
        self.inner = v.DistributedDataloader(ds, batch_size=1, sampler=sampler, collate_fn=v.UnpackDataCollator(),
                                             **_loader_kw(sc))
        strategy = v.TextBatchingStrategy(**_strategy_kw(sc, v.get_length_fn_by_count_mode("total")))
        self.dl = v.DynamicBatchSizeDataLoader(self.inner, strategy, **_steps_kw(sc, v.NoopDataCollator()))

    def close(self) -> None:
        if self.dl is not None:
            gen = getattr(self.dl, "_batch_data_iter", None)
            if gen is not None:
                gen.close()
            shutdown_workers(self.inner)
        self.dl = None


def _dynamic_dataset(v: SimpleNamespace, upstream, sc: LoaderScenario):
    return v.DynamicBatchingSizeDataset(upstream, **_dynamic_dataset_kw(sc, v.NoopDataCollator(),
                                                                        v.get_length_fn_by_count_mode("total")))


class WorkerRuntime(DelegatingLoader):
    def __init__(self, sc: LoaderScenario, drop_last: bool = True):
        # drop_last: VeOmni's DataloaderConfig.drop_last (True, its default, drops each worker's last incomplete step)
        v = classes()
        self.dl = v.DistributedDataloader(self._upstream(v, sc), batch_size=sc.micro_batches_per_step,
                                          collate_fn=v.NoopDataCollator(), **{**_loader_kw(sc), "drop_last": drop_last})

    def _upstream(self, v: SimpleNamespace, sc: LoaderScenario):
        wrapper = v.MapStyleSamplerWrapper(SampleDataset(trace_of(sc)), **_sharding_kw(sc))
        return _dynamic_dataset(v, wrapper, sc)


class MultiSource(WorkerRuntime):
    def _upstream(self, v: SimpleNamespace, sc: LoaderScenario):
        trace, parts = trace_of(sc), _sources(sc)
        sources = [v.MapStyleSamplerWrapper(SampleDataset(trace, rows), **_sharding_kw(sc)) for _, rows, _ in parts]
        mixed = v.WeightedMultiSourceDataset(sources, [w for _, _, w in parts], **_mixture_kw(sc))
        return _dynamic_dataset(v, mixed, sc)


def main_runtime(sc: LoaderScenario) -> MainRuntime:
    return MainRuntime(sc)


def worker_runtime(sc: LoaderScenario, drop_last: bool = True) -> WorkerRuntime:
    return WorkerRuntime(sc, drop_last)


def multi_source(sc: LoaderScenario, drop_last: bool = True) -> MultiSource:
    return MultiSource(sc, drop_last)


def main_skew_runner(sc: SkewScenario) -> SkewRun:
    """One epoch of the main runtime in plain mode: a budget of 1 token and a buffer of 1 make every
    fetched sample a step of its own, cut in arrival order (``length`` = the epoch's samples).
    The sampler order is the StatefulDistributedSampler's own permutation for epoch 0."""
    v = classes()
    trace = SKEW_WORKLOAD.sample(sc.num_samples, sc.data_seed)
    ds = SampleDataset(trace)
    sampler = v.StatefulDistributedSampler(ds, num_replicas=1, rank=0, shuffle=True, seed=sc.shuffle_seed)
    order = tuple(int(i) for i in sampler)
    inner = v.DistributedDataloader(ds, batch_size=1, sampler=sampler, collate_fn=v.UnpackDataCollator(),
                                    num_workers=sc.num_workers, prefetch_factor=sc.prefetch_factor,
                                    in_order=sc.in_order, pin_memory=False, drop_last=True, snapshot_every_n_steps=1)
    strategy = v.TextBatchingStrategy(token_micro_bsz=1, buffer_size=1,
                                      get_length_fn=v.get_length_fn_by_count_mode("total"))
    dl = v.DynamicBatchSizeDataLoader(inner, strategy, collate_fn=v.NoopDataCollator(), num_micro_batch=1,
                                      length=len(ds), drop_last=True)
    dl.set_epoch(0)
    try:
        delivered = tuple(sid for step in dl for sid in sum(ids_of(step), ()))
    finally:
        shutdown_workers(inner)
    return SkewRun(order, delivered)


# ---- the pipelines as standalone code (properties.repro) --------------------------------------

_STEP_IDS = "tuple(tuple(int(s['id']) for s in mb) for mb in batch)"   # ids_of: a step is list[micro batch]
_WIDTH = 120


def _library() -> str:
    from importlib.metadata import version

    return f"VeOmni {version('veomni')}"


def _call(head: str, args: list[str], tail: str = "") -> list[str]:
    """``head(args)tail`` as lines of at most 120 characters, the arguments aligned under the first."""
    indent, lines, line = " " * len(head), [], head
    for k, arg in enumerate(args):
        piece = arg + (")" + tail if k == len(args) - 1 else ",")
        if line not in (head, indent) and len(line) + 1 + len(piece) > _WIDTH:
            lines.append(line)
            line = indent
        line += ("" if line in (head, indent) else " ") + piece
    return lines + [line]


_ALWAYS = ("num_workers", "stopping_strategy")   # written even where they are the defaults


class _Expr(str):
    """An argument written as this expression, standing for ``value`` (what a default is compared with)."""

    def __new__(cls, code: str, value: Any = NotImplemented):   # no value: never a default
        self = super().__new__(cls, code)
        self.value = value
        return self


def _args(cls: Any, **kw: Any) -> list[str]:
    """Keyword arguments as code, leaving out those equal to ``cls``'s own defaults (the adapter passes what VeOmni's
    builder passes; where that is the default, the script says nothing) but for the knobs a reader looks for."""
    import inspect

    params = inspect.signature(cls).parameters
    out = []
    for k, v in kw.items():
        value = v.value if isinstance(v, _Expr) else v
        default = params[k].default if k in params else inspect.Parameter.empty
        if k in _ALWAYS or default is inspect.Parameter.empty or not (default is value or (
                type(default) is type(value) and default == value)):
            out.append(f"{k}={v if isinstance(v, _Expr) else repr(v)}")
    return out


def _repro_data(sc: LoaderScenario) -> tuple[list[str], tuple[str, ...]]:
    """``SampleDataset`` over the scenario's trace and ``make_sample`` as code: a map-style list of sample ids whose
    item is a fresh one-sample list (the trace's tokens as a literal; its decode times only where two or more
    workers race: with none or one, they change nothing the loader delivers)."""
    trace = trace_of(sc)
    if trace.ids.tolist() != list(range(len(trace))) or len(trace) > 32000:
        raise ValueError("the script names sample i by its row (input_ids filled with i): the trace's ids must be "
                         "0..n-1, n <= 32000")
    timed = sc.num_workers >= 2
    code = [f"TOKENS = {trace.tokens.tolist()}  # sample i's tokens (the harness's trace, data_seed={sc.data_seed})"]
    if timed:
        code.append(f"COSTS = {[round(float(c), 6) for c in trace.cost_s]}  # sample i's decode time (s)")
    code += ["", "class Samples(list):  # map-style over sample ids; item k: a one-sample list, as VeOmni's transforms "
             "return", "    def __getitem__(self, k):", "        i = super().__getitem__(k)"]
    if timed:
        code.append("        time.sleep(COSTS[i])  # with two or more workers, which sample is ready first is timing")
    code += ["        return [{'input_ids': torch.full((TOKENS[i],), i), 'attention_mask': torch.ones(TOKENS[i]).long(), "
             "'id': i}]", ""]
    return code, ("time",) if timed else ()


def _sharding(cls: Any, sc: LoaderScenario) -> list[str]:
    return _args(cls, **_sharding_kw(sc))


def _length_fn(v: SimpleNamespace) -> _Expr:
    """``get_length_fn_by_count_mode("total")``, by the name of the function it returns where it has one."""
    fn = v.get_length_fn_by_count_mode("total")
    from veomni.data import dataset

    named = getattr(dataset, getattr(fn, "__name__", ""), None) is fn
    return _Expr(fn.__name__ if named else "get_length_fn_by_count_mode('total')", fn)


def _imports(module: str, names: list[str]) -> list[str]:
    return _call(f"from {module} import (", names) if len(f"from {module} import {', '.join(names)}") > _WIDTH \
        else [f"from {module} import {', '.join(names)}"]


def _dataset_import(code: list[str], names: list[str]) -> list[str]:
    """veomni.data.dataset's classes that ``code`` uses."""
    text = "\n".join(code)
    used = [n for n in names if n + "(" in text or f"={n})" in text or f"={n}," in text]
    return _imports("veomni.data.dataset", used) if used else []


#: ``MainRuntime.close`` as code: the step generator, then the inner loader's workers
MAIN_CLOSE = ["def close(loader):  # a restarted job's old workers are gone before the new loader starts its own",
              "    if hasattr(loader, '_batch_data_iter'):  # its step generator",
              "        loader._batch_data_iter.close()",
              "    getattr(loader._dataloader._iterator, '_shutdown_workers', lambda: None)()",
              "    loader._dataloader._iterator = None", ""]


def repro_main(sc: LoaderScenario) -> ReproSetup:
    """``MainRuntime`` as standalone code, the scenario's values as literals."""
    v = classes()
    code, stdlib = _repro_data(sc)
    strategy = _strategy_kw(sc, _length_fn(v))
    if not sc.warmup_steps:
        del strategy["bsz_warmup_init_mbtoken"]   # without warm-up steps, the warm-up's initial budget is never read
    code += ["def make():", f"    ds = Samples(range({sc.num_samples}))",
             *_call("    sampler = StatefulDistributedSampler(", ["ds", *_sharding(v.StatefulDistributedSampler, sc)]),
             *_call("    inner = DistributedDataloader(", ["ds", *_args(
                 v.DistributedDataloader, batch_size=1, sampler=_Expr("sampler"),
                 collate_fn=_Expr("UnpackDataCollator()"), **_loader_kw(sc))]),
             *_call("    strategy = TextBatchingStrategy(", _args(v.TextBatchingStrategy, **strategy)),
             *_call("    return DynamicBatchSizeDataLoader(", ["inner", "strategy", *_args(
                 v.DynamicBatchSizeDataLoader, **_steps_kw(sc, _Expr("NoopDataCollator()")))],
                 "  # length: train_steps"), ""]
    if sc.num_workers:
        code += MAIN_CLOSE
    imports = ["import torch", "from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler",
               "from veomni.data.data_collator import NoopDataCollator, UnpackDataCollator",
               "from veomni.data.data_loader import DistributedDataloader",
               *_dataset_import(code, ["get_length_by_attention_mask_fn", "get_length_fn_by_count_mode"]),
               "from veomni.data.dynamic_batching import DynamicBatchSizeDataLoader, TextBatchingStrategy"]
    return ReproSetup(_library(), stdlib, tuple(imports), "\n".join(code).rstrip(), _STEP_IDS,
                      "loader.set_epoch(epoch)")


def _repro_worker_pipeline(sc: LoaderScenario, upstream: list[str], source: str = "upstream") -> ReproSetup:
    """``WorkerRuntime`` as standalone code: ``upstream`` the lines that set what ``source`` names."""
    v = classes()
    code, stdlib = _repro_data(sc)
    code += ["def make():", *upstream,
             *_call("    ds = DynamicBatchingSizeDataset(", [source, *_args(
                 v.DynamicBatchingSizeDataset, **_dynamic_dataset_kw(sc, _Expr("NoopDataCollator()"), _length_fn(v)))]),
             *_call("    return DistributedDataloader(", ["ds", *_args(
                 v.DistributedDataloader, batch_size=sc.micro_batches_per_step, collate_fn=_Expr("NoopDataCollator()"),
                 **_loader_kw(sc))])]
    imports = ["import torch", "from veomni.data.data_collator import NoopDataCollator",
               "from veomni.data.data_loader import DistributedDataloader",
               *_dataset_import(code, ["DynamicBatchingSizeDataset", "WeightedMultiSourceDataset",
                                       "_MapStyleSamplerWrapper", "get_length_by_attention_mask_fn",
                                       "get_length_fn_by_count_mode"])]
    return ReproSetup(_library(), stdlib, tuple(imports), "\n".join(code), _STEP_IDS, "loader.set_epoch(epoch)")


def repro_worker(sc: LoaderScenario) -> ReproSetup:
    """``WorkerRuntime`` (drop_last=True, VeOmni's default) as standalone code."""
    v = classes()
    sharding = "".join(", " + a for a in _sharding(v.MapStyleSamplerWrapper, sc))
    return _repro_worker_pipeline(sc, [], f"_MapStyleSamplerWrapper(Samples(range({sc.num_samples})){sharding})")


def repro_multisource(sc: LoaderScenario) -> ReproSetup:
    """``MultiSource`` as standalone code: each source's sample ids and weight as literals."""
    v = classes()
    parts = _sources(sc)
    sharding = "".join(", " + a for a in _sharding(v.MapStyleSamplerWrapper, sc))
    upstream = [f"    sources = [_MapStyleSamplerWrapper(Samples(ids){sharding})",
                f"               for ids in {[rows for _, rows, _ in parts]}]  "
                f"# the {' and '.join(name for name, _, _ in parts)} samples",
                *_call("    upstream = WeightedMultiSourceDataset(", ["sources", repr([w for _, _, w in parts]), *_args(
                    v.WeightedMultiSourceDataset, **_mixture_kw(sc))])]
    return _repro_worker_pipeline(sc, upstream)


# ---- components ------------------------------------------------------------------------------

WORKER_NOTES = {
    "warmup_steps": "the worker runtime has no batch-size warm-up (build_native_dataloader passes none)",
    "fetch_batch_size": "DynamicBatchingSizeDataset reads its upstream one sample at a time",
}
MIX_OUT_OF_ORDER = ("out of order a weighted mixture promises neither the order nor each sample once, so "
                    "no property has anything to hold it to")
NO_SKEW = ("hands out micro-batches packed inside each worker, not samples in sampler order; the skew "
           "model is of a sampler's samples dispatched to workers")


def components() -> tuple[LoaderComponent, ...]:
    # States hold the buffered samples' tensors. A run is bounded the way VeOmni's BaseTrainer.train
    # bounds it: per epoch ``for _ in range(start_step, train_steps)`` around next(), ending the epoch
    # early on StopIteration (veomni/trainer/base.py:937-955); the loaders have no total step bound.
    # Used with VeOmni's own trainer (properties.trainers.VEOMNI) and held to the adversarial schedule too.
    common = dict(ids_of=ids_of, state_codec="pickle", stopping=("steps_per_epoch",), steps_per_epoch=train_steps,
                  trainers=("veomni", "adversarial"))
    main = LoaderComponent(
        name="loader:main", runtime="main", make_loader=main_runtime, skew_runner=main_skew_runner,
        fetch_batch_sizes=(1,), repro_setup=repro_main,
        knob_notes={"fetch_batch_size": "the main runtime needs dataloader_batch_size=1: UnpackDataCollator "
                                        "keeps features[0] of a fetched batch"}, **common)
    worker = LoaderComponent(
        name="loader:worker", runtime="worker", make_loader=worker_runtime, fetch_batch_sizes=(1,), warmup=False,
        repro_setup=repro_worker, knob_notes=WORKER_NOTES, skip={"in_order_skew": NO_SKEW}, **common)
    multi = LoaderComponent(
        name="loader:multisource", runtime="worker", make_loader=multi_source, fetch_batch_sizes=(1,), warmup=False,
        in_order=(True,), repro_setup=repro_multisource, knob_notes={**WORKER_NOTES, "in_order": MIX_OUT_OF_ORDER}, **common,
        skip={"exactly_once": "a weighted mixture draws sources by weight and stops at the first exhausted one: "
                              "it promises no sample once per epoch",
              "dp_shards": "a weighted mixture under first_exhausted reads no complete shard; its sources' "
                           "rank split is _MapStyleSamplerWrapper's, covered by loader:worker",
              "in_order_skew": NO_SKEW})
    return main, worker, multi
