"""The fixes: their ids, where each shows, the pinned example of each finding, and how to apply
them (a block, or for good in the ``fixed`` target)."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

from ..targets import veomni_builders
from ..targets.base import Target
from .documented import documented_components
from .patches import ACTIVE, CONDITIONAL, active, patch_list

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
           "state reads 'start of this epoch' (dataset.py:977-982, 725-759); with V7, so does a restored mixture "
           "state of another epoch until __iter__ discards it",
    "V15": "(torchdata's H9, reached through VeOmni) DistributedDataloader.state_dict() after load_state_dict() "
           "and before iterating returns the loaded state instead of building the iterator, so a checkpoint "
           "written right after a restore starts no workers before the trainer's set_epoch "
           "(torchdata stateful_dataloader.py:415-419)",
}
ALL_FIXES = tuple(FIXES)
#: fix -> the regression file (tests/regressions/) that pins its finding: an example that fails on
#: VeOmni as shipped and with every other fix applied, and passes with all of them.
PINNED: dict[str, str] = {
    "V1": "loader_resume-loader_main-veomni-a0fc1e421b.json",
    "V2": "exactly_once-loader_main-veomni-a4740003b3.json",
    "V3": "exactly_once-loader_main-veomni-d19ad1821f.json",
    "V4": "exactly_once-loader_main-veomni-1194f9357c.json",
    "V5": "epoch_reshuffle-loader_main-veomni-9a43053d22.json",
    "V6": "exactly_once-loader_worker-veomni-45af2abdca.json",
    "V7": "epoch_reshuffle-loader_worker-veomni-f1a25a8832.json",
    "V8": "exactly_once-loader_worker-veomni-9be15848f8.json",
    "V9": "loader_resume-loader_multisource-veomni-b3acb1e834.json",
    "V10": "loader_resume-loader_multisource-veomni-c07368a626.json",
    "V11": "budget-packer-veomni-9975e069ad.json",
    "V12": "loader_resume-loader_main-veomni-b4c225fb8f.json",
    "V13": "exactly_once-loader_worker-veomni-468453fcdc.json",
    "V15": "exactly_once-loader_worker-veomni-f24dd8d34b.json",
}
#: Findings without a proposed fix patch: finding -> (what fails, the regression file that pins it).
#: Each fails on VeOmni as shipped, held to its docs and with every fix applied (tests/test_veomni_conformance.py).
UNFIXED: dict[str, tuple[str, str]] = {
    "V14": ("the worker runtime has no length bound: under BaseTrainer's loop (at most train_steps steps an "
            "epoch, the epoch ending early on StopIteration) DP ranks that pack their shards into different "
            "numbers of steps stop at different steps, and the rank still stepping waits in its next collective",
            "dp_step_counts-loader_worker-veomni-1ff2675553.json"),
}
#: Where each fix can show: the components whose code it changes (for the leave-one-out search).
FIX_COMPONENTS: dict[str, tuple[str, ...]] = {
    **{f: ("loader:main",) for f in ("V1", "V2", "V3", "V4", "V5", "V12")},
    "V6": ("loader:worker", "loader:multisource"), "V7": ("loader:worker", "loader:multisource"),
    "V8": ("loader:worker", "loader:multisource"), "V13": ("loader:worker", "loader:multisource"),
    "V15": ("loader:worker", "loader:multisource"),
    **{f: ("loader:multisource",) for f in ("V9", "V10")},
    "V11": ("packer",),
}


_INSTALLED: list[tuple[Any, str, Any]] | None = None


def _install() -> None:
    """Put the patched functions in place once per process. Each behaves as VeOmni's own until
    its fix id is in ``ACTIVE``; V4 and V7 replace attributes only while active (CONDITIONAL)."""
    global _INSTALLED
    if _INSTALLED is None:
        _INSTALLED = []
        for obj, attr, new in patch_list():
            _INSTALLED.append((obj, attr, obj.__dict__[attr]))
            setattr(obj, attr, new)


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
    before = set(ACTIVE)
    saved = _activate(ids)
    try:
        yield
    finally:
        ACTIVE.clear()
        ACTIVE.update(before)
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
        for obj, attr, new in CONDITIONAL.get(fix, lambda: [])():
            saved.append((obj, attr, obj.__dict__.get(attr), attr in obj.__dict__))
            setattr(obj, attr, new)
    ACTIVE.update(ids)
    return saved


def fixed_loaders() -> dict[str, Callable[[Any], Any]]:
    """VeOmni's loader pipelines as the fixed builder assembles them: V6 (drop_last=False for the
    worker runtime's micro-batch groups) when active; the rest is the patched classes."""
    from ..targets import veomni_loaders as vl

    def worker_kw(sc):
        kw = vl._loader_kw(sc)
        if active("V6"):
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
            if active("V5"):
                self.dl._drop_last = False   # a pass's last, short step is delivered, not dropped

    return {"loader:main": FixedMain, "loader:worker": FixedWorker, "loader:multisource": FixedMulti}


_PERMANENT: list[Any] = []


def fixed() -> Target:
    """``documented()`` with every fix in FIXES applied, for the rest of this process."""
    if not _PERMANENT:
        # Never undone: forked workers and later loaders must see the fixes.
        _PERMANENT.append(_activate(ALL_FIXES))
    return Target(name="veomni-fixed", components=documented_components(fixed_loaders()),
                  description="VeOmni 0.1.12 with the report's proposed fixes V1-V13 and V15 patched in (D1-D4 not drawn)")


def builders_fixed() -> Target:
    """``veomni-builders`` (VeOmni's loaders as its own builders build them, held to D1-D4) with every fix in FIXES
    patched into VeOmni's classes for the rest of this process: a campaign on the real path looks past the known
    bugs. V6 (``drop_last=False``) is not applied: the builders take ``drop_last`` from the arguments, as
    BaseTrainer passes them. Runs in VeOmni's overlay (``python -m properties`` re-runs itself there)."""
    base = veomni_builders.target()
    name = "veomni-builders-fixed"
    if base.unavailable:
        return Target(name=name, description="veomni-builders with fixes", unavailable=base.unavailable)
    if not _PERMANENT:
        _PERMANENT.append(_activate(ALL_FIXES))
    return Target(name=name, components=base.components,
                  description=base.description + "; with the report's fixes " + ", ".join(f for f in ALL_FIXES if f != "V6")
                  + " patched into VeOmni's classes (properties.veomni_conformance:builders_fixed)")
