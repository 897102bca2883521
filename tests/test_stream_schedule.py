"""The trainer's ``checkpoint_on_resume`` schedule option (``loader_props.run_schedule``,
``StreamScenario.checkpoint_on_resume``): its call order, which checkpoint a later restore loads,
its JSON form (old examples decode unchanged) and that the strategy draws it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings

from properties import loader_props as L
from properties import stream_props as S
from properties.loader_targets import dynbsz_loader
from properties.scenarios import LoaderScenario
from properties.stream_scenarios import (
    StreamScenario,
    decode_stream_scenario,
    encode_stream_scenario,
    stream_scenarios,
)
from properties.targets.stream import StreamComponent


class Recording:
    """A stream loader over ``range(n)`` that logs every call the trainer makes (shared log)."""

    def __init__(self, sc: StreamScenario, log: list, n: int = 4):
        self.n, self.log, self.pos, self.epoch = n, log, 0, 0
        self.id = sum(1 for c in log if c[0] == "build")
        log.append(("build", self.id))

    def set_epoch(self, epoch: int) -> None:
        self.log.append(("set_epoch", self.id, epoch))
        if epoch != self.epoch:
            self.epoch, self.pos = epoch, 0

    def __iter__(self):
        self.log.append(("iter", self.id))
        while self.pos < self.n:
            self.pos += 1
            yield [self.pos - 1]

    def state_dict(self) -> dict:
        self.log.append(("state_dict", self.id, self.pos))
        return {"epoch": self.epoch, "pos": self.pos, "by": self.id}

    def load_state_dict(self, state: dict) -> None:
        self.log.append(("load", self.id, state["by"], state["pos"]))
        self.epoch, self.pos = state["epoch"], state["pos"]

    def close(self) -> None:
        self.log.append(("close", self.id))


def _run(sc: StreamScenario) -> tuple[S.StreamTranscript, list]:
    log: list = []
    t = S.run_stream(lambda s: Recording(s, log), sc, ids_of=tuple, codec="json")
    return t, log


def test_off_the_trainer_asks_the_loader_once_per_restore_and_iterates_at_once():
    t, log = _run(StreamScenario(checkpoints=(2,)))
    k = log.index(("load", 1, 0, 2))
    assert [c[0] for c in log[k - 3:k + 2]] == ["state_dict", "close", "build", "load", "set_epoch"]
    assert sum(c[0] == "state_dict" for c in log) == 1
    assert t.epoch_ids(0) == t.epoch_ids(1) == [0, 1, 2, 3]


def test_on_every_restore_is_followed_by_a_checkpoint_before_set_epoch_and_iter():
    t, log = _run(StreamScenario(checkpoints=(0, 2), restore_at_epoch_end=True, checkpoint_on_resume=True))
    for k, call in enumerate(log):
        if call[0] == "load":
            assert log[k + 1] == ("state_dict", call[1], call[3]), log
            assert log[k + 2][0] == "set_epoch", log
    assert t.epoch_ids(0) == t.epoch_ids(1) == [0, 1, 2, 3]


def test_a_restore_before_the_next_batch_loads_the_checkpoint_written_on_resume():
    # two restores after batch 2: the second loads what loader 1 wrote on resume, without asking loader 1 again
    t, log = _run(StreamScenario(checkpoints=(2, 2), checkpoint_on_resume=True))
    assert ("load", 2, 1, 2) in log
    assert [c for c in log if c[0] == "state_dict" and c[1] == 1] == [("state_dict", 1, 2)]   # on resume only
    assert t.epoch_ids(0) == [0, 1, 2, 3]
    # a batch in between: the next restore asks the loader for its state after that batch
    _, log = _run(StreamScenario(checkpoints=(2, 3), checkpoint_on_resume=True))
    assert ("load", 2, 1, 3) in log and ("state_dict", 1, 3) in log


def test_once_the_epoch_ended_the_epoch_end_checkpoint_asks_the_loader():
    # restored after epoch 0's last batch, the loader then ran out: the epoch-end restore saves its state anew
    _, log = _run(StreamScenario(checkpoints=(4,), restore_at_epoch_end=True, checkpoint_on_resume=True))
    assert ("state_dict", 1, 4) in log and log.count(("state_dict", 1, 4)) == 2   # on resume, and at the epoch end
    assert ("load", 2, 1, 4) in log


def test_map_style_loaders_take_the_option_through_run_schedule():
    sc = LoaderScenario(num_samples=12, data_seed=1, num_workers=0, budget=256, epochs=2, checkpoints=(0, 3, 3))
    plain = L.run_schedule(dynbsz_loader, replace(sc, checkpoints=()))
    on_resume = L.run_schedule(dynbsz_loader, sc, checkpoint_on_resume=True)
    assert on_resume.steps == plain.steps


def test_json_without_the_field_decodes_to_off_and_off_encodes_without_it():
    sc = StreamScenario(sources=(4,), checkpoints=(1,))
    doc = encode_stream_scenario(sc)
    assert "checkpoint_on_resume" not in doc["scenario"]
    assert decode_stream_scenario(doc) == sc and not sc.checkpoint_on_resume
    on = replace(sc, checkpoint_on_resume=True)
    assert encode_stream_scenario(on)["scenario"]["checkpoint_on_resume"] is True
    assert decode_stream_scenario(encode_stream_scenario(on)) == on


def test_schedule_says_so():
    assert "a checkpoint written right after every restore" in S.schedule(StreamScenario(checkpoint_on_resume=True))
    assert "restore" not in S.schedule(StreamScenario())


COMPONENT = StreamComponent(name="stream:recording", make_loader=lambda sc: None, ids_of=tuple, break_early=True)


@pytest.mark.parametrize("checkpoints", [True, False])
def test_the_strategy_draws_it_only_with_checkpoints(checkpoints):
    seen = set()

    @settings(max_examples=60, database=None, derandomize=True)
    @given(stream_scenarios(COMPONENT, checkpoints=checkpoints))
    def draw(sc):
        seen.add(sc.checkpoint_on_resume)

    draw()
    assert seen == ({True, False} if checkpoints else {False})


class MovesOn(Recording):
    """Restores a state saved after its epoch's last batch as that epoch over, as litdata does (``closed``)."""

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        if self.pos == self.n:
            self.epoch, self.pos = self.epoch + 1, 0

    def set_epoch(self, epoch: int) -> None:
        self.log.append(("set_epoch", self.id, epoch))
        if epoch > self.epoch or (epoch == self.epoch and self.pos == self.n):
            self.epoch, self.pos = epoch, 0


