"""Loader targets for the loader properties: dynbsz's loader, a plain torchdata loader as most
projects use it, and broken variants the loader property tests must catch (the registered loader
mutants are in ``properties.mutants.loaders``).

Each is a factory ``make(scenario) -> loader`` for ``loader_props``; ``properties.targets``
wraps them into ``LoaderComponent``s (what each promises and which knobs it has)."""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch.utils.data import IterableDataset, get_worker_info
from torchdata.stateful_dataloader import StatefulDataLoader

from dynbsz.config import PackerConfig
from dynbsz.costs import CostModel, TraceMeta, exact_cost
from dynbsz.datasets import TraceMapDataset
from dynbsz.gates import FixedGate
from dynbsz.loader import build_loader
from dynbsz.loader_config import LoaderConfig
from dynbsz.order import epoch_order
from dynbsz.workload import Trace

from .loader_props import default_ids_of
from .repro_setup import ReproSetup
from .scenarios import LoaderScenario, SkewScenario
from .skew_props import SKEW_WORKLOAD, SkewRun


def trace_of(sc: LoaderScenario) -> Trace:
    return sc.trace()


def loader_config(sc: LoaderScenario, **over: Any) -> LoaderConfig:
    kw = dict(num_workers=sc.num_workers, prefetch_factor=sc.prefetch_factor if sc.num_workers else None,
              persistent_workers=sc.persistent_workers and sc.num_workers > 0, in_order=sc.in_order,
              seed=sc.shuffle_seed, dp_rank=sc.dp_rank, dp_size=sc.dp_size, runtime=sc.runtime,
              fetch_batch_size=sc.fetch_batch_size if sc.runtime == "main" else 1, order=sc.order,
              lookahead=sc.lookahead, reorder_buffer=sc.reorder_buffer, max_steps=sc.max_steps,
              start_method=sc.start_method)
    if sc.order == "balanced" and sc.cost_estimates == "fitted":
        kw["cost_model"] = CostModel.fit(trace_of(sc))
    kw.update(over)
    return LoaderConfig(**kw)


def cost_source(sc: LoaderScenario) -> dict[str, Any]:
    """What ``build_loader`` takes to estimate decode costs for ``order='balanced'``: the trace's
    metadata, with its true costs and ``exact_cost`` ('exact') or without them, for the fitted cost
    model ``loader_config`` puts in the config ('fitted'). Nothing for the sampler order."""
    if sc.order != "balanced":
        return {}
    trace = trace_of(sc)
    if sc.cost_estimates == "fitted":
        return {"meta_fn": TraceMeta(trace)}
    return {"meta_fn": TraceMeta(trace, cost_s=trace.cost_s), "cost_fn": exact_cost}


