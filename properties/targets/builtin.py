"""The built-in targets: ``dynbsz`` (the production packer and every built-in gate) and
``veomni`` (VeOmni 0.1.12's ``TextBatchingStrategy``, when the optional extra is installed)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from dynbsz.config import PackerConfig
from dynbsz.gates import CONTEXT_AWARE_TABLE, FixedGate, TokenAwareGate, context_aware, resolve_gate
from dynbsz.packer import GreedyPacker

from .. import probes
from .base import PackerComponent, Target

# ---- gate specs, the serialized form of a gate in examples and regression files -------------


def _counts(maximum: int) -> st.SearchStrategy[int]:
    # Small thresholds half the time: a count threshold only matters when it is reached before
    # the budget is covered, which with streams of a few dozen samples takes a small one.
    return st.one_of(st.integers(1, 6), st.integers(1, maximum))


def fixed_specs(config: PackerConfig, max_buffer: int = 40) -> st.SearchStrategy[dict]:
    return _counts(max_buffer).map(lambda n: FixedGate(n).spec())


def token_aware_specs(config: PackerConfig, max_pool: int = 40) -> st.SearchStrategy[dict]:
    # Margins from a short list keep examples (and regression files) readable; the rule's
    # ceil((1 + margin) * budget) is exercised by the budgets, which vary freely.
    margins = st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.5, 3.0])
    return st.builds(lambda m, p: TokenAwareGate(m, p).spec(), margins, _counts(max_pool))


def context_aware_specs(config: PackerConfig) -> st.SearchStrategy[dict]:
    return st.just(context_aware(config.budget).spec())


def probe_specs(config: PackerConfig) -> st.SearchStrategy[dict]:
    return st.sampled_from([1.0, 0.75]).map(lambda f: probes.HighWaterGate(f).spec())


def builtin_specs(config: PackerConfig) -> st.SearchStrategy[dict]:
    """What a packer is tested with: both documented gates and the stateful probe."""
    return st.one_of(fixed_specs(config), token_aware_specs(config), probe_specs(config))


def build_gate(spec: dict[str, Any], budget: int) -> Any:
    """A fresh gate from its spec: dynbsz's own resolver for built-in kinds, the probe otherwise."""
    if spec.get("kind") == probes.KIND:
        return probes.from_spec(spec)
    return resolve_gate(dict(spec), budget=budget)


def greedy_packer(config: PackerConfig, spec: dict[str, Any]) -> GreedyPacker:
    return GreedyPacker(config, build_gate(spec, config.budget))


CONTEXT_AWARE_BUDGETS = st.sampled_from(sorted(CONTEXT_AWARE_TABLE))

# Which gate family a gate component draws, by name; mutants of a gate replace one of these.
GATE_FAMILIES: dict[str, dict[str, Any]] = {
    "fixed": {"gate_specs": fixed_specs},
    "token_aware": {"gate_specs": token_aware_specs},
    "context_aware": {"gate_specs": context_aware_specs, "budgets": CONTEXT_AWARE_BUDGETS},
}


def gate_component(family: str, make_packer=greedy_packer) -> PackerComponent:
    return PackerComponent(name=f"gate:{family}", kind="gate", make_packer=make_packer, documented_rule=True,
                           **GATE_FAMILIES[family])


def packer_component(make_packer=greedy_packer) -> PackerComponent:
    return PackerComponent(name="packer", kind="packer", make_packer=make_packer, gate_specs=builtin_specs)


def dynbsz_target() -> Target:
    return Target(name="dynbsz", description="dynbsz's GreedyPacker with every built-in gate (must pass everything)",
                  components=(packer_component(),) + tuple(gate_component(f) for f in GATE_FAMILIES))


# ---- VeOmni --------------------------------------------------------------------------------

VEOMNI_MISSING = "VeOmni 0.1.12 is not importable (install the extra: bash ci/install.sh --veomni)"


def veomni_target() -> Target:
    from dynbsz.compat import veomni

    description = "VeOmni 0.1.12's TextBatchingStrategy through dynbsz.compat.veomni.VeOmniPacker"
    if not veomni.available():
        return Target(name="veomni", description=description, unavailable=VEOMNI_MISSING)

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
    return Target(name="veomni", description=description, components=(component,))


BUILTIN = {"dynbsz": dynbsz_target, "veomni": veomni_target}
