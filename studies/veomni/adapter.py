"""The ``veomni`` target: VeOmni 0.1.12's ``TextBatchingStrategy`` through ``dynbsz.compat.veomni.VeOmniPacker``,
and its three loader pipelines (``studies.veomni.loaders``) when the optional extra is installed."""

from __future__ import annotations

from typing import Any

from dynbsz.config import PackerConfig
from properties.targets.base import PackerComponent, Target
from properties.targets.builtin import fixed_specs

from . import loaders

MISSING = "VeOmni 0.1.12 is not importable (install the extra: bash ci/install.sh --veomni)"


def target() -> Target:
    from dynbsz.compat import veomni

    description = "VeOmni 0.1.12's TextBatchingStrategy through dynbsz.compat.veomni.VeOmniPacker"
    if not veomni.available():
        return Target(name="veomni", description=description, unavailable=MISSING)

    def make(config: PackerConfig, spec: dict[str, Any]):
        return veomni.VeOmniPacker(config, spec["buffer_size"])

    # VeOmni knows only a fixed buffer gate and one policy for overlong samples. Zero-token samples
    # stay in the draw: effective-token counting (labels all ignored) produces them, and VeOmni's
    # forced-head test (`cum_seq_len == 0`) then force-takes every sample up to the first non-empty
    # one, past the budget and the physical cap. Its checkpoint is the strategy object itself
    # (deep-copied), as DynamicBatchSizeDataLoader keeps it.
    component = PackerComponent(name="packer", kind="packer", make_packer=make, gate_specs=fixed_specs,
                                overlong=("emit_alone",), empty=("emit_alone",), json_state=False,
                                accepts_gates=False)

    if not loaders.available():  # the data modules import more of VeOmni than the packer does
        return Target(name="veomni", description=description + "; its loaders are not importable here",
                      components=(component,))
    return Target(name="veomni", description=description + "; its loaders (see studies.veomni.loaders)",
                  components=(component,) + loaders.components())
