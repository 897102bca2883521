"""order='balanced': a bounded rearrangement of the sampler's order that keeps torch's workers level.

The throughput oracle here is written independently of dynbsz and of the simulator: a few lines
of torch's in_order=True rules (task j to worker j % W, dispatched when task j - P*W is handed
out, each worker FIFO, hand-out in task order).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dynbsz.costs import CostModel
from dynbsz.datasets import TraceMapDataset
from dynbsz.errors import ConfigError, StateMismatchError
from dynbsz.loader import build_loader
from dynbsz.loader_config import LoaderConfig
from dynbsz.order import LazyOrder, balanced_order, balanced_picks, loader_order, rank_order
from dynbsz.workload import LOADER_BENCH_MIX, with_cost_noise

#: The loader benchmark's mix: 80% text at 2 ms, 20% video at 20 ms.
MIX = LOADER_BENCH_MIX


def in_order_makespan(costs, workers: int, prefetch: int, batch: int = 1) -> float:
    """torch's in_order=True schedule with an infinitely fast consumer: when the last task is handed out."""
    tasks = [float(sum(costs[i:i + batch])) for i in range(0, len(costs), batch)]
    free = [0.0] * workers
    handout: list[float] = []
    for j, c in enumerate(tasks):
        dispatch = handout[j - workers * prefetch] if j >= workers * prefetch else 0.0
        start = max(dispatch, free[j % workers])
        free[j % workers] = start + c
        handout.append(max(handout[-1] if handout else 0.0, start + c))
    return handout[-1]


@settings(max_examples=60, deadline=None)
@given(costs=st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=0, max_size=80),
       workers=st.integers(1, 5), prefetch=st.integers(1, 4), lookahead=st.integers(0, 12), batch=st.integers(1, 3))
def test_a_permutation_in_which_nothing_moves_more_than_the_lookahead(costs, workers, prefetch, lookahead, batch):
    order = np.arange(100, 100 + len(costs))
    out = balanced_order(order, np.array(costs), num_workers=workers, prefetch_factor=prefetch,
                         lookahead=lookahead, batch_size=batch)
    assert sorted(out.tolist()) == order.tolist()
    moved = np.abs(np.argsort(out) - np.argsort(order)) if len(costs) else np.zeros(0)
    assert (moved <= lookahead).all()
    again = balanced_order(order, np.array(costs), num_workers=workers, prefetch_factor=prefetch,
                           lookahead=lookahead, batch_size=batch)
    assert out.tolist() == again.tolist()          # a pure function of its inputs
    if lookahead == 0:
        assert out.tolist() == order.tolist()


@pytest.mark.parametrize("workers,prefetch,batch", [(4, 2, 1), (4, 4, 1), (8, 2, 1), (4, 2, 2)])
def test_balanced_order_reaches_the_limit_on_exact_costs(workers, prefetch, batch):
    trace = MIX.sample(4000, 0)
    costs = trace.cost_s[rank_order(4000, 0, 0, 0, 1)]
    limit = costs.sum() / workers
    plain = limit / in_order_makespan(costs, workers, prefetch, batch)
    out = balanced_order(np.arange(4000), costs, num_workers=workers, prefetch_factor=prefetch, lookahead=32,
                         batch_size=batch)
    balanced = limit / in_order_makespan(costs[out], workers, prefetch, batch)
    assert plain < 0.85          # the trade the issue describes: in_order=True is slow on this mix
    assert balanced > 0.97       # ... and the order alone removes it


def test_balanced_order_levels_continuous_exact_costs():
    """Every sample's own cost (the mix times a lognormal factor: no two alike), known exactly: the order
    still levels the workers to 0.97 of the limit at lookahead 32 (measured 0.981 at seed 1; the median
    forecast of the first version reached 0.976)."""
    true = with_cost_noise(MIX.sample(4000, 1), 0.3, 1).cost_s[rank_order(4000, 1, 0, 0, 1)]
    limit = true.sum() / 4
    out = balanced_order(np.arange(4000), true, num_workers=4, prefetch_factor=2, lookahead=32)
    assert limit / in_order_makespan(true, 4, 2) < 0.65
    assert limit / in_order_makespan(true[out], 4, 2) > 0.97


