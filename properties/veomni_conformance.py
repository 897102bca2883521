"""VeOmni 0.1.12 conformance instruments (docs/veomni-0.1.12-conformance.md).

Three things the report needs besides the plain ``veomni`` target:

* ``documented()``: the ``veomni`` target held only to what VeOmni promises. An example that
  hits one of VeOmni's *documented deviations* (``DEVIATIONS``) is rejected from the search
  (a replay of one is a skip that names the deviation), so what still fails is a bug, not a
  documented choice. Outputs are never changed: only inputs are restricted.
* ``fixed()``: ``documented()`` with the smallest upstream fix of every finding patched into
  VeOmni (``FIXES``), to confirm each root cause: a property that passes with the fixes and
  fails without them failed for the reasons the report gives, and for no other.
  ``fixes_applied(ids)`` applies chosen fixes for the duration of a ``with`` block (the
  conformance tests check each finding's example against its own fix alone).
* ``python -m properties.veomni_conformance deviations``: what the documented deviations lose
  on realistic workloads (overlong samples dropped by the worker runtime, one-token samples
  dropped by the main runtime, epochs of ``train_steps`` steps in the main runtime, padding).

Both targets are ``MODULE:FACTORY`` targets:
``python -m properties check --target properties.veomni_conformance:documented``.
``fixed()`` patches VeOmni for the rest of the process it is resolved in (its loaders fork
workers that must see the patches too); use it from the command line, not inside a test run.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import json
import math
import sys
import time
from typing import Any, Callable, Iterator

from .registry import Unsupported
from .targets.base import LoaderComponent, PackerComponent, Target, TargetError

# ---- documented deviations ---------------------------------------------------------------------

#: id -> what VeOmni documents, and where (installed veomni 0.1.12 / torch / torchdata).
DEVIATIONS: dict[str, str] = {
    "D1": ("main runtime drops samples whose input_ids hold at most one token (TextBatchingStrategy.put_item, "
           "veomni/data/dynamic_batching.py:211-214, 'WARNING: EMPTY STRING.')"),
    "D2": ("worker runtime drops samples longer than the micro-batch budget (DynamicBatchingSizeDataset, "
           "veomni/data/dataset.py:1037-1039 docstring, 1202-1207)"),
    "D3": ("DP shards are padded by wrapping around to an equal size (torch DistributedSampler's documented "
           "padding, used by StatefulDistributedSampler and copied by _MapStyleSamplerWrapper, "
           "veomni/data/dataset.py:848-850, 924-931)"),
    "D4": ("in_order=False with workers gives no checkpoint/resume guarantee (torchdata stateful_dataloader.py:184, "
           "237-242; VeOmni's warning, veomni/data/data_loader.py:246-250)"),
}


def _reject(deviation: str, detail: str) -> Unsupported:
    return Unsupported(f"documented deviation {deviation}: {detail} ({DEVIATIONS[deviation].split(' (')[0]})")


def loader_deviation(component_name: str, runtime: str, sc: Any, prop: str | None = None) -> Unsupported | None:
    """The documented deviation a loader scenario hits on a VeOmni loader component, if any."""
    from .loader_targets import trace_of

    if runtime == "worker":
        tokens = trace_of(sc).tokens
        over = int((tokens > sc.budget).sum())
        if over:
            return _reject("D2", f"{over} of {sc.num_samples} samples are longer than the budget {sc.budget}")
    if sc.dp_size > 1 and sc.num_samples % sc.dp_size:
        return _reject("D3", f"{sc.num_samples} samples over {sc.dp_size} ranks")
    if not sc.in_order and sc.num_workers > 0 and (sc.checkpoints or sc.restore_at_epoch_end):
        return _reject("D4", "a checkpoint schedule with in_order=False and workers")
    return None


class _DocumentedPacker:
    """A VeOmni packer that refuses (as Unsupported) the samples VeOmni documents it drops."""

    def __init__(self, inner: Any):
        self._inner = inner

    def put(self, sample_id, tokens, physical_tokens=None, source=None, payload=None):
        if (tokens if physical_tokens is None else physical_tokens) <= 1:
            raise _reject("D1", f"sample {sample_id!r} holds {tokens if physical_tokens is None else physical_tokens} "
                                "token(s)")
        return self._inner.put(sample_id, tokens, physical_tokens, source, payload)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __len__(self) -> int:
        return len(self._inner)


class _Refused:
    """Stands in for a loader on a scenario that hits a documented deviation: any use raises the
    Unsupported that makes the runner reject the example (or a replay report a skip)."""

    def __init__(self, reason: Unsupported):
        self.reason = reason

    def _refuse(self, *args, **kwargs):
        raise self.reason

    set_epoch = __iter__ = state_dict = load_state_dict = _refuse

    def close(self) -> None:
        pass


def _documented_loader(component: LoaderComponent, make: Callable[[Any], Any] | None = None) -> LoaderComponent:
    make = make or component.make_loader

    def make_loader(sc):
        hit = loader_deviation(component.name, component.runtime, sc)
        return _Refused(hit) if hit is not None else make(sc)

    return dataclasses.replace(component, make_loader=make_loader)


def _documented_components(loaders: dict[str, Callable[[Any], Any]] | None = None) -> tuple:
    from .targets.builtin import veomni_target

    base = veomni_target()
    if base.unavailable:
        raise TargetError(base.unavailable)
    out = []
    for c in base.components:
        if isinstance(c, PackerComponent):
            make = c.make_packer
            out.append(dataclasses.replace(c, make_packer=lambda config, spec, make=make: _DocumentedPacker(
                make(config, spec))))
        elif isinstance(c, LoaderComponent):
            out.append(_documented_loader(c, (loaders or {}).get(c.name)))
        else:
            out.append(c)
    return tuple(out)


def documented() -> Target:
    """``veomni`` with every example that hits a documented deviation (D1-D4) rejected."""
    return Target(name="veomni-documented", components=_documented_components(),
                  description="VeOmni 0.1.12 held to what it documents: examples hitting D1-D4 are not drawn")


# ---- the proposed upstream fixes, as patches ----------------------------------------------------

#: id -> (finding, the fix in one line). The patched functions below are VeOmni's (or torchdata's)
#: own, copied, with exactly that change; docs/veomni-0.1.12-conformance.md shows each as a diff.
FIXES: dict[str, str] = {
    "V1": "DynamicBatchSizeDataLoader: count a step before yielding it (dynamic_batching.py:316-317, 335-336)",
    "V2": "DynamicBatchSizeDataLoader: keep the epoch; set_epoch to another epoch ends a pending resume "
          "(dynamic_batching.py:402-404)",
    "V3": "DynamicBatchSizeDataLoader.load_state_dict: give the sampler the saved epoch before the eager iter() "
          "(dynamic_batching.py:399)",
    "V4": "StatefulDistributedSampler.__iter__: apply a restored position when the iterator is made, not when it "
          "is first advanced (torchdata sampler.py:198-206)",
    "V5": "DynamicBatchSizeDataLoader: an epoch ends with its data pass (drain, then stop) instead of re-reading "
          "the pass until train_steps (dynamic_batching.py:307-308, 322-327)",
    "V6": "build_native_dataloader: drop_last=False for the worker runtime's micro-batch groups (data_loader.py:264)",
    "V7": "_MapStyleSamplerWrapper / WeightedMultiSourceDataset: epoch in shared memory, and their states name the "
          "epoch they belong to (dataset.py:898, 1006-1009, 977-982; 463, 549, 725-759)",
    "V8": "_MapStyleSamplerWrapper.load_state_dict: a state of another epoch than set_epoch's restores nothing "
          "(dataset.py:1002-1004)",
    "V9": "WeightedMultiSourceDataset: record the first_exhausted stop in its state, and start a fresh epoch's "
           "sources fresh (dataset.py:646-647, 565-574)",
    "V10": "WeightedMultiSourceDataset.__iter__: seed the epoch's stream when a restored state had not started "
           "(dataset.py:565)",
    "V11": "DynBszBuffer.get_samples: force only the first sample of a micro-batch, not every one while the sum "
           "is 0 (dynamic_batching.py:102)",
    "V12": "DynamicBatchSizeDataLoader: a restored generator reads the next sample before its first readiness "
           "check, where the suspended one resumes (dynamic_batching.py:310-311, 398)",
    "V13": "DynamicBatchingSizeDataset.__iter__ starts its upstream lazily (dataset.py:1154-1169): until the first "
           "batch, the upstream's state is the previous iteration's; mark the upstream's iteration pending so its "
           "state reads 'start of this epoch' (dataset.py:977-982, 725-759)",
}
ALL_FIXES = tuple(FIXES)
#: fix -> the regression file (tests/regressions/) that pins its finding: an example that fails on
#: VeOmni as shipped and with every other fix applied, and passes with all of them.
PINNED: dict[str, str] = {
    "V1": "resume-loader_main-veomni-9c9cc80f34.json",
    "V2": "exactly_once-loader_main-veomni-a4740003b3.json",
    "V3": "exactly_once-loader_main-veomni-d19ad1821f.json",
    "V4": "exactly_once-loader_main-veomni-1194f9357c.json",
    "V5": "epoch_reshuffle-loader_main-veomni-9a43053d22.json",
    "V6": "exactly_once-loader_worker-veomni-45af2abdca.json",
    "V7": "epoch_reshuffle-loader_worker-veomni-f1a25a8832.json",
    "V8": "exactly_once-loader_worker-veomni-9be15848f8.json",
    "V9": "resume-loader_multisource-veomni-6e674958d8.json",
    "V10": "resume-loader_multisource-veomni-dc60ca7664.json",
    "V11": "budget-packer-veomni-9975e069ad.json",
    "V12": "resume-loader_main-veomni-1e5b590005.json",
    "V13": "exactly_once-loader_worker-veomni-468453fcdc.json",
}
#: Where each fix can show: the components whose code it changes (for the leave-one-out search).
FIX_COMPONENTS: dict[str, tuple[str, ...]] = {
    **{f: ("loader:main",) for f in ("V1", "V2", "V3", "V4", "V5", "V12")},
    "V6": ("loader:worker", "loader:multisource"), "V7": ("loader:worker", "loader:multisource"),
    "V8": ("loader:worker", "loader:multisource"), "V13": ("loader:worker", "loader:multisource"),
    **{f: ("loader:multisource",) for f in ("V9", "V10")},
    "V11": ("packer",),
}
_ACTIVE: set[str] = set()


def _veomni():
    from .targets.veomni_loaders import classes

    classes()  # imports VeOmni with its loggers on stderr
    from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler
    from veomni.data import dataset as ds
    from veomni.data import dynamic_batching as db

    return db, ds, StatefulDistributedSampler


def _on(fix: str) -> bool:
    return fix in _ACTIVE


# V1 + V5: DynamicBatchSizeDataLoader.batch_data_generator, dynamic_batching.py:303-357.
def batch_data_generator(self):
    batch = []
    if _on("V5") and self.step == 0:
        self.pass_done = False       # V5: a fresh epoch (a public attribute: the checkpoint holds it)
    # V12: a generator made by load_state_dict() starts where the checkpointed one was suspended:
    # after a yield, that is at the fetch, not at the readiness check (which would cut one sample early).
    fetch_first = _on("V12") and self.__dict__.pop("_restored", False)

    while True:
        if self._length and self.step >= self._length and not _on("V5"):   # V5: the pass, not length, ends it
            return

        if fetch_first:
            fetch_first = False
        elif self.batching_strategy.is_ready_for_micro_batch():
            micro_batch = self.batching_strategy.get_micro_batch(self.step)
            if self._collate_fn:
                micro_batch = self._collate_fn(micro_batch)
            batch.append(micro_batch)
            if len(batch) == self.num_micro_batch:
                if _on("V1"):
                    self.step += 1          # V1: counted before the yield, so a checkpoint holds it
                    yield batch
                else:
                    yield batch
                    self.step += 1
                batch = []

        try:
            if _on("V5") and getattr(self, "pass_done", False):
                raise StopIteration   # V5: restored after the pass ended: only the drain is left
            processing_item = next(self._data_iter)
        except Exception as e:
            if isinstance(e, StopIteration):
                if _on("V5"):
                    self.pass_done = True
                    # V5: the data pass is over: drain the buffer into micro-batches and end the epoch.
                    while not self.batching_strategy.empty():
                        micro_batch = self.batching_strategy.get_micro_batch(self.step)
                        if self._collate_fn:
                            micro_batch = self._collate_fn(micro_batch)
                        batch.append(micro_batch)
                        if len(batch) == self.num_micro_batch:
                            self.step += 1
                            yield batch
                            batch = []
                    if batch and not self._drop_last:
                        self.step += 1
                        yield batch
                    return
                if self.step < self._length:
                    self._data_iter = iter(self._dataloader)
                    processing_item = next(self._data_iter)
                elif not self._drop_last and not self.batching_strategy.empty():
                    while not self.batching_strategy.empty():
                        micro_batch = self.batching_strategy.get_micro_batch(self.step)
                        if self._collate_fn:
                            micro_batch = self._collate_fn(micro_batch)
                        batch.append(micro_batch)
                        if len(batch) == self.num_micro_batch:
                            yield batch
                            self.step += 1
                            batch = []

                    while len(batch) < self.num_micro_batch:
                        padding_batch = copy.deepcopy(micro_batch)
                        padding_batch["padding_flag"] = True
                        batch.append(padding_batch)
                    yield batch
                    self.step += 1
                    return
                else:
                    return
            else:
                raise

        if isinstance(processing_item, dict):
            processing_item = [processing_item]

        for item in processing_item:
            self.batching_strategy.put_item(item)


def _load_state_dict_v3(original):
    # V3: DynamicBatchSizeDataLoader.load_state_dict, dynamic_batching.py:379-400.
    def load_state_dict(self, state):
        if _on("V3") and "epoch" in state and hasattr(self._dataloader, "set_epoch"):
            self._dataloader.set_epoch(state["epoch"])
        out = original(self, state)
        self._restored = True   # read by V12 (private: state_dict() leaves it out)
        return out

    return load_state_dict


def set_epoch_v2(self, epoch: int) -> None:
    # V2 (+V3's saved epoch): DynamicBatchSizeDataLoader.set_epoch, dynamic_batching.py:402-404.
    if _on("V2") and self._resume and epoch != self.__dict__.get("epoch", epoch):
        self._resume = False          # a restored state of another epoch is over: the next iter() starts this one
    if _on("V2") or _on("V3"):
        self.epoch = epoch            # a public attribute: state_dict() saves it, load_state_dict() restores it
    if hasattr(self._dataloader, "set_epoch"):
        self._dataloader.set_epoch(epoch)


def sampler_iter(self):
    # V4: torchdata StatefulDistributedSampler.__iter__, sampler.py:198-206, no longer a generator
    # function: a restored position is applied when the iterator is made, not when it is first
    # advanced, so state_dict() right after a restore reports it, and an iterator that is made
    # and dropped unstarted (torchdata replaces a finished one) does not carry it into the next epoch.
    import itertools

    import torch.utils.data.distributed as tud

    self.yielded = self.next_yielded if self.next_yielded is not None else 0
    self.next_yielded = None
    it = tud.DistributedSampler.__iter__(self)

    def indices():
        for idx in itertools.islice(it, self.yielded, None):
            self.yielded += 1
            yield idx

    return indices()


def _shared_epoch(attr: str):
    """V7: an epoch attribute backed by a shared-memory tensor, so set_epoch reaches persistent workers."""
    import torch

    store = "_shared_" + attr.strip("_")

    def get(self):
        t = self.__dict__.get(store)
        return int(t[0]) if t is not None else 0

    def set_(self, value):
        t = self.__dict__.get(store)
        if t is None:
            t = torch.zeros(1, dtype=torch.long).share_memory_()
            self.__dict__[store] = t
        t[0] = int(value)

    return property(get, set_)


def _wrapper_iter_v7(original):
    # V7: _MapStyleSamplerWrapper._iter, dataset.py:945-963. With the epoch shared, a persistent
    # worker's snapshot at the start of an epoch would pair the new epoch with the old epoch's
    # yielded count (and a restore would skip the new epoch's whole shard): the state must name
    # the epoch whose order the count is a position in, set when the order is drawn.
    def _iter(self):
        self._iter_epoch = self.epoch
        yield from original(self)

    return _iter


def _wrapper_state_v7(original):
    def state_dict(self):
        state = original(self)
        state["epoch"] = self.__dict__.get("_iter_epoch", self.epoch)
        return state

    return state_dict


def _dbsd_iter_v13(original):
    # V13: DynamicBatchingSizeDataset.__iter__, dataset.py:1146-1166. Its eager part resets its own
    # buffer; the upstream is iterated only when the first batch is asked for (_iter, 1168-1169).
    # torchdata snapshots a worker right after iter() (an epoch's start, a reset of a restored,
    # finished iterator): the upstream's state then still describes the iteration before.
    def __iter__(self):
        fresh = not self._just_resumed
        out = original(self)
        if _on("V13") and fresh:
            self.dataset._iteration_pending = True
        return out

    return __iter__


def _wrapper_iter_v13(original):
    def __iter__(self):
        self._iteration_pending = False
        return original(self)

    return __iter__


def _wrapper_state_v13(original):
    # V13: _MapStyleSamplerWrapper.state_dict, dataset.py:977-982: a pending iteration is this epoch's start.
    def state_dict(self):
        state = original(self)
        if _on("V13") and self.__dict__.get("_iteration_pending"):
            state.update(epoch=self.epoch, yielded=0)
        return state

    return state_dict


def _wrapper_load_v8(original):
    # V8: _MapStyleSamplerWrapper.load_state_dict, dataset.py:984-1004.
    def load_state_dict(self, state_dict):
        if _on("V8") and state_dict.get("epoch", self.epoch) != self.epoch:
            # The loader applies a state lazily, at iter(), after the trainer's set_epoch(e). A state
            # of another epoch is that epoch's finished end (torchdata then starts a fresh epoch):
            # restoring it would put the wrapper back into the old epoch. Keep set_epoch's.
            return
        return original(self, state_dict)

    return load_state_dict


def _wmsd_iter(original):
    # V7, V9, V10: WeightedMultiSourceDataset.__iter__, dataset.py:555-604.
    def __iter__(self):
        if _on("V7") and self._just_resumed and self.__dict__.get("_restored_epoch", self._epoch) != self._epoch:
            # V7: a persistent worker's snapshot at an epoch's start is the previous epoch's end (the
            # mixture's state names no epoch): restored into this epoch, it must not continue that one.
            self._just_resumed = False
        if _on("V13") and self._just_resumed and self.__dict__.get("_restored_pending"):
            self._just_resumed = False   # V13: the state was saved before this iteration drew anything
        self._iteration_pending = False
        if _on("V7"):
            self._iter_epoch = self._epoch
        if _on("V9") and self._just_resumed and getattr(self, "_stopped", False):
            self._just_resumed = False
            return          # V9: the restored state had stopped (first_exhausted): the epoch is over
        if _on("V10") and self._just_resumed and self._global_sample_idx == 0:
            self._just_resumed = False   # V10: nothing was read before the checkpoint: seed the epoch's stream
        if _on("V9") and not self._just_resumed:
            # V9: a fresh epoch of the mixture is a fresh epoch of each source: a restored stop (above)
            # leaves the sources' own resume flags set, which the next epoch must not inherit.
            for source in self._datasets:
                if getattr(source, "_just_resumed", False):
                    source._just_resumed = False
                if callable(getattr(source, "set_epoch", None)):
                    source.set_epoch(self._epoch)
        if _on("V9"):
            self._stopped = False
        inner = original(self)
        for item in inner:
            yield item
        if _on("V9"):
            self._stopped = True

    return __iter__


def _wmsd_state(original_state, original_load):
    def state_dict(self):
        state = original_state(self)
        if _on("V13"):
            state["runtime"]["pending"] = bool(self.__dict__.get("_iteration_pending"))
        if _on("V7"):
            state["runtime"]["epoch"] = self.__dict__.get("_iter_epoch", self._epoch)
        if _on("V9"):
            state["runtime"]["stopped"] = bool(getattr(self, "_stopped", False))
        return state

    def load_state_dict(self, state, *a, **kw):
        original_load(self, state, *a, **kw)
        if _on("V13"):
            self._restored_pending = bool(state["runtime"].get("pending", False))
        if _on("V7"):
            self._restored_epoch = state["runtime"].get("epoch")
        if _on("V9"):
            self._stopped = bool(state["runtime"].get("stopped", False))

    return state_dict, load_state_dict


def get_samples_v12(self, n_token_per_iter: int, force: bool = True, physical_token_cap=None):
    # V11: DynBszBuffer.get_samples, dynamic_batching.py:81-112, with line 102 changed.
    cum_seq_len = 0
    cum_physical_len = 0
    samples = []
    while self.cur_idx < len(self._buffer) and cum_seq_len < n_token_per_iter:
        seq_len = self._buffer_sample_lens[self.cur_idx]
        physical_seq_len = self._buffer_physical_lens[self.cur_idx]
        fits_effective_budget = seq_len <= n_token_per_iter - cum_seq_len
        fits_physical_cap = physical_token_cap is None or (physical_seq_len <= physical_token_cap - cum_physical_len)
        first_forced_sample = force is True and (not samples if _on("V11") else cum_seq_len == 0)
        if self.cur_idx not in self.del_idxs and (first_forced_sample or (fits_effective_budget and fits_physical_cap)):
            cum_seq_len += seq_len
            cum_physical_len += physical_seq_len
            samples.append(self._buffer[self.cur_idx])
            self.del_idxs.append(self.cur_idx)
        self.cur_idx += 1
    assert len(samples) > 0
    return samples


def _patches() -> list[tuple[Any, str, Any]]:
    db, ds, sampler = _veomni()
    loader, wrapper, wmsd = db.DynamicBatchSizeDataLoader, ds._MapStyleSamplerWrapper, ds.WeightedMultiSourceDataset
    wmsd_state, wmsd_load = _wmsd_state(wmsd.state_dict, wmsd.load_state_dict)
    return [
        (loader, "batch_data_generator", batch_data_generator),
        (loader, "load_state_dict", _load_state_dict_v3(loader.load_state_dict)),
        (loader, "set_epoch", set_epoch_v2),
        (wrapper, "load_state_dict", _wrapper_load_v8(wrapper.load_state_dict)),
        (wrapper, "__iter__", _wrapper_iter_v13(wrapper.__iter__)),
        (wrapper, "state_dict", _wrapper_state_v13(wrapper.state_dict)),
        (ds.DynamicBatchingSizeDataset, "__iter__", _dbsd_iter_v13(ds.DynamicBatchingSizeDataset.__iter__)),
        (wmsd, "__iter__", _wmsd_iter(wmsd.__iter__)),
        (wmsd, "state_dict", wmsd_state),
        (wmsd, "load_state_dict", wmsd_load),
        (db.DynBszBuffer, "get_samples", get_samples_v12),
    ]


_INSTALLED: list[tuple[Any, str, Any]] | None = None


def _install() -> None:
    """Put the patched functions in place once per process. Each behaves as VeOmni's own until
    its fix id is in ``_ACTIVE``; V4 and V7 replace attributes only while active (_CONDITIONAL)."""
    global _INSTALLED
    if _INSTALLED is None:
        _INSTALLED = []
        for obj, attr, new in _patches():
            _INSTALLED.append((obj, attr, obj.__dict__[attr]))
            setattr(obj, attr, new)


_CONDITIONAL: dict[str, Callable[[], list[tuple[Any, str, Any]]]] = {
    "V4": lambda: [(_veomni()[2], "__iter__", sampler_iter)],
    "V7": lambda: [(_veomni()[1]._MapStyleSamplerWrapper, "epoch", _shared_epoch("epoch")),
                   (_veomni()[1]._MapStyleSamplerWrapper, "_iter",
                    _wrapper_iter_v7(_veomni()[1]._MapStyleSamplerWrapper._iter)),
                   (_veomni()[1]._MapStyleSamplerWrapper, "state_dict",
                    _wrapper_state_v7(_veomni()[1]._MapStyleSamplerWrapper.__dict__["state_dict"])),
                   (_veomni()[1].WeightedMultiSourceDataset, "_epoch", _shared_epoch("_epoch"))],
}


def _uninstall() -> None:
    global _INSTALLED
    for obj, attr, original in reversed(_INSTALLED or []):
        setattr(obj, attr, original)
    _INSTALLED = None


@contextlib.contextmanager
def fixes_applied(ids: tuple[str, ...] | list[str] = ALL_FIXES) -> Iterator[None]:
    """VeOmni with the chosen fixes, inside the block (objects built inside it keep V7's shared
    epoch; worker processes forked inside it see every patch). The outermost block puts VeOmni's
    own functions back on exit, so tests that drive VeOmni afterwards drive VeOmni's code."""
    unknown = sorted(set(ids) - set(FIXES))
    if unknown:
        raise KeyError(f"unknown fix(es) {unknown}; allowed values: {', '.join(FIXES)}")
    outermost = _INSTALLED is None
    before = set(_ACTIVE)
    saved = _activate(ids)
    try:
        yield
    finally:
        _ACTIVE.clear()
        _ACTIVE.update(before)
        for obj, attr, old, had in reversed(saved):
            if had:
                setattr(obj, attr, old)
            else:
                delattr(obj, attr)
        if outermost and not _PERMANENT:
            _uninstall()


