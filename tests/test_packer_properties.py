"""The packer's invariants, for every built-in gate, on Hypothesis-generated streams."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynbsz import FixedGate, GreedyPacker, PackerConfig, TokenAwareGate
from properties import packer_props as P
from properties.strategies import gates, packer_configs, sample_streams

pytestmark = pytest.mark.filterwarnings("ignore::dynbsz.errors.DroppedSampleWarning")


@st.composite
def scenarios(draw, **config_kw):
    config = draw(packer_configs(**config_kw))
    gate = draw(gates())
    stream = draw(sample_streams(config.budget, physical=config.physical_cap is not None,
                                 allow_empty=True))
    return config, gate, stream


def _run(config, gate, stream, **kw):
    return P.drive(lambda: GreedyPacker(config, gate), config, stream, **kw)


@given(scenarios(overlong=("emit_alone", "drop"), empty=("emit_alone", "drop")))
def test_conservation_budget_order_and_warmup(scenario):
    config, gate, stream = scenario
    packer_holder = {}

    def make():
        packer_holder["p"] = GreedyPacker(config, gate)
        return packer_holder["p"]

    run = P.drive(make, config, stream)
    P.check_conservation(run, dropped=packer_holder["p"].dropped)
    P.check_budget(run)
    P.check_warmup(run)
    P.check_ordered_greedy(run)


@given(scenarios())
def test_minimum_gate_not_capacity(scenario):
    config, gate, stream = scenario
    run = _run(config, gate, stream)
    P.check_minimum_gate(run)


def _gate_rule(config, gate):
    """Each built-in gate's documented rule, restated independently of gates.py."""
    cap = config.physical_cap

    def covers(tokens, phys):
        return tokens >= config.budget or (cap is not None and phys >= cap)

    if isinstance(gate, FixedGate):
        return lambda n, tokens, phys: n > 0 and n >= gate.buffer_size and covers(tokens, phys)
    assert isinstance(gate, TokenAwareGate)
    target = math.ceil((1 + gate.margin) * config.budget)
    ptarget = math.ceil((1 + gate.margin) * cap) if cap is not None else None
    return lambda n, tokens, phys: n > 0 and covers(tokens, phys) and (
        n >= gate.pool_cap or tokens >= target or (ptarget is not None and phys >= ptarget))


@given(scenarios())
def test_gate_opens_exactly_by_its_rule(scenario):
    config, gate, stream = scenario
    run = _run(config, gate, stream)
    P.check_gate_opens(run, _gate_rule(config, gate))


@given(scenarios(overlong=("emit_alone", "drop"), empty=("emit_alone", "drop")), st.data())
def test_resume_anywhere_is_invisible(scenario, data):
    config, gate, stream = scenario
    points = data.draw(st.lists(st.integers(0, max(0, len(stream) - 1)), max_size=4, unique=True)) if stream else []
    plain = _run(config, gate, stream)
    resumed = _run(config, gate, stream, restore_after=sorted(points))
    P.check_resume_equivalence(plain, resumed)
