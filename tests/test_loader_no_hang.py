"""The no-hang bounds (properties.watchdog): a loader that never ends an epoch, a worker that stops
delivering or a rank stuck waiting fails with the schedule and where it stopped, instead of hanging.

The bounds themselves are checked on plain iterators here (the step bound counts, the wall bound
interrupts a sleeping next(), an outer timer or another thread is left alone); that each driver
applies them, and that the property suite alone kills the hang mutants, is checked through the
drivers and the runner. The mutants' kills by the ci search are in tests/test_packer_mutants.py.
"""

from __future__ import annotations

import signal
import threading
import time

import pytest

from properties import loader_props as L
from properties import mutation, suite
from properties import trainers as T
from properties.cli import main as cli_main
from properties.runner import RunSettings, replay_example, run_property
from properties.scenarios import LoaderScenario, decode_loader_scenario, encode_loader_scenario
from properties.targets import resolve
from properties.watchdog import LoaderHang, Watch, check_timeout, pass_bound, step_timeout


def forever():
    k = 0
    while True:
        yield k
        k += 1


class SlowNext:
    """An iterator whose every next() takes ``seconds`` (a sleep, so the alarm can interrupt it)."""

    def __init__(self, seconds: float, n: int = 3):
        self.seconds, self.n = seconds, n

    def __iter__(self):
        return self

    def __next__(self):
        if self.n == 0:
            raise StopIteration
        self.n -= 1
        time.sleep(self.seconds)
        return self.n


class Once:
    def __init__(self, it):
        self.it = it

    def __iter__(self):
        return self.it


SC = LoaderScenario(num_samples=12)


def test_the_step_bound_is_two_per_sample_plus_two_and_names_the_epoch_and_schedule():
    assert pass_bound(SC) == 26
    watch = Watch(SC, "the schedule under test")
    it = watch.iter(Once(forever()), epoch=3)
    got = []
    with pytest.raises(LoaderHang) as e:
        for step in it:
            got.append(step)
    assert len(got) == 26
    assert "epoch 3" in str(e.value) and "the schedule under test" in str(e.value) and "27 steps" in str(e.value)


def test_a_finite_pass_within_the_bound_is_untouched():
    watch = Watch(SC, "s")
    assert list(watch.iter(Once(iter(range(26))), 0)) == list(range(26))
    assert watch.delivered == 26


def test_the_wall_bound_interrupts_a_sleeping_next_and_restores_the_previous_handler():
    before = signal.getsignal(signal.SIGALRM)
    with step_timeout(0.2):
        watch = Watch(SC, "s")
    it = watch.iter(Once(SlowNext(5.0)), 1)
    with pytest.raises(LoaderHang) as e:
        next(it)
    assert "next() for step 0 of epoch 1" in str(e.value) and "0.2 s" in str(e.value)
    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0.0


def _expires_within_the_bound(hangs, name: str, unraisable: list) -> None:
    """A 0.1 s step bound on ``hangs`` still expires (well before its 5 s sleep ends), and nothing was swallowed."""
    with step_timeout(0.1):
        w = Watch(LoaderScenario(num_samples=4), name)
    start = time.monotonic()
    with pytest.raises(LoaderHang, match="did not return within 0.1 s"):
        w.call(hangs, "next()")
    assert time.monotonic() - start < 2 and not unraisable


def test_an_alarm_that_lands_in_a_finalizer_is_deferred_not_lost(monkeypatch):
    # ci.flips saw it: the garbage collector ran a torch iterator's __del__ (joining its workers) inside a
    # watched next(); the alarm raised there, Python swallowed it as "Exception ignored", and pytest failed the
    # test on the unraisable exception while the expiry itself was lost
    import sys

    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)

    class SlowFinalizer:
        def __del__(self):
            time.sleep(0.3)          # still running when the 0.1 s alarm fires

    def hangs():
        obj = SlowFinalizer()
        del obj                      # its __del__ runs here, under the alarm
        time.sleep(5)                # the hang the bound must still catch

    _expires_within_the_bound(hangs, "finalizer test", unraisable)


def test_an_alarm_that_lands_in_a_weakref_callback_is_deferred_too(monkeypatch):
    # the CI run of 2026-12-04: "Exception ignored in: <function WeakValueDictionary.__init__.<locals>.remove>", the
    # garbage collector running a WeakValueDictionary's callback inside a watched call when the alarm fired
    import sys
    import weakref

    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)

    class Slow:
        pass

    def hangs():
        obj = Slow()
        # weakref.finalize.__call__ (weakref.py) runs the sleep, still running when the 0.1 s alarm fires
        finalizer = weakref.finalize(obj, time.sleep, 0.3)
        del obj                     # the callback runs here, under the alarm
        assert not finalizer.alive
        time.sleep(5)               # the hang the bound must still catch

    _expires_within_the_bound(hangs, "weakref callback test", unraisable)