def _activate(ids) -> list[tuple[Any, str, Any, bool]]:
    """Install the patches, put the chosen fixes' attributes in place and mark them active; returns
    what was replaced."""
    _install()
    saved: list[tuple[Any, str, Any, bool]] = []
    for fix in ids:
        for obj, attr, new in _CONDITIONAL.get(fix, lambda: [])():
            saved.append((obj, attr, obj.__dict__.get(attr), attr in obj.__dict__))
            setattr(obj, attr, new)
    _ACTIVE.update(ids)
    return saved


def fixed_loaders() -> dict[str, Callable[[Any], Any]]:
    """VeOmni's loader pipelines as the fixed builder assembles them: V6 (drop_last=False for the
    worker runtime's micro-batch groups) when active; the rest is the patched classes."""
    from .targets import veomni_loaders as vl

    def worker_kw(sc):
        kw = vl._loader_kw(sc)
        if _on("V6"):
            kw["drop_last"] = False
        return kw

    class FixedWorker(vl.WorkerRuntime):
        def __init__(self, sc):
            v = vl.classes()
            self.dl = v.DistributedDataloader(self._upstream(v, sc), batch_size=sc.micro_batches_per_step,
                                              collate_fn=v.NoopDataCollator(), **worker_kw(sc))

    class FixedMulti(vl.MultiSource, FixedWorker):
        pass

    class FixedMain(vl.MainRuntime):
        def __init__(self, sc):
            super().__init__(sc)
            if _on("V5"):
                self.dl._drop_last = False   # a pass's last, short step is delivered, not dropped

    return {"loader:main": FixedMain, "loader:worker": FixedWorker, "loader:multisource": FixedMulti}


