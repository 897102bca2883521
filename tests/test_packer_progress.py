"""The progress, bounded-buffer and bounded-wait oracles (properties.packer_props) on runs built by hand,
their bounds worked out here from each gate's documentation, and a user packer with its own readiness held
to the bound it declares."""

from __future__ import annotations

import pytest

from dynbsz.config import PackerConfig
from dynbsz.gates import covers_budget
from dynbsz.packer import GreedyPacker
from properties import packer_props as P
from properties import packer_suite, suite
from properties.errors import PropertyViolation
from properties.runner import RunSettings, run_property
from properties.scenarios import Sample
from properties.targets import resolve
from properties.targets.base import PackerComponent, Target, TargetError
from properties.targets.builtin import build_gate, fixed_specs


def _run(sizes, accepted=None, **config) -> P.Run:
    run = P.Run(PackerConfig(**config), [Sample(i, t) for i, t in enumerate(sizes)])
    run.accepted = list(accepted or [True] * len(sizes))
    return run


def test_buffer_limit_from_the_count_minimum_and_the_uncovered_budget():
    # fixed:3, budget 10: a closed buffer has at most 2 samples, or < 10 tokens: sizes 1, 2, 3 fit in 9
    # (three samples), so a closed buffer holds at most 3 samples, plus one put: 4; tokens: the four largest.
    run = _run([5, 1, 2, 3, 8, 4], budget=10)
    assert P.buffer_limit(run, {"kind": "fixed", "buffer_size": 3}) == (4, 8 + 5 + 4 + 3)
    # a count minimum of 8 dominates: 7 closed, 8 after a put (the whole stream of 6 then)
    assert P.buffer_limit(run, {"kind": "fixed", "buffer_size": 8})[0] == 8
    # an empty sample never covers anything: it adds to the uncovered buffer's count
    assert P.buffer_limit(_run([5, 0, 1, 2, 3], budget=10), {"kind": "fixed", "buffer_size": 1})[0] == 5
    # a sample rejected at put() is never buffered
    assert P.buffer_limit(_run([1, 1, 1], accepted=[True, False, True], budget=10),
                          {"kind": "fixed", "buffer_size": 1})[0] == 3


def _observe(run, states):
    for i, (n, tokens, ready) in enumerate(states):
        run.observations.append(P.Observation(i, n, tokens, tokens, ready))


def test_progress_flags_a_due_micro_batch_held_back_and_honours_declared_slack():
    spec = {"kind": "fixed", "buffer_size": 2, "policy": "fixed"}
    run = _run([6, 6, 6], budget=10)
    _observe(run, [(1, 6, False), (2, 12, False), (3, 18, False)])
    with pytest.raises(PropertyViolation, match="progress: after sample 1 .* no micro-batch was cut by sample 1"):
        P.check_progress(run, spec)
    P.check_progress(run, spec, P.ProgressBound(min_samples=2, within_puts=2))
    with pytest.raises(PropertyViolation, match="by sample 2"):
        P.check_progress(run, spec, P.ProgressBound(min_samples=2, within_puts=1))
    ok = _run([6, 6], budget=10)
    _observe(ok, [(1, 6, False), (2, 12, True)])
    P.check_progress(ok, spec)


def test_bounded_wait_counts_cuts_since_arrival():
    run = _run([4, 4, 4], budget=4)
    _observe(run, [(1, 4, False), (2, 8, True), (2, 8, True)])
    # sample 0 (nothing ahead of it) is left behind by the first cut: it may wait one cut only
    run.cuts = [P.Cut((1,), (4,), (4,), 4, False, [], 1), P.Cut((0,), (4,), (4,), 4, False, [], 2),
                P.Cut((2,), (4,), (4,), 4, True, [], 2)]
    with pytest.raises(PropertyViolation, match="bounded wait: sample 0 .* 2 cuts after it arrived; at most 1"):
        P.check_bounded_wait(run)
    P.check_bounded_wait(run, P.ProgressBound(max_wait=2))


def test_progress_bound_rejects_bad_values_naming_the_field():
    with pytest.raises(ValueError, match="min_samples=0"):
        P.ProgressBound(min_samples=0)
    with pytest.raises(ValueError, match="max_wait=0"):
        P.ProgressBound(max_wait=0)
    with pytest.raises(TargetError, match="progress=.* must be a properties.packer_props.ProgressBound"):
        PackerComponent(name="p", kind="packer", make_packer=GreedyPacker, gate_specs=fixed_specs,
                        progress={"min_samples": 4})


class _EveryEighth(GreedyPacker):
    """A packer with its own readiness: it cuts only at every eighth put, whatever its gate says."""

    def __init__(self, config, gate=None):
        super().__init__(config, gate)
        self.puts = 0

    def put(self, *a, **kw):
        self.puts += 1
        return super().put(*a, **kw)

    def ready(self) -> bool:
        return self.puts % 8 == 0 and covers_budget(self)

    def state_dict(self):
        return {**super().state_dict(), "puts": self.puts}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.puts = state["puts"]


def _check(component, name):
    target = Target(name="own", components=(component,))
    return run_property(target, suite.get(name), component, RunSettings(max_examples=150, database=None, shrink=False))


def test_a_packer_with_its_own_readiness_fails_progress_unless_it_declares_its_bound():
    base = dict(name="packer", kind="packer", make_packer=lambda c, s: _EveryEighth(c, build_gate(s, c.budget)),
                gate_specs=fixed_specs)
    assert _check(PackerComponent(**base), "progress").status == "fail"
    declared = PackerComponent(**base, progress=P.ProgressBound(min_samples=1, within_puts=7, max_wait=60))
    assert _check(declared, "progress").status == "pass"


def test_the_new_properties_are_in_the_suite_for_packers_and_gates():
    names = {p.name for p in suite.PROPERTIES}
    assert {"progress", "bounded_buffer", "bounded_wait"} <= names
    for name in ("progress", "bounded_buffer"):
        assert {"packer", "gate"} <= suite.get(name).kinds
    assert packer_suite.bounded_wait is not None and resolve("dynbsz").component("gate:fixed") is not None
