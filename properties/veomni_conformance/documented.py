"""VeOmni held only to what it documents: the deviations D1-D4, and the target that never draws
an example hitting one (a replay of one is a skip naming it). Outputs are never changed."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ..errors import Unsupported
from ..targets.base import LoaderComponent, PackerComponent, Target, TargetError

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
    from ..loader_targets import trace_of

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


def _documented_loader(component: LoaderComponent, make: Callable[[Any], Any] | None = None) -> LoaderComponent:
    make = make or component.make_loader

    def make_loader(sc):
        hit = loader_deviation(component.name, component.runtime, sc)
        return Refused(hit) if hit is not None else make(sc)

    return dataclasses.replace(component, make_loader=make_loader)


def documented_components(loaders: dict[str, Callable[[Any], Any]] | None = None) -> tuple:
    from ..targets.builtin import veomni_target

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
    return Target(name="veomni-documented", components=documented_components(),
                  description="VeOmni 0.1.12 held to what it documents: examples hitting D1-D4 are not drawn")
