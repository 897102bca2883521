"""VeOmni 0.1.12's documented deviations D1-D6, and the rules that keep a loader scenario from reporting one as a bug.

One home for both VeOmni targets: ``veomni-builders`` (VeOmni's own builders) applies it to every loader it
builds, and ``studies.veomni:documented`` to the hand-assembled ``veomni`` target's. A refused
scenario is an ``Unsupported`` naming the deviation: the search rejects the example, a replay reports a skip.
D5 is a design, not a scenario: the main runtime does not promise the per-epoch properties (``d5_skips``, a skip
naming it). D6 is a default with a documented alternative: the documented target's worker runtime is configured
with ``drop_last=False`` (``studies.veomni.documented``), under which VeOmni keeps every sample.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from properties.errors import Unsupported
from properties.loader_targets import trace_of
from properties.targets.base import LoaderComponent

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
    "D5": ("the main runtime's epoch is train_steps steps: the data pass is re-read to fill it and the packing "
           "buffer's leftovers open the next epoch (DynamicBatchSizeDataLoader.batch_data_generator, "
           "veomni/data/dynamic_batching.py:307-308, 322-327 'call iter until reach length'; "
           "docs/usage/data_packing_and_dyn_bsz.md: 'for SFT tasks ... it is recommended to disable dyn_bsz')"),
    "D6": ("drop_last=True, the default, drops each worker's last incomplete step every epoch ('Whether to drop the "
           "last incomplete batch', veomni/arguments/arguments_types.py:1532-1535); drop_last=False keeps it"),
}
#: D5: the properties that judge an epoch's samples, which the main runtime's design does not promise
D5_PROPERTIES = ("exactly_once", "epoch_reshuffle", "dp_shards")


def reject(deviation: str, detail: str) -> Unsupported:
    return Unsupported(f"documented deviation {deviation}: {detail} ({DEVIATIONS[deviation].split(' (')[0]})")


def loader_deviation(component_name: str, runtime: str, sc: Any, prop: str | None = None) -> Unsupported | None:
    """The documented deviation a loader scenario hits on a VeOmni loader component, if any."""
    if runtime == "worker":
        tokens = trace_of(sc).tokens
        over = int((tokens > sc.budget).sum())
        if over:
            return reject("D2", f"{over} of {sc.num_samples} samples are longer than the budget {sc.budget}")
    if sc.dp_size > 1 and sc.num_samples % sc.dp_size:
        return reject("D3", f"{sc.num_samples} samples over {sc.dp_size} ranks")
    if not sc.in_order and sc.num_workers > 0 and (sc.checkpoints or sc.restore_at_epoch_end):
        return reject("D4", "a checkpoint schedule with in_order=False and workers")
    return None


class Refused:
    """Stands in for a loader on a scenario that hits a documented deviation: any use raises the
    Unsupported that makes the runner reject the example (or a replay report a skip)."""

    def __init__(self, reason: Unsupported):
        self.reason = reason

    def _refuse(self, *args, **kwargs):
        raise self.reason

    set_epoch = __iter__ = state_dict = load_state_dict = _refuse

    def close(self) -> None:
        pass


def d5_skips(component: LoaderComponent) -> dict[str, str]:
    """The per-epoch properties a main-runtime component does not promise (D5), with the reason a skip gives."""
    if component.runtime != "main":
        return {}
    return {p: f"documented deviation D5: {DEVIATIONS['D5']}" for p in D5_PROPERTIES}


def documented_loader(component: LoaderComponent, make: Callable[[Any], Any] | None = None) -> LoaderComponent:
    """``component`` held to what VeOmni documents: scenarios hitting D1-D4 refused, D5's properties skipped."""
    make = make or component.make_loader

    def make_loader(sc):
        hit = loader_deviation(component.name, component.runtime, sc)
        return Refused(hit) if hit is not None else make(sc)

    make_loader.__wrapped__ = make   # what builds an admitted example (properties.repro_loader renders its module's)

    return dataclasses.replace(component, make_loader=make_loader, skip={**component.skip, **d5_skips(component)})



__all__ = ["D5_PROPERTIES", "DEVIATIONS", "Refused", "d5_skips", "documented_loader", "loader_deviation", "reject"]
