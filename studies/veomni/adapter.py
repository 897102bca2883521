"""The ``veomni`` target: VeOmni 0.1.12's ``TextBatchingStrategy`` through ``dynbsz.compat.veomni.VeOmniPacker``,
and its three loader pipelines (``studies.veomni.loaders``) when the optional extra is installed."""

from __future__ import annotations

from typing import Any

from dynbsz.config import PackerConfig
from properties.repro_setup import PackerReproSetup
from properties.targets.base import PackerComponent, Target
from properties.targets.builtin import fixed_specs

from . import loaders

MISSING = "VeOmni 0.1.12 is not importable (install the extra: bash ci/install.sh --veomni)"


def repro_packer(config: PackerConfig, spec: dict[str, Any]) -> PackerReproSetup:
    """``dynbsz.compat.veomni``'s ``make_strategy`` and ``VeOmniPacker``'s calls as standalone code (the
    ``PackerReproSetup`` functions), the config's values as literals."""
    if config.overlong != "emit_alone":
        raise ValueError(f"VeOmni's TextBatchingStrategy only knows overlong='emit_alone', got {config.overlong!r}")
    code = ["class Ids:  # VeOmni reads only input_ids.shape[-1] (it drops a sample of one token or none)",
            "    def __init__(self, n):", "        self.shape = (n,)", "",
            f"strategy = TextBatchingStrategy(token_micro_bsz={config.budget}, buffer_size={spec['buffer_size']}, "
            f"bsz_warmup_steps={config.warmup_steps},",
            f"                                bsz_warmup_init_mbtoken={config.warmup_init_tokens}, "
            f"physical_token_cap={config.physical_cap},",
            "                                get_length_fn=lambda s: s['tokens'], "
            "get_physical_length_fn=lambda s: s['physical'])",
            "ready, empty = strategy.is_ready_for_micro_batch, strategy.empty", "",
            "def put(sid, tokens, physical):  # a sample: the strategy reads its lengths through the functions above",
            "    strategy.put_item({'id': sid, 'tokens': tokens, 'physical': physical, 'input_ids': Ids(physical)})", "",
            "def cut(step):  # the next micro-batch of optimizer step `step`, and the budget it was cut against",
            "    items = strategy.get_micro_batch(step)",
            "    return ([i['id'] for i in items], [i['tokens'] for i in items], [i['physical'] for i in items],",
            "            strategy.get_cur_token_micro_bsz())"]
    return PackerReproSetup("VeOmni 0.1.12", ("from veomni.data.dynamic_batching import TextBatchingStrategy",),
                            "\n".join(code))


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
                                accepts_gates=False, repro_setup=repro_packer)

    if not loaders.available():  # the data modules import more of VeOmni than the packer does
        return Target(name="veomni", description=description + "; its loaders are not importable here",
                      components=(component,))
    return Target(name="veomni", description=description + "; its loaders (see studies.veomni.loaders)",
                  components=(component,) + loaders.components())
