"""Main-process dynamic batching over the model, the cold-start study and gate sweeps.

The simulator must *call* dynbsz's packer and gates, never copy them: its
micro-batches are compared with a plain put/ready/cut loop over the same samples,
and a gate the simulator has never seen must be obeyed exactly.
"""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynbsz import FixedGate, GreedyPacker, PackerConfig, TokenAwareGate
from dynbsz.errors import ConfigError
from dynbsz.workload import SourceSpec, Trace, Workload
from simulator.config import LoaderModelConfig, StepTime
from simulator.dynbatch import run_rank, shard, truncate
from simulator.gatespec import parse_gate
from simulator.study import FILL_TOLERANCE_POINTS, READY_TOLERANCE, SEED_READY_S, Study, StudyConfig, calibration
from simulator.workloads import SEED_TEXT, Stream

K = 1024


def direct(items, config: PackerConfig, gate) -> list[tuple]:
    """The loop a training job runs, without any simulator: put an item's samples; if ready, cut one; drain."""
    packer = GreedyPacker(config, gate)
    out = []
    for item in items:
        for sid, tok, src in item:
            packer.put(sid, tok, source=src)
        if packer.ready():
            out.append(packer.cut().ids)
    out += [mb.ids for mb in packer.drain()]
    return out


def items_of(trace: Trace, rows, offsets=None):
    rows = list(rows)
    offsets = list(range(len(rows) + 1)) if offsets is None else list(offsets)
    sample = [(int(trace.ids[r]), int(trace.tokens[r]), trace.source_names[int(trace.source[r])]) for r in rows]
    return [sample[a:b] for a, b in zip(offsets[:-1], offsets[1:])]


class EveryThirdGate:
    """A user gate the simulator has never seen: ready on every third ``ready()`` call once the budget is covered."""

    def __init__(self):
        self.calls = 0

    def ready(self, view) -> bool:
        self.calls += 1
        return view.tokens >= view.budget and self.calls % 3 == 0

    def spec(self) -> dict:
        return {"kind": "every_third"}


@st.composite
def dyn_cases(draw):
    n = draw(st.integers(1, 60))
    tokens = draw(st.lists(st.integers(1, 120), min_size=n, max_size=n))
    costs = draw(st.lists(st.sampled_from([0.0, 0.01, 0.05, 0.2]), min_size=n, max_size=n))
    trace = Trace(np.arange(n, dtype=np.int64), np.array(tokens, dtype=np.int64), np.array(costs),
                  np.array([i % 2 for i in range(n)], dtype=np.int64), ("text", "video"))
    nw = draw(st.integers(0, 3))
    loader = LoaderModelConfig(num_workers=nw, prefetch_factor=draw(st.integers(1, 3)) if nw else None,
                               batch_size=draw(st.integers(1, 3)), in_order=draw(st.booleans()))
    gate_kind = draw(st.sampled_from(["fixed", "token", "user"]))
    budget = draw(st.integers(50, 300))
    return trace, loader, budget, gate_kind, StepTime(draw(st.sampled_from([0.0, 0.03])))


def make_gate(kind):
    return {"fixed": lambda: FixedGate(4), "token": lambda: TokenAwareGate(0.5, 6), "user": EveryThirdGate}[kind]()


@given(dyn_cases())
def test_simulated_micro_batches_are_the_real_packers_on_the_delivered_order(case):
    trace, loader, budget, gate_kind, step = case
    cfg = PackerConfig(budget)
    rank = run_rank(trace, cfg, make_gate(gate_kind), loader, step)
    expected = direct(items_of(trace, rank.loader.samples, rank.loader.offsets), cfg, make_gate(gate_kind))
    assert list(rank.ids) == expected
    assert sorted(i for mb in rank.ids for i in mb) == list(range(len(trace)))
    # at most one gated cut per fetched item; cut times never run backwards
    gated = ~rank.drained
    assert gated.sum() <= len(rank.loader)
    assert (np.diff(rank.fetched[gated]) > 0).all()
    assert (np.diff(rank.cut_s) >= 0).all()


