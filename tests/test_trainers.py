"""Trainer models (properties/trainers.py): each drives a loader with its trainer's exact calls.

The expected call sequences below are written from each trainer's source, not from the model's code:
VeOmni 0.1.12 (trainer/base.py:850-857, 926-970; trainer/callbacks/checkpoint_callback.py:46-57, 86-115),
torchtitan 0.3.0 (trainer.py Trainer.train and batch_generator; components/checkpointer/dcp.py; DCP's
load in torch/distributed/checkpoint/state_dict_loader.py) and Lightning 2.6.5 (loops/fit_loop.py,
loops/training_epoch_loop.py, loops/fetchers.py); the Lightning models are also compared with the real
Lightning in tests/test_trainers_lightning.py."""

from __future__ import annotations

import pytest

from properties import trainers
from properties.loader_props import default_ids_of
from properties.scenarios import LoaderScenario


class FakeLoader:
    """A correct resumable loader over ``n`` steps an epoch; every call it gets goes into ``log``."""

    def __init__(self, log, n, restart_on_resume=False):
        self.log, self.n, self.epoch, self.pending = log, n, 0, None
        self.pos = 0
        self.restart_on_resume = restart_on_resume
        log.append("make")

    def set_epoch(self, e):
        self.log.append(f"set_epoch({e})")
        self.epoch = e

    def __iter__(self):
        self.log.append("iter")
        start = 0
        if self.pending is not None:
            epoch, pos = self.pending
            self.pending = None
            start = 0 if self.restart_on_resume or epoch != self.epoch else pos
            if epoch != self.epoch and pos < self.n:   # a state of an unfinished epoch resumes that epoch
                self.epoch, start = epoch, (0 if self.restart_on_resume else pos)
        self.pos = start
        return self._gen()

    def _gen(self):
        while self.pos < self.n:
            self.pos += 1
            self.log.append(f"next->{self.epoch}.{self.pos - 1}")
            yield ((self.epoch * 100 + self.pos - 1,),)
        self.log.append("next->StopIteration")

    def state_dict(self):
        self.log.append("state_dict")
        return {"epoch": self.epoch, "pos": self.pos}

    def load_state_dict(self, state):
        self.log.append(f"load_state_dict({state['epoch']}.{state['pos']})")
        self.pending = (state["epoch"], state["pos"])

    def close(self):
        self.log.append("close")


def _sc(epochs=2, in_order=True):
    return LoaderScenario(num_samples=6, data_seed=0, shuffle_seed=0, num_workers=0, prefetch_factor=None,
                          persistent_workers=False, in_order=in_order, runtime="main", fetch_batch_size=1, budget=64,
                          buffer_size=1, micro_batches_per_step=1, warmup_steps=0, epochs=epochs, dp_rank=0,
                          dp_size=1, checkpoints=(), restore_at_epoch_end=False)


def _run(trainer, n, preempt, steps_per_epoch, epochs=2, **kw):
    log = []
    t = trainers.get(trainer).run(lambda sc: FakeLoader(log, n, **kw), _sc(epochs), preempt_after=preempt,
                                  ids_of=lambda s: s, steps_per_epoch=steps_per_epoch)
    return log, t


def test_veomni_mid_epoch_restart_loads_the_step_checkpoint_and_re_enters_the_epoch():
    log, t = _run("veomni", 3, (2,), 3)
    assert log == ["make", "set_epoch(0)", "iter", "next->0.0", "state_dict", "next->0.1", "state_dict",
                   # killed after global step 2; the next job loads that step's checkpoint, start_step 2: no eager iter
                   "close", "make", "load_state_dict(0.2)", "set_epoch(0)", "iter", "next->0.2", "state_dict",
                   # the epoch-end save is skipped: global step 3 was just saved at step end
                   "set_epoch(1)", "iter", "next->1.0", "state_dict", "next->1.1", "state_dict", "next->1.2",
                   "state_dict", "close"]
    assert [e for e, _ in t.steps] == [0, 0, 0, 1, 1, 1]


def test_veomni_restart_at_an_epoch_end_calls_iter_at_once_then_moves_on():
    log, _ = _run("veomni", 3, (3,), 3)
    i = log.index("close")
    assert log[i:i + 6] == ["close", "make", "load_state_dict(0.3)", "iter", "set_epoch(1)", "iter"]


def test_veomni_counts_a_global_step_for_the_stop_iteration_that_ends_a_short_epoch():
    # 2 steps an epoch under train_steps=3: the third next() raises, global step 3 is spent on it, and the
    # epoch-end checkpoint is written at global step 3 (not a step-end one).
    log, t = _run("veomni", 2, (), 3)
    assert log == ["make", "set_epoch(0)", "iter", "next->0.0", "state_dict", "next->0.1", "state_dict",
                   "next->StopIteration", "state_dict", "set_epoch(1)", "iter", "next->1.0", "state_dict",
                   "next->1.1", "state_dict", "next->StopIteration", "state_dict", "close"]
    assert len(t.steps) == 4