_PERMANENT: list[Any] = []


def fixed() -> Target:
    """``documented()`` with every fix in FIXES applied, for the rest of this process."""
    if not _PERMANENT:
        # Never undone: forked workers and later loaders must see the fixes.
        _PERMANENT.append(_activate(ALL_FIXES))
    return Target(name="veomni-fixed", components=_documented_components(fixed_loaders()),
                  description="VeOmni 0.1.12 with the report's proposed fixes V1-V13 patched in (D1-D4 not drawn)")


def replay_with(entry: dict[str, Any], fixes: tuple[str, ...] | list[str] = ()) -> Any:
    """Replay a regression entry on VeOmni held to its documentation, with ``fixes`` applied (and
    only those): the Result (pass, fail, or skip naming a documented deviation)."""
    from . import registry
    from .runner import replay_example

    target = Target(name="veomni-with-" + ("+".join(fixes) or "no-fixes"),
                    components=_documented_components(fixed_loaders()))
    with fixes_applied(tuple(fixes)):
        return replay_example(target, registry.get(entry["property"]), entry["component"], entry["example"])


def attribute(entry: dict[str, Any]) -> dict[str, Any]:
    """Which fixes an example needs: it must fail with none and pass with all; then fixes are taken
    out one at a time while it still passes, leaving a minimal set that is sufficient on its own."""
    bare = replay_with(entry)
    if bare.status != "fail":
        return {"status": bare.status, "message": bare.message, "fixes": None}
    full = replay_with(entry, ALL_FIXES)
    if full.status != "pass":
        return {"status": "unexplained", "message": full.message, "fixes": None}
    needed = list(ALL_FIXES)
    for fix in ALL_FIXES:
        trial = [f for f in needed if f != fix]
        if replay_with(entry, trial).status == "pass":
            needed = trial
    return {"status": "fail", "message": bare.message, "fixes": needed}


