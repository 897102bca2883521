"""The model predicts what the real StatefulDataLoader does (real worker processes, sleep-based costs).

Each case runs well under a second with 2-4 workers sleeping a few to a few tens
of milliseconds per sample (a balanced case about 1.5 s: it runs a warm-up epoch),
so the file is safe under ``pytest -n auto``. The jitter tolerance here is looser
than the CLI's default because the suite shares two cores with other test
processes; the order rule is the same.
"""

from __future__ import annotations

import pytest

from simulator.fidelity import MAKESPAN_TOLERANCE, FidelityCase, measure_overhead, run_case

LOADED_MACHINE_JITTER_S = 0.015

CASES = [
    FidelityCase(seed=11, samples=40, batch_size=2, num_workers=2, prefetch_factor=2, in_order=True),
    FidelityCase(seed=12, samples=40, batch_size=1, num_workers=4, prefetch_factor=1, in_order=True, step_s=0.005),
    FidelityCase(seed=13, samples=40, batch_size=2, num_workers=3, prefetch_factor=2, in_order=False),
    FidelityCase(seed=14, samples=40, batch_size=1, num_workers=4, prefetch_factor=2, in_order=False, step_s=0.01),
]

#: dynbsz's build_loader with order='balanced' against the model running the same dynbsz order.
BALANCED = [
    FidelityCase(seed=15, samples=48, batch_size=1, num_workers=4, prefetch_factor=2, order="balanced",
                 costs="exact"),
    FidelityCase(seed=16, samples=48, batch_size=2, num_workers=3, prefetch_factor=2, order="balanced",
                 costs="estimated", step_s=0.005),
]

#: dynbsz's build_loader with a reorder buffer (torch out of order, the order restored in the main process)
#: against the model of it; buffers small enough that they fill and pauses are dispatched (the model
#: dispatches 104 and 49). 96-120 samples, not 48: out of order, which worker gets a 100 ms sample is
#: a near-tie, and on 48 samples one such sample alone moved the real makespan by 20% from run to
#: run (0.29-0.38 s, the model 0.37 s). Three workers, not four: with four on two cores and no step
#: those near-ties also moved the real makespan 0.69-0.85 s under load (CI failed on it once at
#: 10.3%); with three, 16 runs idle and under two busy-loop processes measured within 0.3-3.4%.
REORDER = [
    FidelityCase(seed=17, samples=120, batch_size=1, num_workers=3, prefetch_factor=2, reorder_buffer=8),
    FidelityCase(seed=18, samples=96, batch_size=2, num_workers=3, prefetch_factor=2, reorder_buffer=6,
                 step_s=0.005),
]


#: Attempts per real-loader case. A loaded machine only ever delays the real loader (other test
#: processes take its cores), never speeds it up, so an attempt within tolerance shows the model is
#: right; every attempt off by more than the tolerance shows it is not.
ATTEMPTS = 3


def measured(case: FidelityCase, overhead: float, ok) -> object:
    """The first of ``ATTEMPTS`` runs of ``case`` that ``ok`` accepts, else the last (for the message)."""
    for _ in range(ATTEMPTS):
        result = run_case(case, tolerance_s=LOADED_MACHINE_JITTER_S, task_overhead_s=overhead)
        if ok(result):
            break
    return result


@pytest.fixture(scope="module")
def overhead() -> float:
    """This machine's per-task overhead, measured on a separate near-zero-cost trace (not on the cases)."""
    value = measure_overhead()
    assert 0 <= value < 0.005          # a fraction of a millisecond; more means the machine is swamped
    return value


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.label)
def test_real_loader_matches_the_model(case, overhead):
    result = measured(case, overhead, lambda r: (r.order_exact and r.workers_exact if case.in_order else
                                                 r.max_gap_s <= LOADED_MACHINE_JITTER_S)
                      and r.makespan_ok and r.replay_makespan_error <= MAKESPAN_TOLERANCE)
    if case.in_order:
        # in_order=True: exactly sampler order, and every batch on the round-robin worker
        assert result.order_exact and result.workers_exact, result
    else:
        # in_order=False: any difference is a near-tie the real loader may resolve either way
        assert result.max_gap_s <= LOADED_MACHINE_JITTER_S, result
    assert result.makespan_ok, result
    # the replay that followed the real hand-outs is always close: the model's timing is right
    assert result.replay_makespan_error <= MAKESPAN_TOLERANCE, result
    assert result.decisions == -(-case.samples // case.batch_size)


@pytest.mark.parametrize("case", BALANCED, ids=lambda c: c.label)
def test_real_balanced_loader_matches_the_model(case, overhead):
    """The model's predicted throughput for the balanced order is within 10% (MAKESPAN_TOLERANCE) of the
    real loader's. Measured on the 2-core development machine: within 1.7% when it is otherwise idle,
    up to 7% with other test processes beside it (the real loader then runs slower, never faster)."""
    result = measured(case, overhead, lambda r: r.order_exact and r.workers_exact and r.makespan_error <=
                      MAKESPAN_TOLERANCE and abs(r.model_fraction_of_limit - r.real_fraction_of_limit) <=
                      MAKESPAN_TOLERANCE * r.real_fraction_of_limit)
    # the same dynbsz order, sample for sample, and every batch on the round-robin worker
    assert result.order_exact and result.workers_exact, result
    real, model = result.real_fraction_of_limit, result.model_fraction_of_limit
    assert abs(model - real) <= MAKESPAN_TOLERANCE * real, result
    assert result.makespan_error <= MAKESPAN_TOLERANCE, result
    assert result.decisions == -(-case.samples // case.batch_size)


@pytest.mark.parametrize("case", REORDER, ids=lambda c: c.label)
def test_real_reorder_buffer_loader_matches_the_model(case, overhead):
    """Both deliver the sampler's order batch for batch, and the model's makespan is within 10% of the real
    loader's (which worker ran a batch is arrival order's doing and is not compared)."""
    result = measured(case, overhead, lambda r: r.order_exact and r.makespan_error <= MAKESPAN_TOLERANCE)
    assert result.order_exact and result.order_ok, result
    assert result.makespan_error <= MAKESPAN_TOLERANCE, result
    assert result.decisions == -(-case.samples // case.batch_size)
