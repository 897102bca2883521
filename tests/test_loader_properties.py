"""The loader's four behaviours as Hypothesis properties over generated configurations, each
also run against a deliberately broken loader that must fail it.

Every example builds real StatefulDataLoaders with real worker processes and sleeping samples,
so example counts are a quarter of the profile's (ci: 15 per property).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from properties import loader_props as L
from properties.loader_targets import (count_resume_loader, dynbsz_loader, shared_epoch_loader, stale_epoch_loader,
                                       torchdata_loader)
from properties.packer_props import PropertyViolation

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
EXAMPLES = max(3, settings.default.max_examples // 4)


@st.composite
def scenarios(draw, *, in_order=None, runtime=None, max_checkpoints=3):
    workers = draw(st.integers(0, 3))
    runtime = draw(st.sampled_from(["main", "worker"])) if runtime is None else runtime
    n = draw(st.integers(12, 40))
    return L.LoaderScenario(
        num_samples=n, data_seed=draw(st.integers(0, 2**16)), shuffle_seed=draw(st.integers(0, 2**16)),
        num_workers=workers, prefetch_factor=draw(st.integers(1, 3)) if workers else None,
        persistent_workers=draw(st.booleans()) if workers else False,
        in_order=draw(st.booleans()) if in_order is None else in_order, runtime=runtime,
        fetch_batch_size=draw(st.integers(1, 3)) if runtime == "main" else 1,
        budget=draw(st.sampled_from([128, 512, 2048])), buffer_size=draw(st.integers(1, 6)),
        micro_batches_per_step=draw(st.integers(1, 2)), epochs=2,
        warmup_steps=draw(st.integers(0, 4)) if runtime == "main" else 0,
        checkpoints=tuple(sorted(draw(st.lists(st.integers(0, 2 * n // 3), max_size=max_checkpoints)))))


@settings(max_examples=EXAMPLES)
@given(scenarios(in_order=True))
def test_exact_resume_in_order(sc):
    # Step ids and warm-up budgets: a resumed step must be the same step, cut against the same budget.
    L.check_exact_resume(dynbsz_loader, sc, ids_of=ids_and_budgets)


def ids_and_budgets(step):
    L.default_ids_of(step)  # payload integrity
    return (step.index,) + tuple((tuple(mb.ids), mb.budget) for mb in step.micro_batches)


@settings(max_examples=EXAMPLES)
@given(scenarios(in_order=False))
def test_exactly_once_out_of_order(sc):
    L.check_exactly_once(dynbsz_loader, sc, expected=L.expected_epoch_ids(sc))


@settings(max_examples=EXAMPLES)
@given(scenarios())
def test_epoch_order_reaches_persistent_workers(sc):
    sc = replace(sc, num_workers=max(1, sc.num_workers), prefetch_factor=sc.prefetch_factor or 2, in_order=True)
    L.check_epoch_reshuffle(dynbsz_loader, sc)


@settings(max_examples=max(2, EXAMPLES // 3))
@given(scenarios(max_checkpoints=0), st.integers(2, 3))
def test_dp_shards_disjoint_and_complete(sc, dp):
    L.check_dp_shards(dynbsz_loader, replace(sc, dp_size=dp))


# ---- the same properties fail on broken loaders ---------------------------------------------

# A slow head makes deliveries out of order at the checkpoint: samples behind it arrive first.
SLOW_HEAD = L.LoaderScenario(num_samples=24, data_seed=3, num_workers=3, prefetch_factor=2, in_order=False,
                             fetch_batch_size=2, fast_s=0.002, slow_s=0.25, video_share=0.15, budget=512,
                             buffer_size=1, epochs=1, checkpoints=(4,))


def test_exactly_once_fails_on_resume_by_count():
    with pytest.raises(PropertyViolation, match="exactly-once"):
        L.check_exactly_once(count_resume_loader, SLOW_HEAD, expected=L.expected_epoch_ids(SLOW_HEAD))


def test_exactly_once_holds_for_dynbsz_on_the_same_schedule():
    L.check_exactly_once(dynbsz_loader, SLOW_HEAD, expected=L.expected_epoch_ids(SLOW_HEAD))


def test_exactly_once_fails_on_plain_statefuldataloader_out_of_order():
    # torchdata replays a *count* of batches on resume; out of order that count is not the set.
    failures = 0
    for seed in range(3):
        sc = replace(SLOW_HEAD, data_seed=seed, checkpoints=(5,))
        try:
            L.check_exactly_once(torchdata_loader, sc, expected=L.expected_epoch_ids(sc))
        except PropertyViolation:
            failures += 1
    assert failures >= 1


def test_epoch_property_fails_when_the_epoch_is_read_at_construction():
    sc = L.LoaderScenario(num_samples=20, num_workers=2, prefetch_factor=2, epochs=3)
    with pytest.raises(PropertyViolation, match="epoch"):
        L.check_epoch_reshuffle(stale_epoch_loader, sc)


def test_epoch_property_holds_for_an_iterable_with_its_epoch_in_shared_memory():
    sc = L.LoaderScenario(num_samples=20, num_workers=2, prefetch_factor=2, epochs=3)
    L.check_epoch_reshuffle(shared_epoch_loader, sc)


def test_epoch_property_fails_on_plain_statefuldataloader():
    # Non-persistent workers draw one extra seed per epoch from the shared generator, so the same
    # seed gives other permutations from epoch 1 on.
    sc = L.LoaderScenario(num_samples=20, num_workers=2, prefetch_factor=2, epochs=3)
    with pytest.raises(PropertyViolation, match="epoch"):
        L.check_epoch_reshuffle(torchdata_loader, sc)