def test_on_noisy_estimates_slow_rounds_come_in_runs_that_absorb_the_noise():
    """Estimates that know each source's cost, not the sample's: after a round of slow samples the next
    round takes slow ones too where the lookahead has them, so one round's lateness is absorbed by the
    next round's work. Measured at seed 1, lookahead 32: 46% of all-slow rounds follow another (the
    median forecast: 4%), and 0.883 of the limit on the true costs (the median forecast: 0.854)."""
    base = MIX.sample(4000, 1)
    order = rank_order(4000, 1, 0, 0, 1)
    estimates, true = base.cost_s[order], with_cost_noise(base, 0.3, 1).cost_s[order]
    out = balanced_order(np.arange(4000), estimates, num_workers=4, prefetch_factor=2, lookahead=32)
    slow_rounds = (estimates[out] > 0.01).reshape(-1, 4).all(axis=1)
    assert (slow_rounds[1:] & slow_rounds[:-1]).sum() > 0.3 * slow_rounds.sum()
    limit = true.sum() / 4
    assert limit / in_order_makespan(true[out], 4, 2) > 0.87
    assert in_order_makespan(true[out], 4, 2) < 0.7 * in_order_makespan(true, 4, 2)


def test_balanced_order_beats_the_sampler_order_on_noisy_estimates():
    trace = MIX.sample(4000, 1)
    estimates = trace.cost_s
    true = estimates * np.random.default_rng(2).lognormal(0.0, 0.3, 4000)
    out = balanced_order(np.arange(4000), estimates, num_workers=4, prefetch_factor=2, lookahead=16)
    assert in_order_makespan(true[out], 4, 2) < 0.8 * in_order_makespan(true, 4, 2)


# ---- the loader --------------------------------------------------------------------------------

TRACE = MIX.sample(60, 3)


def meta_fn(index: int) -> dict:
    return {"tokens": int(TRACE.tokens[index]), "source": TRACE.source_names[int(TRACE.source[index])]}


MODEL = CostModel.fit(TRACE)


def balanced(**over) -> LoaderConfig:
    kw = dict(num_workers=2, prefetch_factor=2, seed=4, order="balanced", lookahead=6, cost_model=MODEL)
    kw.update(over)
    return LoaderConfig(**kw)


def ids_of(loader, steps=None) -> list:
    out = []
    for step in loader:
        out.append(tuple(step.sample_ids))
        if steps is not None and len(out) == steps:
            break
    return out


def fast_dataset():
    return TraceMapDataset(TRACE, time_scale=0.05)


def test_the_loader_reads_the_balanced_order_and_resumes_it_exactly():
    ds = fast_dataset()
    loader = build_loader(ds, None, None, balanced(), meta_fn=meta_fn)
    full = ids_of(loader)
    loader.close()
    flat = [i for step in full for i in step]
    plain = rank_order(60, 4, 0, 0, 1).tolist()
    assert sorted(flat) == sorted(plain) and flat != plain
    assert max(abs(flat.index(i) - plain.index(i)) for i in plain) <= 6

    first = build_loader(ds, None, None, balanced(), meta_fn=meta_fn)
    head = ids_of(first, steps=17)
    state = first.state_dict()
    first.close()
    second = build_loader(ds, None, None, balanced(), meta_fn=meta_fn)
    second.load_state_dict(state)
    tail = ids_of(second)
    second.close()
    assert head + tail == full


def test_the_lazy_order_is_the_eager_one_computed_only_as_far_as_it_is_read():
    costs = MIX.sample(500, 1).cost_s
    order = rank_order(500, 1, 0, 0, 1)
    shape = dict(num_workers=4, prefetch_factor=2, lookahead=16)
    eager = balanced_order(order, costs[order], **shape)
    drawn = []

    def counted():
        for pick in balanced_picks(costs[order], **shape):
            drawn.append(pick)
            yield pick

    lazy = LazyOrder(order, counted())
    assert len(lazy) == 500 and drawn == []
    assert lazy[9] == eager[9] and len(drawn) == 10
    assert [lazy[p] for p in range(500)] == eager.tolist()
    assert np.asarray(lazy).tolist() == eager.tolist()
    for bad in (500, -1, slice(0, 3)):
        with pytest.raises(IndexError):
            lazy[bad]


def test_the_loader_delivers_exactly_the_eager_balanced_order():
    ds = fast_dataset()
    loader = build_loader(ds, None, None, balanced(), meta_fn=meta_fn)
    flat = [i for step in ids_of(loader) for i in step]
    eager = loader_order(60, balanced(), 0, loader.cost_estimates())
    loader.close()
    assert isinstance(eager, np.ndarray) and flat == eager.tolist()