def leave_one_out(fix: str, corpus_dir: str | None, profile: str = "ci", seed: int = 0) -> list[Any]:
    """Search for what ``fix`` alone prevents: every property on the components it touches, on VeOmni
    held to its documentation with every other fix applied. A failure is an example the other fixes
    do not cover (saved as a ``veomni`` regression when it also fails on VeOmni as shipped)."""
    from . import corpus
    from .runner import RunSettings, run_target

    others = tuple(f for f in ALL_FIXES if f != fix)
    target = Target(name=f"veomni-fixed-except-{fix}", components=_documented_components(fixed_loaders()))
    with fixes_applied(others):
        results = run_target(target, RunSettings(profile=profile, seed=seed, database=None),
                             components=FIX_COMPONENTS[fix])
    out = []
    for r in results:
        if r.status == "fail" and r.saveable and corpus_dir is not None:
            shipped = dataclasses.replace(r, target="veomni")
            entry = corpus.entry_for(shipped)
            if replay_with(entry, ()).status == "fail" and replay_with(entry, ALL_FIXES).status == "pass":
                path = corpus.save(shipped, corpus_dir)
                r = dataclasses.replace(r, file=str(path), replay=corpus.replay_command(path))
        out.append(r)
    return out


# ---- the configuration matrix: how often each property fails, per loader configuration -----------

