"""lookahead='auto': a pure function of the cost estimates and the worker count, resolved in one place
(``dynbsz.order.auto_lookahead``), the same in the loader, its checkpoints and the simulator."""

from __future__ import annotations

import numpy as np
import pytest

from dynbsz.costs import CostModel, estimate_costs
from dynbsz.datasets import TraceMapDataset
from dynbsz.errors import ConfigError
from dynbsz.loader import build_loader
from dynbsz.loader_config import LoaderConfig
from dynbsz.order import MAX_LOOKAHEAD, MIN_LOOKAHEAD, auto_lookahead, loader_order, rank_order, resolve_lookahead
from dynbsz.workload import LOADER_BENCH_MIX, SPARSE_VIDEO, with_cost_noise
from simulator import skew
from simulator.bridge import trace_estimates
from simulator.config import LoaderModelConfig, StepTime


def test_auto_is_the_documented_rule_and_a_pure_function():
    # 20% of samples at 20 ms among 2 ms ones: slow share 0.2, so 6 slow per worker needs 30 x workers
    costs = np.array([0.02 if i % 5 == 0 else 0.002 for i in range(1000)])
    assert auto_lookahead(costs, 1) == 30 and auto_lookahead(costs, 4) == 120
    assert auto_lookahead(costs, 4) == auto_lookahead(costs.copy(), 4)
    # a permutation of the estimates (another epoch's order) resolves the same
    assert auto_lookahead(np.random.default_rng(0).permutation(costs), 4) == 120
    # rarer slow samples need a longer lookahead: a tenth -> twice as long
    rarer = np.array([0.02 if i % 10 == 0 else 0.002 for i in range(1000)])
    assert auto_lookahead(rarer, 2) == 2 * auto_lookahead(costs, 2) == 120


def test_auto_is_bounded():
    assert auto_lookahead(np.full(500, 0.003), 4) == MIN_LOOKAHEAD            # no slow samples
    assert auto_lookahead(np.array([0.02, 0.02, 0.0, 0.0, 0.0]), 1) == MIN_LOOKAHEAD   # 15, raised to 16
    rare = np.array([0.05 if i % 100 == 0 else 0.002 for i in range(10_000)])
    assert auto_lookahead(rare, 8) == MAX_LOOKAHEAD == 256
    assert auto_lookahead(rare, 0) == 0 and auto_lookahead(np.zeros(0), 4) == 0


def test_the_config_takes_auto_by_default_or_an_integer_and_refuses_the_rest():
    assert LoaderConfig().lookahead == "auto"
    assert LoaderConfig(num_workers=2, order="balanced", lookahead=7).lookahead == 7
    for bad in ("Auto", "32", -1, 2.5, True, None):
        with pytest.raises(ConfigError, match="lookahead.*allowed values: 'auto' or an integer >= 0") as e:
            LoaderConfig(num_workers=2, order="balanced", lookahead=bad)
        assert "\n" not in str(e.value)


def test_an_explicit_integer_is_used_as_it_is_and_auto_needs_estimates():
    costs = LOADER_BENCH_MIX.sample(400, 0).cost_s
    assert resolve_lookahead(LoaderConfig(num_workers=4, order="balanced", lookahead=9), costs) == 9
    with pytest.raises(ValueError, match="auto"):
        resolve_lookahead(LoaderConfig(num_workers=4, order="balanced"), None)


def test_the_loader_order_with_auto_is_the_order_at_the_resolved_integer():
    costs = SPARSE_VIDEO.sample(600, 1).cost_s
    auto = LoaderConfig(num_workers=3, prefetch_factor=2, seed=2, order="balanced")
    fixed = LoaderConfig(num_workers=3, prefetch_factor=2, seed=2, order="balanced",
                         lookahead=auto_lookahead(costs, 3))
    other = LoaderConfig(num_workers=3, prefetch_factor=2, seed=2, order="balanced", lookahead=16)
    assert np.array_equal(loader_order(600, auto, 0, costs), loader_order(600, fixed, 0, costs))
    assert not np.array_equal(loader_order(600, auto, 0, costs), loader_order(600, other, 0, costs))


TRACE = LOADER_BENCH_MIX.sample(60, 3)
MODEL = CostModel.fit(TRACE)


def meta_fn(index: int) -> dict:
    return {"tokens": int(TRACE.tokens[index]), "source": TRACE.source_names[int(TRACE.source[index])]}


def ids_of(loader, steps=None) -> list:
    out = []
    for step in loader:
        out.append(tuple(step.sample_ids))
        if steps is not None and len(out) == steps:
            break
    return out


def test_a_loader_with_auto_resumes_mid_epoch_to_exactly_the_uninterrupted_run():
    ds = TraceMapDataset(TRACE, time_scale=0.05)
    config = LoaderConfig(num_workers=2, prefetch_factor=2, seed=4, order="balanced", cost_model=MODEL)
    loader = build_loader(ds, None, None, config, meta_fn=meta_fn)
    full = ids_of(loader)
    fingerprint = loader._fingerprint()
    loader.close()
    flat = [i for step in full for i in step]
    assert flat != rank_order(60, 4, 0, 0, 1).tolist()       # the balanced order, not the sampler's
    estimates = estimate_costs(60, meta_fn, MODEL.estimate)
    assert fingerprint["lookahead"] == auto_lookahead(estimates, 2)

    first = build_loader(ds, None, None, config, meta_fn=meta_fn)
    head = ids_of(first, steps=17)
    state = first.state_dict()
    first.close()
    second = build_loader(ds, None, None, config, meta_fn=meta_fn)
    second.load_state_dict(state)
    tail = ids_of(second)
    second.close()
    assert head + tail == full


def test_the_simulator_runs_the_lookahead_dynbsz_resolves():
    base = SPARSE_VIDEO.sample(400, 0)
    true = with_cost_noise(base, 0.3, 0)
    found = skew.study(base, LoaderModelConfig(num_workers=4, prefetch_factor=2), StepTime(), 50,
                       lookahead="auto")
    estimated = trace_estimates(base, CostModel.fit(base))
    config = LoaderConfig(num_workers=4, prefetch_factor=2, order="balanced")
    assert [r.lookahead for r in found.balanced] == [resolve_lookahead(config, true.cost_s),
                                                     resolve_lookahead(config, estimated)]
    assert all(r.max_displacement <= r.lookahead for r in found.balanced)
    # exact and estimated costs resolve differently here, so a model that resolved once would show
    assert found.balanced[0].lookahead != found.balanced[1].lookahead
