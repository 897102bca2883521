"""``stream_epochs`` across seeds: where an epoch can take so few orders that two epochs agree by chance
(``StreamComponent.epoch_orders``), epoch 1 must differ from epoch 0 for one of the seeds that make a chance replay for
all of them unlikely. A toy loader orders 4 shards of 3 samples by a generator drawn from (seed, epoch), or, as
datasets 5.2.0 does with 4 shards (H2, studies/hf_datasets/report.md), the same in every epoch."""

from __future__ import annotations

import numpy as np
import pytest

from properties.errors import PropertyViolation
from properties.stream_props import seeds_to_tell
from properties.stream_scenarios import StreamScenario
from properties.stream_suite import stream_epochs
from properties.targets.stream import StreamComponent


class Shards:
    def __init__(self, sc: StreamScenario, by_epoch: bool):
        self.sc, self.by_epoch, self.epoch = sc, by_epoch, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        key = [self.sc.seed, self.epoch] if self.by_epoch else [self.sc.seed]
        for shard in np.random.default_rng(key).permutation(4):
            yield from ((3 * int(shard) + i,) for i in range(3))

    def state_dict(self):
        return {"epoch": self.epoch}

    def load_state_dict(self, state):
        self.epoch = state["epoch"]

    def close(self):
        pass


def component(by_epoch: bool, orders=lambda sc: 24) -> StreamComponent:
    return StreamComponent(name="stream:shards", make_loader=lambda sc: Shards(sc, by_epoch), ids_of=tuple,
                           reshuffles=lambda sc: (False, "4 shards: 24 orders"), epoch_orders=orders)


SC = StreamScenario(sources=(12,), shuffle=True, epochs=2)


def test_seeds_are_the_fewest_that_make_a_chance_replay_for_all_of_them_unlikely():
    assert [seeds_to_tell(n) for n in (24, 6, 40320)] == [7, 12, 2]   # 24**-7 = 2e-10 <= 1e-9 < 24**-6
    assert seeds_to_tell(2) is None and seeds_to_tell(1) is None     # 30 seeds, or no order to draw: undecided


@pytest.mark.parametrize("seed", range(6))
def test_a_reshuffle_drawn_from_seed_and_epoch_passes(seed):
    stream_epochs(component(True), StreamScenario(sources=(12,), shuffle=True, epochs=2, seed=seed))


def test_a_reshuffle_that_ignores_the_epoch_fails_naming_the_seeds():
    with pytest.raises(PropertyViolation, match=r"epoch 1 replays epoch 0's order with shuffle=True for every one "
                                                 r"of 7 seeds 3-9 .* probability 2e-10"):
        stream_epochs(component(False), StreamScenario(sources=(12,), shuffle=True, epochs=2, seed=3))


def test_without_few_orders_declared_one_seed_is_not_held_to_differ():
    stream_epochs(component(False, orders=lambda sc: None), SC)


def test_repro_renders_the_seed_as_a_name_only_where_the_code_takes_it_as_one_literal():
    from properties.repro import ReproError, _seeded_code
    from properties.repro_setup import ReproSetup

    def setup(code_of):
        return lambda sc: ReproSetup("lib 1.0", (), (), code_of(sc), "batch")

    as_literal = _seeded_code(SC, setup(lambda sc: f"ds = ds.shuffle(seed={sc.seed})"), "pin.json")
    assert as_literal.code == "ds = ds.shuffle(seed=SEED)"
    for code_of in (lambda sc: f"K = {sc.seed % 7}  # derived from the seed", lambda sc: "no seed at all"):
        with pytest.raises(ReproError, match="does not take its seed as one literal.*replay"):
            _seeded_code(SC, setup(code_of), "pin.json")