def _configs(c: LoaderComponent) -> list[dict[str, Any]]:
    warmups = (False, True) if c.warmup else (False,)
    out = [{"workers": False, "in_order": True, "persistent": False, "warmup": w} for w in warmups]
    out += [{"workers": True, "in_order": o, "persistent": p, "warmup": w}
            for o in c.in_order for p in c.persistent for w in warmups]
    return out


def _config_name(cfg: dict[str, Any]) -> str:
    if not cfg["workers"]:
        return "no workers" + (", warm-up" if cfg["warmup"] else "")
    return ", ".join(["in_order" if cfg["in_order"] else "out of order",
                      "persistent" if cfg["persistent"] else "non-persistent"] + (["warm-up"] if cfg["warmup"] else []))


def matrix(target: Target, examples: int, seed: int = 0) -> list[dict[str, Any]]:
    """Each loader property on each configuration a component supports (workers or none, in_order,
    persistent workers, warm-up): ``examples`` fresh examples each, counting the failing ones
    instead of stopping at the first, so a failure rate says where a bug lives."""
    import hypothesis
    from hypothesis import Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis.errors import Unsatisfiable

    from . import registry
    from .packer_props import PropertyViolation
    from .runner import guarded_check, quiet_target

    rows = []
    for c in target.components:
        if not isinstance(c, LoaderComponent):
            continue
        for cfg in _configs(c):

            def keep(sc, cfg=cfg):
                return (sc.num_workers > 0) == cfg["workers"] and (sc.warmup_steps > 0) == cfg["warmup"]

            for prop in registry.properties():
                if "loader" not in prop.kinds or prop.name == "in_order_skew" or prop.skip_reason(c):
                    continue
                # epoch_reshuffle runs every scenario both with and without persistent workers itself.
                both = prop.name == "epoch_reshuffle"
                if both and cfg["workers"] and not cfg["persistent"]:
                    continue
                narrowed = dataclasses.replace(c, in_order=(cfg["in_order"],), warmup=cfg["warmup"],
                                               persistent=c.persistent if both else (cfg["persistent"],),
                                               max_workers=c.max_workers if cfg["workers"] else 0)
                tally = {"examples": 0, "failed": 0, "refused": 0, "first": None}

                def make_probe(prop, component, tally):
                    def probe(sc):
                        try:
                            guarded_check(prop, component, sc)
                        except Unsupported:
                            tally["refused"] += 1
                            hypothesis.reject()
                        except PropertyViolation as e:
                            tally["failed"] += 1
                            tally["first"] = tally["first"] or str(e)
                        tally["examples"] += 1

                    return probe

                probe = make_probe(prop, narrowed, tally)
                test = hseed(seed)(settings(max_examples=examples, database=None, deadline=None,
                                            phases=[Phase.generate], suppress_health_check=list(hypothesis.HealthCheck))(
                    given(prop.examples(narrowed).filter(keep))(probe)))
                status = "ok"
                try:
                    with quiet_target():
                        test()
                except Unsatisfiable:
                    status = "n/a"
                rows.append({"component": c.name, "config": _config_name(cfg), "property": prop.name,
                             "status": status, **tally})
                print(f"{c.name:20} {_config_name(cfg):42} {prop.name:16} {tally['failed']}/{tally['examples']}",
                      file=sys.stderr, flush=True)
    return rows


