"""The simulator models dynbsz's reorder buffer (``LoaderConfig(in_order=True, reorder_buffer=N)``).

torch runs out of order underneath, the main process releases batches in send order, and while
``N`` samples wait each dispatch is a pause. The oracles here: the sampler's order (what the
buffer promises), the model's own in_order=False run (the same dispatch when nothing is held
back), and the bound the loader documents on what is held. The real loader is held to the
model in tests/test_simulator_fidelity.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from dynbsz.errors import ConfigError
from dynbsz.loader import PAUSE_S
from dynbsz.loader_config import LoaderConfig
from dynbsz.order import epoch_order
from dynbsz.workload import LOADER_BENCH_MIX, with_cost_noise
from simulator.bridge import simulate_loader
from simulator.config import LoaderModelConfig, StepTime
from simulator.loader_model import simulate

TRACE = with_cost_noise(LOADER_BENCH_MIX.sample(400, 2), 0.3, 2)


def model(**kw) -> LoaderModelConfig:
    base = dict(num_workers=4, prefetch_factor=2, task_overhead_s=3e-4)
    base.update(kw)
    return LoaderModelConfig(**base)


@pytest.mark.parametrize("buffer, batch, step", [(1, 1, 0.0), (4, 1, 0.0), (6, 2, 0.0), (64, 1, 0.0),
                                                 (3, 3, 0.002), (10**6, 1, 0.0)])
def test_the_buffer_delivers_the_sampler_order(buffer, batch, step):
    run = simulate(TRACE, model(batch_size=batch, reorder_buffer=buffer), step=StepTime(step))
    assert run.samples.tolist() == list(range(len(TRACE)))          # in_order=True's order, whatever the costs
    assert run.batch.tolist() == list(range(len(run)))


@pytest.mark.parametrize("buffer, batch", [(1, 1), (4, 1), (6, 2), (16, 1)])
def test_a_small_buffer_pauses_and_holds_at_most_the_documented_bound(buffer, batch):
    cfg = model(batch_size=batch, reorder_buffer=buffer)
    run = simulate(TRACE, cfg)
    assert run.n_pause > 0                                          # the buffer filled behind a slow sample
    # dynbsz.loader: at most about N plus what was in flight when it filled (prefetch * workers * batch)
    assert buffer <= run.reorder_peak <= buffer + cfg.max_tasks * batch
    assert run.n_dropped == 0


def test_an_unbounded_buffer_runs_at_in_order_false_speed():
    """Nothing is ever paused, torch dispatches exactly as out of order, and the last batch is released
    when the last one arrives: the makespan is in_order=False's."""
    held = simulate(TRACE, model(reorder_buffer=10**6))
    free = simulate(TRACE, model(in_order=False))
    assert held.n_pause == 0
    assert held.makespan_s == pytest.approx(free.makespan_s, rel=1e-12)
    plain = simulate(TRACE, model())
    assert held.makespan_s < 0.8 * plain.makespan_s                 # ... far ahead of in_order=True on this mix


def test_a_tiny_buffer_is_no_faster_than_in_order_true_and_a_larger_one_is_faster():
    times = [simulate(TRACE, model(reorder_buffer=n)).makespan_s for n in (1, 8, 64)]
    plain = simulate(TRACE, model()).makespan_s
    assert times[0] > 0.9 * plain
    assert times[0] > times[1] > times[2]


def test_the_loader_model_carries_the_buffer_and_the_pause():
    config = LoaderConfig(num_workers=3, prefetch_factor=2, reorder_buffer=8, shuffle=False)
    cfg = LoaderModelConfig.for_loader(config)
    assert cfg.reorder_buffer == 8 and cfg.in_order
    assert cfg.pause_s == PAUSE_S                                   # the model pauses as long as the loader
    run = simulate_loader(TRACE, config)
    assert run.samples.tolist() == list(range(len(TRACE)))


@pytest.mark.parametrize("kw, needle", [
    (dict(in_order=False, reorder_buffer=4), "needs in_order=True"),
    (dict(num_workers=0, reorder_buffer=4), "num_workers >= 1"),
    (dict(dataset="iterable", reorder_buffer=4), "dataset='map'"),
    (dict(reorder_buffer=-1), "reorder_buffer"),
    (dict(pause_s=-0.001), "pause_s"),
])
def test_a_buffer_the_model_cannot_have_is_refused(kw, needle):
    with pytest.raises(ConfigError, match=needle):
        LoaderModelConfig(**kw)


def test_every_epoch_is_delivered_in_order_with_persistent_workers():
    run = simulate(TRACE, model(reorder_buffer=4, persistent_workers=True, shuffle_seed=3), epochs=2)
    for e in (0, 1):
        first = run.offsets[np.flatnonzero(run.epoch == e)[0]]
        assert run.samples[first:first + len(TRACE)].tolist() == epoch_order(len(TRACE), 3, e).tolist()
