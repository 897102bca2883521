"""The proposed upstream fixes as patches: each is VeOmni's (or torchdata's) own function, copied,
with exactly the change its fix describes, and behaves as the original until its fix id is active."""

from __future__ import annotations

import copy
from typing import Any, Callable

from ..torchdata_h9 import loaded_state

ACTIVE: set[str] = set()


def veomni_modules():
    from ..targets.veomni_loaders import classes

    classes()  # imports VeOmni with its loggers on stderr
    from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler
    from veomni.data import dataset as ds
    from veomni.data import dynamic_batching as db

    return db, ds, StatefulDistributedSampler


def active(fix: str) -> bool:
    return fix in ACTIVE


# V1 + V5: DynamicBatchSizeDataLoader.batch_data_generator, dynamic_batching.py:303-357.
def batch_data_generator(self):
    batch = []
    if active("V5") and self.step == 0:
        self.pass_done = False       # V5: a fresh epoch (a public attribute: the checkpoint holds it)
    # V12: a generator made by load_state_dict() starts where the checkpointed one was suspended:
    # after a yield, that is at the fetch, not at the readiness check (which would cut one sample early).
    fetch_first = active("V12") and self.__dict__.pop("_restored", False)

    while True:
        if self._length and self.step >= self._length and not active("V5"):   # V5: the pass, not length, ends it
            return

        if fetch_first:
            fetch_first = False
        elif self.batching_strategy.is_ready_for_micro_batch():
            micro_batch = self.batching_strategy.get_micro_batch(self.step)
            if self._collate_fn:
                micro_batch = self._collate_fn(micro_batch)
            batch.append(micro_batch)
            if len(batch) == self.num_micro_batch:
                if active("V1"):
                    self.step += 1          # V1: counted before the yield, so a checkpoint holds it
                    yield batch
                else:
                    yield batch
                    self.step += 1
                batch = []

        try:
            if active("V5") and getattr(self, "pass_done", False):
                raise StopIteration   # V5: restored after the pass ended: only the drain is left
            processing_item = next(self._data_iter)
        except Exception as e:
            if isinstance(e, StopIteration):
                if active("V5"):
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
        if active("V3") and "epoch" in state and hasattr(self._dataloader, "set_epoch"):
            self._dataloader.set_epoch(state["epoch"])
        out = original(self, state)
        self._restored = True   # read by V12 (private: state_dict() leaves it out)
        return out

    return load_state_dict


def set_epoch_v2(self, epoch: int) -> None:
    # V2 (+V3's saved epoch): DynamicBatchSizeDataLoader.set_epoch, dynamic_batching.py:402-404.
    if active("V2") and self._resume and epoch != self.__dict__.get("epoch", epoch):
        self._resume = False          # a restored state of another epoch is over: the next iter() starts this one
    if active("V2") or active("V3"):
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
        if active("V13") and fresh:
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
        if active("V13") and self.__dict__.get("_iteration_pending"):
            state.update(epoch=self.epoch, yielded=0)
        return state

    return state_dict


def _wrapper_load_v8(original):
    # V8: _MapStyleSamplerWrapper.load_state_dict, dataset.py:984-1004.
    def load_state_dict(self, state_dict):
        if active("V8") and state_dict.get("epoch", self.epoch) != self.epoch:
            # The loader applies a state lazily, at iter(), after the trainer's set_epoch(e). A state
            # of another epoch is that epoch's finished end (torchdata then starts a fresh epoch):
            # restoring it would put the wrapper back into the old epoch. Keep set_epoch's.
            return
        return original(self, state_dict)

    return load_state_dict