def test_a_reorder_buffer_reads_the_balanced_order_only_as_far_as_the_workers_have_got():
    # The sequencer once read every key of the epoch before the first dispatch, which computed the
    # whole lazy order first: the stall LazyOrder exists to avoid.
    config = balanced(reorder_buffer=4)
    loader = build_loader(fast_dataset(), None, None, config, meta_fn=meta_fn)
    it = iter(loader)
    first = next(it)
    computed = len(loader._order_cache[1]._done)     # LazyOrder: the positions computed so far
    flat = list(first.sample_ids) + [i for step in it for i in step.sample_ids]
    eager = loader_order(60, config, 0, loader.cost_estimates())
    loader.close()
    assert computed < 30, computed
    assert flat == eager.tolist()


@pytest.mark.parametrize("change,setting", [(dict(num_workers=3), "num_workers"),
                                            (dict(prefetch_factor=3), "prefetch_factor"),
                                            (dict(lookahead=5), "lookahead"),
                                            (dict(order="sampler", cost_model=None), "order")])
def test_a_balanced_checkpoint_refuses_another_layout(change, setting):
    ds = fast_dataset()
    loader = build_loader(ds, None, None, balanced(), meta_fn=meta_fn)
    ids_of(loader, steps=3)
    state = loader.state_dict()
    loader.close()
    kw = {} if change.get("order") == "sampler" else {"meta_fn": meta_fn}
    other = build_loader(ds, None, None, balanced(**change), **kw)
    with pytest.raises(StateMismatchError, match=setting):
        other.load_state_dict(state)


def test_a_balanced_checkpoint_refuses_another_cost_model():
    ds = fast_dataset()
    loader = build_loader(ds, None, None, balanced(), meta_fn=meta_fn)
    state = loader.state_dict()
    other = build_loader(ds, None, None, balanced(cost_model=None), meta_fn=meta_fn, cost_fn=lambda meta: 1.0)
    with pytest.raises(StateMismatchError, match="costs"):
        other.load_state_dict(state)


def test_balanced_epochs_are_the_same_with_persistent_workers_and_differ_between_epochs():
    ds = fast_dataset()
    epochs = {}
    for persistent in (True, False):
        loader = build_loader(ds, None, None, balanced(persistent_workers=persistent), meta_fn=meta_fn)
        epochs[persistent] = [ids_of(loader) for _ in range(2)]
        loader.close()
    assert epochs[True] == epochs[False]
    assert epochs[True][0] != epochs[True][1]


@pytest.mark.parametrize("config,kwargs,needle", [
    (dict(runtime="worker"), {}, "runtime='main' only"),
    (dict(num_workers=0, prefetch_factor=None), {}, "num_workers"),
    (dict(order="sampler"), {}, "cost_model is used by order='balanced' only"),
])
def test_balanced_config_errors(config, kwargs, needle):
    with pytest.raises(ConfigError, match=needle):
        balanced(**config)


@pytest.mark.parametrize("kwargs,config,needle", [
    ({}, {}, "meta_fn"),
    ({"meta_fn": meta_fn, "cost_fn": lambda m: 1.0}, {}, "both cost_fn and"),
    ({"meta_fn": meta_fn}, {"cost_model": None}, "decode-cost estimates"),
])
def test_balanced_loader_needs_one_cost_source(kwargs, config, needle):
    with pytest.raises(ConfigError, match=needle):
        build_loader(fast_dataset(), None, None, balanced(**config), **kwargs)


@pytest.mark.parametrize("runtime", ["main", "worker"])
def test_a_cost_source_without_a_balanced_order_is_refused_not_ignored(runtime):
    from dynbsz import PackerConfig

    with pytest.raises(ConfigError, match="meta_fn"):
        build_loader(fast_dataset(), PackerConfig(budget=50_000), None, LoaderConfig(runtime=runtime, num_workers=1),
                     meta_fn=meta_fn)


def test_a_failing_estimate_names_the_sample():
    def bad_meta(i):
        if i == 7:
            raise KeyError("no such row")
        return meta_fn(i)

    loader = build_loader(fast_dataset(), None, None, balanced(), meta_fn=bad_meta)
    with pytest.raises(ConfigError, match="sample 7 failed: KeyError"):
        ids_of(loader, steps=1)
    with pytest.raises(ConfigError, match="sample 0 must be a finite number"):
        ids_of(build_loader(fast_dataset(), None, None, balanced(cost_model=None), meta_fn=meta_fn,
                            cost_fn=lambda m: float("nan")), steps=1)