def test_veomni_resumes_in_the_epoch_global_step_over_train_steps_names_even_after_short_epochs():
    # checkpoint_callback.py:75-76: start_epoch = global_step // train_steps, start_step = global_step %
    # train_steps. Epochs of 2 steps under train_steps=4, each spending a third global step on its
    # StopIteration: epoch 2's first step is global step 7, and a kill there restarts in epoch 7 // 4 = 1
    # at step 3 with the loader's state of epoch 2: the trainer's epoch and the loader's agree only while
    # epochs are train_steps long (dynbsz refuses such a set_epoch with a ConfigError).
    log, _ = _run("veomni", 2, (7,), 4, epochs=3)
    i = log.index("close")
    assert log[i:i + 6] == ["close", "make", "load_state_dict(2.1)", "set_epoch(1)", "iter", "next->2.1"]


def test_veomni_needs_its_epoch_bound():
    with pytest.raises(ValueError, match="train_steps: steps_per_epoch must be > 0"):
        _run("veomni", 3, (), None)


def test_an_unknown_trainer_names_the_allowed_ones():
    with pytest.raises(ValueError, match="allowed values: torchdata, lightning, lightning-steps, torchtitan, veomni, adversarial"):
        trainers.get("lightningg")


@pytest.mark.parametrize("preempt", [(1,), (2,), (3,), (1, 4), (3, 3)])
def test_a_correct_loader_survives_every_preemption_under_veomni(preempt):
    make = lambda sc: FakeLoader([], 3)  # noqa: E731
    trainers.check_under(trainers.VEOMNI, make, _sc(), preempt, ids_of=lambda s: s, steps_per_epoch=3)


def test_a_loader_that_restarts_its_epoch_on_resume_fails_under_veomni():
    make = lambda sc: FakeLoader([], 3, restart_on_resume=True)  # noqa: E731
    with pytest.raises(trainers.PropertyViolation, match="under trainer 'veomni', preempted after global steps"):
        trainers.check_under(trainers.VEOMNI, make, _sc(), (2,), ids_of=lambda s: s, steps_per_epoch=3)


def test_judge_out_of_order_asks_exactly_once_per_epoch_not_the_order():
    from properties.loader_props import Transcript

    a = Transcript([(0, ((1,), (2,))), (0, ((3,),))])
    b = Transcript([(0, ((3,),)), (0, ((2,), (1,)))])
    assert trainers.judge(a, b, in_order=False) is None
    assert "differs" in trainers.judge(a, b, in_order=True)
    assert "lost [3]" in trainers.judge(a, Transcript([(0, ((1,), (2,)))]), in_order=False)


def test_the_veomni_model_drives_dynbsz_s_loader_through_a_preemption():
    from properties.targets import resolve

    comp = resolve("dynbsz").component("loader:main")
    sc = _sc()
    assert comp.unsupported(sc) is None
    # train_steps above the epoch's length, so StopIteration ends each epoch: dynbsz refuses a set_epoch that
    # would drop an unfinished epoch's buffered samples (ConfigError), as a shorter train_steps would ask
    trainers.check_under(trainers.VEOMNI, comp.make_loader, sc, (1, 2), ids_of=comp.ids_of or default_ids_of,
                         steps_per_epoch=50,
                         codec=comp.state_codec)


def test_torchdata_checkpoints_every_step_and_a_restart_re_enters_the_saved_epoch():
    log, t = _run("torchdata", 3, (3,), None)
    assert log == ["make", "set_epoch(0)", "iter", "next->0.0", "state_dict", "next->0.1", "state_dict", "next->0.2",
                   "state_dict",
                   # killed after the epoch's last step: the restored loader re-enters epoch 0, which has nothing left
                   "close", "make", "load_state_dict(0.3)", "set_epoch(0)", "iter", "next->StopIteration",
                   "set_epoch(1)", "iter", "next->1.0", "state_dict", "next->1.1", "state_dict", "next->1.2",
                   "state_dict", "next->StopIteration", "close"]
    assert [e for e, _ in t.steps] == [0, 0, 0, 1, 1, 1]


@pytest.mark.parametrize("preempt", [(1,), (3,), (2, 4)])
def test_a_correct_loader_survives_every_preemption_under_torchdata(preempt):
    make = lambda sc: FakeLoader([], 3)  # noqa: E731
    trainers.check_under(trainers.TORCHDATA, make, _sc(), preempt, ids_of=lambda s: s)


