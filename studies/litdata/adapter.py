"""litdata 0.2.76's streaming loader as a ``stream`` component: ``StreamingDataset`` (and
``CombinedStreamingDataset``, ``ParallelStreamingDataset``) inside ``StreamingDataLoader``.

The adapter writes each source once per process as a small local litdata dataset (``BinaryWriter``,
``chunk_size`` items per chunk, items ``{"id": sample id}``) and reads it by its plain path (no
``local:`` prefix, so nothing is copied into a cache). DP ranks reach litdata the way it reads
them without a process group: ``WORLD_SIZE`` and ``GLOBAL_RANK`` in the environment
(``litdata.utilities.env._DistributedEnv.detect``), set while the loader lives (workers fork with it).
``set_epoch`` is a no-op: ``StreamingDataLoader.__iter__`` counts epochs itself
(``self.current_epoch += 1``) and keeps the count in its ``state_dict``.

What litdata does not promise, in its own words (each quoted where it is used below):

* ``drop_last``: "If `True`, drops the last items to ensure that all processes/workers return the same
  amount of data" and "The argument `drop_last` is set to `True` in a distributed setting"
  (``StreamingDataset.__init__``).
* A combined mixture with weights: "When `iterate_over_all` is set to True, the weights argument
  shouldn't be provided" (``CombinedStreamingDataset.__init__``), so a weighted mixture stops "as soon
  as one raises a StopIteration": it promises no sample once per epoch.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from types import SimpleNamespace
from typing import Any

from properties.loader_targets import DelegatingLoader
from properties.stream_scenarios import StreamScenario
from properties.targets.scratch import scratch_root
from properties.targets.stream import ReproSetup, StreamComponent

MISSING = "litdata 0.2.76 is not importable (install the extra: bash ci/install.sh --litdata)"


@functools.lru_cache(maxsize=1)
def lib() -> SimpleNamespace:
    with contextlib.redirect_stdout(sys.stderr):
        import litdata
        from litdata import CombinedStreamingDataset, ParallelStreamingDataset, StreamingDataLoader, StreamingDataset
        from litdata.streaming.writer import BinaryWriter
    return SimpleNamespace(version=litdata.__version__, StreamingDataset=StreamingDataset,
                           StreamingDataLoader=StreamingDataLoader, CombinedStreamingDataset=CombinedStreamingDataset,
                           ParallelStreamingDataset=ParallelStreamingDataset, BinaryWriter=BinaryWriter)


def available() -> bool:
    try:
        lib()
    except ImportError:
        return False
    return True


def _root() -> str:
    return scratch_root("litdata-src")


@functools.lru_cache(maxsize=256)
def source_dir(source: int, size: int, chunk_size: int) -> str:
    """A local litdata dataset of ``size`` items ``{"id": 1000*source + i}``, ``chunk_size`` per chunk."""
    from properties.stream_scenarios import sample_id

    path = os.path.join(_root(), f"s{source}-n{size}-c{chunk_size}")
    if not os.path.exists(os.path.join(path, "index.json")):
        os.makedirs(path, exist_ok=True)
        w = lib().BinaryWriter(path, chunk_size=chunk_size)
        for i in range(size):
            w.add_item(i, {"id": sample_id(source, i)})
        w.done()
        w.merge()
    return path


def ids_of(batch: Any) -> tuple:
    """A plain batch is ``{"id": tensor}``; a parallel one is a list (one entry per source) of those."""
    if isinstance(batch, dict):
        return tuple(int(x) for x in batch["id"].reshape(-1).tolist())
    return tuple(sid for part in batch for sid in ids_of(part))


def dataset_drop_last(sc: StreamScenario) -> bool:
    """What StreamingDataset is given: world_size > 1 forces drop_last=True and warns, so pass it only where
    litdata accepts it."""
    return sc.drop_last if sc.dp_size == 1 else True


class LitdataLoader(DelegatingLoader):
    """litdata's loader over the scenario's data, from whichever litdata this process imports (the release, or
    a copy with the proposed diffs: ``studies.litdata.fixes.LITDATA``)."""

    def __init__(self, sc: StreamScenario):
        self.sc = sc
        # written before the DP environment is set: BinaryWriter.merge waits for every rank's index
        dirs = [source_dir(k, n, sc.chunk_size) for k, n in enumerate(sc.sources)]
        self._env = {"WORLD_SIZE": str(sc.dp_size), "GLOBAL_RANK": str(sc.dp_rank)}
        self._saved = {k: os.environ.get(k) for k in self._env}
        os.environ.update(self._env)
        v = lib()
        drop_last = dataset_drop_last(sc)
        datasets = [v.StreamingDataset(d, shuffle=sc.shuffle, seed=sc.seed, drop_last=drop_last) for d in dirs]
        if sc.mix == "single":
            ds = datasets[0]
        elif sc.mix == "combined":
            ds = v.CombinedStreamingDataset(datasets, seed=sc.seed, weights=list(sc.weights) if sc.weights else None,
                                            iterate_over_all=sc.weights is None)
        else:
            ds = v.ParallelStreamingDataset(datasets, length=sc.cycle_length, seed=sc.seed)
        self.dl = v.StreamingDataLoader(ds, batch_size=sc.batch_size, num_workers=sc.num_workers,
                                        persistent_workers=sc.persistent_workers and sc.num_workers > 0,
                                        drop_last=sc.drop_last)

    def set_epoch(self, epoch: int) -> None:
        pass  # StreamingDataLoader counts epochs itself

    def close(self) -> None:
        super().close()
        for k, old in self._saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old


def make_loader(sc: StreamScenario) -> LitdataLoader:
    return LitdataLoader(sc)


def repro_setup(sc: StreamScenario) -> ReproSetup:
    """``LitdataLoader`` and ``source_dir`` as standalone code, the scenario's values as literals."""
    mixture = {"single": "", "combined": "CombinedStreamingDataset, ", "parallel": "ParallelStreamingDataset, "}[sc.mix]
    imports = (f"from litdata import {mixture}StreamingDataLoader, StreamingDataset",
               "from litdata.streaming.writer import BinaryWriter")
    drop_last = dataset_drop_last(sc)
    code = [f"SOURCES = {list(sc.sources)}  # source k's sample i is {{'id': 1000 * k + i}}",
            "ROOT = tempfile.mkdtemp()", "for k, n in enumerate(SOURCES):",
            f"    w = BinaryWriter(os.path.join(ROOT, str(k)), chunk_size={sc.chunk_size})",
            "    for i in range(n):", "        w.add_item(i, {'id': 1000 * k + i})", "    w.done()", "    w.merge()"]
    if sc.dp_size > 1:
        code += [f"os.environ.update(WORLD_SIZE='{sc.dp_size}', GLOBAL_RANK='{sc.dp_rank}')  # how litdata reads DP "
                 "ranks without a process group"]
    part = f"StreamingDataset(os.path.join(ROOT, {{}}), shuffle={sc.shuffle}, seed={sc.seed}, drop_last={drop_last})"
    code += ["", "def make():"]
    if sc.mix == "single":
        code += ["    ds = " + part.format("'0'")]
    else:
        code += ["    parts = [" + part.format("str(k)") + " for k in range(len(SOURCES))]"]
    if sc.mix == "combined":
        weights = list(sc.weights) if sc.weights else None
        code += [f"    ds = CombinedStreamingDataset(parts, seed={sc.seed}, weights={weights}, "
                 f"iterate_over_all={sc.weights is None})"]
    elif sc.mix == "parallel":
        code += [f"    ds = ParallelStreamingDataset(parts, length={sc.cycle_length}, seed={sc.seed})"]
    persistent = sc.persistent_workers and sc.num_workers > 0
    code += [f"    return StreamingDataLoader(ds, batch_size={sc.batch_size}, num_workers={sc.num_workers}, "
             f"persistent_workers={persistent}, drop_last={sc.drop_last})"]
    if sc.mix == "parallel":
        ids = "tuple(int(x) for part in batch for x in part['id'].tolist())"   # one {'id': tensor} per source
    else:
        ids = "tuple(batch['id'].tolist())"
    # no epoch hook: StreamingDataLoader counts epochs itself
    return ReproSetup(f"litdata {lib().version}", ("os", "tempfile"), imports, "\n".join(code), ids)


