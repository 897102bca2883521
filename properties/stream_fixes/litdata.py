"""litdata 0.2.76's findings fixed (docs/litdata-0.2.76-conformance.md): each proposed upstream fix
as a subclass of litdata's own class whose overriding method is litdata's, copied, with only the
change its fix describes (marked with the fix's id); built with ``fixes=()`` it behaves as released.
"""

from __future__ import annotations

import functools
import hashlib
import pickle
import weakref
from copy import deepcopy
from dataclasses import replace
from types import SimpleNamespace
from typing import Iterable

from ..targets import litdata_target
from ..targets.base import Target
from ..targets.stream import StreamComponent
from .fixset import check_fixes, fixed_target

LITDATA_FIXES: dict[str, str] = {
    "L1": "only the first iter() after load_state_dict resumes, and a state records whether its epoch was still "
          "open (a loop that broke early closed it), so a restored loader resumes only an open epoch",
    "L2": "a cycling ParallelStreamingDataset's epoch (resumed, or continued across epochs) routes its first batch "
          "to the worker after the last one that delivered, and its per-worker counters start at that same worker "
          "(restore is kept during the iteration, and load_state_dict starts a fresh cycle of worker indices)",
    "L4": "a CombinedStreamingDataset (or non-cycling ParallelStreamingDataset) worker starts from the restored "
          "counts and positions once: a persistent worker's later epochs start fresh",
    "L5": "CombinedStreamingDataset.__len__ measures with the loader's batch size and workers instead of setting "
          "batch size 1 and one worker on its sources",
    "L6": "StreamingDataset.load_state_dict takes the state's epoch, so a state saved again before the first batch "
          "after a resume names the restored epoch, not the constructor's",
    "L7": "a CombinedStreamingDataset (or ParallelStreamingDataset) worker resumes each source from the count it "
          "delivered itself, not from the sum over workers split as if every worker had delivered whole batches of "
          "that source in turn",
    "L8": "a StreamingDataset worker starts each epoch at the loader's epoch (set_epoch writes it to shared memory) "
          "instead of the count its own StopIteration kept, which a persistent worker's broken-off epoch left behind",
    "L9": "StreamingDataLoader files each batch's per-worker counts under the worker that produced it (torch names "
          "it when the batch arrives) instead of a round-robin guess, which is wrong once a worker ran out first",
    "L10": "a cycling ParallelStreamingDataset takes each worker's share of a source as the chunk intervals it reads, "
           "not an even split over workers: its resumed counter uses the length that worker cycles over, and a "
           "restored loader resumes only if a worker is inside its part of the epoch (each worker's own count and "
           "cycles, not per-source sums that drop the workers a cycle behind)",
    "L11": "a cycling ParallelStreamingDataset in a persistent worker starts each epoch where the loader's counts say "
           "it left off (the loader shares the state it hands the dataset every epoch, which reaches workers only when "
           "they fork) instead of starting its sources over: it continues its own iterator where that is where the "
           "loader's counts are, and otherwise (batches it prefetched were dropped at a break) resumes the shared state",
    "L13": "a state saved again after load_state_dict and before the first batch names the loaded state's last "
           "worker, not the one after it that load_state_dict keeps for routing the resume's first batch (a checkpoint, "
           "and the state a cycling ParallelStreamingDataset's loader hands itself at the next epoch)",
    "L14": "a persistent loader iterator rebuilds its first-batch routing at every epoch (torch's _reset), as a new "
           "iterator builds it, so a cycling dataset's next epoch starts after the last worker that delivered",
    "L15": "a cycling ParallelStreamingDataset's worker resumes each source in the epoch of its own cycle, not the one "
           "epoch the state holds for every worker (the cycle of the last batch's worker)",
    "L16": "a CombinedStreamingDataset's worker draws its sources with a random generator seeded with its rank too, "
           "as ParallelStreamingDataset seeds its own, instead of the same seed (and the same draws) in every worker",
    "L17": "a resumed unweighted CombinedStreamingDataset replays its draws of sources as the run made them: a draw of "
           "a source whose replayed count has reached its restored count found it exhausted, so the replay drops it "
           "and scales the weights left as __next__ does (and draws no more once one source is left), instead of "
           "sum(counts) draws over every source with the first weights",
    "L18": "StreamingDataLoader.__len__ over an unweighted, stratified CombinedStreamingDataset counts the batches "
           "each worker makes of its own share of every source (torch batches per worker, so each worker ends on "
           "its own partial batch), instead of ceil(total samples / batch_size), which is short by up to one batch "
           "per worker and makes a trainer that ends its epoch after len() batches (Lightning) skip samples",
}
ALL_LITDATA = tuple(LITDATA_FIXES)


def _register(cls: type) -> type:
    # Built lazily (the extra may be absent); registered here under its own name so that a worker
    # started with 'spawn' can unpickle an instance.
    cls.__module__ = __name__
    cls.__qualname__ = cls.__name__
    globals()[cls.__name__] = cls
    return cls