def test_an_alarm_that_lands_in_a_fork_hook_is_deferred_too():
    # ci.flips again: "Exception ignored in: <function _releaseLock>", logging's at-fork hook, run by os.fork()
    # as a DataLoader worker started inside a watched iter(); a hook of that name must finish undisturbed
    finished = []

    def _releaseLock():              # the name is what the watchdog recognises
        time.sleep(0.3)              # still running when the 0.1 s alarm fires
        finished.append(True)

    def hangs():
        _releaseLock()
        time.sleep(5)

    with step_timeout(0.1):
        w = Watch(LoaderScenario(num_samples=4), "fork hook test")
    with pytest.raises(LoaderHang, match="did not return within 0.1 s"):
        w.call(hangs, "iter()")
    assert finished == [True]


def test_an_outer_timer_is_left_to_its_owner():
    # a pytest-timeout in signal mode, say: the watch must neither replace nor cancel it
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    signal.setitimer(signal.ITIMER_REAL, 100.0)
    try:
        with step_timeout(0.05):
            watch = Watch(SC, "s")
        assert list(watch.iter(Once(SlowNext(0.2, n=1)), 0)) == [0]   # no hang reported: their timer rules
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 50.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, previous)
    assert not fired


def test_outside_the_main_thread_only_the_step_bound_applies():
    out = {}

    def run():
        with step_timeout(0.05):
            watch = Watch(SC, "s")
        out["slow"] = list(watch.iter(Once(SlowNext(0.2, n=1)), 0))
        try:
            list(watch.iter(Once(forever()), 0))
        except LoaderHang as e:
            out["hang"] = str(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert out["slow"] == [0] and "without ending" in out["hang"]


@pytest.mark.parametrize("bad", [0, -1, "5", True, float("nan")])
def test_a_bad_timeout_names_the_setting(bad):
    with pytest.raises(ValueError, match="step_timeout_s"):
        check_timeout(bad)
    with pytest.raises(ValueError, match="step_timeout_s"):
        RunSettings(step_timeout_s=bad)


def test_the_cli_refuses_a_negative_step_timeout(capsys):
    assert cli_main(["check", "--target", "dynbsz", "--property", "no_hang", "--step-timeout", "-2"]) == 2
    assert "--step-timeout must be >= 0" in capsys.readouterr().err


# ---- through the drivers: every loop a property drives is bounded -----------------------------

def never_ending(sc):
    return resolve("mutant:epoch-never-ends").component("loader:main").make_loader(sc)


def test_run_schedule_and_run_bounded_stop_a_never_ending_epoch():
    sc = LoaderScenario(num_samples=12, checkpoints=(2,))
    with pytest.raises(LoaderHang, match="checkpoints after steps \\[2\\]"):
        L.run_schedule(never_ending, sc)
    with pytest.raises(LoaderHang, match="stopping rule epoch"):
        L.run_bounded(never_ending, sc, "epoch")


@pytest.mark.parametrize("trainer", ["torchdata", "lightning", "torchtitan"])
def test_every_trainer_model_without_an_epoch_bound_of_its_own_stops_too(trainer):
    # named as every failure under a trainer is, so that the verdict credits the hang to that trainer (a hang
    # said "trainer torchtitan," and was classed a bug under no trainer: ci.flips, torchtitan's check)
    model = T.get(trainer)
    with pytest.raises(LoaderHang, match=f"under trainer '{trainer}', preempted after global steps"):
        model.run(never_ending, LoaderScenario(num_samples=12), preempt_after=(3,))


def test_the_state_machine_reports_a_hang_instead_of_hanging():
    target = resolve("mutant:epoch-never-ends")
    result = run_property(target, suite.get("loader_stateful"), target.component("loader:main"),
                          mutation.default_settings("ci", max_examples=4))
    assert result.status == "fail" and "no hang:" in result.message and "not shrunk" in result.message


@pytest.mark.parametrize("name,where", [("stuck-rank", "rank 1 of 2"), ("silent-worker", "next() for step"),
                                        ("epoch-never-ends", "without ending")])
def test_each_hang_mutant_fails_no_hang_with_where_it_stopped_and_dynbsz_passes_that_example(name, where):
    target = resolve(f"mutant:{name}")
    prop = suite.get("no_hang")
    rs = mutation.default_settings("ci", step_timeout_s=5.0)
    result = run_property(target, prop, target.component("loader:main"), rs)
    assert result.status == "fail", result.message
    assert result.message.startswith("no hang:") and where in result.message
    if name == "stuck-rank":
        assert decode_loader_scenario(result.minimal_example).dp_size == 2
    control = replay_example(resolve("dynbsz"), prop, "loader:main", result.minimal_example)
    assert control.status == "pass", control.message


def test_dynbsz_passes_no_hang_on_both_runtimes():
    target = resolve("dynbsz")
    for component in ("loader:main", "loader:worker"):
        result = run_property(target, suite.get("no_hang"), target.component(component),
                              RunSettings(profile="ci", database=None, max_examples=6))
        assert result.status == "pass", result.message


def test_a_replayed_hang_is_a_failure_like_any_other():
    sc = LoaderScenario(num_samples=12)
    result = replay_example(resolve("mutant:epoch-never-ends"), suite.get("no_hang"), "loader:main",
                            encode_loader_scenario(sc))
    assert result.status == "fail" and "without ending" in result.message