def _steps(cls, sc: StreamScenario, epoch_end: str) -> list:
    log: list = []
    return S.run_stream(lambda s: cls(s, log), sc, ids_of=tuple, codec="json", epoch_end=epoch_end).steps


def test_a_closed_epoch_end_moves_on_and_an_open_one_re_enters_the_restored_epoch():
    # a checkpoint after epoch 0's last batch (4 of 4): the trainer that knows the epoch ended moves on
    plain = _steps(Recording, StreamScenario(sources=(4,), epochs=2), "open")
    at_end = StreamScenario(sources=(4,), epochs=2, checkpoints=(4,))
    assert plain == [(0, (0,)), (0, (1,)), (0, (2,)), (0, (3,)), (1, (0,)), (1, (1,)), (1, (2,)), (1, (3,))]
    assert _steps(MovesOn, at_end, "closed") == plain
    assert _steps(Recording, at_end, "open") == plain            # re-entered: its iter() ends the epoch
    # declared open, a loader that moved on trains an epoch too many: the re-entered epoch 0 is epoch 1's data
    assert [e for e, _ in _steps(MovesOn, at_end, "open")] == [0] * 8 + [1] * 4
    # mid-epoch restores and a double restore at the end behave alike under both conventions
    twice = StreamScenario(sources=(4,), epochs=2, checkpoints=(2, 4, 4))
    assert _steps(MovesOn, twice, "closed") == plain == _steps(Recording, twice, "open")


def test_an_unknown_epoch_end_convention_names_the_allowed_values():
    with pytest.raises(ValueError, match="epoch_end='shut'; allowed values: open, closed"):
        _steps(Recording, StreamScenario(sources=(4,), epochs=2), "shut")


def test_after_break_conventions_are_checked_and_a_replay_judges_the_broken_off_epoch_alone():
    from properties import stream_suite as SS
    from properties.targets.base import TargetError

    broken = StreamScenario(sources=(4,), epochs=2, checkpoints=(1,), break_after=2)

    def component(convention, reason="the library's note"):
        return StreamComponent(name="stream:toy", make_loader=lambda s: Recording(s, []), ids_of=tuple,
                               after_break=lambda sc: (convention, reason))

    assert SS.judged(component("fresh"), broken) == broken
    assert SS.judged(component("replays"), broken).epochs == 1
    # no restore in the broken-off epoch (a restore at step 3 is epoch 1's first), or no break: both epochs judged
    assert SS.judged(component("replays"), replace(broken, checkpoints=(3,))) == replace(broken, checkpoints=(3,))
    assert SS.judged(component("replays"), replace(broken, break_after=None)).epochs == 2
    # a restore at the break itself: stream_resume's own at every epoch end, or the scenario's restore_at_epoch_end
    assert SS.judged(component("replays"), replace(broken, checkpoints=(3,)), "stream_resume").epochs == 1
    assert SS.judged(component("replays"), replace(broken, checkpoints=(3,), restore_at_epoch_end=True)).epochs == 1
    assert SS.judged(component("replays"), replace(broken, checkpoints=(3,)), "stream_exactly_once").epochs == 2
    with pytest.raises(TargetError, match="after_break returned 'again'; allowed values: fresh, replays"):
        SS.judged(component("again"), broken)
    with pytest.raises(TargetError, match="after_break 'replays' needs its reason"):
        SS.judged(component("replays", ""), broken)
