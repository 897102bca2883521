"""The simulator models dynbsz's own loader: same knobs, same (seed, epoch) order, same deliveries."""

from __future__ import annotations

import warnings

import pytest

from dynbsz import SourceSpec, Workload
from dynbsz.datasets import TraceMapDataset
from dynbsz.loader import build_loader
from dynbsz.loader_config import LoaderConfig
from simulator.config import LoaderModelConfig
from simulator.loader_model import simulate

TRACE = Workload((SourceSpec("text", 0.7, 100, cost_base_s=0.001), SourceSpec("video", 0.3, 900, cost_base_s=0.006))
                 ).sample(36, 2)


@pytest.mark.parametrize("workers, batch", [(0, 1), (2, 1), (3, 2)])
def test_model_of_a_dynbsz_loader_delivers_what_it_delivers_in_order(workers, batch):
    config = LoaderConfig(num_workers=workers, fetch_batch_size=batch, seed=9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loader = build_loader(TraceMapDataset(TRACE), None, None, config)
        real = [step.sample_ids for step in loader]
        loader.close()
    model = simulate(TRACE, LoaderModelConfig.for_loader(config))
    assert TRACE.ids[model.samples].tolist() == [sid for batch_ids in real for sid in batch_ids]
    assert [len(b) for b in real] == model.batch_sizes().tolist()


def test_a_trainer_computes_each_ranks_balanced_order_once_for_all_its_runs(monkeypatch):
    import numpy as np

    from dynbsz.order import loader_order
    from simulator import bridge
    from simulator.training import STEP_PRESETS, TEXT_VIDEO_LONG, Trainer, TrainingConfig, TrainingWorkload
    from simulator.workloads import Stream

    trace = Stream(TEXT_VIDEO_LONG, 3).take(600)
    est = trace.cost_s * 1.1
    lc = LoaderConfig(num_workers=2, prefetch_factor=2, shuffle=False, order="balanced", lookahead=16)
    wl = TrainingWorkload("t", TEXT_VIDEO_LONG, LoaderModelConfig.for_loader(lc, sampler=False), "test")
    calls = []

    def counted(n, config, epoch, estimates=None):
        calls.append((config.dp_rank, epoch))
        return loader_order(n, config, epoch, estimates)

    monkeypatch.setattr(bridge, "loader_order", counted)
    runs = {}
    for memo in (True, False):
        trainer = Trainer(TrainingConfig(workload=wl, step=STEP_PRESETS["1b-h100"], horizon_s=3600.0, trace=trace,
                                         loader_config=lc, estimates=est))
        calls.clear()
        runs[memo] = []
        for g in ("fixed:4", "fixed:24", "fixed:4"):
            if not memo:
                trainer._orders.clear()                   # as before the trainer kept them
            runs[memo].append(trainer.run(256 * 1024, g, 2))
        # three runs, two ranks: one order each (kept), or one each a run
        assert sorted(calls) == ([(0, 0), (1, 0)] if memo else [(0, 0)] * 3 + [(1, 0)] * 3)
    # what the runs deliver does not depend on whether the order was kept
    for a, b in zip(runs[True], runs[False]):
        assert np.array_equal(a.step_end_s, b.step_end_s) and np.array_equal(a.step_tokens, b.step_tokens)
    order = bridge.LoaderOrder(lc, 100, np.ones(100))
    first = order(0)
    assert order(0) is first and not first.flags.writeable
    assert np.array_equal(first, loader_order(100, lc, 0, np.ones(100)))
