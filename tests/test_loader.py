"""The loader, by example: knobs and their errors, faults, checkpoint mismatches, spawn, warm-up."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import warnings

import pytest

from dynbsz import ConfigError, FixedGate, PackerConfig, SourceSpec, StateMismatchError, Workload
from dynbsz.datasets import TraceMapDataset
from dynbsz.errors import SampleFetchError
from dynbsz.loader import build_loader
from dynbsz.loader_config import IN_ORDER_FALSE_COST, LoaderConfig, LoaderWarning

TRACE = Workload((SourceSpec("text", 0.8, 40, cost_base_s=0.0005), SourceSpec("video", 0.2, 150, cost_base_s=0.002))
                 ).sample(30, 7)
PACK = PackerConfig(budget=256)


def loader(config=LoaderConfig(), dataset=None, packer=PACK, **kw):
    return build_loader(dataset if dataset is not None else TraceMapDataset(TRACE), packer, FixedGate(3), config, **kw)


def epoch_ids(ld, epoch=0):
    ld.set_epoch(epoch)
    try:
        return [sid for step in ld for sid in step.sample_ids]
    finally:
        ld.close()


@pytest.mark.parametrize("kwargs, setting", [
    ({"num_workers": -1}, "num_workers"),
    ({"prefetch_factor": 2}, "prefetch_factor"),
    ({"num_workers": 2, "prefetch_factor": 0}, "prefetch_factor"),
    ({"dp_size": 0}, "dp_size"),
    ({"dp_size": 2, "dp_rank": 2}, "dp_rank"),
    ({"runtime": "gpu"}, "runtime"),
    ({"fetch_batch_size": 0}, "fetch_batch_size"),
    ({"max_steps": 0}, "max_steps"),
    ({"timeout_s": -1}, "timeout_s"),
    ({"start_method": "threads"}, "start_method"),
    ({"in_order": "yes"}, "in_order"),
    ({"seed": -1}, "seed"),
])
def test_knob_errors_name_the_setting(kwargs, setting):
    with pytest.raises(ConfigError, match=setting):
        LoaderConfig(**kwargs)


def test_persistent_without_workers_is_downgraded_with_a_warning():
    with pytest.warns(LoaderWarning, match="persistent_workers=True has no effect with num_workers=0"):
        ld = loader(LoaderConfig(persistent_workers=True))
    assert ld.config.persistent_workers is False
    assert sorted(epoch_ids(ld)) == list(range(30))


def test_in_order_false_warns_once_with_what_it_costs(caplog):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ld = loader(LoaderConfig(num_workers=2, in_order=False))
        ids = epoch_ids(ld)
        ld.state_dict()
    ours = [w for w in seen if issubclass(w.category, LoaderWarning)]
    assert len(ours) == 1 and str(ours[0].message) == IN_ORDER_FALSE_COST
    for needle in ("reproducibility", "skew", "resume"):
        assert needle in IN_ORDER_FALSE_COST
    # torchdata's own caveat is folded into ours rather than logged again.
    assert not [r for r in caplog.records if "in_order=False" in r.getMessage()]
    assert sorted(ids) == list(range(30))


def test_worker_runtime_refusals():
    with pytest.raises(ConfigError, match="warmup_steps"):
        loader(LoaderConfig(runtime="worker"), packer=PackerConfig(budget=256, warmup_steps=3, warmup_init_tokens=8))
    with pytest.raises(ConfigError, match="needs a PackerConfig"):
        loader(LoaderConfig(runtime="worker"), packer=None)
    with pytest.raises(ConfigError, match="map-style"):
        loader(LoaderConfig(runtime="worker"), dataset=iter(range(3)))
    with pytest.raises(ConfigError, match="fetch_batch_size"):
        loader(LoaderConfig(runtime="worker", fetch_batch_size=2))


def test_dataset_smaller_than_dp_is_refused():
    with pytest.raises(ConfigError, match="dp_size"):
        loader(LoaderConfig(dp_size=64, dp_rank=0))


class Flaky(TraceMapDataset):
    def __init__(self, trace, bad):
        super().__init__(trace)
        self.bad = bad

    def __getitem__(self, index):
        if index == self.bad:
            raise ValueError("corrupt record")
        return super().__getitem__(index)


@pytest.mark.parametrize("runtime", ["main", "worker"])
@pytest.mark.parametrize("workers", [0, 2])
def test_a_failing_sample_surfaces_the_original_error_with_its_id(runtime, workers):
    ld = loader(LoaderConfig(num_workers=workers, runtime=runtime), dataset=Flaky(TRACE, bad=11))
    with pytest.raises(SampleFetchError, match=r"sample 11 .*ValueError: corrupt record"):
        epoch_ids(ld)


class Killer(TraceMapDataset):
    """Kills its worker process the first time it reads ``victim`` (a marker file makes it once)."""

    def __init__(self, trace, victim, marker):
        super().__init__(trace)
        self.victim, self.marker = victim, marker

    def __getitem__(self, index):
        if index == self.victim and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__getitem__(index)


@contextlib.contextmanager
def killed_worker_reports_dropped_by_finalizers():
    """torch's SIGCHLD handler raises "DataLoader worker (pid N) is killed by signal" in the main thread wherever it
    is; when that is a finalizer (a weakref callback the garbage collector runs), Python drops it as unraisable and
    the loader reports the dead worker itself a moment later (a fresh-clone suite saw this once). Those reports are
    expected here; any other unraisable exception goes on to pytest's hook and fails the test as before."""
    previous = sys.unraisablehook

    def hook(unraisable):
        if not (isinstance(unraisable.exc_value, RuntimeError) and "is killed by signal" in str(unraisable.exc_value)):
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