class SizedFake(FakeLoader):
    def __len__(self):
        return self.n


def test_torchtitan_iterates_once_lazily_and_restarts_with_dcp_template_then_load():
    # Trainer.train: checkpointer.load() first, then the batch generator's iter() at the first next(); every
    # step saves (interval 1); DCP's load asks state_dict() for a template before load_state_dict(); no
    # set_epoch anywhere, and running out of data ends training (the run is epoch 0 only).
    log, t = _run("torchtitan", 3, (2,), None)
    assert log == ["make", "iter", "next->0.0", "state_dict", "next->0.1", "state_dict", "close",
                   "make", "state_dict", "load_state_dict(0.2)", "iter", "next->0.2", "state_dict",
                   "next->StopIteration", "close"]
    assert [e for e, _ in t.steps] == [0, 0, 0]


def test_torchtitan_saves_no_loader_state_at_its_last_step():
    # dcp.py: the last step's save is model-only (last_save_model_only=True): no state_dict() of the loader
    log = []
    trainers.get("torchtitan").run(lambda sc: FakeLoader(log, 5), _sc(1), ids_of=lambda s: s, training_steps=2)
    assert log == ["make", "iter", "next->0.0", "state_dict", "next->0.1", "close"]


def test_lightning_first_epoch_of_a_fit_iterates_before_set_epoch_and_never_asks_a_sized_loader_to_stop():
    # fit_loop.py setup_data: iter() once before the epochs; on_advance_start: set_epoch(processed); later
    # epochs: set_epoch then iter() (training_epoch_loop.py on_run_start). Sized: the fetcher is done after
    # len() batches, so no next() sees the StopIteration. ModelCheckpoint's default: a save at each epoch end.
    log = []
    trainers.get("lightning").run(lambda sc: SizedFake(log, 2), _sc(2), ids_of=lambda s: s)
    assert log == ["make", "iter", "set_epoch(0)", "next->0.0", "next->0.1", "state_dict",
                   "set_epoch(1)", "iter", "next->1.0", "next->1.1", "state_dict", "close"]


def test_lightning_never_loads_an_epoch_end_checkpoints_loader_state():
    # fit_loop.py restarting setter: the epoch of an on_train_epoch_end checkpoint is finished, so the
    # loader's saved state is not loaded; the job starts the next epoch on the freshly built loader
    log = []
    trainers.get("lightning").run(lambda sc: SizedFake(log, 2), _sc(2), preempt_after=(3,), ids_of=lambda s: s)
    i = log.index("close")
    assert log[i:] == ["close", "make", "iter", "set_epoch(1)", "next->1.0", "next->1.1", "state_dict", "close"]


def test_lightning_steps_resumes_mid_epoch_for_the_remaining_batches_only():
    # every_n_train_steps=1: a save at every on_train_batch_end; resume: load_state_dict, iter(), then
    # set_epoch(processed); the fetcher starts at the batches already done (training_epoch_loop.py:249)
    log = []
    trainers.get("lightning-steps").run(lambda sc: SizedFake(log, 3), _sc(1), preempt_after=(1,), ids_of=lambda s: s)
    i = log.index("close")
    assert log[i:] == ["close", "make", "load_state_dict(0.1)", "iter", "set_epoch(0)", "next->0.1", "state_dict",
                       "next->0.2", "state_dict", "close"]


def test_lightning_fetches_one_batch_ahead_of_an_unsized_loader():
    # fetchers.py _PrefetchDataFetcher: without a length, iter() fetches one batch before set_epoch, and
    # every batch handed out is refilled at once; the StopIteration is seen one batch early
    log = []
    trainers.get("lightning").run(lambda sc: FakeLoader(log, 2), _sc(1), ids_of=lambda s: s)
    assert log == ["make", "iter", "next->0.0", "set_epoch(0)", "next->0.1", "next->StopIteration", "state_dict",
                   "close"]


def test_a_lossy_resume_may_lose_samples_but_never_deliver_one_twice():
    from properties.loader_props import Transcript

    plain = Transcript([(0, ((1, 2),)), (0, ((3, 4),))])
    assert trainers.judge(plain, Transcript([(0, ((1, 2),))]), in_order=False, lossy=True) is None
    assert "more than once" in trainers.judge(plain, Transcript([(0, ((1, 2),)), (0, ((2, 3),))]),
                                              in_order=False, lossy=True)
    assert "[9] foreign" in trainers.judge(plain, Transcript([(0, ((1, 9),))]), in_order=False, lossy=True)
    # held to exactly once, the same loss is a violation
    assert "lost [3, 4]" in trainers.judge(plain, Transcript([(0, ((1, 2),))]), in_order=False)