def packer_config(sc: LoaderScenario) -> PackerConfig:
    return PackerConfig(budget=sc.budget, micro_batches_per_step=sc.micro_batches_per_step,
                        warmup_steps=sc.warmup_steps, warmup_init_tokens=max(1, sc.budget // 4))


def dynbsz_loader(sc: LoaderScenario):
    """dynbsz's production loader on the scenario's synthetic dataset (real sleeps)."""
    packer = packer_config(sc)
    return build_loader(TraceMapDataset(trace_of(sc)), packer, FixedGate(sc.buffer_size), loader_config(sc),
                        **cost_source(sc))


def dynbsz_repro(sc: LoaderScenario) -> ReproSetup:
    """``dynbsz_loader`` as standalone code (``properties.repro_loader``): the scenario's workload sampled with its
    seed (``dynbsz.workload``), the dataset, packer, gate, loader config and cost source as ``dynbsz_loader`` builds
    them, the scenario's values as literals. It imports dynbsz only: the library under test."""
    from dataclasses import MISSING, fields
    from importlib import metadata

    def literal(obj: Any) -> str:   # a frozen config as its constructor call, its non-default fields only
        given = [(f.name, getattr(obj, f.name)) for f in fields(obj) if f.name != "cost_model"
                 and (f.default is MISSING or getattr(obj, f.name) != f.default)]
        return f"{type(obj).__name__}({', '.join(f'{k}={v!r}' for k, v in given)})"

    specs = [f"SourceSpec({s.name!r}, {s.weight!r}, median_tokens={s.median_tokens!r}, sigma={s.sigma!r}, "
             f"cost_base_s={s.cost_base_s!r})" for s in sc.workload().sources]
    fitted = sc.order == "balanced" and sc.cost_estimates == "fitted"
    config = literal(loader_config(sc))
    if fitted:   # the config's cost model, fitted on the trace as loader_config fits it
        config = config[:-1] + ", cost_model=CostModel.fit(TRACE))"
    cost = {"": "", "exact": ", meta_fn=TraceMeta(TRACE, cost_s=TRACE.cost_s), cost_fn=exact_cost",
            "fitted": ", meta_fn=TraceMeta(TRACE)"}[sc.cost_estimates if sc.order == "balanced" else ""]
    code = ["# the samples (ids, tokens, sources) and their decode costs, as the harness draws them",
            f"TRACE = Workload(({specs[0]},", *[f"                  {x}," for x in specs[1:]],
            f"                  )).sample({sc.num_samples}, {sc.data_seed})", "", "def make():",
            f"    return build_loader(TraceMapDataset(TRACE), {literal(packer_config(sc))}, "
            f"FixedGate({sc.buffer_size}),", f"                        {config}{cost})", "",
            "def close(loader):  # a restarted job's old workers are gone before the new loader starts its own",
            "    loader.close()", ""]
    imports = ["from dynbsz.config import PackerConfig", "from dynbsz.datasets import TraceMapDataset",
               "from dynbsz.gates import FixedGate", "from dynbsz.loader import build_loader",
               "from dynbsz.loader_config import LoaderConfig", "from dynbsz.workload import SourceSpec, Workload"]
    if sc.order == "balanced":
        imports.append(f"from dynbsz.costs import {'CostModel, TraceMeta' if fitted else 'TraceMeta, exact_cost'}")
    return ReproSetup(f"dynbsz {metadata.version('dynbsz-harness')}", (), tuple(sorted(imports)), "\n".join(code),
                      "tuple(tuple(mb.ids) for mb in batch.micro_batches)", "loader.set_epoch(epoch)",
                      # step_signature: the step's index, each micro-batch's ids and the budget it was cut against
                      "(batch.index,) + tuple((tuple(mb.ids), mb.budget) for mb in batch.micro_batches)")


def step_signature(step) -> tuple:
    """What an exact resume must reproduce of a dynbsz step: its global index, and each
    micro-batch's ids and the budget it was cut against (warm-up resumes at the same step)."""
    default_ids_of(step)  # payload integrity
    return (step.index,) + tuple((tuple(mb.ids), mb.budget) for mb in step.micro_batches)


# ---- a plain StatefulDataLoader, as most projects use it ------------------------------------

class PlainStep:
    """One fetched batch as the loader properties read a step: a single micro-batch of sample ids."""

    __slots__ = ("micro_batches",)

    def __init__(self, ids):
        self.micro_batches = (_Ids(tuple(ids)),)


class _Ids:
    __slots__ = ("ids",)

    def __init__(self, ids):
        self.ids = ids


def ids_collate(batch: list) -> list:
    return [s["id"] for s in batch]


class PlainTorchdataLoader:
    """``StatefulDataLoader(dataset, shuffle=True, generator=...)`` with its own state_dict, as most
    projects use it; set_epoch is what such projects usually forget, so it does nothing. One
    fetched batch (``fetch_batch_size`` samples) per step. With DP, the usual
    ``StatefulDistributedSampler(num_replicas, rank, shuffle=True, seed)`` in place of shuffle."""

    def __init__(self, sc: LoaderScenario):
        from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler

        self.sc = sc
        dataset = TraceMapDataset(trace_of(sc))
        kw: dict[str, Any] = dict(batch_size=sc.fetch_batch_size, num_workers=sc.num_workers, in_order=sc.in_order,
                                  collate_fn=ids_collate,
                                  persistent_workers=sc.persistent_workers and sc.num_workers > 0)
        if sc.dp_size > 1:
            kw["sampler"] = StatefulDistributedSampler(dataset, num_replicas=sc.dp_size, rank=sc.dp_rank, shuffle=True,
                                                       seed=sc.shuffle_seed)
        else:
            kw.update(shuffle=True, generator=torch.Generator().manual_seed(sc.shuffle_seed))
        if sc.num_workers:
            kw["prefetch_factor"] = sc.prefetch_factor or 2
        self.dl = StatefulDataLoader(dataset, **kw)

    def set_epoch(self, epoch: int) -> None:
        pass

    def __iter__(self):
        return (PlainStep(ids) for ids in self.dl)

    def state_dict(self):
        return self.dl.state_dict()

    def load_state_dict(self, state):
        self.dl.load_state_dict(state)

    def close(self) -> None:
        if self.dl is not None:
            shutdown_workers(self.dl)
        self.dl = None


def shutdown_workers(dl: Any) -> None:
    """Stop a (Stateful)DataLoader's worker processes now rather than at garbage collection, so
    the next loader's forked workers never inherit them. Only releases resources: the loader's
    delivered stream is over when its owner closes it."""
    it = getattr(dl, "_iterator", None)
    if it is not None and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()
    dl._iterator = None


class DelegatingLoader:
    """A foreign loader's own set_epoch / iter / state_dict / load_state_dict, unchanged, and a close
    that stops its workers: what the suite's loader interface asks of an adapter around ``self.dl``.

    ``close`` stops the workers of every iterator the loader made (``_get_iterator``, tracked by weak reference),
    not only of its current one: a non-persistent loader replaces its iterator each ``iter()`` (and again when the
    new one starts finished, StatefulDataLoader.__iter__), and an iterator dropped with live workers is freed only
    by the cyclic garbage collector, whose ``__del__`` then waits 5 s per worker for a shutdown that its
    half-finalized queues never deliver. Only resources: nothing a loader delivers changes."""

    _dl: Any = None
    _made: tuple = ()

    @property
    def dl(self) -> Any:
        return self._dl

    @dl.setter
    def dl(self, loader: Any) -> None:
        self._dl, self._made = loader, []
        make = getattr(type(loader), "_get_iterator", None)
        if make is None:
            return
        made, owner = self._made, weakref.ref(loader)   # no reference back to the loader: no cycle of our own

        def tracked():
            it = make(owner())
            made.append(weakref.ref(it))
            return it

        loader._get_iterator = tracked

    def set_epoch(self, epoch: int) -> None:
        self.dl.set_epoch(epoch)

    def __iter__(self):
        return iter(self.dl)

    def state_dict(self) -> dict:
        return self.dl.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.dl.load_state_dict(state)

    def close(self) -> None:
        for ref in self._made:
            it = ref()
            if it is not None and getattr(it, "_shutdown", True) is False:
                it._shutdown_workers()
        if self.dl is not None:
            shutdown_workers(self.dl)
        self.dl = None


def torchdata_repro(sc: LoaderScenario) -> ReproSetup:
    """``PlainTorchdataLoader`` as standalone code (``properties.repro_loader``), the scenario's values as literals:
    a map-style list of sample ids whose item is ``{'id': i}`` (after sample i's decode time where two or more
    workers race; with none or one it changes nothing the loader delivers), one fetched batch a step."""
    from importlib import metadata

    trace = trace_of(sc)
    if trace.ids.tolist() != list(range(len(trace))):
        raise ValueError("the script names sample i by its row: the trace's ids must be 0..n-1")
    timed = sc.num_workers >= 2
    code = [f"COSTS = {[round(float(c), 6) for c in trace.cost_s]}  # sample i's decode time (s)"] if timed else []
    code += ["class Samples(list):  # map-style over sample ids", "    def __getitem__(self, k):",
             "        i = super().__getitem__(k)",
             *(["        time.sleep(COSTS[i])  # with two or more workers, which sample is ready first is timing"]
               if timed else []),
             "        return {'id': i}", "", "def ids(batch):  # the collate function: a batch's sample ids",
             "    return [s['id'] for s in batch]", "", "def make():", f"    ds = Samples(range({len(trace)}))"]
    kw = [f"batch_size={sc.fetch_batch_size}", f"num_workers={sc.num_workers}", f"in_order={sc.in_order}",
          "collate_fn=ids", f"persistent_workers={sc.persistent_workers and sc.num_workers > 0}"]
    if sc.num_workers:
        kw.append(f"prefetch_factor={sc.prefetch_factor or 2}")
    imports = ["import torch", "from torchdata.stateful_dataloader import StatefulDataLoader"]
    if sc.dp_size > 1:
        imports.append("from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler")
        code.append(f"    sampler = StatefulDistributedSampler(ds, num_replicas={sc.dp_size}, rank={sc.dp_rank}, "
                    f"shuffle=True, seed={sc.shuffle_seed})")
        kw.append("sampler=sampler")
    else:
        kw += ["shuffle=True", f"generator=torch.Generator().manual_seed({sc.shuffle_seed})"]
    code.append(f"    return StatefulDataLoader(ds, {', '.join(kw)})")
    return ReproSetup(f"torchdata {metadata.version('torchdata')}", ("time",) if timed else (), tuple(imports),
                      "\n".join(code), "(tuple(batch),)")


def torchdata_loader(sc: LoaderScenario) -> PlainTorchdataLoader:
    return PlainTorchdataLoader(sc)


torchdata_loader.state_codec = "pickle"  # its state holds the sampler's generator tensor


def torchdata_skew_runner(sc: SkewScenario) -> SkewRun:
    """One epoch of the same plain StatefulDataLoader, batch 1. Its sampler order is what the same
    loader delivers with in_order=True over a zero-cost copy of the dataset (torch hands out
    in_order=True batches in sampler order, and the RandomSampler's permutation depends on how
    many seeds the loader drew from the shared generator before it, which depends on the workers,
    not on the costs)."""
    trace = SKEW_WORKLOAD.sample(sc.num_samples, sc.data_seed)

    def one_epoch(dataset, in_order: bool) -> list:
        dl = StatefulDataLoader(dataset, batch_size=1, shuffle=True,
                                generator=torch.Generator().manual_seed(sc.shuffle_seed), num_workers=sc.num_workers,
                                prefetch_factor=sc.prefetch_factor, in_order=in_order, collate_fn=ids_collate)
        try:
            return [sid for batch in dl for sid in batch]
        finally:
            shutdown_workers(dl)

    sampler_ids = one_epoch(TraceMapDataset(trace, time_scale=0.0), True)
    return SkewRun(tuple(sampler_ids), tuple(one_epoch(TraceMapDataset(trace), sc.in_order)))


# ---- broken variants -----------------------------------------------------------------------

class StaleEpochIterable(IterableDataset):
    """An IterableDataset that shuffles by ``self.epoch``, which ``set_epoch`` sets in the main
    process: the replica in a persistent worker keeps the epoch it was built with."""

    def __init__(self, trace: Trace, seed: int):
        self.trace, self.seed, self.epoch = trace, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        order = epoch_order(len(self.trace), self.seed, self.epoch)[wid::nw]
        return iter([{"id": int(self.trace.ids[i])} for i in order])


class StaleEpochLoader(PlainTorchdataLoader):
    def __init__(self, sc: LoaderScenario):
        self.sc = sc
        self.ds = StaleEpochIterable(trace_of(sc), sc.shuffle_seed)
        kw: dict[str, Any] = dict(batch_size=sc.fetch_batch_size, num_workers=sc.num_workers, collate_fn=ids_collate,
                                  persistent_workers=sc.persistent_workers and sc.num_workers > 0)
        if sc.num_workers:
            kw["prefetch_factor"] = sc.prefetch_factor or 2
        self.dl = StatefulDataLoader(self.ds, **kw)

    def set_epoch(self, epoch: int) -> None:
        self.ds.set_epoch(epoch)


def stale_epoch_loader(sc: LoaderScenario) -> StaleEpochLoader:
    return StaleEpochLoader(sc)


class SharedEpochLoader(StaleEpochLoader):
    """The same plain loader over dynbsz.datasets.TraceIterableDataset, whose epoch is in shared memory."""

    def __init__(self, sc: LoaderScenario):
        from dynbsz.datasets import TraceIterableDataset

        self.sc = sc
        self.ds = TraceIterableDataset(trace_of(sc), seed=sc.shuffle_seed)
        kw: dict[str, Any] = dict(batch_size=sc.fetch_batch_size, num_workers=sc.num_workers, collate_fn=ids_collate,
                                  persistent_workers=sc.persistent_workers and sc.num_workers > 0)
        if sc.num_workers:
            kw["prefetch_factor"] = sc.prefetch_factor or 2
        self.dl = StatefulDataLoader(self.ds, **kw)


def shared_epoch_loader(sc: LoaderScenario) -> SharedEpochLoader:
    return SharedEpochLoader(sc)


shared_epoch_loader.state_codec = "pickle"


stale_epoch_loader.state_codec = "pickle"