def _wmsd_iter(original):
    # V7, V9, V10: WeightedMultiSourceDataset.__iter__, dataset.py:555-604.
    def __iter__(self):
        if active("V7") and self._just_resumed and self.__dict__.get("_restored_epoch", self._epoch) != self._epoch:
            # V7: a persistent worker's snapshot at an epoch's start is the previous epoch's end (the
            # mixture's state names no epoch): restored into this epoch, it must not continue that one.
            self._just_resumed = False
        if active("V13") and self._just_resumed and self.__dict__.get("_restored_pending"):
            self._just_resumed = False   # V13: the state was saved before this iteration drew anything
        self._iteration_pending = False
        if active("V7"):
            self._iter_epoch = self._epoch
        if active("V9") and self._just_resumed and getattr(self, "_stopped", False):
            self._just_resumed = False
            return          # V9: the restored state had stopped (first_exhausted): the epoch is over
        if active("V10") and self._just_resumed and self._global_sample_idx == 0:
            self._just_resumed = False   # V10: nothing was read before the checkpoint: seed the epoch's stream
        if active("V9") and not self._just_resumed:
            # V9: a fresh epoch of the mixture is a fresh epoch of each source: a restored stop (above)
            # leaves the sources' own resume flags set, which the next epoch must not inherit.
            for source in self._datasets:
                if getattr(source, "_just_resumed", False):
                    source._just_resumed = False
                if callable(getattr(source, "set_epoch", None)):
                    source.set_epoch(self._epoch)
        if active("V9"):
            self._stopped = False
        inner = original(self)
        for item in inner:
            yield item
        if active("V9"):
            self._stopped = True

    return __iter__


def _wmsd_state(original_state, original_load):
    def state_dict(self):
        state = original_state(self)
        if active("V13"):
            pending = bool(self.__dict__.get("_iteration_pending"))
            if active("V7") and self._just_resumed and self.__dict__.get("_restored_epoch", self._epoch) != self._epoch:
                # V13 with V7: a restored state of another epoch, which __iter__ will discard, is this epoch's
                # start until then. Read before that, it was the loaded state relabelled with this epoch, and a
                # second restore continued it (the multi-source mixture lost a worker's share of the epoch).
                pending = True
            state["runtime"]["pending"] = pending
        if active("V7"):
            state["runtime"]["epoch"] = self.__dict__.get("_iter_epoch", self._epoch)
        if active("V9"):
            state["runtime"]["stopped"] = bool(getattr(self, "_stopped", False))
        return state

    def load_state_dict(self, state, *a, **kw):
        original_load(self, state, *a, **kw)
        if active("V13"):
            self._restored_pending = bool(state["runtime"].get("pending", False))
        if active("V7"):
            self._restored_epoch = state["runtime"].get("epoch")
        if active("V9"):
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
        first_forced_sample = force is True and (not samples if active("V11") else cum_seq_len == 0)
        if self.cur_idx not in self.del_idxs and (first_forced_sample or (fits_effective_budget and fits_physical_cap)):
            cum_seq_len += seq_len
            cum_physical_len += physical_seq_len
            samples.append(self._buffer[self.cur_idx])
            self.del_idxs.append(self.cur_idx)
        self.cur_idx += 1
    assert len(samples) > 0
    return samples


def state_dict_v15(self):
    # V15: torchdata's H9 reached through VeOmni's DistributedDataloader (properties.torchdata_h9); set on the
    # subclass only while active, so super() is torchdata's StatefulDataLoader.state_dict as released.
    state = loaded_state(self)
    return state if state is not None else super(_distributed_dataloader(), self).state_dict()


def patch_list() -> list[tuple[Any, str, Any]]:
    db, ds, sampler = veomni_modules()
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


def _distributed_dataloader():
    veomni_modules()
    from veomni.data.data_loader import DistributedDataloader

    return DistributedDataloader


CONDITIONAL: dict[str, Callable[[], list[tuple[Any, str, Any]]]] = {
    "V4": lambda: [(veomni_modules()[2], "__iter__", sampler_iter)],
    # VeOmni's subclass, not torchdata's class: other StatefulDataLoaders in the process stay as released
    "V15": lambda: [(_distributed_dataloader(), "state_dict", state_dict_v15)],
    "V7": lambda: [(veomni_modules()[1]._MapStyleSamplerWrapper, "epoch", _shared_epoch("epoch")),
                   (veomni_modules()[1]._MapStyleSamplerWrapper, "_iter",
                    _wrapper_iter_v7(veomni_modules()[1]._MapStyleSamplerWrapper._iter)),
                   (veomni_modules()[1]._MapStyleSamplerWrapper, "state_dict",
                    _wrapper_state_v7(veomni_modules()[1]._MapStyleSamplerWrapper.__dict__["state_dict"])),
                   (veomni_modules()[1].WeightedMultiSourceDataset, "_epoch", _shared_epoch("_epoch"))],
}