# ---- what litdata promises ------------------------------------------------------------------

DROP_LAST = ("StreamingDataset(drop_last=True) 'drops the last items to ensure that all processes/workers return "
             "the same amount of data' (and the DataLoader drops each worker's incomplete last batch)")
DISTRIBUTED_DROP = "'The argument `drop_last` is set to `True` in a distributed setting' (StreamingDataset.__init__)"
CLOSED_AT_LAST_BATCH = (
    "a state saved after an epoch's last batch is the finished epoch's state (StreamingDataLoader.load_state_dict "
    "resumes only when 0 < samples yielded < the dataset's length), and litdata's own test "
    "test_dataloader_with_loading_states ('resume after complete last epoch') asserts that such a state restores into "
    "the next epoch; Lightning's fit loop, which knows the epoch ended (its fetcher looks a batch ahead), moves on")
OPEN_AT_LAST_BATCH = (
    "a weighted mixture's epoch ends when a source runs out, which only the fetch after its last batch finds: the "
    "state saved at that batch has yielded fewer samples than the length, so it restores as that epoch, still open")
REPLAYS_AFTER_BREAK = (
    "after load_state_dict, a loop that breaks off the resumed epoch leaves `restore` set, so the next iter() "
    "replays the loaded state: on purpose (the note at StreamingDataLoader.__iter__, dataloader.py:905-911, and "
    "commit ed7409db, PR #851: callers that resumed from a checkpoint rely on it)")
