"""Hugging Face datasets' findings fixed (docs/hf-datasets-5.2.0-conformance.md): each proposed
upstream fix as a patch on ``IterableDataset`` that acts only on a dataset carrying the fixes.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Iterable

from ..targets import hf_iterable
from ..targets.base import Target
from ..targets.stream import StreamComponent
from .fixset import check_fixes

HF_FIXES: dict[str, str] = {
    "H1": "a DataLoader worker loads its saved state only into its own share of the shards, not first into the "
          "whole dataset's pipeline (whose per-shard lists are longer than the state's)",
    "H2": "the epoch's shard shuffle is seeded by the dataset's shuffle generator and the epoch, not by the epoch "
          "alone",
    "H3": "IterableDataset.state_dict() after load_state_dict() and before iterating returns the loaded state",
}
#: no patch (the fix needs an epoch that torchdata's loader does not have): the fixed target holds a resume
#: whose epoch was broken off early, with two workers or more, to exactly-once instead of batch for batch.
H4_UNFIXED = ("H4 (no fix patch): after a resume, StatefulDataLoader hands the next iterator the saved worker "
              "round-robin position even when set_epoch started a new epoch, so that epoch starts at another worker")
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

    cls = I.IterableDataset
    released_prepare, released_load = cls._prepare_ex_iterable_for_iteration, cls.load_state_dict

    def shuffle_generator(ex_iterable):
        while ex_iterable is not None:
            if isinstance(ex_iterable, I.BufferShuffledExamplesIterable):
                return ex_iterable.generator
            ex_iterable = getattr(ex_iterable, "ex_iterable", None)
        return None

    # datasets 5.2.0 IterableDataset._prepare_ex_iterable_for_iteration (iterable_dataset.py:2958-3033),
    # copied; changes marked H1 and H2 (its log lines are left out).
    def prepare(self, batch_size: int = 1, drop_last_batch: bool = False):
        fixes = _fixes_of(self)
        if not fixes:
            return released_prepare(self, batch_size=batch_size, drop_last_batch=drop_last_batch)
        ex_iterable = self._ex_iterable

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
            ex_iterable = I.RebatchedArrowExamplesIterable(
                ex_iterable, batch_size=batch_size, drop_last_batch=drop_last_batch)
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

    cls._prepare_ex_iterable_for_iteration = prepare
    cls.load_state_dict = load_state_dict


def _torch_worker():
    import torch.utils.data

    return torch.utils.data.get_worker_info()


def hf_component(fixes: Iterable[str] = ALL_HF) -> StreamComponent:
    fixes = frozenset(check_fixes(fixes, HF_FIXES))
    install_hf_patches()

    def make_loader(sc):
        return hf_iterable.HFLoader(sc, fixes=fixes)

    def resume_promise(sc):
        level, reason = hf_iterable.resume_promise(sc)
        if level == "exact" and sc.break_after is not None and sc.num_workers >= 2:
            return "once", H4_UNFIXED
        return level, reason

    return replace(hf_iterable.component(), make_loader=make_loader, resume_promise=resume_promise)


def hf_fixed() -> Target:
    name = "properties.stream_fixes:hf_fixed"
    if not hf_iterable.available():
        return Target(name=name, description="Hugging Face datasets with fixes", unavailable=hf_iterable.MISSING)
    return Target(name=name, components=(hf_component(),),
                  description=f"Hugging Face datasets {hf_iterable.version()} with the report's proposed fixes "
                              + ", ".join(HF_FIXES) + " patched in (properties.stream_fixes)")
