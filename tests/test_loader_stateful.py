"""Sequences of operations on a loader, as a Hypothesis rule-based state machine.

Interleaves taking steps, checkpoint-and-restore into a fresh loader, dropping the iterator
mid-epoch, running an epoch out and moving to the next (set_epoch), in any order. The model is
the uninterrupted transcript of the same configuration: with in_order=True every step must equal
the model's; with in_order=False every epoch must deliver each sample exactly once.

The machine is built for a loader component (``properties.targets.LoaderComponent``: its
factory, knobs and checkpoint codec), so the same sequences run on both of dynbsz's runtimes
and, to prove they have teeth, on loader mutants that must be caught.
"""

from __future__ import annotations

import json
import pickle
import warnings
from collections import Counter

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition, rule,
                                 run_state_machine_as_test)

from properties import loader_props as L
from properties.targets import resolve

EPOCHS = 3


def _sig(step):
    return (step.index, step.epoch, tuple(tuple(mb.ids) for mb in step.micro_batches))


def machine_for(component) -> type[RuleBasedStateMachine]:
    """A state machine driving loaders that ``component`` makes (dynbsz's Step interface)."""
    make = component.make_loader
    codec = component.state_codec
    workers = [w for w in (0, 2) if w <= component.max_workers]

    def roundtrip(state):
        return json.loads(json.dumps(state)) if codec == "json" else pickle.loads(pickle.dumps(state))

    class LoaderMachine(RuleBasedStateMachine):
        @initialize(workers=st.sampled_from(workers), in_order=st.sampled_from(component.in_order),
                    persistent=st.sampled_from(component.persistent), n=st.integers(10, 24), seed=st.integers(0, 99),
                    mbps=st.sampled_from(component.micro_batches_per_step))
        def build(self, workers, in_order, persistent, n, seed, mbps):
            warnings.simplefilter("ignore")
            self.sc = L.LoaderScenario(num_samples=n, data_seed=seed, shuffle_seed=seed, num_workers=workers,
                                       prefetch_factor=2 if workers else None, persistent_workers=persistent,
                                       in_order=in_order, runtime=component.runtime, budget=256, buffer_size=3,
                                       micro_batches_per_step=mbps, epochs=EPOCHS)
            reference = make(self.sc)
            self.model = []
            for e in range(EPOCHS):
                reference.set_epoch(e)
                self.model.extend(_sig(s) for s in reference)
            reference.close()
            self.loader = make(self.sc)
            self.epoch = 0
            self.loader.set_epoch(0)
            self.it = iter(self.loader)
            self.seen: list = []          # signatures of the steps taken so far
            self.epoch_over = False

        def teardown(self):
            if hasattr(self, "loader"):
                self.loader.close()

        @precondition(lambda self: not self.epoch_over)
        @rule()
        def take_step(self):
            try:
                self.seen.append(_sig(next(self.it)))
            except StopIteration:
                self.epoch_over = True

        @rule()
        def checkpoint_and_restore(self):
            state = roundtrip(self.loader.state_dict())
            self.loader.close()
            self.loader = make(self.sc)
            self.loader.load_state_dict(state)
            self.loader.set_epoch(self.epoch)
            self.it = iter(self.loader)

        @precondition(lambda self: not self.epoch_over)
        @rule()
        def drop_iterator(self):
            # A training loop that breaks out and iterates again: nothing may be lost or repeated.
            self.it = None
            self.loader.close()
            self.it = iter(self.loader)

        @precondition(lambda self: self.epoch_over and self.epoch + 1 < EPOCHS)
        @rule()
        def next_epoch(self):
            self.epoch += 1
            self.loader.set_epoch(self.epoch)
            self.it = iter(self.loader)
            self.epoch_over = False

        @invariant()
        def matches_the_uninterrupted_run(self):
            if not hasattr(self, "sc"):
                return
            if self.sc.in_order:
                assert self.seen == self.model[:len(self.seen)]
            else:
                for e in range(self.epoch + 1):
                    ids = Counter(sid for _, ep, mbs in self.seen if ep == e for mb in mbs for sid in mb)
                    repeated = [k for k, c in ids.items() if c > 1]
                    assert not repeated, f"epoch {e} repeated {repeated}"
                    if e < self.epoch or self.epoch_over:
                        assert sorted(ids) == list(range(self.sc.num_samples)), f"epoch {e} lost samples"
                assert [s[0] for s in self.seen] == list(range(len(self.seen))), "step indices must run on"

    LoaderMachine.__name__ = f"LoaderMachine[{component.name}]"
    return LoaderMachine


DYNBSZ = resolve("dynbsz")
MachineMain = machine_for(DYNBSZ.component("loader:main"))
MachineWorker = machine_for(DYNBSZ.component("loader:worker"))
# Ten sequences per profile's 60 between the two runtimes, as before the split.
_SETTINGS = settings(max_examples=max(3, settings.default.max_examples // 12), stateful_step_count=25, deadline=None)
MachineMain.TestCase.settings = _SETTINGS
MachineWorker.TestCase.settings = _SETTINGS
TestLoaderMachineMain = MachineMain.TestCase
TestLoaderMachineWorker = MachineWorker.TestCase


def test_the_machine_catches_a_loader_mutant():
    # A checkpoint one step short: any restore after a step renumbers the steps that follow.
    (component,) = resolve("mutant:step-off-by-one").components
    # Generation only: a counterexample is enough, shrinking a state machine costs more than the search.
    found = settings(max_examples=30, stateful_step_count=25, deadline=None, database=None,
                     phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    with pytest.raises(AssertionError):
        run_state_machine_as_test(machine_for(component), settings=found)
