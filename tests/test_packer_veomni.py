"""Differential: dynbsz's packer and VeOmni 0.1.12's TextBatchingStrategy cut identical micro-batches.

Skipped (with the reason) where the optional extra is not installed; CI installs it.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynbsz import FixedGate, GreedyPacker
from dynbsz.compat import veomni
from properties import packer_props as P
from properties.strategies import packer_configs, sample_streams

pytestmark = pytest.mark.skipif(not veomni.available(), reason="VeOmni extra not installed (bash ci/install.sh --veomni)")


@st.composite
def scenarios(draw):
    config = draw(packer_configs(max_budget=300))
    buffer_size = draw(st.integers(1, 30))
    # VeOmni drops samples of at most one physical token (a bare print); keep the streams above that.
    stream = [s for s in draw(sample_streams(config.budget, physical=config.physical_cap is not None))
              if (s.physical or s.tokens) > 1]
    return config, buffer_size, stream


@given(scenarios())
def test_identical_micro_batches(scenario):
    config, buffer_size, stream = scenario
    ours = P.drive(lambda: GreedyPacker(config, FixedGate(buffer_size)), config, stream)
    theirs = P.drive(lambda: veomni.VeOmniPacker(config, buffer_size), config, stream)
    assert [(c.ids, c.budget, c.drained) for c in ours.cuts] == [(c.ids, c.budget, c.drained) for c in theirs.cuts]


def test_bench_rows_are_identical_and_complete():
    from dynbsz import bench

    rows = bench.run(samples=3000, budgets=(4096, 65536), buffers=(8, 64), vs_veomni=True, repeat=1)
    assert len(rows) == 4
    for r in rows:
        assert r.identical is True, r
        assert r.veomni_s > 0 and r.dynbsz_s > 0


def test_veomni_silently_drops_one_token_samples():
    # A documented deviation, pinned: VeOmni drops these with a bare print; dynbsz keeps them.
    from dynbsz import PackerConfig

    config = PackerConfig(budget=16)
    theirs = veomni.VeOmniPacker(config, buffer_size=1)
    assert theirs.put(0, 1) is False
    ours = GreedyPacker(config, FixedGate(1))
    assert ours.put(0, 1) is True


def test_veomni_force_packs_zero_token_heads_past_the_physical_cap():
    # Found by the property suite (budget property, target veomni): VeOmni's forced-head test is
    # `cum_seq_len == 0`, so with effective-token counting every zero-token sample at the head is
    # forced in, and so is the first real one, whatever the cap. dynbsz emits such samples alone.
    from dynbsz import PackerConfig

    config = PackerConfig(budget=8, physical_cap=10)
    theirs = veomni.VeOmniPacker(config, buffer_size=1)
    ours = GreedyPacker(config, FixedGate(1))
    for packer in (theirs, ours):
        for sid, (tokens, physical) in enumerate([(0, 6), (0, 6), (8, 8)]):
            packer.put(sid, tokens, physical)
    assert sum(theirs.cut().physical) == 20 > config.physical_cap
    assert [mb.ids for mb in [ours.cut(), *ours.drain()]] == [(0,), (1,), (2,)]


def test_the_suite_reports_veomnis_silent_drop_on_the_veomni_target():
    from properties import suite
    from properties.runner import RunSettings, run_property
    from properties.targets import resolve

    target = resolve("veomni")
    result = run_property(target, suite.get("conservation"), target.component("packer"),
                          RunSettings(profile="dev", seed=0, database=None))
    assert result.status == "fail" and "silently dropped" in result.message
    stream = result.minimal_example["stream"]
    assert len(stream) == 1 and (stream[0][2] or stream[0][1]) <= 1  # one sample of at most one token
