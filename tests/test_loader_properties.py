"""The loader properties on fixed scenarios where a broken loader must fail and dynbsz must hold.

The generated-scenario search (exactly-once, exact resume, epochs under persistent workers,
DP shards, in_order skew on both runtimes) is the registry's loader suite
(``properties/loader_suite.py``): it runs on dynbsz's loader components through the plugin in
tests/test_packer_properties.py (target ``dynbsz``), on torchdata and VeOmni in
tests/test_properties_loaders.py, and on the loader mutants in tests/test_packer_mutants.py.
What stays here are loaders outside the registry (plain iterable datasets under a plain
StatefulDataLoader) and schedules chosen to hit a known failure every time.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from dynbsz.errors import SampleError
from properties import loader_props as L
from properties.errors import PropertyViolation
from properties.loader_targets import (
    dynbsz_loader,
    shared_epoch_loader,
    stale_epoch_loader,
    step_signature,
    torchdata_loader,
)
from properties.mutants import by_name
from properties.mutants.loaders import count_resume_loader
from properties.scenarios import LoaderScenario

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

step_off_by_one = by_name("step-off-by-one").make

# A slow head makes deliveries out of order at the checkpoint: samples behind it arrive first.
SLOW_HEAD = LoaderScenario(num_samples=24, data_seed=3, num_workers=3, prefetch_factor=2, in_order=False,
                             fetch_batch_size=2, fast_s=0.002, slow_s=0.25, video_share=0.15, budget=512,
                             buffer_size=1, epochs=1, checkpoints=(4,))


def test_exactly_once_fails_on_resume_by_count():
    # Which samples the count skips or repeats depends on arrival order (timing): a repeated one is
    # either delivered twice (the property's violation) or, if it is still in the restored packer
    # buffer, refused by the packer as a second put. The suite reports both as a failure
    # (runner.guarded_check turns a target's exception into a violation).
    with pytest.raises((PropertyViolation, SampleError), match="exactly-once|already buffered"):
        L.check_exactly_once(count_resume_loader, SLOW_HEAD, expected=L.expected_epoch_ids(SLOW_HEAD))


def test_exactly_once_holds_for_dynbsz_on_the_same_schedule():
    L.check_exactly_once(dynbsz_loader, SLOW_HEAD, expected=L.expected_epoch_ids(SLOW_HEAD))


def test_exactly_once_fails_on_plain_statefuldataloader_out_of_order():
    # torchdata replays a *count* of batches on resume; out of order that count is not the set.
    # It shows only when a batch is still in flight behind later ones at the checkpoint, which is
    # timing: each of these seeds showed it in 8-14 of 16 runs on two busy cores (and one CI run
    # saw none of three seeds fail), so the test tries up to eight and stops at the first failure.
    for seed in range(8):
        sc = replace(SLOW_HEAD, data_seed=seed, checkpoints=(5,))
        try:
            L.check_exactly_once(torchdata_loader, sc, expected=L.expected_epoch_ids(sc))
        except PropertyViolation:
            return
    pytest.fail("plain StatefulDataLoader(in_order=False) resumed every seed exactly once: "
                "torchdata's count-based resume may be fixed (docs/guide/loader.md: \"The checkpoint is what was delivered\")")


def test_epoch_property_fails_when_the_epoch_is_read_at_construction():
    sc = LoaderScenario(num_samples=20, num_workers=2, prefetch_factor=2, epochs=3)
    with pytest.raises(PropertyViolation, match="epoch"):
        L.check_epoch_reshuffle(stale_epoch_loader, sc)


def test_epoch_property_holds_for_an_iterable_with_its_epoch_in_shared_memory():
    # A fresh loader told set_epoch(e) must deliver epoch e too: the epoch is in shared memory,
    # set in the main process before the workers start.
    sc = LoaderScenario(num_samples=20, num_workers=2, prefetch_factor=2, epochs=3)
    L.check_epoch_reshuffle(shared_epoch_loader, sc)


def test_epoch_property_names_an_epoch_that_delivered_nothing():
    # two empty epochs are "the same order", but what a user must hear is that nothing was delivered
    # (found on VeOmni's worker runtime, whose drop_last drops every worker's only, partial step)
    from properties.loader_targets import PlainTorchdataLoader

    class DeliversNothing(PlainTorchdataLoader):
        def __iter__(self):
            return iter(())

    sc = LoaderScenario(num_samples=12, num_workers=0, epochs=2)
    with pytest.raises(PropertyViolation, match="epochs 0 and 1 delivered none of the 12 samples"):
        L.check_epoch_reshuffle(DeliversNothing, sc)


def test_epoch_property_fails_on_plain_statefuldataloader():
    # Non-persistent workers draw one extra seed per epoch from the shared generator, so the same
    # seed gives other permutations from epoch 1 on.
    sc = LoaderScenario(num_samples=20, num_workers=2, prefetch_factor=2, epochs=3)
    with pytest.raises(PropertyViolation, match="epoch"):
        L.check_epoch_reshuffle(torchdata_loader, sc)


def test_restore_at_every_epoch_end_keeps_dynbsz_exact():
    # The state taken after an epoch's iterator ran out (torchdata's end-of-epoch state) and the
    # one taken right after its last step must both continue with the next epoch, unchanged:
    # every step's index, and each micro-batch's ids and the budget it was cut against
    # (step_signature, what loader_resume compares), not only the sample ids.
    for runtime in ("main", "worker"):
        sc = LoaderScenario(num_samples=18, num_workers=2, prefetch_factor=2, persistent_workers=True,
                            runtime=runtime, fetch_batch_size=2 if runtime == "main" else 1, epochs=3,
                            warmup_steps=3 if runtime == "main" else 0, checkpoints=(0, 3), restore_at_epoch_end=True)
        L.check_exact_resume(dynbsz_loader, sc, ids_of=step_signature)


def test_exact_resume_compares_step_indices_and_budgets_not_only_ids():
    # A checkpoint one step short renumbers the steps after a restore: the same ids in the same
    # order, so a comparison of ids alone passes it; the step signature does not. Under warm-up
    # the budgets shift too.
    sc = LoaderScenario(num_samples=18, epochs=2, checkpoints=(3,))
    L.check_exact_resume(step_off_by_one, sc)   # ids alone: a blind spot
    with pytest.raises(PropertyViolation, match="resume: step 3 differs"):
        L.check_exact_resume(step_off_by_one, sc, ids_of=step_signature)
    with pytest.raises(PropertyViolation, match="resume: step 3 differs"):
        L.check_exact_resume(step_off_by_one, replace(sc, warmup_steps=6), ids_of=step_signature)