@functools.lru_cache(maxsize=1)
def litdata_classes() -> SimpleNamespace:
    """litdata's classes with the fixes as subclasses; each instance is told which fixes are on."""
    v = litdata_target.lib()
    import litdata.streaming.combined as D_combined
    import litdata.streaming.dataloader as D
    import litdata.streaming.dataset as D_dataset
    import litdata.streaming.parallel as D_parallel
    import torch
    from litdata.streaming.combined import BatchingMethod, _CombinedDatasetIterator
    from litdata.utilities.env import _WorkerEnv
    from torch.utils.data import DataLoader

    StreamingDataLoader = v.StreamingDataLoader

    class FixedStreamingDataLoader(StreamingDataLoader):
        def __init__(self, *args, fixes: Iterable[str] = ALL_LITDATA, **kwargs):
            super().__init__(*args, **kwargs)
            self._fixes = frozenset(fixes)
            self._pending_resume = False   # L1: load_state_dict ran and no iter() has been made since
            self._live = False             # L1: an iterator of this epoch is started and not ended or closed
            self._unstarted = None         # L1: a weak reference to the resumed iterator until it starts
            self._received_from = 0        # L9: the worker whose batch arrived last
            self._loaded_latest = None     # L13: the loaded state's last worker, until the first batch after the load
            self._epoch_base = {}          # L10: each worker's running counts when this epoch started (cycling)

        def __len__(self):
            length = super().__len__()   # as released: also records the samples torch compares its warning with
            ds = self.dataset
            if ("L18" not in self._fixes or not isinstance(ds, D_combined.CombinedStreamingDataset)
                    or not ds._iterate_over_all or ds._batching_method != "stratified"
                    or not isinstance(self.batch_size, int)):
                return length
            # L18: was ceil(sum of the sources' samples / batch_size) (dataloader.py:925-931). An iterable dataset
            # is batched inside each worker, so a worker's last batch is partial whenever its own share is not a
            # multiple of batch_size: the loader yields one batch per worker per partial share. Each worker's share
            # of a source is the intervals the source's shuffler gives it for this rank (what its __iter__ reads).
            workers = max(self.num_workers, 1)
            per_worker = [0] * workers
            for source in ds._datasets:
                source.get_len(workers, self.batch_size)   # builds the shuffler with the loader's split
                _, intervals = source.shuffler.get_chunks_and_intervals_per_workers(
                    source.distributed_env, workers, self.batch_size, source.current_epoch)
                first = source.distributed_env.global_rank * workers
                for w in range(workers):
                    per_worker[w] += sum(iv[2] - iv[1] for iv in intervals[first + w])
            if self.drop_last:
                return sum(n // self.batch_size for n in per_worker)
            return sum(-(-n // self.batch_size) for n in per_worker)

        def __iter__(self):
            resuming, self._pending_resume = self._pending_resume, False
            if "L1" in self._fixes and not resuming:
                # L1: restore is honoured by the first iter() after load_state_dict only; any later iter()
                # starts a new epoch, as it does on a loader that was never restored.
                self.restore = False
            batches = self._tracked(self._iter_batches())
            # L1: a resumed iterator not started yet holds the epoch open while the trainer keeps it
            self._unstarted = weakref.ref(batches) if self.restore else None
            return batches

        def _tracked(self, batches):
            self._unstarted = None
            self._live = True
            try:
                yield from batches
            finally:
                self._live = False

        def _epoch_open(self) -> bool:
            unstarted = self._unstarted is not None and self._unstarted() is not None
            return self._live or (self.restore and (self._pending_resume or unstarted))

        def state_dict(self):
            state = super().state_dict()
            if "L1" in self._fixes:
                state["epoch_open"] = self._epoch_open()
            if "L13" in self._fixes and self._loaded_latest is not None:
                # L13: load_state_dict keeps `latest_worker_idx + 1` in _latest_worker_idx (dataloader.py:1033-1037),
                # the worker a resume starts at, and state_dict saves that as the last worker that delivered: a
                # state saved again before the first batch put the next restore one worker further on.
                state["latest_worker_idx"] = self._loaded_latest
            if "L10" in self._fixes:
                state["epoch_base"] = dict(self._epoch_base)
            return state

        def load_state_dict(self, obj):
            self._litdata_load(obj)
            if "L10" in self._fixes and isinstance(self.dataset, D.ParallelStreamingDataset) \
                    and self.dataset.is_cycling() and not self.dataset.is_infinite():
                # L10: litdata resumes a cycling epoch when `0 < (cycles * length + samples) % len(dataset)` for a
                # source (dataloader.py:1080-1087) with sums over workers that keep only the workers in the highest
                # cycle (ParallelStreamingDataset.get_num_samples_yielded, parallel.py:285-292): with uneven shares
                # the workers cycle at different times, and an epoch that had delivered everything read as open.
                # Each worker's count in this epoch is what its iterator resumes from.
                self._epoch_base = dict(obj.get("epoch_base", {}))
                self.restore = self.dataset._epoch_under_way(self._num_samples_yielded_wrapper, self._num_cycles,
                                                             self.num_workers, self._epoch_base)
            self._pending_resume = True
            self._loaded_latest = obj["latest_worker_idx"]   # L13: until the next batch, the last worker that delivered
            if "epoch_open" not in obj:
                return
            if not obj["epoch_open"] and "L1" in self._fixes:
                self.restore = False   # L1: the saved epoch had ended or been broken off: iter() starts the next
            if not self.restore and "L2" in self._fixes:
                # L2: not a resume: the loader is where the uninterrupted one was after its epoch's last batch,
                # whose worker is the saved one (load_state_dict advanced it as for a resume, and a cycling
                # dataset's next epoch would count from one worker further on).
                self._latest_worker_idx = obj["latest_worker_idx"]

        def _litdata_load(self, obj):
            StreamingDataLoader.load_state_dict(self, obj)
            if "L2" in self._fixes:
                # L2: litdata advances the worker cycle it already has (`iter()` of an itertools.cycle is the
                # cycle itself), so after an epoch transition the counters start at another worker than the
                # one _try_put_index sends the first batch to; a fresh cycle starts at the worker after the last.
                self._worker_idx = D.cycle(list(range(self.num_workers if self.num_workers > 0 else 1)))
                self._worker_idx_iter = iter(self._worker_idx)
                for _ in range(self._latest_worker_idx):
                    next(self._worker_idx_iter)

        def _batch_worker(self, counted: int) -> int:
            """The worker that produced the batch just received (L9), or litdata's round-robin guess."""
            self._loaded_latest = None   # L13: a batch after the load: _latest_worker_idx is its worker again
            if "L9" in self._fixes and self.num_workers > 0:
                # L9: was `next(self._worker_idx_iter)` alone: batches arrive round-robin only while every worker
                # has data; torch skips a worker whose iterator ended (an uneven split), and the counts the batch
                # carries were filed under another worker's slot of _num_samples_yielded_wrapper / _num_cycles.
                return self._received_from
            return counted

        def _get_iterator(self):
            if self._fixes & {"L9", "L14"} and self.num_workers > 0:
                self.check_worker_number_rationality()
                return FixedStreamingMultiProcessingDataLoaderIter(self)
            return StreamingDataLoader._get_iterator(self)

        # litdata 0.2.76 StreamingDataLoader.__iter__ (dataloader.py:831-923), copied; changes marked L2, L9.
        # Its calls to its own state_dict/load_state_dict are litdata's (with L2's fresh worker cycle), not this
        # class's; its tracing and profiling lines are left out.
        def _iter_batches(self):
            if (
                isinstance(self.dataset, D.ParallelStreamingDataset)
                and self.dataset.is_cycling()
                and self.dataset.resume
                and self.current_epoch != 0
            ):
                if not self.restore:
                    state = StreamingDataLoader.state_dict(self)
                    if "L13" in self._fixes and self._loaded_latest is not None:
                        # L13: this state too is saved after load_state_dict and before the first batch (a resumed
                        # iterator dropped unstarted): it names the loaded state's last worker, not the next one
                        state["latest_worker_idx"] = self._loaded_latest
                    self._litdata_load(state)
                    self.current_epoch += 1
                    if "L10" in self._fixes:
                        # L10: the workers' counts run on across epochs; this epoch's part starts from these
                        self._epoch_base = {w: (c[0], self._num_cycles[w][0])
                                            for w, c in self._num_samples_yielded_wrapper.items()}
                # L2: was `self.restore = False`, which made _try_put_index route the first batch to worker 0
                # while the per-worker counters (_latest_worker_idx) continue after the last worker that delivered.
                self.restore = "L2" in self._fixes
            elif not self.restore:
                self._latest_worker_idx = 0
                self._worker_idx = D.cycle(list(range(self.num_workers if self.num_workers > 0 else 1)))
                self._worker_idx_iter = iter(self._worker_idx)
                self._num_samples_yielded_wrapper = {}
                self._num_samples_yielded_streaming = 0
                self._num_cycles = {}
                self.dataset.reset_state_dict()
                self.current_epoch += 1
                self._epoch_base = {}

            self.dataset.set_epoch(self.current_epoch)
            if isinstance(self.dataset, D.ParallelStreamingDataset):
                self.dataset._epoch_base = self._epoch_base   # L10: what the workers fork with
                if "L11" in self._fixes and self.persistent_workers and self.num_workers > 0 \
                        and self.dataset.is_cycling() and self.dataset.resume:
                    # L11: what a forked worker takes from the dataset's state, for the persistent ones (below)
                    self.dataset._share_loader_state(self._epoch_base)
            if isinstance(self.dataset, D.StreamingDataset):
                for batch in DataLoader.__iter__(self):
                    self._latest_worker_idx = self._batch_worker(next(self._worker_idx_iter))
                    self._num_samples_yielded_streaming += self.batch_size
                    yield batch
            else:
                self.dataset._set_use_streaming_dataloader(True)
                for batch in DataLoader.__iter__(self):
                    self._latest_worker_idx = self._batch_worker(next(self._worker_idx_iter))
                    if isinstance(batch, dict) and D.__NUM_SAMPLES_YIELDED_KEY__ in batch:
                        self._num_samples_yielded_wrapper[self._latest_worker_idx] = [
                            sample[-1].item() if self.batch_size > 1 else sample.item()
                            for sample in batch[D.__NUM_SAMPLES_YIELDED_KEY__]
                        ]
                        if D.__NUM_CYCLES_KEY__ in batch:
                            self._num_cycles[self._latest_worker_idx] = [
                                cycle[-1].item() if self.batch_size > 1 else cycle.item()
                                for cycle in batch[D.__NUM_CYCLES_KEY__]
                            ]
                            self.dataset.update_epoch_counters(self._num_cycles[self._latest_worker_idx])
                        yield batch[D.__SAMPLES_KEY__]
                    else:
                        yield batch
            self.restore = False

    class FixedStreamingMultiProcessingDataLoaderIter(D._StreamingMultiProcessingDataLoaderIter):
        # torch's _MultiProcessingDataLoaderIter._process_data (torch/utils/data/dataloader.py), which receives the
        # batch with the index of the worker that produced it; change marked L9.
        def _process_data(self, data, worker_idx):
            if "L9" in self._loader._fixes:
                self._loader._received_from = worker_idx   # L9: the loader files the batch's counts under this worker
            return super()._process_data(data, worker_idx)

        # torch's _MultiProcessingDataLoaderIter._reset, which a persistent iterator runs for every later epoch;
        # change marked L14 (litdata's __init__ lines that build the routing, dataloader.py:554-560, run again).
        def _reset(self, loader, first_iter=False):
            if "L14" in self._loader._fixes and not first_iter:
                # L14: was nothing: the first-batch routing was built once, in __init__, so a persistent iterator's
                # later epochs started at worker 0 while a cycling dataset's counters (and a fresh iterator) start
                # after the last worker that delivered
                latest = self._loader._latest_worker_idx
                self._indexes = list(range(latest, self._loader.num_workers)) if latest > 0 else []
            super()._reset(loader, first_iter)

    class FixedStreamingDataset(v.StreamingDataset):
        def __init__(self, *args, fixes: Iterable[str] = ALL_LITDATA, **kwargs):
            super().__init__(*args, **kwargs)
            self._fixes = frozenset(fixes)
            # L8: the loader's epoch, in shared memory so that a persistent worker's copy sees every set_epoch
            # (as Hugging Face datasets shares its epoch with persistent workers); a ParallelStreamingDataset says
            # which of its sources' iter() calls start a loader epoch (its cycling re-iterations do not)
            self._shared_epoch = torch.tensor(self.current_epoch).share_memory_() if "L8" in self._fixes else None
            self._epoch_start = True

        # litdata 0.2.76 StreamingDataset.set_epoch (dataset.py:341-350), copied; change marked L8.
        def set_epoch(self, current_epoch):
            if self._shared_epoch is not None:
                # L8: every worker, persistent ones included, starts its next epoch from this one
                self._shared_epoch.fill_(current_epoch)
            if self._state_dict is None:
                self.current_epoch = current_epoch

        def __iter__(self):
            if self._shared_epoch is not None and not self._state_dict and self._epoch_start:
                # L8: was nothing: a persistent worker kept the epoch its own __next__ counted at its StopIteration
                # (dataset.py:1020, 1029), one behind after an epoch the loop broke off. Taken at every iter() that
                # starts a loader epoch (a worker's fetcher), not when a cycling ParallelStreamingDataset re-iterates
                # a source (its own count is each cycle's epoch). (A restored state's epoch still wins: line 561.)
                self.current_epoch = int(self._shared_epoch)
            iterator = super().__iter__()
            return iterator

        # litdata 0.2.76 StreamingDataset._resume (dataset.py:644-705), copied; changes marked L7, L11 (posix_fast
        # prefetching, off here, left out).
        def _resume(self, workers_chunks, workers_intervals):
            state = self._state_dict
            num_workers = state["num_workers"]
            batch_size = state["batch_size"]
            num_samples_yielded = self._state_dict["num_samples_yielded"]
            worker_start = self.distributed_env.global_rank * num_workers
            worker_end = worker_start + num_workers
            own = getattr(self, "_own_samples_yielded", None)
            if own is not None and "L7" in self._fixes:
                # L7: in a mixture the state's count is the sum over workers, and _replay_sampling splits it as
                # if each worker had delivered whole batches of this source in turn; the mixture's worker
                # knows how many this worker delivered.
                indexes = {w: own for w in range(num_workers)}
            else:
                indexes = D_dataset._replay_sampling(num_samples_yielded, batch_size, num_workers)
            chunks_index, indexes = D_dataset._replay_chunks_sampling(
                workers_intervals={i: workers_intervals[j] for i, j in enumerate(range(worker_start, worker_end))},
                indexes=indexes,
            )
            worker_rank = self.distributed_env.global_rank * self.worker_env.world_size + self.worker_env.rank
            worker_local_rank = self.worker_env.rank
            self.num_chunks = len(workers_intervals[worker_rank])
            self.worker_next_chunk_index = chunks_index[worker_local_rank]
            self.worker_chunks = workers_chunks[worker_rank]
            self.worker_intervals = workers_intervals[worker_rank]
            if self.worker_next_chunk_index >= self.num_chunks:
                if "L11" in self._fixes:
                    # L11: was a bare return, which keeps the position of this copy's last iteration: a fresh
                    # worker's copy has none (its next() ends the part), but a persistent worker's copy resumed from
                    # the loader's state (L11, above) kept the indexes it had prefetched past the loader's counts.
                    self.upcoming_indexes = D_dataset.deque()
                    self.global_index = indexes[worker_local_rank]
                return
            interval = self.worker_intervals[self.worker_next_chunk_index]
            current_indexes = D_dataset.np.arange(interval[1], interval[2])
            current_indexes = self.shuffler(current_indexes, self._shuffle_num_chunks, self.current_epoch,
                                            int(self.worker_chunks[self.worker_next_chunk_index]))
            current_indexes = current_indexes[indexes[worker_local_rank]:]
            self.upcoming_indexes = D_dataset.deque(current_indexes)
            self.global_index = indexes[worker_local_rank]
            self.worker_next_chunk_index += 1

        def load_state_dict(self, state_dict):
            super().load_state_dict(state_dict)
            if state_dict and "L6" in self._fixes:
                # L6: state_dict() updates the loaded state with this object's current_epoch, which only
                # __iter__ takes from the state; a state saved before the first batch after a resume named
                # the constructor's epoch 1.
                self.current_epoch = state_dict["current_epoch"]

    class FixedCombinedStreamingDataset(v.CombinedStreamingDataset):
        def __init__(self, *args, fixes: Iterable[str] = ALL_LITDATA, **kwargs):
            super().__init__(*args, **kwargs)
            self._fixes = frozenset(fixes)

        def __iter__(self):
            if "L7" in self._fixes and self._num_samples_yielded is not None:
                own = self._num_samples_yielded.get(_WorkerEnv.detect().rank) or [0] * len(self._datasets)
                for dataset, count in zip(self._datasets, own):
                    dataset._own_samples_yielded = count   # L7: this worker's own count of each source
            iterator = self._litdata_iter()
            for dataset in self._datasets:
                dataset._own_samples_yielded = None
            if "L4" in self._fixes:
                # L4: the restored counts (and the sources' restored positions) are where this iteration
                # starts, once; a persistent worker keeps this object, and its next epoch must start fresh.
                if self._num_samples_yielded is not None:
                    self._num_samples_yielded.pop(_WorkerEnv.detect().rank, None)
                for dataset in self._datasets:
                    dataset._state_dict = None   # not reset_state_dict(): an elastic resume is still under way
            return iterator

        def __len__(self):
            if "L5" in self._fixes:
                # L5: was get_len(1, 1), which sets batch_size 1 and one worker on every source; the loader's
                # load_state_dict calls len() before its workers fork, so they compared the checkpoint's batch
                # size with 1 and took the elastic resume, whose chunk plan is not the one the epoch started with.
                return self.get_len(self.num_workers, self.batch_size)
            return super().__len__()

        # litdata 0.2.76 CombinedStreamingDataset.__iter__ (combined.py:130-147), copied; changes marked L16, L17.
        def _litdata_iter(self):
            assert self._weights
            worker_env = _WorkerEnv.detect()
            num_samples_yielded = None
            if self._num_samples_yielded is not None and worker_env.rank in self._num_samples_yielded:
                num_samples_yielded = self._num_samples_yielded.get(worker_env.rank, 0)
            seed = self._seed
            if "L16" in self._fixes:
                # L16: was `self._seed` in every worker: _CombinedDatasetIterator draws each sample's source with
                # random.Random(seed) (combined.py:180), so every worker drew the same sequence of sources and the
                # loader, taking the workers in turn, delivered each draw once per worker. The worker's rank goes
                # into the seed as ParallelStreamingDataset.__iter__ puts it into its own (parallel.py:225-232).
                state = (self._seed, worker_env.rank)
                seed = int(hashlib.sha256(str(state).encode()).hexdigest(), 16) % (2**32 - 1)
            # L17: a resume replays the draws as the run made them (FixedCombinedDatasetIterator)
            iterator_class = FixedCombinedDatasetIterator if "L17" in self._fixes else _CombinedDatasetIterator
            self._iterator = iterator_class(
                self._datasets,
                seed,
                self._weights,
                self._use_streaming_dataloader,
                num_samples_yielded,
                self.batch_size,
                self._batching_method,
                self._iterate_over_all,
            )
            return self._iterator

    class FixedCombinedDatasetIterator(_CombinedDatasetIterator):
        # litdata 0.2.76 _CombinedDatasetIterator.__init__ (combined.py:163-210): litdata's own, with the resume's
        # replay of the draws (lines 193-198) replaced; change marked L17. Built only with L17 on.
        def __init__(self, datasets, seed, weights, use_streaming_dataloader, num_samples_yielded, batch_size,
                     batching_method, iterate_over_all=False):
            # a weighted mixture stops at its first exhausted source, and a per_stream one draws per batch: as released
            replay = num_samples_yielded is not None and iterate_over_all and batching_method == BatchingMethod.STRATIFIED
            super().__init__(datasets, seed, weights, use_streaming_dataloader,
                             None if replay else num_samples_yielded, batch_size, batching_method, iterate_over_all)
            if replay:
                self._num_samples_yielded = deepcopy(num_samples_yielded)
                self._replay_draws(num_samples_yielded)

        def _replay_draws(self, counts) -> None:
            # L17: was `for _ in range(sum(counts)): self._rng.choices(<sources left>, <their weights>)` with no source
            # ever dropped: sum(counts) draws over every source with the first weights. When a drawn source runs out,
            # __next__ (combined.py:212-233) drops it, scales the weights left and draws again, and draws no more once
            # one source is left: after a source ran out before the checkpoint the run's draws were others, and the
            # resumed generator drew the rest of the epoch in another order. Replayed as the run made them: until
            # every counted sample is replayed, a draw of a source whose replayed count has reached its restored count
            # is the draw that found it exhausted (a draw of a source with samples left delivered one).
            replayed = [0] * len(counts)
            while sum(replayed) < sum(counts):
                left = [index for index in self._dataset_indexes if index is not None]
                index = self._set_new_dataset_index() if len(left) > 1 else left[0]
                if replayed[index] < counts[index]:
                    replayed[index] += 1
                    continue
                self._dataset_indexes[index] = None
                self._weights[index] = None
                new_sum = sum(w for w in self._weights if w is not None)
                self._weights = [None if w is None else w / new_sum for w in self._weights]

    _register(FixedCombinedDatasetIterator)

    class FixedParallelStreamingDataset(v.ParallelStreamingDataset):
        def __init__(self, *args, fixes: Iterable[str] = ALL_LITDATA, **kwargs):
            super().__init__(*args, **kwargs)
            self._fixes = frozenset(fixes)
            self._state_handed = False   # L11: load_state_dict ran since this copy's last iterator was built
            self._handed = None          # L11: the state load_state_dict was handed last (main process)
            self._shared_state = None    # L11: that state and the epoch's base, in shared memory (persistent workers)
            for dataset in self._datasets:
                dataset._epoch_start = False   # L8: only the epoch's own iterator takes the loader's epoch (below)

        def load_state_dict(self, state_dict):
            super().load_state_dict(state_dict)
            self._state_handed = True
            self._handed = state_dict if state_dict else self._handed

        # L11: a persistent worker's copy never gets the state the loader hands the dataset at every epoch
        # (dataloader.py:832-848); the loader writes it here, with L10's epoch base, before the workers start the epoch.
        # A sequence count around each write (odd while writing) lets a worker that reads late read a whole one.
        _SHARED_STATE_BYTES = 1 << 20

        def _share_loader_state(self, epoch_base):
            data = pickle.dumps((self._handed, dict(epoch_base)))
            if self._shared_state is None:   # the first epoch: before the persistent workers fork
                self._shared_state = torch.zeros(self._SHARED_STATE_BYTES + 16, dtype=torch.uint8).share_memory_()
            if len(data) > self._SHARED_STATE_BYTES:
                raise RuntimeError(f"L11: the loader's state ({len(data)} bytes) exceeds the shared buffer")
            header = self._shared_state[:16].view(torch.int64)
            header[0] += 1
            self._shared_state[16:16 + len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
            header[1] = len(data)
            header[0] += 1

        def _loader_state(self):
            if self._shared_state is None:
                return None
            header = self._shared_state[:16].view(torch.int64)
            while True:
                seq = int(header[0])
                if seq % 2:
                    continue
                data = bytes(self._shared_state[16:16 + int(header[1])].numpy())
                if int(header[0]) == seq:
                    return pickle.loads(data) if data else None

        def _take_loader_state(self):
            """L11: a persistent worker continues its own iterator only where its counts are the loader's; its
            iterator may have run ahead by the batches it prefetched and the loader dropped (a loop broken off), and
            then it takes the loader's state, as a forked worker does."""
            shared = self._loader_state()
            if shared is None or shared[0] is None:
                return
            state, epoch_base = shared
            rank, none = _WorkerEnv.detect().rank, [0] * len(self._datasets)
            loader_counts = [list((state.get("num_samples_yielded") or {}).get(rank, none)),
                             list((state.get("num_cycles") or {}).get(rank, none))]
            own_counts = [list(self._iterator._num_samples_yielded), list(self._iterator._num_cycles)]
            if loader_counts != own_counts:
                self.load_state_dict(state)
                self._epoch_base = epoch_base

        def __iter__(self):
            if "L11" in self._fixes and self.is_cycling() and self.resume and self._iterator is not None \
                    and not self._state_handed and D_dataset._is_in_dataloader_worker():
                self._take_loader_state()
            iterator = self._litdata_iter()
            if "L4" in self._fixes and not self.is_cycling():
                # L4, as for CombinedStreamingDataset: a persistent worker's next epoch starts fresh. (A cycling
                # dataset continues across epochs by design; the loader hands it its position every epoch.)
                rank = _WorkerEnv.detect().rank
                for counts in (self._num_samples_yielded, self._num_cycles):
                    if counts is not None:
                        counts.pop(rank, None)
                for dataset in self._datasets:
                    dataset._state_dict = None
            return iterator

        def _part_delivered(self, rank, workers, samples, cycles, base) -> tuple[int, int]:
            """(samples this worker delivered in the current epoch, its part of an epoch) (L10). Its counts run on
            across epochs (a cycling dataset continues): cycles * its share of source 0 + samples in the cycle, less
            the same at the epoch's start (``base``: (samples, cycles), none for a worker that had delivered none)."""
            part = self._length // workers + (rank < self._length % workers)
            share = self._worker_share(self._datasets[0], SimpleNamespace(world_size=workers, rank=rank))
            base_samples, base_cycles = base or (0, 0)
            delivered = share * (cycles - base_cycles) + samples - base_samples
            return min(max(delivered, 0), part), part

        def _epoch_under_way(self, num_samples_yielded, num_cycles, num_workers, epoch_base) -> bool:
            """Some worker delivered part of the epoch and not every worker all of its part (L10)."""
            workers = max(num_workers, 1)
            done = total = 0
            for rank in range(workers):
                samples, cycles = (num_samples_yielded or {}).get(rank), (num_cycles or {}).get(rank)
                d, part = self._part_delivered(rank, workers, samples[0] if samples else 0,
                                               cycles[0] if cycles else 0, epoch_base.get(rank))
                done, total = done + d, total + part
            return 0 < done < total

        def _worker_share(self, dataset, worker_env) -> int:
            """How many samples of ``dataset`` this worker reads in a pass: its chunk intervals' sum (L10)."""
            self._get_len(dataset)   # sets the loader's workers and batch size on it and builds its shuffler
            _, intervals = dataset.shuffler.get_chunks_and_intervals_per_workers(
                dataset.distributed_env, worker_env.world_size, dataset.batch_size, dataset.current_epoch)
            rank = dataset.distributed_env.global_rank * worker_env.world_size + worker_env.rank
            return sum(end - start for _, start, end, _ in intervals[rank])

        # litdata 0.2.76 ParallelStreamingDataset.__iter__ (parallel.py:197-250), copied; changes marked L7, L10, L11,
        # L15.
        def _litdata_iter(self):
            P = D_parallel
            if self.is_cycling() and not self.resume:
                self.set_epoch(1)
            worker_env = P._WorkerEnv.detect()
            num_samples_yielded = None
            if self._num_samples_yielded is not None and worker_env.rank in self._num_samples_yielded:
                num_samples_yielded = self._num_samples_yielded.get(worker_env.rank, 0)
            num_cycles = None
            if self._num_cycles is not None and worker_env.rank in self._num_cycles:
                num_cycles = self._num_cycles.get(worker_env.rank, 0)
            if "L15" in self._fixes and num_cycles is not None and self.is_cycling() and self.resume:
                # L15: was nothing: each source resumes in its state's `current_epoch`, one value for every worker: the
                # main process's copy, which update_epoch_counters (dataloader.py:897) sets from the cycles of the last
                # batch's worker. The workers cycle at different times; a worker a cycle behind (or ahead) resumed its
                # part, and shuffled its next cycle, with another worker's epoch. A source's epoch is this worker's
                # cycle count + 1 (update_epoch_counters: the epoch counter starts at 1, the cycle counter at 0).
                for dataset, cycles in zip(self._datasets, num_cycles):
                    if dataset._state_dict:
                        dataset._state_dict["current_epoch"] = cycles + 1
            length = self._length
            if isinstance(length, int):
                length = length // worker_env.world_size + (worker_env.rank < length % worker_env.world_size)
            tot_dset_lengths = self.get_all_lens()
            if "L10" in self._fixes:
                # L10: was `dl // world_size + (rank < dl % world_size)`, an even split of each source over the
                # workers; a worker reads whole chunk intervals (here 8 and 6 of 14 samples), and the resumed
                # counter below, (cycle length * cycles + samples) % length, must use the length it cycles over.
                dset_lengths = [self._worker_share(d, worker_env) for d in self._datasets]
            else:
                dset_lengths = [
                    dl // worker_env.world_size + (worker_env.rank < dl % worker_env.world_size)
                    for dl in tot_dset_lengths
                ]
            if "L11" in self._fixes and self.is_cycling() and self.resume and self._iterator is not None \
                    and not self._state_handed:
                # L11: was a new iterator whose sources start their parts over. The loader continues a cycling
                # dataset across epochs by handing it its own state every epoch (dataloader.py:832-848), which
                # reaches a worker only when it forks: a persistent worker's copy has no new state. Where its own
                # iterator is where the loader's counts are (__iter__ checks, and otherwise hands it the loader's
                # state), continue it, its epoch counter taken as a fresh one would (line 348).
                self._iterator._count = 0   # a new epoch: the worker delivers its whole part again
                return self._iterator
            self._state_handed = False
            tot_samples_yielded, tot_cycles = self.get_num_samples_yielded()
            tot_samples_yielded = [0 if dl == 0 else s % dl for s, dl in zip(tot_samples_yielded, tot_dset_lengths)]
            if self._reset_rngs:
                state = (self._seed, worker_env.rank, *tot_samples_yielded)
            elif self._length is None:
                state = (self._seed, worker_env.rank, *tot_samples_yielded, self._current_epoch)
            else:
                state = (self._seed, worker_env.rank, *tot_samples_yielded, *tot_cycles)
            seed = int(P.hashlib.sha256(str(state).encode()).hexdigest(), 16) % (2**32 - 1)
            rngs = {
                "random": P.random.Random(seed),  # noqa: S311
                "numpy": P.np.random.default_rng(seed),
                "torch": P.torch.Generator().manual_seed(seed),
            }
            if "L7" in self._fixes and num_samples_yielded is not None:
                for dataset, count in zip(self._datasets, num_samples_yielded):
                    dataset._own_samples_yielded = count   # L7, as for CombinedStreamingDataset
            for dataset in self._datasets:
                # L8: a non-cycling mixture's sources start the loader's epoch here; a cycling one's continue their
                # cycles (the loader keeps their epoch counters, update_epoch_counters)
                dataset._epoch_start = not self.is_cycling()
            self._iterator = P._ParallelDatasetIterator(
                self._datasets, self._use_streaming_dataloader, num_samples_yielded, num_cycles, length,
                dset_lengths, self._transform, self._transform_nargs, rngs,
            )
            for dataset in self._datasets:
                dataset._own_samples_yielded = None
                dataset._epoch_start = False
            if "L10" in self._fixes and isinstance(length, int) and length > 0 and self.resume:
                # L10: was `(dset_lengths[0] * cycles + samples) % length` alone (parallel.py:348), 0 both when the
                # worker starts its part of the epoch and when it has delivered all of it: a worker restored after
                # its part but before the others' delivered its whole part again. The counts run on across epochs;
                # the loader's counts at the epoch's start (given to the dataset before the workers fork) say how
                # much of them is this epoch's.
                it = self._iterator
                it._count, _ = self._part_delivered(worker_env.rank, worker_env.world_size, it._num_samples_yielded[0],
                                                    it._num_cycles[0],
                                                    getattr(self, "_epoch_base", {}).get(worker_env.rank))
            return self._iterator

    return SimpleNamespace(StreamingDataLoader=_register(FixedStreamingDataLoader),
                           CombinedStreamingDataset=_register(FixedCombinedStreamingDataset),
                           StreamingDataset=_register(FixedStreamingDataset),
                           ParallelStreamingDataset=_register(FixedParallelStreamingDataset),
                           BinaryWriter=v.BinaryWriter, version=v.version)


#: the classes a loader with fixes is built from; each is told which fixes are on
_PATCHED = ("StreamingDataLoader", "CombinedStreamingDataset", "StreamingDataset", "ParallelStreamingDataset")


def _with_fixes(classes: SimpleNamespace, fixes: tuple[str, ...]) -> SimpleNamespace:
    return SimpleNamespace(**{**vars(classes),
                              **{n: functools.partial(getattr(classes, n), fixes=fixes) for n in _PATCHED}})


def litdata_component(fixes: Iterable[str] = ALL_LITDATA) -> StreamComponent:
    fixes = check_fixes(fixes, LITDATA_FIXES)

    def make_loader(sc):
        return litdata_target.LitdataLoader(sc, _with_fixes(litdata_classes(), fixes))

    return replace(litdata_target.component(), make_loader=make_loader)


def litdata_fixed() -> Target:
    return fixed_target("litdata_fixed", litdata_target, "litdata", lambda: "litdata 0.2.76", LITDATA_FIXES,
                        litdata_component)
