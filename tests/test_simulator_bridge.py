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