def test_user_gate_is_obeyed_not_reimplemented():
    trace = Workload((SourceSpec("text", median_tokens=40, sigma=0.5),)).sample(200, 1)
    gate = EveryThirdGate()
    rank = run_rank(trace, PackerConfig(100), gate, LoaderModelConfig(num_workers=2))
    assert gate.calls >= len(trace)             # asked after every fetched item
    expected = direct(items_of(trace, range(len(trace))), PackerConfig(100), EveryThirdGate())
    assert list(rank.ids) == expected


def test_consumer_step_time_delays_the_next_fetch():
    trace = Trace(np.arange(30), np.full(30, 10, np.int64), np.full(30, 0.01), np.zeros(30, np.int64))
    rank = run_rank(trace, PackerConfig(20), FixedGate(2), LoaderModelConfig(num_workers=1), StepTime(0.5))
    requests = rank.loader.request_s
    for cut in rank.cut_s[~rank.drained].tolist():
        later = requests[requests > cut]
        if len(later):
            assert later[0] >= cut + 0.5 - 1e-9


def test_cold_start_is_linear_in_candidates_with_one_decode_in_flight():
    trace = Stream(SEED_TEXT, 1).take(400)
    trace = truncate(trace, 512 * K)
    for buffer in (8, 24, 200):
        rank = run_rank(trace, PackerConfig(512 * K), FixedGate(buffer), LoaderModelConfig(num_workers=1),
                        max_cuts=1)
        n = rank.candidates_before_first
        assert n >= buffer
        assert rank.ready_s == pytest.approx(trace.cost_s[:n].sum())


def test_max_cuts_stops_fetching_and_drain_happens_only_at_end_of_stream():
    trace = Trace(np.arange(50), np.full(50, 10, np.int64), np.full(50, 0.01), np.zeros(50, np.int64))
    stopped = run_rank(trace, PackerConfig(30), FixedGate(3), LoaderModelConfig(num_workers=2), max_cuts=4)
    assert len(stopped) == 4 and not stopped.stream_ended and not stopped.drained.any()
    full = run_rank(trace, PackerConfig(30), FixedGate(3), LoaderModelConfig(num_workers=2))
    assert full.stream_ended and full.drained[-1] and full.n_samples.sum() == 50


def test_shard_and_truncate():
    t = Stream(SEED_TEXT, 0).take(10)
    assert shard(t, 1, 3).ids.tolist() == [1, 4, 7]
    assert truncate(t, 1000).tokens.max() <= 1000
    assert (truncate(t, 1000).cost_s == t.cost_s).all()
    with pytest.raises(ConfigError, match="rank"):
        shard(t, 3, 3)


def test_stream_is_prefix_stable():
    s = Stream(SEED_TEXT, 7)
    short, long = s.take(100), Stream(SEED_TEXT, 7).take(9000)
    assert (long.tokens[:100] == short.tokens).all() and (long.cost_s[:100] == short.cost_s).all()
    assert not (Stream(SEED_TEXT, 8).take(100).tokens == short.tokens).all()


# ---- the study ------------------------------------------------------------------------------------

def test_calibration_lands_within_the_issue_tolerances():
    rows = calibration()
    assert {(r["budget"], r["gate"]) for r in rows} == set(SEED_READY_S)
    for r in rows:
        assert abs(r["ready_error"]) <= READY_TOLERANCE, r
        if r["fill_diff_points"] is not None:
            assert abs(r["fill_diff_points"]) <= FILL_TOLERANCE_POINTS, r


#: The calibration as a statistic over streams. Measured over streams 0-199 (2026-12-01): the median
#: stream's worst ready-time error over the four seed points is 15.8% (p90 33%), its worst fill
#: difference 0.93 points, and 19 of 200 streams (8 of the first 100) meet both tolerances. The
#: bounds below leave room for drift, not for a model that only one lucky stream calibrates.
CALIBRATION_STREAMS = 200
MEDIAN_WORST_READY_ERROR = 0.20
MEDIAN_WORST_FILL_POINTS = FILL_TOLERANCE_POINTS