WEIGHTED = ("with weights, 'When `iterate_over_all` is set to True, the weights argument shouldn't be provided', so "
            "the mixture 'stops as soon as one raises a StopIteration' (CombinedStreamingDataset)")


def _workers(sc: StreamScenario) -> int:
    return max(1, sc.num_workers)


def epoch_loss(sc: StreamScenario):
    if sc.mix == "combined" and sc.weights is not None:
        return None, WEIGHTED
    if sc.drop_last or sc.dp_size > 1:
        w = _workers(sc) * sc.dp_size
        if sc.mix == "combined":
            # each source is a StreamingDataset that drops its own last items (sources of 4 and 5 in batches of 3
            # keep 3 and 3): the mixture may leave out that much per source
            return len(sc.sources) * (w * sc.batch_size - 1), DROP_LAST + ", for each source of the mixture"
        return w * sc.batch_size - 1, DROP_LAST
    return 0, ""


def epoch_end(sc: StreamScenario):
    if sc.mix == "combined" and sc.weights is not None:
        return "open", OPEN_AT_LAST_BATCH
    return "closed", CLOSED_AT_LAST_BATCH


def after_break(sc: StreamScenario):
    return "replays", REPLAYS_AFTER_BREAK


def dp_loss(sc: StreamScenario):
    w = _workers(sc) * sc.dp_size
    return w * sc.batch_size - 1, DISTRIBUTED_DROP + "; " + DROP_LAST


def component() -> StreamComponent:
    # litdata is Lightning's streaming loader: judged under Lightning's fit loop with its two checkpoint
    # placements (ModelCheckpoint's default at epoch ends, and every_n_train_steps=1), and held to the
    # adversarial schedule too. Its README's resume loop (load_state_dict, then iterate) has no epochs.
    return StreamComponent(name="stream:litdata", make_loader=make_loader, ids_of=ids_of, state_codec="pickle",
                           mixes=("single", "combined", "parallel"), epoch_loss=epoch_loss, dp_loss=dp_loss,
                           trainers=("lightning", "lightning-steps", "adversarial"), repro_setup=repro_setup,
                           epoch_end=epoch_end, after_break=after_break)


def target():
    from properties.targets.base import Target

    description = "litdata 0.2.76's StreamingDataset / CombinedStreamingDataset / ParallelStreamingDataset in " \
                  "StreamingDataLoader (studies.litdata.adapter)"
    if not available():
        return Target(name="litdata", description=description, unavailable=MISSING)
    return Target(name="litdata", description=description, components=(component(),))