def matrix_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: one table row per (component, configuration), failing/run per property."""
    props = list(dict.fromkeys(r["property"] for r in rows))
    out = ["| component | configuration | " + " | ".join(props) + " |", "|---|---|" + "---|" * len(props)]
    for key in dict.fromkeys((r["component"], r["config"]) for r in rows):
        cells = {r["property"]: r for r in rows if (r["component"], r["config"]) == key}
        shown = []
        for prop in props:
            r = cells.get(prop)
            shown.append("·" if r is None else "n/a" if r["status"] == "n/a" or not r["examples"]
                         else f"{r['failed']}/{r['examples']}")
        out.append(f"| {key[0]} | {key[1]} | " + " | ".join(shown) + " |")
    return "\n".join(out)


# ---- the campaign: fuzz one target, tallying the configurations it really ran ---------------------

#: component -> axis -> value -> distinct scenarios built (a property builds several loaders per example).
_TALLY: dict[str, dict[str, dict[str, set]]] = {}


def _axes(sc: Any) -> dict[str, Any]:
    workers = sc.num_workers > 0
    return {"in_order": sc.in_order, "workers": "yes" if workers else "no (main process)",
            "persistent_workers": sc.persistent_workers if workers else "n/a (no workers)",
            "warmup": sc.warmup_steps > 0, "micro_batches_per_step": sc.micro_batches_per_step,
            "dp_size": sc.dp_size, "checkpoints": bool(sc.checkpoints) or sc.restore_at_epoch_end}


def _tallied(target: Target) -> Target:
    def count(component: str, sc: Any, refused: Unsupported | None) -> None:
        key = repr(sc)
        axes = _axes(sc) if refused is None else {"refused": str(refused).split(":")[0]}
        for axis, value in axes.items():
            _TALLY.setdefault(component, {}).setdefault(axis, {}).setdefault(str(value), set()).add(key)

    out = []
    for c in target.components:
        if isinstance(c, LoaderComponent):
            def make_loader(sc, c=c):
                loader = c.make_loader(sc)
                count(c.name, sc, loader.reason if isinstance(loader, _Refused) else None)
                return loader

            c = dataclasses.replace(c, make_loader=make_loader)
        out.append(c)
    return dataclasses.replace(target, components=tuple(out))


def _campaign_targets() -> dict[str, Callable[[], Target]]:
    from .targets import resolve

    return {"dynbsz": lambda: resolve("dynbsz"), "veomni": lambda: resolve("veomni"),
            "documented": documented, "fixed": fixed}


def campaign(target_name: str, minutes: float, seed: int, corpus_dir: str | None) -> dict[str, Any]:
    """``fuzz`` on one target (dynbsz, veomni, documented or fixed) with the fuzz profile, and the
    tally of loader configurations its examples covered."""
    from .fuzz import fuzz
    from .report import fuzz_json

    factories = _campaign_targets()
    if target_name not in factories:
        raise ValueError(f"--target {target_name!r}; allowed values: {', '.join(factories)}")
    _TALLY.clear()
    report = fuzz(_tallied(factories[target_name]()), minutes, seed=seed, corpus_dir=corpus_dir, database=None,
                  progress=lambda line: print(line, file=sys.stderr, flush=True))
    coverage = {comp: {axis: {v: len(ids) for v, ids in sorted(values.items())} for axis, values in axes.items()}
                for comp, axes in _TALLY.items()}
    return {"target": target_name, "date": time.strftime("%Y-%m-%d"), "fuzz": fuzz_json(report),
            "scenarios": coverage}


def table(shipped: dict, documented: dict, fixed: dict, dynbsz: dict, findings: dict[tuple[str, str], str]) -> str:
    """The report's markdown table from the JSON of ``check --json`` (VeOmni as shipped) and of three
    campaigns; ``findings`` maps (property, component) to the findings that explain a failure."""
    def rows(doc: dict) -> dict[tuple[str, str], dict]:
        results = doc["fuzz"]["results"] if "fuzz" in doc else doc["results"]
        return {(r["property"], r["component"]): r for r in results}

    def cell(r: dict | None) -> str:
        if r is None:
            return "n/a"
        if r["status"] == "skip":
            return "not promised" if "does not promise" in r["message"] else "n/a"
        flaky = ", timing-dependent" if r.get("flaky") else ""
        return f"{r['status']} ({r['examples']:,}{flaky})"

    cols = [rows(shipped), rows(documented), rows(fixed), rows(dynbsz)]
    keys = [k for k in cols[0] if k[1] != "-"]
    out = ["| property | component | VeOmni as shipped | held to its docs | with fixes V1-V13 | dynbsz | findings |",
           "|---|---|---|---|---|---|---|"]
    for prop, comp in keys:
        out.append(f"| {prop} | {comp} | " + " | ".join(cell(c.get((prop, comp))) for c in cols)
                   + f" | {findings.get((prop, comp), '')} |")
    return "\n".join(out)


# ---- what the documented deviations lose ---------------------------------------------------------

def lognormal_lengths(n: int, median: float, sigma: float, seed: int) -> "Any":
    import numpy as np

    rng = np.random.default_rng(seed)
    return np.maximum(1, np.round(median * np.exp(sigma * rng.standard_normal(n)))).astype(np.int64)


def count_overlong(n: int, median: float, sigma: float, budget: int, seed: int) -> dict[str, Any]:
    """D2 on a lognormal workload: samples and tokens the worker runtime drops at ``budget``,
    counted by driving VeOmni's DynamicBatchingSizeDataset itself over the lengths."""
    import torch
    from torch.utils.data import IterableDataset

    v = _veomni_loader_classes()
    lengths = lognormal_lengths(n, median, sigma, seed)

    class Lengths(IterableDataset):
        def __iter__(self):
            for i, L in enumerate(lengths.tolist()):
                # attention_mask as a one-element tensor holding the length: the default length function sums it
                yield {"id": i, "attention_mask": torch.tensor([L])}

    ds = v.DynamicBatchingSizeDataset(Lengths(), micro_batch_seq_length=budget, ready_for_micro_batch_threshold=200,
                                      dynamic_batching_collate_fn=v.NoopDataCollator(), save_by_idx=False)
    seen = [s["id"] for mb in _quiet_iter(ds) for s in mb]
    kept = set(seen)
    dropped = [i for i in range(n) if i not in kept]
    return {"budget": budget, "samples": n, "median": median, "sigma": sigma, "seed": seed,
            "dropped_samples": len(dropped), "dropped_share": len(dropped) / n,
            "tokens": int(lengths.sum()), "dropped_tokens": int(lengths[dropped].sum()) if dropped else 0,
            "dropped_token_share": (float(lengths[dropped].sum()) / float(lengths.sum())) if dropped else 0.0,
            "longest_dropped": int(lengths[dropped].max()) if dropped else None}


