"""Every failure classified (properties/verdicts.py): re-run under the trainer models its component
declares, a failure a real trainer sees is a bug; one only the adversarial schedule shows is a contract
gap. The two mutants below are written so that each falls on one side (properties/mutants/loaders.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from properties import cli, suite, trainers, verdicts
from properties.runner import Result, replay_example
from properties.scenarios import LoaderScenario, encode_loader_scenario
from properties.targets import LoaderComponent, TargetError, resolve


def _failed(target, prop, sc):
    result = replay_example(target, suite.get(prop), "loader:main", encode_loader_scenario(sc))
    assert result.status == "fail", result
    return verdicts.classify(target, result)


def test_a_failure_only_a_checkpoint_written_on_resume_shows_is_a_contract_gap():
    # the loader applies a loaded state only at the next set_epoch: the torchdata contract's restart
    # (load_state_dict, set_epoch, iter) never asks its state in between, so no modelled trainer sees it
    deferred = resolve("mutant:restore-deferred-to-set-epoch")
    sc = LoaderScenario(num_samples=12, checkpoints=(2, 2), checkpoint_on_resume=True)
    got = _failed(deferred, "exactly_once", sc)
    assert (got.verdict, got.trainers) == ("contract gap", ("adversarial",))
    assert got.to_json()["class"] == "contract gap" and got.to_json()["trainers"] == ["adversarial"]


def test_a_failure_the_torchdata_contract_s_trainer_sees_is_a_bug():
    # buffered samples left out of the checkpoint: any restart mid-epoch loses them
    unbuffered = resolve("mutant:loader-buffer-not-checkpointed")
    got = _failed(unbuffered, "exactly_once", LoaderScenario(num_samples=12, checkpoints=(2,), buffer_size=4))
    assert (got.verdict, got.trainers) == ("bug", ("torchdata", "adversarial"))


def test_loader_resume_is_classified_on_the_restores_it_made_and_the_signature_it_compared():
    # loader_resume also restores at every epoch end, and compares step ids: the off-by-one step id is
    # seen by the torchdata trainer restarting at the same steps
    off = resolve("mutant:step-off-by-one")
    got = _failed(off, "loader_resume", LoaderScenario(num_samples=12, checkpoints=(2,), buffer_size=4))
    assert (got.verdict, got.trainers) == ("bug", ("torchdata", "adversarial"))


def test_a_trainer_selected_alone_skips_the_adversarial_properties_and_runs_its_own(capsys):
    code = cli.main(["check", "--target", "mutant:loader-buffer-not-checkpointed", "--component", "loader:main", "--trainer",
                     "torchdata", "--property", "exactly_once", "--property", "trainer_resume", "--database", "none",
                     "--no-shrink"])
    out = capsys.readouterr().out
    assert code == 1
    assert "runs the adversarial schedule, which --trainer did not select" in out
    assert "FAIL trainer_resume [loader:main] (bug; trainers: torchdata)" in out


def test_trainer_resume_skips_a_component_with_no_real_trainer_model():
    comp = replace(resolve("dynbsz").component("loader:main"), trainers=("adversarial",))
    assert "declares no trainer model" in suite.get("trainer_resume").not_for(comp)
    with trainers.only(("veomni",)):
        assert "selected none of them" in suite.get("trainer_resume").not_for(resolve("dynbsz").component("loader:main"))


def test_a_component_s_trainers_are_validated_by_name():
    make = lambda sc: None  # noqa: E731
    with pytest.raises(TargetError, match="'lightningg' is not a trainer model; allowed values: torchdata"):
        LoaderComponent(name="l", make_loader=make, trainers=("lightningg",))
    with pytest.raises(TargetError, match="trainer 'veomni' bounds an epoch.*steps_per_epoch"):
        LoaderComponent(name="l", make_loader=make, trainers=("veomni",))


def test_an_unknown_trainer_on_the_command_line_names_the_allowed_ones(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["check", "--target", "dynbsz", "--trainer", "lightningg"])
    assert e.value.code == 2
    assert "invalid choice: 'lightningg'" in capsys.readouterr().err


def test_fuzz_reports_classify_their_failures(capsys):
    code = cli.main(["fuzz", "--target", "mutant:loader-buffer-not-checkpointed", "--minutes", "0.3", "--seed", "0",
                     "--property", "exactly_once", "--database", "none", "--json"])
    doc = json.loads(capsys.readouterr().out)
    failed = [r for r in doc["results"] if r["status"] == "fail"]
    assert code == 1 and failed, doc
    assert all(r["class"] in verdicts.CLASSES and "adversarial" in r["trainers"] for r in failed), failed


class _CrashesAfterRestore:
    """A loader that raises once a state is loaded: a crash the resumed job hits, never the uninterrupted one."""

    def __init__(self, inner):
        self.inner, self.restored = inner, False

    def set_epoch(self, epoch):
        self.inner.set_epoch(epoch)

    def state_dict(self):
        return self.inner.state_dict()

    def load_state_dict(self, state):
        self.inner.load_state_dict(state)
        self.restored = True

    def close(self):
        self.inner.close()

    def __iter__(self):
        if self.restored:
            raise RuntimeError("generator raised StopIteration")
        return iter(self.inner)


def test_a_crash_under_a_trainer_is_a_reproduction_under_that_trainer():
    # VeOmni's B1: the resumed job raises. The verdict reads the trainer from the message, so the crash must
    # be reported under the trainer and schedule it happened in, not as a bare "the target raised"
    base = resolve("dynbsz").component("loader:main")
    comp = replace(base, name="loader:main", make_loader=lambda sc: _CrashesAfterRestore(base.make_loader(sc)),
                   trainers=("torchdata",))
    sc = LoaderScenario(num_samples=12, checkpoints=(2,))
    with pytest.raises(trainers.PropertyViolation,
                       match=r"under trainer 'torchdata', preempted after global steps \[2\]: the loader raised "
                             r"RuntimeError: generator raised StopIteration"):
        suite.get("trainer_resume").check(comp, sc)


def test_a_hang_under_a_trainer_is_credited_to_that_trainer_and_one_under_no_loop_to_none():
    # stream_no_hang of a component with a step budget (torchtitan's) runs under its trainer model, and the watchdog
    # names it; the suite's plain loop names none (a hang there is a bug whatever trainer drives the loader)
    target = resolve("dynbsz")
    under = verdicts.classify(target, Result(
        "dynbsz", "stream_no_hang", "loader:main", "fail",
        message=f"no hang: next() did not return ({trainers.under_trainer('torchtitan')}, preempted after [])"))
    assert (under.verdict, under.trainers) == ("bug", ("torchtitan",))
    plain = verdicts.classify(target, Result("dynbsz", "no_hang", "loader:main", "fail",
                                                      message="no hang: one pass yielded 55 steps (no checkpoints)"))
    assert (plain.verdict, plain.trainers) == ("bug", ())
