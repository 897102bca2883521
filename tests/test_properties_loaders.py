"""The loader half of the property suite: loader components, their knobs, examples as JSON, the
built-in ``torchdata`` target failing where its docstring says, VeOmni's loader adapters, and the
CLI reporting a status for every loader property.

Where the rest runs: dynbsz's loader components go through every loader property in
tests/test_packer_properties.py (the plugin, target ``dynbsz``: checked below); every loader
mutant must be killed in tests/test_packer_mutants.py (it iterates ``mutants.MUTANTS``).
VeOmni's findings are not asserted here (the conformance report pins them); only that its
adapters deliver sample ids and that each property gets a status.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from properties import cli, mutants, suite
from properties.runner import plan, quiet_target, replay_example
from properties.scenarios import (
    LOADER_FORMAT,
    LoaderScenario,
    PackerExample,
    SkewScenario,
    decode_loader_scenario,
    decode_skew_scenario,
    encode_loader_scenario,
    encode_skew_scenario,
)
from properties.strategies import loader_scenarios, skew_scenarios, spawn_is_cheap
from properties.targets import LoaderComponent, TargetError, resolve

LOADER_PROPERTIES = ("loader_resume", "exactly_once", "epoch_reshuffle", "dp_shards", "dp_step_counts",
                     "balanced_order", "reorder_exact", "loader_stateful", "in_order_skew", "trainer_resume",
                     "no_hang")
CORPUS = Path(__file__).parent / "regressions"
DYNBSZ = resolve("dynbsz")
TORCHDATA = resolve("torchdata")


def scenario_json(sc: LoaderScenario) -> dict:
    return encode_loader_scenario(sc)


# ---- the registry and components ---------------------------------------------------------------

def test_loader_properties_are_registered_with_a_cost():
    props = {p.name: p for p in suite.properties()}
    assert set(LOADER_PROPERTIES) <= set(props)
    for name in LOADER_PROPERTIES:
        assert "loader" in props[name].kinds
    # resume (packers and gates) and loader_resume (loaders) are two properties; each draws its own examples
    assert props["resume"].kinds == {"packer", "gate"} and props["loader_resume"].kinds == {"loader"}
    assert props["loader_resume"].examples_for(60) == 15
    assert props["resume"].examples_for(60) == 60
    assert props["dp_shards"].examples_for(60) == 10 and props["in_order_skew"].examples_for(60) == 5
    assert props["loader_stateful"].examples_for(60) == 15 and props["loader_stateful"].machine is not None
    assert props["exactly_once"].examples_for(20) == 5
    assert all(props[name].interesting for name in LOADER_PROPERTIES)


def test_the_plugin_run_on_dynbsz_covers_every_loader_property_on_both_runtimes():
    pairs = {(p.name, c.name) for p, c in plan(DYNBSZ) if c is not None and c.kind == "loader"}
    assert pairs == {(p, c) for p in LOADER_PROPERTIES for c in ("loader:main", "loader:worker")}
    # the one pair dynbsz declares it does not promise, with the reason
    assert "micro-batches" in DYNBSZ.component("loader:worker").skip["in_order_skew"]
    # and the two knobs the worker runtime does not have (ConfigError there), each a skip naming it
    worker = DYNBSZ.component("loader:worker")
    for name in ("balanced_order", "reorder_exact"):
        assert "runtime='worker'" in suite.get(name).skip_reason(worker)
        assert suite.get(name).skip_reason(DYNBSZ.component("loader:main")) is None


def test_each_resume_reads_its_own_example_format():
    prop = suite.get("loader_resume")
    sc = LoaderScenario(num_samples=13, checkpoints=(0, 4), restore_at_epoch_end=True)
    assert prop.decode(json.loads(json.dumps(prop.encode(sc)))) == sc
    packer_example = json.loads(next(CORPUS.glob("resume-packer-*.json")).read_text())["example"]
    assert isinstance(suite.get("resume").decode(packer_example), PackerExample)
    with pytest.raises(ValueError, match="not a loader example"):
        prop.decode({"format": "something"})
    with pytest.raises(ValueError, match="not a loader example"):
        prop.decode(packer_example)


@settings(max_examples=30, deadline=None, database=None)
@given(st.data())
def test_loader_examples_survive_their_json_form_and_respect_the_knobs(data):
    component = data.draw(st.sampled_from([DYNBSZ.component("loader:main"), DYNBSZ.component("loader:worker"),
                                           TORCHDATA.component("loader:main")]))
    sc = data.draw(loader_scenarios(component))
    assert decode_loader_scenario(json.loads(json.dumps(encode_loader_scenario(sc)))) == sc
    assert component.unsupported(sc) is None
    assert sc.checkpoints and sc.epochs == 2  # every schedule restores at least once
    skew = data.draw(skew_scenarios())
    assert decode_skew_scenario(json.loads(json.dumps(encode_skew_scenario(skew)))) == skew


def test_start_methods_are_drawn_from_the_component_with_workers_and_spawn_rarely():
    from collections import Counter

    from properties.loader_machine import scenarios as machine_scenarios

    spawned = 0
    for component in (DYNBSZ.component("loader:main"), DYNBSZ.component("loader:worker"),
                      TORCHDATA.component("loader:main")):
        machine = machine_scenarios(component)
        for strategy in (loader_scenarios(component), machine):
            seen: Counter = Counter()

            @settings(max_examples=200, deadline=None, database=None, derandomize=True)
            @given(strategy)
            def draw(sc):
                assert sc.start_method in component.start_methods
                assert sc.num_workers or sc.start_method is None   # no workers, nothing to start
                if sc.start_method == "spawn":   # only where its start-up is paid once per loader
                    assert strategy is not machine and spawn_is_cheap(sc.num_workers, sc.persistent_workers,
                                                                      sc.dp_size), sc
                seen[sc.start_method] += 1

            draw()
            if component.start_methods == (None,):
                assert set(seen) == {None}
            else:   # every declared method, spawn (slow) rarely
                assert {None, "fork"} <= set(seen) and seen["spawn"] * 8 < sum(seen.values()), seen
                spawned += seen["spawn"]
    assert spawned   # drawn, if rarely (strategies.spawn_is_cheap)


def test_a_saved_scenario_without_a_start_method_decodes_to_the_platform_default():
    # entries saved before the knob existed (tests/regressions) name no start_method
    d = LoaderScenario(num_workers=2, prefetch_factor=2).to_json()
    del d["start_method"]
    sc = decode_loader_scenario({"format": LOADER_FORMAT, "scenario": d})
    assert sc.start_method is None and sc == LoaderScenario(num_workers=2, prefetch_factor=2)


@pytest.mark.parametrize("checkpoints", [True, False])
def test_a_checkpoint_on_resume_is_drawn_only_with_a_schedule_and_written_only_when_on(checkpoints):
    seen = set()

    @settings(max_examples=60, deadline=None, database=None, derandomize=True)
    @given(loader_scenarios(DYNBSZ.component("loader:main"), checkpoints=checkpoints))
    def draw(sc):
        seen.add(sc.checkpoint_on_resume)
        written = encode_loader_scenario(sc)["scenario"]
        # entries saved before the field existed name none and keep their corpus names
        assert ("checkpoint_on_resume" in written) == sc.checkpoint_on_resume
        assert decode_loader_scenario(json.loads(json.dumps(encode_loader_scenario(sc)))) == sc

    draw()
    assert seen == ({True, False} if checkpoints else {False})


def test_a_checkpoint_on_resume_is_said_in_the_failure_s_schedule():
    # the fresh loader's own state saved on resume: a restart from it starts the run over
    deferred = resolve("mutant:restore-deferred-to-set-epoch")
    sc = LoaderScenario(num_samples=12, checkpoints=(2, 2), checkpoint_on_resume=True)
    failed = replay_example(deferred, suite.get("exactly_once"), "loader:main", scenario_json(sc))
    assert failed.status == "fail"
    assert "more than once (checkpoints after steps [2, 2], a checkpoint written right after every restore)" \
        in failed.message
    # the same schedule without it restores through set_epoch each time, which the mutant gets right
    assert replay_example(deferred, suite.get("exactly_once"), "loader:main",
                          scenario_json(replace(sc, checkpoint_on_resume=False))).status == "pass"
    assert replay_example(DYNBSZ, suite.get("exactly_once"), "loader:main", scenario_json(sc)).status == "pass"


def test_a_scenario_with_an_unknown_field_is_rejected_by_name():
    with pytest.raises(ValueError, match="no field.*shards"):
        LoaderScenario.from_json({**LoaderScenario().to_json(), "shards": 2})


def test_loader_component_is_validated():
    make = lambda sc: None  # noqa: E731
    with pytest.raises(TargetError, match="runtime='gpu'; allowed values: main, worker"):
        LoaderComponent(name="l", make_loader=make, runtime="gpu")
    with pytest.raises(TargetError, match="state_codec"):
        LoaderComponent(name="l", make_loader=make, state_codec="yaml")
    with pytest.raises(TargetError, match="kind='loader'"):
        LoaderComponent(name="l", kind="packer", make_loader=make)
    with pytest.raises(TargetError, match="make_loader must be callable"):
        LoaderComponent(name="l", make_loader=None)


def test_a_replayed_example_the_component_cannot_run_is_a_skip_naming_the_setting():
    sc = LoaderScenario(num_samples=12, micro_batches_per_step=2)
    result = replay_example(TORCHDATA, suite.get("loader_resume"), "loader:main", scenario_json(sc))
    assert result.status == "skip"
    assert "micro_batches_per_step=2 is not supported by loader:main" in result.message
    worker = replace(sc, runtime="worker", micro_batches_per_step=1)
    result = replay_example(TORCHDATA, suite.get("exactly_once"), "loader:main", scenario_json(worker))
    assert result.status == "skip" and "runtime='worker'" in result.message


# ---- torchdata: the baseline that fails where its docstring says --------------------------------

TD_CASES = {
    # non-persistent workers draw an extra seed per epoch from the shared generator
    "epoch_reshuffle": LoaderScenario(num_samples=12, num_workers=1, prefetch_factor=1),
    # StatefulDistributedSampler pads 13 samples to 14 by reading one twice
    "dp_shards": LoaderScenario(num_samples=13, dp_size=2),
    # a resume (even in order, no workers) restores the generator without the loader's extra
    # seed draw: the next epoch's permutation differs from the uninterrupted run's
    "loader_resume": LoaderScenario(num_samples=12, checkpoints=(1,)),
}


@pytest.mark.parametrize("prop", sorted(TD_CASES))
def test_torchdata_fails_where_expected_and_dynbsz_holds_on_the_same_example(prop):
    example = scenario_json(TD_CASES[prop])
    failed = replay_example(TORCHDATA, suite.get(prop), "loader:main", example)
    assert failed.status == "fail", failed.message
    assert replay_example(DYNBSZ, suite.get(prop), "loader:main", example).status == "pass"


def test_torchdata_keeps_sampler_order_in_order():
    example = encode_skew_scenario(SkewScenario(num_samples=60, in_order=True, num_workers=2))
    assert replay_example(TORCHDATA, suite.get("in_order_skew"), "loader:main", example).status == "pass"


def run_cli(capsys, *argv) -> tuple[int, dict]:
    code = cli.main(list(argv))
    return code, json.loads(capsys.readouterr().out)


def test_cli_check_torchdata_reports_every_loader_property(capsys, tmp_path):
    code, doc = run_cli(capsys, "check", "--target", "torchdata", "--json", "--max-examples", "3", "--no-shrink",
                        "--database", "none", "--corpus", str(tmp_path), "--property", "epoch_reshuffle",
                        "--property", "exactly_once", "--property", "loader_resume", "--property", "dp_shards")
    assert code == 1
    rows = {r["property"]: r for r in doc["results"]}
    assert set(rows) == {"epoch_reshuffle", "exactly_once", "loader_resume", "dp_shards"}
    assert all(r["component"] == "loader:main" and r["status"] in ("pass", "fail") for r in rows.values())
    fail = rows["epoch_reshuffle"]
    assert fail["status"] == "fail" and fail["minimal_example"]["format"] == LOADER_FORMAT
    assert fail["replay"].startswith("python -m properties replay ")
    code, out = cli.main(["replay", fail["file"], "--target", "dynbsz"]), capsys.readouterr().out
    assert code == 0 and out.startswith("PASS epoch_reshuffle [loader:main] on dynbsz")


# ---- VeOmni: the adapters deliver sample ids; the CLI reports a status for each property ---------

def veomni():
    target = resolve("veomni")
    if target.unavailable:
        pytest.skip(target.unavailable)
    return target


@pytest.mark.parametrize("name", ["loader:main", "loader:worker", "loader:multisource"])
def test_veomni_loader_adapters_deliver_sample_ids(name):
    component = veomni().component(name)
    sc = LoaderScenario(num_samples=16, num_workers=2, prefetch_factor=2, runtime=component.runtime,
                          micro_batches_per_step=2, budget=256, buffer_size=2)
    with quiet_target():
        loader = component.make_loader(sc)
        try:
            loader.set_epoch(0)
            steps = [component.ids_of(step) for step in loader]
            state = pickle.loads(pickle.dumps(loader.state_dict()))  # what the pickle codec carries
        finally:
            loader.close()
    ids = [sid for step in steps for mb in step for sid in mb]
    assert steps and all(len(step) == 2 for step in steps)  # num_micro_batch micro-batches per step
    assert ids and all(isinstance(i, int) and 0 <= i < sc.num_samples for i in ids)
    assert isinstance(state, dict)


def test_cli_check_veomni_gives_every_loader_property_a_status(capsys, tmp_path):
    components = [c.name for c in veomni().components if c.kind == "loader"]
    code, doc = run_cli(capsys, "check", "--target", "veomni", "--json", "--max-examples", "2", "--no-shrink",
                        "--database", "none", "--corpus", str(tmp_path),
                        *[a for c in components for a in ("--component", c)])
    assert code in (0, 1)
    rows = {(r["property"], r["component"]): r for r in doc["results"]}
    assert set(rows) == {(p, c) for p in LOADER_PROPERTIES for c in components}
    for row in rows.values():
        assert row["status"] in ("pass", "fail", "skip")
        assert row["status"] == "pass" or row["message"]  # a failure or a skip says why


# ---- loader mutants ------------------------------------------------------------------------------

def test_loader_mutants_stand_in_for_dynbsz_loader_components():
    loader_mutants = [m for m in mutants.MUTANTS if m.component == "loader"]
    assert len(loader_mutants) >= 7 and len(mutants.MUTANTS) >= 12
    for m in loader_mutants:
        target = resolve("mutant:" + m.name)
        (component,) = target.components
        assert component.name == m.replaces and component.kind == "loader"
        reference = DYNBSZ.component(m.replaces)
        if m.in_order_only:   # searched in order only (registry.Mutant.in_order_only), and it says why
            assert "arrival timing" in component.knob_notes["in_order"]
            reference = replace(reference, in_order=(True,),
                                knob_notes={**reference.knob_notes, "in_order": component.knob_notes["in_order"]})
        # same knobs and promises as the component it replaces: only the loader differs, and a mutant (the suite's
        # own class) renders no standalone script where dynbsz's loader does
        assert component.repro_setup is None and reference.repro_setup is not None
        assert replace(component, make_loader=reference.make_loader, repro_setup=reference.repro_setup) == reference


# ---- a user's own loader, as MODULE:FACTORY returning a Target -----------------------------------

USER_LOADERS = '''
from properties.loader_targets import dynbsz_loader
from properties.targets import LoaderComponent, Target


class NoCheckpoint:
    def __init__(self, sc):
        self.sc = sc

    def set_epoch(self, epoch):
        pass

    def __iter__(self):
        return iter(())


def good():
    return Target(name="x", components=(LoaderComponent(name="loader:main", make_loader=dynbsz_loader),))


def lacking():
    return Target(name="x", components=(LoaderComponent(name="loader:main", make_loader=NoCheckpoint),))


def broken():
    def make(sc):
        raise RuntimeError("no dataset here")
    return Target(name="x", components=(LoaderComponent(name="loader:main", make_loader=make),))
'''


@pytest.fixture
def user_loaders(tmp_path, monkeypatch):
    (tmp_path / "userloaders.py").write_text(USER_LOADERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "userloaders"


def test_a_user_loader_target_runs_the_loader_properties(user_loaders):
    target = resolve(f"{user_loaders}:good")
    assert target.name == f"{user_loaders}:good" and target.kinds() == ("loader",)
    example = scenario_json(LoaderScenario(num_samples=12, num_workers=2, prefetch_factor=2, checkpoints=(0, 3)))
    assert replay_example(target, suite.get("loader_resume"), "loader:main", example).status == "pass"


@pytest.mark.parametrize("factory, says", [
    ("lacking", "the loader of loader:main (NoCheckpoint) lacks state_dict(), load_state_dict(), close()"),
    ("broken", "loader:main's make_loader raised RuntimeError: no dataset here"),
])
def test_a_user_loader_missing_methods_or_raising_gets_one_line(user_loaders, factory, says):
    with pytest.raises(TargetError) as e:
        resolve(f"{user_loaders}:{factory}")
    assert says in str(e.value) and "\n" not in str(e.value)


FLAKY_LOADER = '''
import itertools

from properties.loader_props import default_ids_of
from properties.loader_targets import dynbsz_loader
from properties.errors import PropertyViolation
from properties.targets import LoaderComponent, Target

CALLS = itertools.count()


def ids_of(step):
    # Fails on the first step ever seen, then never again: a timing-dependent failure in miniature.
    if next(CALLS) == 0:
        raise PropertyViolation("exactly-once: pretend a sample arrived twice")
    return default_ids_of(step)


def target():
    return Target(name="x", components=(LoaderComponent(name="loader:main", make_loader=dynbsz_loader,
                                                        ids_of=ids_of, in_order=(True,), max_workers=0),))
'''


def test_a_flaky_failure_is_reported_with_its_seed_and_kept_out_of_the_corpus(capsys, tmp_path, monkeypatch):
    (tmp_path / "flakyloader.py").write_text(FLAKY_LOADER)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, doc = run_cli(capsys, "check", "--target", "flakyloader:target", "--json", "--property", "exactly_once",
                        "--max-examples", "2", "--database", "none", "--corpus", str(tmp_path / "corpus"))
    (row,) = doc["results"]
    assert code == 1 and row["status"] == "fail" and row["flaky"] and row["message"].startswith("flaky:")
    assert row["file"] is None and row["replay"].startswith("python -m properties check --target flakyloader:target")
    assert not (tmp_path / "corpus").exists()  # a flaky example would make the regression corpus flaky


# ---- order='balanced' and reorder_buffer hold every property ------------------------------------

BALANCED = LoaderScenario(num_samples=18, data_seed=5, shuffle_seed=5, num_workers=2, prefetch_factor=2,
                          persistent_workers=True, order="balanced", lookahead=3, budget=512, buffer_size=2,
                          checkpoints=(0, 2, 5), restore_at_epoch_end=True, slow_s=0.02)


@pytest.mark.parametrize("knobs", [
    {},                                                    # balanced, exact cost estimates
    {"cost_estimates": "fitted", "fetch_batch_size": 2},   # balanced, a fitted cost model
    {"order": "sampler", "reorder_buffer": 2},             # the sampler's order behind a reorder buffer
    {"reorder_buffer": 1, "micro_batches_per_step": 2},    # both
], ids=["balanced", "balanced-fitted", "reorder", "balanced-reorder"])
def test_balanced_order_and_reorder_buffer_hold_every_loader_property(knobs):
    sc = replace(BALANCED, **knobs)
    for name in ("loader_resume", "exactly_once", "epoch_reshuffle", "reorder_exact", "balanced_order"):
        if name == "reorder_exact" and not sc.reorder_buffer or name == "balanced_order" and sc.order != "balanced":
            continue
        result = replay_example(DYNBSZ, suite.get(name), "loader:main", scenario_json(sc))
        assert result.status == "pass", f"{name}: {result.message}"
    ranks = replace(sc, dp_size=2, checkpoints=(1,), max_steps=7)
    for name in ("dp_shards", "dp_step_counts"):
        result = replay_example(DYNBSZ, suite.get(name), "loader:main", scenario_json(ranks))
        assert result.status == "pass", f"{name}: {result.message}"


def test_balanced_epochs_reach_persistent_spawned_workers():
    # The balanced order is computed in the main process and shipped as keys: spawned workers (which
    # import everything afresh) deliver the same epochs as forked ones, persistent or not.
    sc = replace(BALANCED, num_samples=12, checkpoints=(), restore_at_epoch_end=False, start_method="spawn")
    result = replay_example(DYNBSZ, suite.get("epoch_reshuffle"), "loader:main", scenario_json(sc))
    assert result.status == "pass", result.message


def test_a_knob_the_loader_lacks_is_a_skip_naming_it():
    for knobs, says in [({"order": "balanced"}, "order='balanced' is not supported by loader:main"),
                        ({"reorder_buffer": 2}, "reorder_buffer=2 is not supported by loader:main"),
                        ({"max_steps": 4}, "max_steps=4 is not supported by loader:main")]:
        sc = LoaderScenario(num_samples=12, num_workers=1, prefetch_factor=1, checkpoints=(1,), **knobs)
        result = replay_example(TORCHDATA, suite.get("exactly_once"), "loader:main", scenario_json(sc))
        assert result.status == "skip" and says in result.message, result.message
