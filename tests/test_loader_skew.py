"""in_order skew on the real loader: zero displacement in order; out of order, the measured skew
agrees with the simulator's prediction for the same trace, and broken loaders fail."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from properties.errors import PropertyViolation
from properties.scenarios import SkewScenario
from properties.skew_props import SKEW_WORKLOAD, check_in_order_skew, dynbsz_skew_runner, measure, sampler_trace
from simulator.fidelity import measure_overhead


@pytest.fixture(scope="module")
def overhead():
    # The model's one machine-dependent input, measured on a near-zero-cost trace, never fitted.
    return measure_overhead()


@pytest.mark.parametrize("workers", [2, 3])
def test_in_order_true_delivers_sampler_order(workers):
    report = check_in_order_skew(dynbsz_skew_runner, SkewScenario(num_workers=workers, in_order=True, data_seed=4))
    assert report["real"]["max_displacement"] == 0


@pytest.mark.parametrize("seed", [0, 1])
def test_out_of_order_skew_agrees_with_the_simulator(seed, overhead):
    report = check_in_order_skew(dynbsz_skew_runner, SkewScenario(data_seed=seed, shuffle_seed=seed),
                                 task_overhead_s=overhead)
    # Uneven costs really do skew: samples move, and the prediction says by about as much.
    assert report["real"]["mean_displacement"] > 1.0
    assert report["predicted"]["mean_displacement"] > 1.0


def test_a_loader_that_ignores_in_order_fails():
    def ignores(sc):
        return dynbsz_skew_runner(replace(sc, in_order=False))

    with pytest.raises(PropertyViolation, match="in_order=True moved samples"):
        check_in_order_skew(ignores, SkewScenario(in_order=True))


def test_a_loader_with_a_hidden_cheap_first_buffer_fails(overhead):
    """Reorders far more than torch's dispatch allows: cheapest first within blocks of 48."""
    def cheap_first(sc):
        trace = SKEW_WORKLOAD.sample(sc.num_samples, sc.data_seed)
        ids = dynbsz_skew_runner(sc)
        out = []
        for i in range(0, len(ids), 48):
            out.extend(sorted(ids[i:i + 48], key=lambda sid: trace.cost_s[sid]))
        return out

    with pytest.raises(PropertyViolation, match="mean displacement"):
        check_in_order_skew(cheap_first, SkewScenario(), task_overhead_s=overhead)


def test_measure_is_pure_and_zero_for_sampler_order():
    trace = sampler_trace(SkewScenario(num_samples=40))
    m = measure(trace, np.arange(40), 8)
    assert (m.mean_displacement, m.max_displacement, m.shift) == (0.0, 0, 0.0)
    swapped = np.arange(40)
    swapped[[0, 39]] = swapped[[39, 0]]
    assert measure(trace, swapped, 8).max_displacement == 39
