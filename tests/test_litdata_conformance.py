"""litdata 0.2.76 against the stream properties: the target resolves, and each finding is pinned as a
strict xfail (an upstream fix shows as XPASS). Skips with the reason when the litdata extra is absent."""

from __future__ import annotations

import pytest

from properties import stream_suite as SS
from properties.stream_scenarios import StreamScenario, decode_stream_scenario, encode_stream_scenario
from properties.targets import litdata_target as L
from properties.targets import resolve

pytestmark = pytest.mark.skipif(not L.available(), reason=L.MISSING)

# L1: a resume mid-epoch, then the loop breaks early and the trainer starts the next epoch:
# StreamingDataLoader.__iter__ keeps `restore=True` across the early exit, so the "next epoch"
# replays epoch 0 from the loaded checkpoint instead of starting epoch 1.
L1 = StreamScenario(sources=(4,), chunk_size=1, checkpoints=(1,), break_after=1)
# L2: ParallelStreamingDataset cycling (length=6) with 2 workers, restored after one batch:
# _ParallelDatasetIterator.__init__ asserts that every source's cycle count agrees, and it does not.
L2 = StreamScenario(sources=(4, 6), mix="parallel", cycle_length=6, chunk_size=2, num_workers=2, checkpoints=(1,))


def test_target_resolves_with_one_stream_component():
    t = resolve("litdata")
    assert t.unavailable is None and [c.kind for c in t.components] == ["stream"]


def test_scenario_round_trips():
    assert decode_stream_scenario(encode_stream_scenario(L2)) == L2


def test_plain_epochs_deliver_every_sample_once():
    SS.stream_exactly_once(L.component(), StreamScenario(sources=(6,), chunk_size=2, num_workers=1))


# L3: a checkpoint exactly at an epoch end (last batch consumed, iterator not yet exhausted): the
# restored loader's next iterator delivers the following epoch at once, so the trainer's loop sees
# one epoch more than the uninterrupted run (found by the ci profile; root cause not yet traced).
L3 = StreamScenario(sources=(6,), chunk_size=2, checkpoints=(2,))


@pytest.mark.xfail(strict=True, reason="L3: a resume exactly at an epoch end starts the next epoch early")
def test_L3_resume_at_epoch_end():
    SS.stream_resume(L.component(), L3)


@pytest.mark.xfail(strict=True, reason="L1: restore flag survives an early break (StreamingDataLoader.__iter__)")
def test_L1_break_after_resume_starts_a_new_epoch():
    SS.stream_resume(L.component(), L1)


@pytest.mark.xfail(strict=True, reason="L2: cycling ParallelStreamingDataset cannot resume with workers")
def test_L2_parallel_cycling_resume_with_workers():
    SS.stream_resume(L.component(), L2)
