"""Hugging Face datasets' findings fixed (docs/hf-datasets-5.2.0-conformance.md): each proposed
upstream fix as a patch on ``IterableDataset`` that acts only on a dataset carrying the fixes (H1-H3,
H5-H8; H6 and H7 through subclasses of its examples iterables that only such a dataset builds), and
H4's and H9's, fixes to torchdata, in a ``StatefulDataLoader`` subclass that only the fixed adapter uses.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Iterable

from ..targets import hf_iterable
from ..targets.base import Target
from ..targets.stream import StreamComponent
from ..torchdata_h9 import loaded_state
from .fixset import check_fixes, fixed_target

HF_FIXES: dict[str, str] = {
    "H1": "a DataLoader worker loads its saved state only into its own share of the shards, not first into the "
          "whole dataset's pipeline (whose per-shard lists are longer than the state's)",
    "H2": "the epoch's shard shuffle is seeded by the dataset's shuffle generator and the epoch, not by the epoch "
          "alone",
    "H3": "IterableDataset.state_dict() after load_state_dict() and before iterating returns the loaded state",
    "H4": "(torchdata, not datasets) StatefulDataLoader.__iter__ drops a loaded iterator state whose workers' dataset "
          "states are of another epoch than the dataset now has, so a new epoch starts its worker round-robin afresh",
    "H5": "in a DataLoader worker, IterableDataset.state_dict() before the worker's first sample is the worker's own "
          "pipeline's initial state (its shards, its shifted RNGs), not the main process's",
    "H6": "shuffle()'s shard interleaving keeps an interleave_datasets mixture whole instead of splitting it into "
          "per-shard copies read in turn (a weighted mixture's copies each draw the same sources from a copy of one "
          "generator)",
    "H7": "a resumed shuffle buffer does not re-read the input of the table it was delivering: the loader-level "
          "rebatching over a shuffle buffer saves the buffer's state as of the table it received and skips nothing "
          "on resume (that table's undelivered rows go with the buffer, as documented)",
    "H8": "(with H5's state) each new iteration of a DataLoader worker's dataset reports its own start as its state "
          "until its first sample, not where the previous iteration (or an abandoned iterator's tasks) left off",
    "H9": "(torchdata, not datasets) StatefulDataLoader.state_dict() after load_state_dict() and before iterating "
          "returns the loaded state instead of building the iterator from it (whose workers start before the "
          "trainer's set_epoch, and which the next iter() reuses for whatever epoch was set since)",
}
ALL_HF = tuple(HF_FIXES)

#
# The pipeline is built by IterableDataset's own methods (shuffle, interleave_datasets,
# split_dataset_by_node), which return plain IterableDatasets, so these patches are installed on
# the class once and act only on a dataset that carries ``_stream_fixes`` (set by the adapter on the
# dataset the loader iterates; it travels to the workers with the dataset).


def _fixes_of(ds) -> frozenset:
    return getattr(ds, "_stream_fixes", frozenset())


@functools.lru_cache(maxsize=1)
def install_hf_patches() -> None:
    import datasets.iterable_dataset as I
    import numpy as np
    import pyarrow as pa

    cls = I.IterableDataset
    released_prepare, released_load = cls._prepare_ex_iterable_for_iteration, cls.load_state_dict
    released_state_dict, released_iter = cls.state_dict, cls.__iter__

    def shuffle_generator(ex_iterable):
        buffer = _in_pipeline(ex_iterable, I.BufferShuffledExamplesIterable)
        return None if buffer is None else buffer.generator

    # datasets 5.2.0 InterleavedShardsExamplesIterable._interleave_shards (iterable_dataset.py:1952-1958), copied;
    # the change is marked H6. Installed (by keep_mixtures_whole) only in the pipeline of a dataset that names H6.
    class MixtureKeepingInterleavedShards(I.InterleavedShardsExamplesIterable):
        def _interleave_shards(self):
            num_shards = min(self.ex_iterable.num_shards, self.max_input_shards)
            # H6: a mixture split by shards became one copy of the mixture per shard, read in turn: a random
            # mixture's copies each carry a copy of one generator, so all draw the same sources and each stops
            # at its own first exhausted source (20 samples of one source, none of the other, in the example);
            # an alternating mixture's copies give runs as long as the copies are many. A mixture is read whole.
            if _has_mixture(self.ex_iterable):
                num_shards = min(num_shards, 1)
            if num_shards == 0:
                return self.ex_iterable
            return I.CyclingMultiSourcesExamplesIterable(
                [self.ex_iterable.shard_data_sources(num_shards, index) for index in range(num_shards)],
                stopping_strategy="all_exhausted_without_replacement",
            )

        # the released methods build the released class; these keep the fix through the shuffles and shardings
        def shuffle_data_sources(self, generator):
            return MixtureKeepingInterleavedShards(self.ex_iterable.shuffle_data_sources(generator),
                                                   self.max_input_shards)

        def shard_data_sources(self, num_shards: int, index: int, contiguous=True):
            return MixtureKeepingInterleavedShards(
                self.ex_iterable.shard_data_sources(num_shards, index, contiguous=contiguous), self.max_input_shards)

    def keep_mixtures_whole(ex_iterable):
        # the pipeline with each InterleavedShardsExamplesIterable as the H6 class (copied nodes, as
        # shift_ex_examples_rngs copies them: the dataset's own pipeline is left as built)
        if type(ex_iterable) is I.InterleavedShardsExamplesIterable:
            return MixtureKeepingInterleavedShards(ex_iterable.ex_iterable, ex_iterable.max_input_shards)
        ex_iterable = I.copy(ex_iterable)
        if hasattr(ex_iterable, "ex_iterable"):
            ex_iterable.ex_iterable = keep_mixtures_whole(ex_iterable.ex_iterable)
        return ex_iterable

    # datasets 5.2.0 RebatchedArrowExamplesIterable._iter_arrow (iterable_dataset.py:529-629), copied; the changes
    # are marked H7. Used (by prepare) only as the loader-level rebatching of a pipeline with a shuffle buffer.
    class RebatchedOverShuffleBuffer(I.RebatchedArrowExamplesIterable):
        def _iter_arrow(self):
            if self._state_dict and self._state_dict["previous_state"]:
                self.ex_iterable.load_state_dict(self._state_dict["previous_state"])
            if self.ex_iterable.iter_arrow:
                iterator = self.ex_iterable.iter_arrow()
            elif self.force_convert_to_arrow:
                iterator = I._convert_to_arrow(self.ex_iterable, batch_size=1)
            else:
                raise RuntimeError("_iter_arrow is not available in RebatchedArrowExamplesIterable, use an examples "
                                   "iterable that implements _iter_arrow() or pass force_convert_to_arrow=True")
            if self.batch_size is None or self.batch_size <= 0:
                if self._state_dict and self._state_dict["batch_idx"] > 0:
                    return
                all_pa_table = pa.concat_tables([pa_table for _, pa_table in iterator])
                if self._state_dict:
                    self._state_dict["batch_idx"] = 1
                yield "all", all_pa_table
                return
            keys_buffer = []
            chunks_buffer = []
            chunks_buffer_size = 0
            num_chunks_to_skip = self._state_dict["num_chunks_since_previous_state"] if self._state_dict else 0
            chunk_length_to_crop = self._state_dict["cropped_chunk_length"] if self._state_dict else 0
            num_chunks_since_checkpoint = 0
            if self._state_dict:
                previous_state = self.ex_iterable.state_dict()
                self._state_dict["previous_state"] = previous_state
            for key, pa_table in iterator:
                if self._state_dict:
                    # H7: was the state from before this table's input was read (updated after the table): a resume
                    # re-read that input into an empty buffer, which shuffles it into another table, and skipped
                    # as many rows of it as had been delivered: rows delivered before came again, others were
                    # skipped. The buffer's state as of this table; its undelivered rows go with the buffer.
                    previous_state = self.ex_iterable.state_dict()
                for num_chunks_since_previous_state, chunk in enumerate(pa_table.to_reader(max_chunksize=self.batch_size)):
                    num_chunks_since_checkpoint += 1
                    if num_chunks_to_skip > 1:
                        num_chunks_to_skip -= 1
                        continue
                    elif num_chunks_to_skip == 1 and chunk_length_to_crop == 0:
                        num_chunks_to_skip -= 1
                        continue
                    elif num_chunks_to_skip == 1 and chunk_length_to_crop > 0:
                        chunk = chunk.slice(chunk_length_to_crop, len(chunk) - chunk_length_to_crop)
                        num_chunks_to_skip = 0
                        chunk_length_to_crop = 0
                    if len(chunk) == 0:
                        continue

                    if chunks_buffer_size + len(chunk) < self.batch_size:
                        keys_buffer.append(key)
                        chunks_buffer.append(chunk)
                        chunks_buffer_size += len(chunk)
                        continue
                    elif chunks_buffer_size + len(chunk) == self.batch_size:
                        keys_buffer.append(key)
                        chunks_buffer.append(chunk)
                        new_key = "_".join(str(_key) for _key in keys_buffer)
                        if self._state_dict:
                            self._state_dict["batch_idx"] += 1
                            self._state_dict["previous_state"] = previous_state   # H7: was set after the yield
                            self._state_dict["num_chunks_since_previous_state"] = 0   # H7: nothing to skip
                            self._state_dict["cropped_chunk_length"] = 0
                        yield new_key, pa.Table.from_batches(chunks_buffer)
                        keys_buffer = []
                        chunks_buffer = []
                        chunks_buffer_size = 0
                        if self._state_dict:
                            num_chunks_since_checkpoint = num_chunks_since_previous_state + 1
                    else:
                        cropped_chunk_length = self.batch_size - chunks_buffer_size
                        keys_buffer.append(f"{key}[:{cropped_chunk_length}]")
                        chunks_buffer.append(chunk.slice(0, cropped_chunk_length))
                        new_key = "_".join(str(_key) for _key in keys_buffer)
                        if self._state_dict:
                            self._state_dict["batch_idx"] += 1
                            self._state_dict["previous_state"] = previous_state   # H7: was set after the yield
                            self._state_dict["num_chunks_since_previous_state"] = 0   # H7: the rest is lost
                            self._state_dict["cropped_chunk_length"] = 0
                        yield new_key, pa.Table.from_batches(chunks_buffer)
                        keys_buffer = [f"{key}[{cropped_chunk_length}:]"]
                        chunks_buffer = [chunk.slice(cropped_chunk_length, len(chunk) - cropped_chunk_length)]
                        chunks_buffer_size = len(chunk) - cropped_chunk_length
                        if self._state_dict:
                            num_chunks_since_checkpoint = num_chunks_since_previous_state + 1
            if not self.drop_last_batch and chunks_buffer:
                new_key = "_".join(str(_key) for _key in keys_buffer)
                if self._state_dict:
                    self._state_dict["previous_state"] = previous_state
                    self._state_dict["batch_idx"] += 1
                    self._state_dict["num_chunks_since_previous_state"] = 0
                    self._state_dict["cropped_chunk_length"] = 0
                yield new_key, pa.Table.from_batches(chunks_buffer)

            if self.drop_last_batch and self._state_dict:
                self._state_dict["previous_state"] = self.ex_iterable.state_dict()
                self._state_dict["num_chunks_since_previous_state"] = 0
                self._state_dict["cropped_chunk_length"] = 0

        # the released methods build the released class; these keep the fix through the shardings
        def shuffle_data_sources(self, generator):
            return RebatchedOverShuffleBuffer(self.ex_iterable.shuffle_data_sources(generator), self.batch_size,
                                              self.drop_last_batch, self.force_convert_to_arrow)

        def shard_data_sources(self, num_shards: int, index: int, contiguous=True):
            return RebatchedOverShuffleBuffer(
                self.ex_iterable.shard_data_sources(num_shards, index, contiguous=contiguous), self.batch_size,
                self.drop_last_batch, self.force_convert_to_arrow)

    # datasets 5.2.0 IterableDataset._prepare_ex_iterable_for_iteration (iterable_dataset.py:2958-3033),
    # copied; changes marked H1, H2, H5 and H6 (its log lines are left out).
    def prepare(self, batch_size: int = 1, drop_last_batch: bool = False):
        fixes = _fixes_of(self)
        if not fixes:
            return released_prepare(self, batch_size=batch_size, drop_last_batch=drop_last_batch)
        ex_iterable = self._ex_iterable
        if "H6" in fixes:
            ex_iterable = keep_mixtures_whole(ex_iterable)
        if fixes & {"H5", "H8"} and _torch_worker() is not None:
            # H5, H8: from here on this iteration's own pipeline records the worker's state
            self._worker_iteration_started = self._worker_iterated = True

        if self.epoch:
            generator = np.random.default_rng(self.epoch)
            shuffled = shuffle_generator(ex_iterable) if "H2" in fixes else None
            if shuffled is not None:
                # H2: was default_rng(epoch), one permutation per epoch for every dataset and seed (for 4 shards
                # epoch 1's is the identity, so epoch 1 replayed epoch 0); seeded from the dataset's own generator.
                generator = np.random.default_rng([int(I.deepcopy(shuffled).integers(0, 1 << 63)), int(self.epoch)])
            try:
                ex_iterable = ex_iterable.shuffle_data_sources(generator)
            except I.DataSourcesShufflingDisallowed:
                pass
            ex_iterable = I.shift_ex_examples_rngs(ex_iterable, self.epoch)

        if self._distributed:
            rank = self._distributed.rank
            world_size = self._distributed.world_size
            strategy = self._distributed.strategy
            if strategy == "shards" and ex_iterable.num_shards < world_size:
                raise ValueError(
                    f"Cannot iterate with strategy='shards': the dataset now has num_shards={ex_iterable.num_shards}, "
                    f"which is lower than world_size={world_size}, so some nodes would not be assigned any shard.")
            if strategy == "shards" or (strategy == "auto" and ex_iterable.num_shards % world_size == 0):
                ex_iterable = ex_iterable.shard_data_sources(num_shards=world_size, index=rank, contiguous=False)
            else:
                ex_iterable = I.StepExamplesIterable(ex_iterable, step=world_size, offset=rank)

        if ex_iterable.iter_arrow:
            # H7: over a shuffle buffer the rebatching saves the state the buffer had when it delivered the table
            rebatched = (RebatchedOverShuffleBuffer if "H7" in fixes and _has_shuffle_buffer(ex_iterable)
                         else I.RebatchedArrowExamplesIterable)
            ex_iterable = rebatched(ex_iterable, batch_size=batch_size, drop_last_batch=drop_last_batch)
        elif self._formatting and self._formatting.is_table:
            ex_iterable = I.RebatchedArrowExamplesIterable(
                ex_iterable, batch_size=batch_size, drop_last_batch=drop_last_batch, force_convert_to_arrow=True)

        if self._formatting or (self.features and ex_iterable.features != self.features):
            ex_iterable = I.FormattedExamplesIterable(
                ex_iterable, formatting=self._formatting, features=self.features,
                token_per_repo_id=self._token_per_repo_id)

        self._state_dict = {
            "examples_iterable": ex_iterable._init_state_dict(),
            "epoch": self.epoch,
        }
        # H1: in a DataLoader worker the saved state is that worker's share of the shards; _iter_pytorch
        # loads it after splitting the shards by worker. Loading it here too, into the whole dataset's
        # pipeline, raised IndexError wherever the state holds per-shard lists.
        in_worker = "H1" in fixes and _torch_worker() is not None
        if self._starting_state_dict and self.epoch == self._starting_state_dict["epoch"] and not in_worker:
            ex_iterable.load_state_dict(self._starting_state_dict["examples_iterable"])
            self._state_dict["examples_iterable"] = ex_iterable._state_dict
        return ex_iterable

    def load_state_dict(self, state_dict: dict) -> None:
        released_load(self, state_dict)
        if "H3" in _fixes_of(self):
            # H3: the state is applied when iteration starts; until then, it is still the state to save
            self._state_dict = I._fast_copy(state_dict)

    def worker_initial_state(self) -> dict | None:
        # what IterableDataset._iter_pytorch (2889-2928) records in this worker before its first sample: the
        # pipeline split by worker and its RNGs shifted by the worker id; None for a worker without shards
        worker = _torch_worker()
        ds = I.copy(self)
        ds._starting_state_dict = None
        ex_iterable = ds._prepare_ex_iterable_for_iteration()
        if not ex_iterable.split_shard_indices_by_worker(num_shards=worker.num_workers, index=worker.id,
                                                         contiguous=False):
            return None
        ex_iterable = ex_iterable.shard_data_sources(num_shards=worker.num_workers, index=worker.id, contiguous=False)
        ex_iterable = I.shift_ex_examples_rngs(ex_iterable=ex_iterable, value=worker.id)
        return {"examples_iterable": ex_iterable._init_state_dict(), "epoch": self.epoch}

    # datasets 5.2.0 IterableDataset.state_dict (iterable_dataset.py:2747-2798), copied; the change is marked H5 and H8.
    def state_dict(self) -> dict:
        fixes = _fixes_of(self)
        starting = self._starting_state_dict
        if (fixes & {"H5", "H8"} and _torch_worker() is not None
                and not getattr(self, "_worker_iteration_started", False)
                and not (starting and starting["epoch"] == self.epoch)):
            first = not getattr(self, "_worker_iterated", False)
            # H5: before this worker's first sample its state was the main process's pipeline's (built by
            # __init__, 2712), whose mixture generator lacks the worker's shift (shift_ex_examples_rngs,
            # 2920); restored in the worker it replaced the shifted generator and re-drew the interleaving.
            # H8: before a persistent worker's next iteration (torchdata's _ResumeIteration asks then) it was
            # where the last iteration left off, which may be the new epoch already: an abandoned iterator's
            # prefetch tasks run after set_epoch moved the shared epoch on, and their samples were discarded.
            if ("H5" if first else "H8") in fixes:
                own = worker_initial_state(self)
                if own is not None:
                    return I._fast_copy(own)
        return released_state_dict(self)

    # datasets 5.2.0 IterableDataset.__iter__ (iterable_dataset.py:3035-3054), a generator function: the change
    # (marked H8) runs when iter() is called, before the generator, as torchdata's worker calls it
    def __iter__(self):
        if "H8" in _fixes_of(self):
            self._worker_iteration_started = False   # H8: a new iteration, not started yet
        return released_iter(self)

    cls._prepare_ex_iterable_for_iteration = prepare
    cls.load_state_dict = load_state_dict
    cls.state_dict = state_dict
    cls.__iter__ = __iter__


def _torch_worker():
    import torch.utils.data

    return torch.utils.data.get_worker_info()


def _in_pipeline(ex_iterable, cls):
    """The first stage of ``cls`` down the pipeline (each stage wraps the next as ``ex_iterable``), or None."""
    while ex_iterable is not None:
        if isinstance(ex_iterable, cls):
            return ex_iterable
        ex_iterable = getattr(ex_iterable, "ex_iterable", None)
    return None


def _has_mixture(ex_iterable) -> bool:
    """Whether the pipeline reads an interleave_datasets mixture (weighted or alternating)."""
    import datasets.iterable_dataset as I

    return _in_pipeline(ex_iterable, I.CyclingMultiSourcesExamplesIterable) is not None


def _has_shuffle_buffer(ex_iterable) -> bool:
    """Whether the pipeline holds a shuffle buffer (whose state leaves out what the buffer holds)."""
    import datasets.iterable_dataset as I

    return _in_pipeline(ex_iterable, I.BufferShuffledExamplesIterable) is not None


def _dataset_epochs(iter_state: dict) -> set:
    """The epochs datasets tagged the workers' dataset states with, in a StatefulDataLoader state."""
    workers = iter_state.get("_snapshot", {}).get("_worker_snapshots", {})
    return {w["dataset_state"]["epoch"] for w in workers.values()
            if isinstance(w, dict) and isinstance(w.get("dataset_state"), dict) and "epoch" in w["dataset_state"]}


