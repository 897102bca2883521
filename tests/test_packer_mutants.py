"""The properties have teeth: every deliberately broken gate, packer or loader (properties/mutants/,
at least one per dynbsz module a property covers) is killed by the property suite alone in the CI
profile, and the example that killed it is no false alarm: dynbsz passes it.

The settings are ``python -m properties mutants``'s (ci profile, seed 0, no example database, no
shrinking). The runner keeps a seed's examples independent of the modules loaded
(``runner.hermetic_search``), but which property kills a mutant first is not the point: the goal
checked is the one that matters, killed, by a genuine counterexample.
"""

from __future__ import annotations

import pytest

from properties import mutation, suite
from properties.mutants import MUTANTS
from properties.runner import replay_example
from properties.targets import resolve

SETTINGS = mutation.default_settings("ci", seed=0)


def test_there_are_enough_mutants_and_each_is_distinct():
    names = [m.name for m in MUTANTS]
    assert len(names) >= 41 and len(set(names)) == len(names)
    assert {m.component for m in MUTANTS} == {"packer", "gate", "loader"}


def test_every_aim_is_a_property_that_applies_to_the_mutant_s_kind():
    aimed = [m for m in MUTANTS if m.aims_at is not None]
    assert aimed
    for m in aimed:
        prop = suite.get(m.aims_at)
        assert m.component in prop.kinds, f"{m.name} aims at {m.aims_at}, which does not apply to {m.component}s"


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_mutant_is_killed_and_dynbsz_passes_the_killing_example(mutant):
    outcome = mutation.run_mutant(mutant, SETTINGS)
    assert outcome.status == "killed", f"{mutant.name} survived: {outcome.description}"
    if mutant.aims_at is not None:   # the search starts where the mutant was aimed
        assert outcome.results[0].property == mutant.aims_at
    kill = next(r for r in outcome.results if r.status == "fail")
    assert kill.minimal_example is not None and kill.message
    control = replay_example(resolve("dynbsz"), suite.get(kill.property), kill.component, kill.minimal_example)
    assert control.status == "pass", f"dynbsz fails the example that killed {mutant.name}: {control.message}"


def test_step_not_restored_is_caught_by_the_gate_that_reads_the_step():
    """The packer component also draws warmup_ramp gates (``builtin_specs``), so a packer that restarts its
    step on restore is caught through the gate alone: with the batch-size warm-up off, the budgets cannot
    show the lost step, and only the ramp's minimum (read from ``view.step``) can."""
    from hypothesis import HealthCheck, Phase, find, settings

    from properties import packer_suite
    from properties.errors import PropertyViolation

    component = resolve("mutant:step-not-restored").components[0]

    def resume_fails(ex) -> bool:
        try:
            packer_suite.resume(component, ex)
        except PropertyViolation:
            return True
        return False

    # The first failing example is the evidence; shrinking it (most of this test's time) proves nothing more.
    ex = find(packer_suite.examples(component, restores=True, warmup=False), resume_fails,
              settings=settings(max_examples=400, database=None, derandomize=True, phases=[Phase.generate],
                                suppress_health_check=list(HealthCheck)))
    assert ex.config.warmup_steps == 0 and ex.gate["kind"] == "warmup_ramp"
    packer_suite.resume(resolve("dynbsz").components[0], ex)   # no false alarm: dynbsz passes it


def test_a_mutant_whose_kill_is_arrival_timing_out_of_order_is_searched_in_order_only():
    from properties.registry import mutant

    comp = resolve("mutant:finished-epoch-restored-as-fresh").component("loader:main")
    assert comp.in_order == (True,) and "arrival timing" in comp.knob_notes["in_order"]
    assert resolve("mutant:resume-by-count").component("loader:main").in_order == (True, False)
    with pytest.raises(ValueError, match="in_order_only is a loader mutant's setting"):
        mutant("x", component="packer", in_order_only=True)