def test_calibration_holds_as_a_statistic_over_many_streams_not_only_the_chosen_one():
    from simulator.workloads import SEED_STREAM

    worst_ready, worst_fill, meets = [], [], []
    for seed in range(CALIBRATION_STREAMS):
        rows = calibration(StudyConfig(seed=seed))
        worst_ready.append(max(abs(r["ready_error"]) for r in rows))
        worst_fill.append(max(abs(r["fill_diff_points"]) for r in rows if r["fill_diff_points"] is not None))
        meets.append(all(r["ok"] for r in rows))
    assert np.median(worst_ready) <= MEDIAN_WORST_READY_ERROR, np.median(worst_ready)
    assert np.median(worst_fill) <= MEDIAN_WORST_FILL_POINTS, np.median(worst_fill)
    assert sum(meets) >= 0.05 * CALIBRATION_STREAMS, sum(meets)
    # The documented example (docs/simulator.md, "Stream seed"): the chosen stream meets both
    # tolerances, and its worst ready-time error is among the best 5% of the streams.
    assert meets[SEED_STREAM]
    assert worst_ready[SEED_STREAM] <= np.percentile(worst_ready, 5), worst_ready[SEED_STREAM]


def test_study_points_dp_and_gate_monotonicity():
    study = Study(StudyConfig(budgets=(512 * K,), gates=("fixed:24",), dp_sizes=(1,), steps=40))
    small, large = study.point(512 * K, "fixed:24", 2), study.point(512 * K, "fixed:200", 2)
    assert len(small.ready_s) == 2 and small.error is None
    # a larger minimum gate can only open later on the same stream, and never fills worse at the first cut
    assert all(a <= b for a, b in zip(small.ready_s, large.ready_s))
    assert small.candidates_p50 >= 24 and large.candidates_p50 >= 200
    for row in (small, large):
        assert 0 < row.first_fill <= 1 and 0 < row.steady_fill <= 1 and row.steady_fill_min <= row.steady_fill
    # context_aware is FixedGate(24) at 512K: identical results; and fails closed at 128K
    assert study.point(512 * K, "context_aware", 2).ready_s == small.ready_s
    closed = study.point(128 * K, "context_aware", 1)
    assert closed.error and "context_aware" in closed.error and closed.ready_s == ()


