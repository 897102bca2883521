"""The packer properties have teeth: every deliberately broken packer or gate is caught."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, find, settings
from hypothesis import strategies as st

from dynbsz import FixedGate, GreedyPacker
from properties import packer_props as P
from properties.mutants import PACKER_MUTANTS
from properties.strategies import packer_configs, sample_streams


@st.composite
def scenarios(draw):
    config = draw(packer_configs())
    gate = FixedGate(draw(st.integers(1, 8)))
    stream = draw(sample_streams(config.budget, physical=config.physical_cap is not None, min_size=1))
    restore = draw(st.lists(st.integers(0, len(stream) - 1), max_size=3, unique=True))
    return config, gate, stream, sorted(restore)


def violation(scenario, make):
    config, gate, stream, restore = scenario
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            P.check_packer(lambda: make(config, gate), config, gate.spec(), stream, restore)
    except P.PropertyViolation as e:
        return str(e)
    return None


@pytest.mark.parametrize("mutant", PACKER_MUTANTS, ids=lambda m: m.name)
def test_mutant_is_killed(mutant):
    if mutant.component == "gate":
        def make(config, gate):
            return GreedyPacker(config, mutant.make(gate.buffer_size))
    else:
        def make(config, gate):
            return mutant.make(config, gate)
    example = find(scenarios(), lambda sc: violation(sc, make) is not None,
                   settings=settings(max_examples=2000, deadline=None, database=None,
                                     suppress_health_check=list(HealthCheck)))
    assert violation(example, make) is not None


@pytest.mark.filterwarnings("ignore::dynbsz.errors.DroppedSampleWarning")
def test_real_packer_passes_the_same_suite():
    # The control: the unmutated packer survives the very search that kills the mutants.
    from hypothesis import given

    @given(scenarios())
    @settings(max_examples=100, deadline=None)
    def inner(sc):
        assert violation(sc, lambda config, gate: GreedyPacker(config, gate)) is None

    inner()
