"""The training model: DP ranks in lockstep, the step-time model, stall / straggle, peak host memory."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dynbsz import FixedGate, PackerConfig
from dynbsz.errors import ConfigError
from dynbsz.workload import Trace
from simulator.config import LoaderModelConfig, StepTime
from simulator.dynbatch import RankFeed, run_rank, shard, truncate
from simulator.study import Study, StudyConfig
from simulator.training import (
    H100_BF16_FLOPS,
    MFU,
    STEP_PRESETS,
    TRAINING_WORKLOADS,
    StepModel,
    Trainer,
    TrainingConfig,
    lockstep,
    parse_step_model,
)
from simulator.workloads import SEED_TEXT, Stream

K = 1024


def small_trace(n=400, seed=0):
    rng = np.random.default_rng(seed)
    return Trace(np.arange(n), rng.integers(5, 60, n), rng.uniform(0.01, 0.05, n), np.zeros(n, np.int64))


def test_presets_come_from_first_principles_and_parse():
    m = STEP_PRESETS["7b-h100"]
    assert m.a == pytest.approx(6 * 6.74e9 / (H100_BF16_FLOPS * MFU))
    assert m.b == pytest.approx(12 * 32 * 4096 / (H100_BF16_FLOPS * MFU))
    assert m.of([1000, 2000]) == pytest.approx(m.base_s + m.a * 3000 + m.b * (1000 ** 2 + 2000 ** 2))
    assert parse_step_model("1b-h100") is STEP_PRESETS["1b-h100"]
    custom = parse_step_model("0.5,1e-5,2e-9")
    assert (custom.base_s, custom.a, custom.b) == (0.5, 1e-5, 2e-9)
    for bad in ("", "fast", "1,2", "1,-2,3", "a,b,c"):
        with pytest.raises(ConfigError, match="step time"):
            parse_step_model(bad)


def test_lockstep_one_rank_free_compute_is_the_cold_start_model():
    """DP1 with training free: the first step is the cold-start study's ready time, to the last digit."""
    cfg = TrainingConfig(workload=TRAINING_WORKLOADS["seed"], step=STEP_PRESETS["none"], horizon_s=None,
                         max_tokens=1)
    run = Trainer(cfg).run(512 * K, "fixed:24", 1)
    row = Study(StudyConfig(budgets=(512 * K,), gates=("fixed:24",), dp_sizes=(1,), steps=0)).point(512 * K,
                                                                                                     "fixed:24", 1)
    assert run.first_step_s == pytest.approx(row.ready_p50_s)
    assert run.straggle_fraction == 0.0


def test_lockstep_cuts_what_run_rank_cuts_and_steps_together():
    trace = small_trace()
    step = StepModel(0.01, 1e-4, 1e-6)
    feeds = [RankFeed(shard(trace, r, 2), PackerConfig(100), FixedGate(4), LoaderModelConfig(num_workers=2), rank=r,
                      track_memory=True) for r in range(2)]
    run = lockstep(feeds, step, budget=100, gate="fixed:4", horizon_s=None, max_tokens=10 ** 9)
    for r in range(2):
        alone = run_rank(shard(trace, r, 2), PackerConfig(100), FixedGate(4), LoaderModelConfig(num_workers=2))
        assert feeds[r].result().ids[:run.steps] == alone.ids[:run.steps]   # packing is dynbsz's, not the clock's
    # every step starts when both ranks hold data and lasts the slower rank's compute
    cut = [feeds[r].result().cut_s for r in range(2)]
    ends = run.step_end_s
    for s in range(1, run.steps):
        start = max(cut[0][s], cut[1][s])
        assert start >= ends[s - 1] - 1e-12
        comp = max(step.of(trace.tokens[list(feeds[r].result().ids[s])].tolist()) for r in range(2))
        assert ends[s] == pytest.approx(start + comp)
    assert 0 <= run.stall_fraction <= 1 and 0 <= run.straggle_fraction <= 1
    assert run.stall_fraction + run.straggle_fraction <= 1 + 1e-9
    assert run.stream_ended and run.tokens == sum(int(t) for f in feeds for t in f.result().tokens[:run.steps])


