"""reorder_buffer: torch dispatches out of order, dynbsz delivers the sampler's order.

The order delivered must be exactly in_order=True's, whatever the costs; resume stays exact; the
buffer stays bounded; and the out-of-order dispatch is what it buys (measured by the benchmark,
not asserted here).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynbsz import FixedGate, PackerConfig
from dynbsz.datasets import TraceMapDataset
from dynbsz.errors import ConfigError
from dynbsz.loader import build_loader
from dynbsz.loader_config import LoaderConfig
from dynbsz.order import rank_order
from dynbsz.sequencer import Sequencer
from dynbsz.workload import SourceSpec, Trace, Workload

# Uneven costs: in arrival order the cheap text overtakes the slow video.
MIX = Workload((SourceSpec("text", 0.7, median_tokens=300, sigma=0.5, cost_base_s=0.0005),
                SourceSpec("video", 0.3, median_tokens=2000, sigma=0.3, cost_base_s=0.008)))
TRACE = MIX.sample(80, 11)


@given(st.permutations(list(range(12))), st.lists(st.integers(1, 3), min_size=12, max_size=12))
def test_the_sequencer_releases_in_the_expected_order_whatever_the_arrivals(arrivals, sizes):
    expected = [f"k{i}" for i in range(12)]
    seq = Sequencer(expected)
    released, held = [], []
    for i in arrivals:
        released += seq.arrive(f"k{i}", i, sizes[i])
        held.append(seq.held)
        # what is held is exactly what arrived but cannot be released yet
        assert seq.held == sum(sizes[j] for j in arrivals[:len(held)] if j >= len(released))
    assert released == list(range(12))
    assert seq.held == 0 and len(seq) == 0 and seq.peak == max(held)


def test_the_sequencer_refuses_the_unexpected():
    seq = Sequencer(["a", "b"])
    seq.arrive("b", 1)
    with pytest.raises(RuntimeError, match="twice"):
        seq.arrive("b", 1)
    with pytest.raises(RuntimeError, match="not expected"):
        seq.arrive("c", 1)
    seq = Sequencer(["b", "a", "a"])
    assert seq.arrive("a", 1) == []
    with pytest.raises(ValueError, match="distinct"):     # found when read, not on construction
        seq.arrive("x", 1)


def test_the_sequencer_reads_what_it_expects_only_as_far_as_the_arrivals_reach():
    read = []

    def keys():
        for i in range(10**9):      # an epoch too long to hold: it must never be read in full
            read.append(i)
            yield i

    seq = Sequencer(keys())
    assert read == []
    assert seq.arrive(2, "c") == [] and read == [0, 1, 2]
    assert seq.arrive(0, "a") == ["a"] and seq.arrive(1, "b") == ["b", "c"]
    assert read == [0, 1, 2] and seq.held == 0
    with pytest.raises(TypeError, match="length"):
        len(seq)
    assert len(Sequencer(range(3))) == 3
    handed = Sequencer(iter("abcd"))
    assert handed.arrive("c", 3) == [] and list(handed.unreleased()) == ["a", "b", "c", "d"]


def config(**over) -> LoaderConfig:
    kw = dict(num_workers=3, prefetch_factor=2, seed=5, reorder_buffer=8)
    kw.update(over)
    return LoaderConfig(**kw)


def steps_of(loader, limit=None) -> list:
    out = []
    for step in loader:
        out.append(tuple(step.sample_ids))
        if limit is not None and len(out) == limit:
            break
    return out


@pytest.mark.parametrize("fetch", [1, 2])
def test_delivers_exactly_the_sampler_order_and_stays_bounded(fetch):
    loader = build_loader(TraceMapDataset(TRACE), None, None, config(fetch_batch_size=fetch))
    ids = [i for step in steps_of(loader) for i in step]
    peak = loader.reorder_peak
    loader.close()
    assert ids == rank_order(80, 5, 0, 0, 1).tolist()
    assert 0 < peak <= 8 + 2 * 3 * fetch     # the cap, plus what was in flight when it filled


@pytest.mark.parametrize("packing", [False, True])
def test_resume_is_exact_and_equals_torchs_in_order(packing):
    pc = PackerConfig(budget=4000, micro_batches_per_step=2) if packing else None
    gate = FixedGate(4) if packing else None
    ds = TraceMapDataset(TRACE)

    def make(**over):
        return build_loader(ds, pc, gate, config(**over))

    torch_order = make(reorder_buffer=0)
    reference = [steps_of(torch_order) for _ in range(2)]   # two epochs
    torch_order.close()

    first = make()
    head = steps_of(first, limit=5)
    state = first.state_dict()
    first.close()
    second = make()
    second.load_state_dict(state)
    tail = steps_of(second)
    nxt = steps_of(second)
    second.close()
    assert head + tail == reference[0]
    assert nxt == reference[1]


def test_persistent_workers_reshuffle_epochs_in_the_same_order():
    ds = TraceMapDataset(TRACE)
    runs = {}
    for persistent in (True, False):
        loader = build_loader(ds, None, None, config(persistent_workers=persistent))
        runs[persistent] = [steps_of(loader) for _ in range(2)]
        loader.close()
    assert runs[True] == runs[False] and runs[True][0] != runs[True][1]


@pytest.mark.parametrize("over,needle", [(dict(in_order=False), "in_order=True"),
                                         (dict(num_workers=0, prefetch_factor=None), "num_workers >= 1"),
                                         (dict(runtime="worker"), "runtime='main'"),
                                         (dict(reorder_buffer=-1), "reorder_buffer")])
def test_reorder_buffer_config_errors(over, needle):
    with pytest.raises(ConfigError, match=needle):
        config(**over)


def test_a_slow_head_does_not_pile_up_more_than_the_cap():
    """The first sample in the epoch's order takes 0.3 s, the other 59 a millisecond: out of order,
    all 59 would arrive while it decodes. With reorder_buffer=2 the loader dispatches pauses once
    two wait, so at most the cap plus what was in flight is held."""
    n = 60
    order = rank_order(n, 5, 0, 0, 1)
    cost = [0.001] * n
    cost[int(order[0])] = 0.3
    trace = Trace(np.arange(n), np.full(n, 100), np.array(cost), np.zeros(n, dtype=np.int64), ("text",))
    loader = build_loader(TraceMapDataset(trace), None, None, config(reorder_buffer=2))
    ids = [i for step in steps_of(loader) for i in step]
    peak = loader.reorder_peak
    loader.close()
    assert ids == order.tolist()
    assert peak <= 2 + 2 * 3
