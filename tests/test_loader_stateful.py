"""Sequences of operations on a loader, as a Hypothesis rule-based state machine.

Interleaves taking steps, checkpoint-and-restore into a fresh loader, dropping the iterator
mid-epoch, running an epoch out and moving to the next, in any order. The model is the
uninterrupted transcript of the same configuration: with in_order=True every step must equal
the model's; with in_order=False every epoch must deliver each sample exactly once.
"""

from __future__ import annotations

import json
import warnings
from collections import Counter

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from properties import loader_props as L
from properties.loader_targets import dynbsz_loader

EPOCHS = 3


def _sig(step):
    return (step.index, step.epoch, tuple(tuple(mb.ids) for mb in step.micro_batches))


class LoaderMachine(RuleBasedStateMachine):
    @initialize(runtime=st.sampled_from(["main", "worker"]), workers=st.sampled_from([0, 2]),
                in_order=st.booleans(), persistent=st.booleans(), n=st.integers(10, 24), seed=st.integers(0, 99))
    def build(self, runtime, workers, in_order, persistent, n, seed):
        warnings.simplefilter("ignore")
        self.sc = L.LoaderScenario(num_samples=n, data_seed=seed, shuffle_seed=seed, num_workers=workers,
                                   prefetch_factor=2 if workers else None, persistent_workers=persistent,
                                   in_order=in_order, runtime=runtime, budget=256, buffer_size=3,
                                   micro_batches_per_step=2 if runtime == "main" else 1, epochs=EPOCHS)
        reference = dynbsz_loader(self.sc)
        self.model = []
        for e in range(EPOCHS):
            reference.set_epoch(e)
            self.model.extend(_sig(s) for s in reference)
        reference.close()
        self.loader = dynbsz_loader(self.sc)
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
        state = json.loads(json.dumps(self.loader.state_dict()))
        self.loader.close()
        self.loader = dynbsz_loader(self.sc)
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
                assert max(ids.values(), default=1) == 1, f"epoch {e} repeated {[k for k, c in ids.items() if c > 1]}"
                if e < self.epoch or self.epoch_over:
                    assert sorted(ids) == list(range(self.sc.num_samples)), f"epoch {e} lost samples"
            assert [s[0] for s in self.seen] == list(range(len(self.seen))), "step indices must run on"


LoaderMachine.TestCase.settings = settings(max_examples=max(3, settings.default.max_examples // 6),
                                           stateful_step_count=25, deadline=None)
TestLoaderMachine = LoaderMachine.TestCase