def test_only_a_killed_workers_report_is_dropped_when_a_finalizer_swallows_it():
    class RaisesWhenCollected:
        def __init__(self, message):
            self.message = message

        def __del__(self):
            raise RuntimeError(self.message)

    reached, previous = [], sys.unraisablehook
    sys.unraisablehook = lambda unraisable: reached.append(str(unraisable.exc_value))
    try:
        with killed_worker_reports_dropped_by_finalizers():
            RaisesWhenCollected("DataLoader worker (pid 1) is killed by signal: Killed.")
            RaisesWhenCollected("another finalizer's error")
    finally:
        sys.unraisablehook = previous
    assert reached == ["another finalizer's error"]


@pytest.mark.parametrize("runtime, in_order", [("main", True), ("main", False), ("worker", True), ("worker", False)])
def test_killed_worker_fails_loudly_and_resume_loses_nothing(tmp_path, runtime, in_order):
    config = LoaderConfig(num_workers=2, runtime=runtime, in_order=in_order, timeout_s=20)
    ld = loader(config, dataset=Killer(TRACE, victim=int(TRACE.ids[20]), marker=str(tmp_path / "killed")))
    ld.set_epoch(0)
    seen, trained, checkpoint = [], [], None
    with killed_worker_reports_dropped_by_finalizers(), pytest.raises(RuntimeError, match="(?i)worker"):
        for step in ld:
            seen.extend(step.sample_ids)
            state = json.loads(json.dumps(ld.state_dict()))
            # torch's SIGCHLD handler may raise anywhere in the main process, even mid-checkpoint:
            # what counts as trained is what a completed checkpoint covers.
            checkpoint, trained = state, list(seen)
    ld.close()
    assert checkpoint is not None
    fresh = loader(config, dataset=Killer(TRACE, victim=-1, marker=str(tmp_path / "unused")))
    fresh.load_state_dict(checkpoint)
    rest = epoch_ids(fresh)
    # Nothing after the last checkpoint is lost and nothing before it comes again.
    assert sorted(trained + rest) == list(range(30))


@pytest.mark.parametrize("change, setting", [
    (dict(dataset=TraceMapDataset(TRACE.subset(slice(0, 20)))), "num_samples"),
    (dict(config=LoaderConfig(seed=5)), "seed"),
    (dict(config=LoaderConfig(dp_size=2)), "dp_size"),
    (dict(config=LoaderConfig(runtime="worker")), "runtime"),
    (dict(packer=PackerConfig(budget=512)), "budget"),
])
def test_checkpoint_from_other_settings_is_refused(change, setting):
    ld = loader()
    ld.set_epoch(0)
    next(iter(ld))
    state = json.loads(json.dumps(ld.state_dict()))
    ld.close()
    other = loader(**change)
    with pytest.raises(StateMismatchError, match=setting):
        other.load_state_dict(state)


