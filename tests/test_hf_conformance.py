"""Hugging Face datasets' IterableDataset under StatefulDataLoader against the stream properties: the
target resolves, and each finding is pinned as a strict xfail. Skips when datasets is absent."""

from __future__ import annotations

import pytest

from properties import stream_suite as SS
from properties.errors import Unsupported
from properties.stream_scenarios import StreamScenario
from properties.targets import hf_iterable as H
from properties.targets import resolve

pytestmark = pytest.mark.skipif(not H.available(), reason=H.MISSING)

# H1: shuffled shards (buffer of 1: nothing for a resume to lose) over 2 workers, restored after one
# batch: a worker's IterableDataset.load_state_dict raises IndexError in _inner_load_state_dict.
H1 = StreamScenario(sources=(4,), chunk_size=1, num_workers=2, shuffle=True, shuffle_buffer=1, checkpoints=(1,))


def test_target_resolves_with_one_stream_component():
    t = resolve("hf-iterable")
    assert t.unavailable is None and [c.kind for c in t.components] == ["stream"]


def test_unshuffled_resume_with_workers_passes():
    SS.stream_resume(H.component(), StreamScenario(sources=(4,), chunk_size=1, num_workers=2, checkpoints=(1,)))


def test_shuffle_buffer_resume_is_not_promised():
    with pytest.raises(Unsupported, match="shuffle buffers are lost"):
        SS.stream_resume(H.component(), StreamScenario(sources=(8,), shuffle=True, shuffle_buffer=4, checkpoints=(1,)))


@pytest.mark.xfail(strict=True, reason="H1: resuming shuffled shards over workers raises IndexError")
def test_H1_shuffled_shards_resume_with_workers():
    SS.stream_resume(H.component(), H1)
