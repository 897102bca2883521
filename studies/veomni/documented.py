"""VeOmni held only to what it documents (``studies.veomni.deviations``): the target that never draws
an example hitting one of the deviations D1-D4 (a replay of one is a skip naming it), does not hold the main
runtime to the per-epoch properties its design does not promise (D5), and runs the worker runtime with
``drop_last=False``, VeOmni's documented setting that keeps every sample (D6). Outputs are never changed.

Run in a process whose VeOmni carries the proposed diffs, it is the ``fixed`` target (``fixes``)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from properties.targets.base import LoaderComponent, PackerComponent, Target, TargetError
from studies.veomni.deviations import DEVIATIONS, Refused, documented_loader, loader_deviation, reject


class _DocumentedPacker:
    """A VeOmni packer that refuses (as Unsupported) the samples VeOmni documents it drops."""

    def __init__(self, inner: Any):
        self._inner = inner

    def put(self, sample_id, tokens, physical_tokens=None, source=None, payload=None):
        if (tokens if physical_tokens is None else physical_tokens) <= 1:
            raise reject("D1", f"sample {sample_id!r} holds {tokens if physical_tokens is None else physical_tokens} "
                                "token(s)")
        return self._inner.put(sample_id, tokens, physical_tokens, source, payload)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __len__(self) -> int:
        return len(self._inner)


def _keep_last(make: Callable[..., Any]) -> Callable[[Any], Any]:
    def make_loader(sc):
        return make(sc, drop_last=False)   # D6: VeOmni's setting under which no sample is dropped

    return make_loader


def documented_components() -> tuple:
    from .adapter import target as veomni_target

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
            out.append(documented_loader(c, _keep_last(c.make_loader) if c.runtime == "worker" else None))
        else:
            out.append(c)
    return tuple(out)


def documented() -> Target:
    """``veomni`` with every example that hits a documented deviation (D1-D4) rejected, D5's properties skipped on
    the main runtime and the worker runtime run with ``drop_last=False`` (D6)."""
    return Target(name="veomni-documented", components=documented_components(),
                  description="VeOmni 0.1.12 held to what it documents: examples hitting D1-D4 are not drawn, the main "
                              "runtime is not held to the per-epoch properties (D5), the worker runtime runs with "
                              "drop_last=False (D6)")


__all__ = ["DEVIATIONS", "Refused", "documented", "documented_components", "loader_deviation"]