def test_horizon_tokens_by_hour_and_token_parity():
    base = TrainingConfig(workload=TRAINING_WORKLOADS["seed_8w"], horizon_s=6 * 3600.0)
    run = Trainer(base).run(512 * K, "fixed:24", 2)
    by = run.tokens_by_hour((1, 3, 6))
    assert by["1"] <= by["3"] <= by["6"] == run.tokens
    assert run.step_end_s[-1] <= 6 * 3600.0
    target = by["3"]
    parity = Trainer(TrainingConfig(workload=TRAINING_WORKLOADS["seed_8w"], horizon_s=None,
                                    max_tokens=target)).run(512 * K, "fixed:24", 2)
    assert parity.tokens >= target and parity.tokens - int(parity.step_tokens[-1]) < target
    assert parity.time_to_tokens(target) == pytest.approx(run.time_to_tokens(target))
    assert math.isinf(run.time_to_tokens(10 ** 15))


def test_peak_buffer_counts_the_packer_and_the_loaders_waiting_results():
    cfg = TrainingConfig(workload=TRAINING_WORKLOADS["seed"], horizon_s=6 * 3600.0)
    small = Trainer(cfg).run(512 * K, "fixed:8", 1)
    big = Trainer(cfg).run(512 * K, "fixed:200", 1)
    assert 8 <= small.peak_buffer_samples < big.peak_buffer_samples
    assert 200 <= big.peak_buffer_samples <= 200 + 2 + 1      # the minimum, plus prefetch (1 worker x 2)
    assert big.peak_buffer_tokens > small.peak_buffer_tokens > 0


def test_dp_ranks_wait_for_each_other_and_first_step_is_the_slowest_rank():
    run = Trainer(TrainingConfig(horizon_s=6 * 3600.0)).run(512 * K, "fixed:24", 4)
    assert run.first_step_s >= run.first_step_p50_s
    assert run.straggle_fraction > 0
    one = Trainer(TrainingConfig(horizon_s=6 * 3600.0)).run(512 * K, "fixed:24", 1)
    assert one.straggle_fraction == 0.0


def test_mixture_reports_source_share_drift():
    run = Trainer(TrainingConfig(workload=TRAINING_WORKLOADS["mix"], horizon_s=6 * 3600.0)).run(512 * K,
                                                                                                 "fixed:24", 1)
    assert set(run.source_shares) == {"text", "video"}
    assert sum(run.source_shares.values()) == pytest.approx(1.0)
    assert 0 <= run.source_share_drift["video"] < 0.5
    s = run.summary((1, 6))
    assert set(s["tokens_by_hour"]) == {"1", "6"} and "source_share_drift" in s


def test_run_rank_is_one_feed_with_a_step_time():
    trace = truncate(Stream(SEED_TEXT, 3).take(300), 512 * K)
    a = run_rank(trace, PackerConfig(512 * K), FixedGate(8), LoaderModelConfig(num_workers=2), StepTime(5.0),
                 max_cuts=20)
    feed = RankFeed(trace, PackerConfig(512 * K), FixedGate(8), LoaderModelConfig(num_workers=2), max_cuts=20)
    while (s := feed.next_step()) is not None:
        feed.finish_step(s.ready_s + 5.0)
    b = feed.result()
    assert a.ids == b.ids and np.array_equal(a.cut_s, b.cut_s)
    with pytest.raises(RuntimeError):
        feed.finish_step(1.0)


def test_bad_training_config_names_the_setting():
    with pytest.raises(ConfigError, match="an end"):
        TrainingConfig(horizon_s=None, max_tokens=None)
    with pytest.raises(ConfigError, match="max_tokens"):
        TrainingConfig(max_tokens=0)


def test_tokens_at_rate_counts_the_step_in_progress_pro_rata():
    from simulator.training import TrainingRun

    run = TrainingRun(512, 1, "fixed:1", np.array([10.0, 20.0]), np.array([100, 300]), 5.0, 5.0, 0.0, 0.0, 1.0, 1, 1)
    # by hand: step 0 from 5 s to 10 s (100 tokens), step 1 to 20 s (300 more)
    assert [run.tokens_at_rate_by(t) for t in (4.0, 7.5, 10.0, 15.0, 25.0)] == [0.0, 50.0, 100.0, 250.0, 400.0]
    assert [run.tokens_by(t) for t in (7.5, 15.0)] == [0, 100]          # whole steps only