def test_sweep_runs_a_user_written_gate_module(tmp_path, monkeypatch):
    (tmp_path / "my_gates_sim.py").write_text(textwrap.dedent("""
        from dynbsz.gates import FixedGate, covers_budget

        class Half:
            def ready(self, view):
                return covers_budget(view) and view.tokens >= 1.25 * view.budget
            def spec(self):
                return {"kind": "half"}

        def make(budget):
            return FixedGate(max(2, budget // 100_000))

        def plain():
            return Half()

        def bad():
            return 3

        GATE = Half()
        NOT_A_GATE = 3
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    study = Study(StudyConfig(budgets=(512 * K,), gates=("fixed:8",), dp_sizes=(1,), steps=5))
    rows = {g: study.point(512 * K, g, 1) for g in ("my_gates_sim:make", "my_gates_sim:plain", "my_gates_sim:GATE")}
    assert rows["my_gates_sim:make"].gate_spec["buffer_size"] == 5
    assert rows["my_gates_sim:plain"].ready_s == rows["my_gates_sim:GATE"].ready_s
    assert all(r.error is None for r in rows.values())
    with pytest.raises(ConfigError, match="neither a gate"):
        parse_gate("my_gates_sim:NOT_A_GATE")
    with pytest.raises(ConfigError, match="not a gate"):
        parse_gate("my_gates_sim:bad").gate_for(1)
    assert "not a gate" in study.point(512 * K, "my_gates_sim:bad", 1).error
    sys.modules.pop("my_gates_sim", None)


@pytest.mark.parametrize("text, needle", [
    ("fixed:0", "buffer_size"), ("fixed:x", "fixed:N"), ("token_aware:1", "token_aware:MARGIN:POOL_CAP"),
    ("nosuchmodule_xyz:f", "cannot import"), ("json:nope", "no attribute"), ("banana", "MODULE:FACTORY"),
])
def test_bad_gate_specs_are_explained(text, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_gate(text)


def test_budget_below_smallest_sample_with_overlong_raise_is_refused():
    big = Workload((SourceSpec("text", median_tokens=5000, min_tokens=4096),))
    with pytest.raises(ConfigError, match="below the smallest possible sample") as e:
        StudyConfig(budgets=(1024,), workload=big, truncate=False, overlong="raise")
    assert "4096" in str(e.value) and "overlong" in str(e.value)
    StudyConfig(budgets=(1024,), workload=big, truncate=True, overlong="raise")  # truncation makes it possible


@pytest.mark.parametrize("kwargs, setting", [
    ({"budgets": ()}, "budgets"), ({"budgets": (0,)}, "budget"), ({"dp_sizes": (0,)}, "dp size"),
    ({"steps": -1}, "steps"), ({"overlong": "cut"}, "overlong"), ({"gates": ("fixed:-1",)}, "buffer_size"),
])
def test_study_config_errors(kwargs, setting):
    with pytest.raises(ConfigError, match=setting):
        StudyConfig(**kwargs)


# ---- the simulator's dynamic batching is the loader's, epoch after epoch ------------------------

LOADER_VS_SIM = [
    # (num_workers, fetch_batch_size, persistent, micro_batches_per_step, warmup_steps, gate)
    (0, 1, False, 1, 0, FixedGate(4)),
    (2, 1, True, 1, 0, FixedGate(6)),
    (2, 3, False, 2, 3, FixedGate(3)),
    (1, 2, True, 3, 0, TokenAwareGate(margin=0.5, pool_cap=8)),
]


@pytest.mark.parametrize("workers,fetch,persistent,mbps,warmup,gate", LOADER_VS_SIM)
def test_simulated_micro_batches_equal_the_real_loaders_over_epochs(workers, fetch, persistent, mbps, warmup, gate):
    """The simulator runs the loader's packing loop: the same micro-batches, budgets and steps as
    ``build_loader`` with packing on, epoch after epoch (the buffer drained at each epoch's end,
    a partial step closing the step for the warm-up schedule)."""
    from dynbsz.datasets import TraceMapDataset
    from dynbsz.loader import build_loader
    from dynbsz.loader_config import LoaderConfig

    epochs = 3
    n = 41   # prime: epochs end mid-step and mid-fetch-batch
    trace = Workload((SourceSpec("text", 0.7, median_tokens=40, sigma=0.8, cost_base_s=0.0),
                      SourceSpec("video", 0.3, median_tokens=150, sigma=0.4, cost_base_s=0.0))).sample(n, 5)
    trace = Trace(np.arange(n, dtype=np.int64), trace.tokens, trace.cost_s, trace.source, trace.source_names)
    packer_cfg = PackerConfig(budget=256, micro_batches_per_step=mbps, warmup_steps=warmup, warmup_init_tokens=64)
    cfg = LoaderConfig(num_workers=workers, persistent_workers=persistent, fetch_batch_size=fetch, seed=7)

    loader = build_loader(TraceMapDataset(trace), packer_cfg, gate, cfg)
    real, real_steps = [], []
    try:
        for epoch in range(epochs):
            for step in loader:
                assert step.epoch == epoch
                real_steps.append(tuple(mb.index for mb in step.micro_batches))
                real += [(mb.ids, mb.budget, mb.step, mb.drained) for mb in step.micro_batches]
    finally:
        loader.close()

    seen = []

    class Recording(GreedyPacker):
        """GreedyPacker that also records what it cuts, with the budget and step of each cut."""

        def cut(self):
            mb = super().cut()
            seen.append((mb.ids, mb.budget, mb.step, mb.drained))
            return mb

        def drain(self):
            for mb in super().drain():
                seen.append((mb.ids, mb.budget, mb.step, mb.drained))
                yield mb

    sim = run_rank(trace, packer_cfg, gate, LoaderModelConfig.for_loader(cfg), epochs=epochs,
                   packer_factory=Recording)
    assert seen == real
    assert list(sim.ids) == [r[0] for r in real]
    assert sorted(i for ids in sim.ids for i in ids) == sorted(list(range(n)) * epochs)
    assert len(real_steps) == len(set(real_steps))   # step boundaries: every cut index in exactly one step