def _quiet_iter(iterable):
    import logging

    log = logging.getLogger("veomni")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield from iterable
    finally:
        log.setLevel(level)


def _veomni_loader_classes():
    from .targets.veomni_loaders import classes

    return classes()


def count_one_token(n: int, median: float, sigma: float, seed: int, budget: int) -> dict[str, Any]:
    """D1 on a lognormal workload, through VeOmni's TextBatchingStrategy (put_item drops them)."""
    import torch

    v = _veomni_loader_classes()
    lengths = lognormal_lengths(n, median, sigma, seed)
    strategy = v.TextBatchingStrategy(token_micro_bsz=budget, buffer_size=200,
                                      get_length_fn=v.get_length_fn_by_count_mode("total"))
    kept = 0
    with contextlib.redirect_stdout(sys.stderr):
        for L in lengths.tolist():
            before = len(strategy.buffer)
            strategy.put_item({"input_ids": torch.zeros(L, dtype=torch.long), "attention_mask": torch.ones(L)})
            kept += len(strategy.buffer) > before
            while strategy.is_ready_for_micro_batch():
                strategy.get_micro_batch(0)
    return {"samples": n, "median": median, "sigma": sigma, "seed": seed, "dropped_samples": n - kept,
            "one_token_samples": int((lengths <= 1).sum())}


