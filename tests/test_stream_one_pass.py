"""``stream_trainer_epochs`` under a trainer without epochs (torchtitan's model): a finite packing loader's one pass,
judged by the samples its token windows deliver (``StreamComponent.samples_of``), and an endless one left to
``stream_trainer_resume``. A toy loader packs each sample into the windows once, or twice as torchtitan's map-style
dataset does with two workers (T2, studies/torchtitan/report.md)."""

from __future__ import annotations

import pytest

from properties.errors import PropertyViolation
from properties.stream_scenarios import StreamScenario
from properties.stream_suite import _epochs_under_a_trainer, stream_trainer_epochs
from properties.targets.stream import StreamComponent

SEQ = 3


def copies(sid: int) -> int:   # how many tokens sample sid encodes to, besides its BOS
    return 1 + sid % 3


class Windows:
    """Each sample's tokens (BOS -1, then ``copies(sid)`` times its id) packed into windows of SEQ; ``reads``: how
    many times the pass reads the data."""

    def __init__(self, sc: StreamScenario, reads: int):
        tokens = [t for _ in range(reads) for s in range(sc.sources[0]) for t in [-1] + [s] * copies(s)]
        self.windows = [tuple(tokens[i:i + SEQ]) for i in range(0, len(tokens) - SEQ + 1, SEQ)]

    def __iter__(self):
        return iter(self.windows)

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass

    def close(self):
        pass


def delivered(sc: StreamScenario, ids: list) -> list:
    out = []
    for s in sorted({i for i in ids if i >= 0}):
        n = ids.count(s)
        out += [s] * ((n + copies(s) - 1) // copies(s))
    return out


def component(reads: int, steps=None) -> StreamComponent:
    return StreamComponent(name=f"stream:windows-{reads}", make_loader=lambda sc: Windows(sc, reads), ids_of=tuple,
                           trainers=("torchtitan",), training_steps=steps, samples_of=delivered, dp=False,
                           shuffle=(False,), drop_last=(False,), break_early=False, mixes=("single",))


@pytest.mark.parametrize("n", [1, 4, 9])
def test_one_read_per_pass_passes_even_when_the_tail_is_never_trained(n):
    stream_trainer_epochs(component(1), StreamScenario(sources=(n,), epochs=2))


def test_a_pass_that_reads_the_data_twice_fails_naming_the_samples():
    with pytest.raises(PropertyViolation, match=r"epoch 0 delivered \[0, 1, 2, 3, 4\] more than once \(under trainer "
                                                 r"'torchtitan', uninterrupted\)"):
        stream_trainer_epochs(component(2), StreamScenario(sources=(5,)))


def test_an_endless_loader_under_a_trainer_without_epochs_is_left_to_stream_trainer_resume():
    assert "stream_trainer_resume judges the run" in _epochs_under_a_trainer(component(2, steps=lambda sc: 10))
    assert _epochs_under_a_trainer(component(2)) is None