def test_max_steps_carries_over_a_resume():
    config = LoaderConfig(max_steps=5)
    ld = loader(config)
    ld.set_epoch(0)
    it = iter(ld)
    first = [next(it).index for _ in range(2)]
    state = json.loads(json.dumps(ld.state_dict()))
    ld.close()
    again = loader(config)
    again.load_state_dict(state)
    again.set_epoch(0)
    rest = [s.index for s in again]
    assert first + rest == [0, 1, 2, 3, 4]  # no extra and no missing step


@pytest.mark.parametrize("runtime", ["main", "worker"])
def test_dp_ranks_yield_different_step_counts_per_epoch_and_max_steps_aligns_them(runtime):
    # Each rank packs its own shard, so an epoch's step count depends on that shard's lengths:
    # in the main runtime rank 0 yields 5 steps in epoch 0 and rank 1 yields 8. A trainer that loops over
    # epochs would leave rank 1's last collectives without a partner. Bounded by steps instead,
    # every rank yields exactly max_steps, crossing its epoch boundaries wherever they fall.
    def ranks(**kw):
        workers = 1 if runtime == "worker" else 0
        return [loader(LoaderConfig(dp_rank=r, dp_size=2, runtime=runtime, num_workers=workers, **kw))
                for r in range(2)]

    per_epoch = [sum(1 for _ in ld) for ld in ranks()]
    assert per_epoch[0] != per_epoch[1]
    max_steps = max(per_epoch) + 2
    epochs = []
    for ld in ranks(max_steps=max_steps):
        seen = []
        while ld.steps < max_steps:
            seen += [s.epoch for s in ld]
        ld.close()
        epochs.append(seen)
    assert [len(e) for e in epochs] == [max_steps, max_steps]
    # Rank 0 is already in epoch 1 at a step where rank 1 is still in epoch 0.
    assert [e.index(1) for e in epochs] == per_epoch


def test_steps_bounded_loop_resumes_across_epoch_boundaries():
    # The loop docs/guide/loader.md documents: `while loader.steps < max_steps: for step in loader`, restored mid-run.
    def run(ld, stop_at=None):
        out = []
        while ld.steps < 12:
            for s in ld:
                out.append((s.index, s.epoch, s.sample_ids))
                if s.index == stop_at:
                    return out, json.loads(json.dumps(ld.state_dict()))
        return out, None

    config = LoaderConfig(dp_rank=0, dp_size=2, max_steps=12)
    plain, _ = run(loader(config))
    first, state = run(loader(config), stop_at=6)
    again = loader(config)
    again.load_state_dict(state)
    rest, _ = run(again)
    assert {e for _, e, _ in plain} == {0, 1, 2} and first[-1][1] == 1  # the restore lands in epoch 1
    assert first + rest == plain


def test_set_epoch_mid_epoch_is_refused_and_nothing_is_lost():
    ld = loader()
    ld.set_epoch(0)
    it = iter(ld)
    next(it)
    with pytest.raises(ConfigError, match="unfinished"):
        ld.set_epoch(1)
    ld.close()


def test_iterating_again_after_an_epoch_starts_the_next_one():
    ld = loader()
    e0 = [sid for s in ld for sid in s.sample_ids]
    e1 = [sid for s in ld for sid in s.sample_ids]
    ld.close()
    assert ld.epoch == 1 and sorted(e0) == sorted(e1) == list(range(30)) and e0 != e1


def test_spawn_start_method_gives_the_same_epochs():
    fork = loader(LoaderConfig(num_workers=1, persistent_workers=True, start_method="fork"))
    spawn = loader(LoaderConfig(num_workers=1, persistent_workers=True, start_method="spawn"), packer=PACK)
    for e in range(2):
        assert epoch_ids(fork, e) == epoch_ids(spawn, e)