def count_main_epochs(n: int, median: float, sigma: float, budget: int, buffer_size: int, seed: int,
                      epochs: int = 3, warmup_ratio: float = 0.0, micro_batches: int = 1) -> dict[str, Any]:
    """V5 on a lognormal workload: VeOmni's real main-runtime loader (num_workers=0, no decode cost),
    ``length`` = VeOmni's train_steps for dynamic batching, run for ``epochs`` trainer epochs the way
    BaseTrainer runs them (set_epoch, iter, train_steps steps); what each epoch misses and repeats."""
    from collections import Counter

    import torch

    v = _veomni_loader_classes()
    lengths = lognormal_lengths(n, median, sigma, seed)

    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return n

        def __getitem__(self, i):
            L = int(lengths[i])
            return [{"id": i, "input_ids": torch.zeros(1, dtype=torch.long).expand(L),
                     "attention_mask": torch.ones(1, dtype=torch.long).expand(L)}]

    per_step = micro_batches * budget
    train_steps = math.ceil(int(int(lengths.sum()) * (1 + warmup_ratio / 2)) / per_step)  # compute_train_steps
    ds = DS()
    sampler = v.StatefulDistributedSampler(ds, num_replicas=1, rank=0, shuffle=True, seed=0)
    inner = v.DistributedDataloader(ds, batch_size=1, sampler=sampler, collate_fn=v.UnpackDataCollator(),
                                    num_workers=0, prefetch_factor=None, pin_memory=False, drop_last=True)
    strategy = v.TextBatchingStrategy(token_micro_bsz=budget, buffer_size=buffer_size,
                                      bsz_warmup_steps=int(train_steps * warmup_ratio),
                                      bsz_warmup_init_mbtoken=200, get_length_fn=v.get_length_fn_by_count_mode("total"))
    dl = v.DynamicBatchSizeDataLoader(inner, strategy, collate_fn=None, num_micro_batch=micro_batches,
                                      length=train_steps, drop_last=True)
    rows = []
    with contextlib.redirect_stdout(sys.stderr):
        for epoch in range(epochs):
            dl.set_epoch(epoch)
            it = iter(dl)
            ids = [s["id"] for _ in range(train_steps) for mb in next(it) for s in mb]
            counts = Counter(ids)
            rows.append({"epoch": epoch, "steps": train_steps, "delivered": len(ids),
                         "distinct": len(counts), "missed": n - len(counts),
                         "repeated": sum(c - 1 for c in counts.values() if c > 1),
                         "fill": float(sum(int(lengths[i]) for i in ids)) / (train_steps * per_step)})
    return {"samples": n, "median": median, "sigma": sigma, "budget": budget, "buffer_size": buffer_size,
            "warmup_ratio": warmup_ratio, "train_steps": train_steps, "epochs": rows}


def count_padding(n: int, dp_size: int) -> dict[str, Any]:
    """D3: samples read twice per epoch by the padded DP shards (exact: total_size - n)."""
    return {"samples": n, "dp_size": dp_size, "duplicated_per_epoch": math.ceil(n / dp_size) * dp_size - n}


def deviations_report(quick: bool = False) -> dict[str, Any]:
    n = 20_000 if quick else 100_000
    started = time.time()
    out: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "samples": n}
    # The README's packer benchmark workload (median 2,048, sigma 1) and the simulator's calibrated
    # long-context workload (median 50K, sigma 1.1).
    out["D2_overlong"] = [count_overlong(n, 2048, 1.0, 32 * 1024, 0), count_overlong(n, 50_000, 1.1, 512 * 1024, 0),
                          count_overlong(n, 2048, 1.0, 512 * 1024, 0), count_overlong(n, 50_000, 1.1, 1024 * 1024, 0)]
    out["D1_one_token"] = [count_one_token(n, 2048, 1.0, 0, 32 * 1024), count_one_token(n, 16, 2.0, 0, 32 * 1024)]
    out["V5_main_epochs"] = [count_main_epochs(n // 5, 2048, 1.0, 32 * 1024, 200, 0),
                             count_main_epochs(n // 5, 2048, 1.0, 32 * 1024, 200, 0, warmup_ratio=0.02),
                             count_main_epochs(n // 5, 2048, 1.0, 32 * 1024, 24, 0)]
    out["D3_padding"] = [count_padding(n, dp) for dp in (3, 7, 64)]
    out["seconds"] = round(time.time() - started, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m properties.veomni_conformance", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("deviations", help="count what VeOmni's documented deviations lose on lognormal workloads")
    d.add_argument("--quick", action="store_true", help="20,000 samples instead of 100,000")
    sub.add_parser("fixes", help="list the proposed fixes")
    c = sub.add_parser("campaign", help="fuzz one target and tally the loader configurations it covered (JSON)")
    c.add_argument("--target", required=True, help="dynbsz, veomni, documented or fixed")
    c.add_argument("--minutes", type=float, required=True)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--corpus", default=None, help="save failures here (default: not saved)")
    a = sub.add_parser("attribute", help="the minimal set of proposed fixes that makes saved failures pass")
    a.add_argument("files", nargs="+")
    lo = sub.add_parser("leave-one-out", help="for each fix, search with every other fix applied (JSON lines)")
    lo.add_argument("fixes", nargs="*", default=list(FIXES))
    lo.add_argument("--corpus", default=None)
    lo.add_argument("--profile", default="ci")
    m = sub.add_parser("matrix", help="failure rate of each loader property per configuration (JSON)")
    m.add_argument("--target", required=True, help="dynbsz, veomni, documented or fixed")
    m.add_argument("--examples", type=int, default=8, help="examples per (configuration, property)")
    m.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.command == "matrix":
        rows = matrix(_campaign_targets()[args.target](), args.examples, args.seed)
        json.dump({"target": args.target, "examples": args.examples, "seed": args.seed, "rows": rows,
                   "table": matrix_table(rows)}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    if args.command == "leave-one-out":
        for fix in args.fixes:
            started = time.time()
            for r in leave_one_out(fix, args.corpus, args.profile):
                print(json.dumps({"fix": fix, "seconds": round(time.time() - started, 1), **r.to_json()}), flush=True)
        return 0
    if args.command == "attribute":
        from . import corpus

        for path in args.files:
            print(json.dumps({"file": path, **attribute(corpus.load(path))}), flush=True)
        return 0
    if args.command == "campaign":
        json.dump(campaign(args.target, args.minutes, args.seed, args.corpus), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    if args.command == "fixes":
        for k, v in FIXES.items():
            print(f"{k:4} {v}")
        return 0
    json.dump(deviations_report(args.quick), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