@functools.lru_cache(maxsize=1)
def epoch_aware_loader_class():
    """torchdata's StatefulDataLoader with H4's and H9's fixes (a subclass: the released class stays as
    released), each acting when the dataset names it."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    class EpochAwareStatefulDataLoader(StatefulDataLoader):
        # torchdata 0.11.0 StatefulDataLoader.__iter__ (stateful_dataloader.py:391-413), copied; the changes are
        # marked H4. The root cause is torchdata's: its state has no epoch, so a loaded state is always
        # resumed.
        def __iter__(self):
            fixes = _fixes_of(self.dataset)
            epoch = getattr(self.dataset, "epoch", None)
            # H4: a state saved in an epoch the trainer broke off early (its iterator not finished) was handed
            # to the next epoch's iterator, which restored _last_yielded_worker_id and started that epoch at
            # another worker (1089-1091); datasets discards its own epoch-tagged state (3029), the loader did
            # not. A state of another epoch than the dataset's is dropped, as the dataset drops its own.
            if "H4" in fixes and self.next_iter_state is not None and epoch is not None:
                saved = _dataset_epochs(self.next_iter_state)
                if saved and int(epoch) not in saved:
                    self.next_iter_state = None
            if self._initial_iter_for_state_dict:
                self._initial_iter_for_state_dict = False
                assert self._iterator is not None
            elif self.persistent_workers and self.num_workers > 0:
                if self._iterator is None:
                    self._iterator = self._get_iterator()
                else:
                    self._iterator._reset(self)
            else:
                self._iterator = self._get_iterator()
            if self._iterator._finished:
                if self.persistent_workers:
                    self._iterator._reset(self)
                else:
                    self._iterator = self._get_iterator()

            return self._iterator

        def state_dict(self):
            # H9 (properties.torchdata_h9): between load_state_dict() and the next iter() the state is the loaded
            # one, and no iterator is built.
            state = loaded_state(self) if "H9" in _fixes_of(self.dataset) else None
            return state if state is not None else super().state_dict()

    return EpochAwareStatefulDataLoader


def hf_component(fixes: Iterable[str] = ALL_HF) -> StreamComponent:
    fixes = frozenset(check_fixes(fixes, HF_FIXES))
    install_hf_patches()

    loader_class = epoch_aware_loader_class() if fixes & {"H4", "H9"} else None

    def make_loader(sc):
        return hf_iterable.HFLoader(sc, fixes=fixes, loader_class=loader_class)

    return replace(hf_iterable.component(), make_loader=make_loader)


def hf_fixed() -> Target:
    return fixed_target("hf_fixed", hf_iterable, "Hugging Face datasets",
                        lambda: f"Hugging Face datasets {hf_iterable.version()}", HF_FIXES, hf_component)