def test_worker_runtime_spawn_reads_the_epoch_from_shared_memory():
    fork = loader(LoaderConfig(num_workers=1, persistent_workers=True, runtime="worker"))
    spawn = loader(LoaderConfig(num_workers=1, persistent_workers=True, runtime="worker", start_method="spawn"))
    orders = []
    for e in range(2):
        a, b = epoch_ids(fork, e), epoch_ids(spawn, e)
        assert a == b
        orders.append(a)
    assert orders[0] != orders[1]


def test_plain_mode_collate_and_pin_memory():
    ld = build_loader(TraceMapDataset(TRACE), None, None, LoaderConfig(fetch_batch_size=4, pin_memory=True),
                      collate_fn=lambda mb: sum(mb.tokens))
    steps = list(ld)
    assert [len(s.micro_batches[0]) for s in steps] == [4] * 7 + [2]
    assert all(s.data == (sum(s.micro_batches[0].tokens),) for s in steps)


@pytest.mark.parametrize("runtime", ["main", "worker"])
def test_the_inner_loader_takes_no_torchdata_snapshots(runtime):
    """dynbsz checkpoints its own ledger; torchdata's per-step snapshot would cost 120-140 us of main-process
    CPU a batch (docs/ordering.md) for a state nothing reads, so it is off underneath."""
    ld = loader(LoaderConfig(num_workers=1, runtime=runtime))
    assert ld._inner().snapshot_every_n_steps == 0
    first = epoch_ids(ld)
    assert sorted(first) == sorted(TRACE.ids.tolist())


class PidDataset(TraceMapDataset):
    """Each sample records the process that read it, to see which workers served an epoch."""

    def __getitem__(self, index):
        sample = super().__getitem__(index)
        sample["pid"] = os.getpid()
        return sample


@pytest.mark.parametrize("runtime", ["main", "worker"])
@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_set_epoch_reaches_persistent_workers_kept_across_epochs(runtime, start_method):
    """One loader, never closed between epochs: the same worker processes serve every epoch, and
    each epoch is the order a fresh non-persistent loader gives it (so set_epoch reached them)."""
    cfg = LoaderConfig(num_workers=2, persistent_workers=True, runtime=runtime, start_method=start_method)
    ld = loader(cfg, dataset=PidDataset(TRACE))
    orders, pids = [], []
    for epoch in range(3):
        ld.set_epoch(epoch)
        steps = list(ld)
        orders.append([sid for s in steps for sid in s.sample_ids])
        pids.append({p["pid"] for s in steps for mb in s.micro_batches for p in mb.payloads})
    ld.close()
    assert len(pids[0]) == 2 and pids[0] == pids[1] == pids[2] and os.getpid() not in pids[0]
    fresh = [epoch_ids(loader(LoaderConfig(num_workers=2, runtime=runtime)), e) for e in range(3)]
    assert orders == fresh
    assert orders[0] != orders[1] != orders[2] != orders[0]


def test_a_refused_checkpoint_changes_nothing():
    """A packer state of another budget is refused by the packer's own check, after the loader's
    fingerprint passed: the loader must be left exactly as it was, and carry on."""
    ld = loader(LoaderConfig(seed=4))
    steps = iter(ld)
    head = [next(steps).sample_ids for _ in range(3)]
    before = json.dumps(ld.state_dict())
    other = loader(LoaderConfig(seed=4), packer=PackerConfig(budget=300))
    it = iter(other)
    for _ in range(6):   # further into the epoch: its steps and ledger differ from ld's
        next(it)
    foreign = other.state_dict()
    other.close()
    assert foreign["steps"] != 3 and foreign["ledger"] != json.loads(before)["ledger"]
    with pytest.raises(StateMismatchError, match="budget"):
        ld.load_state_dict(foreign)
    assert json.dumps(ld.state_dict()) == before
    rest = [s.sample_ids for s in iter(ld)]
    ld.close()
    fresh = loader(LoaderConfig(seed=4))
    assert head + rest == [s.sample_ids for s in fresh]
