"""Targets and the registry: built-in targets, MODULE:FACTORY in each of its forms, bad targets
with one-line messages, and the plug-in point for other component kinds (loaders)."""

from __future__ import annotations

import re
import textwrap

import pytest
from hypothesis import given, settings

from dynbsz.gates import GATE_NAMES
from properties import packer_suite, suite
from properties.runner import RunSettings, plan, run_target
from properties.scenarios import decode_packer_example, encode_packer_example
from properties.targets import KINDS, Component, Target, TargetError, names, resolve

QUICK = RunSettings(profile="dev", seed=0, max_examples=8, database=None)

USER_MODULE = '''
from dynbsz import FixedGate, GreedyPacker, PackerConfig
from dynbsz.gates import covers_budget
from properties.targets import Component, Target


class MyFixed:
    """A user's re-implementation of VeOmni's fixed gate, with the built-in spec kind."""

    def __init__(self, n=3):
        self.n = n

    def ready(self, view):
        return view.num_samples >= self.n and covers_budget(view)

    def spec(self):
        return {"kind": "fixed", "buffer_size": self.n, "policy": "fixed"}


class Custom(MyFixed):
    def spec(self):
        return {"kind": "custom", "n": self.n}


class Lossy(GreedyPacker):
    """Loses every sample of exactly 3 tokens and says it kept it."""

    def put(self, sample_id, tokens, physical_tokens=None, source=None, payload=None):
        if tokens == 3:
            return True
        return super().put(sample_id, tokens, physical_tokens, source, payload)


class ClaimsFixed(MyFixed):
    def spec(self):
        return {"kind": "fixed"}


def claims_fixed():
    return ClaimsFixed()


class NoSpec:
    def ready(self, view):
        return True


class NoState:
    def __init__(self, config, gate):
        pass

    def put(self, *a, **k):
        return True

    def ready(self):
        return False

    def cut(self):
        raise RuntimeError

    def drain(self):
        return []

    def __len__(self):
        return 0


def my_gate():
    return MyFixed(3)


def custom_gate():
    return Custom(2)


def plain_packer():
    return GreedyPacker


def direct_packer(config, gate):
    return GreedyPacker(config, gate)


def fixed_only_packer():
    def make(config, gate):
        return GreedyPacker(config, gate)
    make.gates = ("fixed",)
    return make


def bad_option_packer():
    def make(config, gate):
        return GreedyPacker(config, gate)
    make.overlong = ("truncate",)
    return make


def lossy_packer():
    return Lossy


def raises():
    raise RuntimeError("no GPU here")


def nospec():
    return NoSpec()


def nostate():
    return NoState


def instance():
    return GreedyPacker(PackerConfig(budget=8))


def wrong_signature():
    return lambda config: GreedyPacker(config)


def number():
    return 42


def loader_only():
    return Target(name="ignored", components=(Component(name="loader", kind="loader"),))


NOT_CALLABLE = 3
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "userpk.py").write_text(textwrap.dedent(USER_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "userpk"


# ---- built-in targets --------------------------------------------------------------------------

def test_dynbsz_has_the_packer_every_builtin_gate_and_the_loader_in_both_runtimes():
    target = resolve("dynbsz")
    assert target.unavailable is None
    assert {c.name for c in target.components} == ({"packer"} | {f"gate:{g}" for g in GATE_NAMES}
                                                   | {"loader:main", "loader:worker"})
    # every packer/loader property runs on dynbsz somewhere (stream properties are for streaming loaders)
    assert all(component is not None for p, component in plan(target) if "stream" not in p.kinds)


def test_veomni_is_a_packer_and_loader_target_or_says_why_not():
    target = resolve("veomni")
    if target.unavailable:
        assert "veomni" in target.unavailable.lower()
        assert all(r.status == "skip" and r.message == target.unavailable for r in run_target(target, QUICK))
    else:
        assert [c.name for c in target.components] == ["packer", "loader:main", "loader:worker", "loader:multisource"]


def test_every_mutant_is_addressable_as_a_target():
    mutant_names = [n for n in names() if n.startswith("mutant:")]
    assert len(mutant_names) >= 12
    for name in mutant_names:
        target = resolve(name)
        assert target.name == name and target.components and target.description


def test_registry_properties_are_well_formed():
    props = suite.properties()
    assert len({p.name for p in props}) == len(props)
    for p in props:
        assert p.kinds and set(p.kinds) <= set(KINDS) and p.doc
    with pytest.raises(KeyError, match="allowed values"):
        suite.get("no-such-property")


@settings(max_examples=25, deadline=None, database=None)
@given(packer_suite.examples(resolve("dynbsz").component("packer"), restores=True))
def test_examples_survive_their_json_form(example):
    import json

    encoded = encode_packer_example(example)
    assert decode_packer_example(json.loads(json.dumps(encoded))) == example


# ---- MODULE:FACTORY ----------------------------------------------------------------------------

def test_user_gate_with_a_builtin_kind_gets_the_documented_rule_and_passes(user_module):
    target = resolve(f"{user_module}:my_gate")
    assert [c.name for c in target.components] == ["gate:fixed"]
    results = {r.property: r for r in run_target(target, QUICK)}
    assert results["gate_rule"].status == "pass" and results["gate_rule"].examples == 8
    assert results["minimum_gate"].status == "pass"
    assert results["conservation"].status == "skip"  # a packer property; this target has only a gate


def test_user_gate_with_its_own_kind_skips_the_rule_and_says_why(user_module):
    results = {r.property: r for r in run_target(resolve(f"{user_module}:custom_gate"), QUICK)}
    assert results["gate_rule"].status == "skip" and "documented" in results["gate_rule"].message
    assert results["resume"].status == "pass"


def test_user_packer_factory_passes_and_a_lossy_one_fails(user_module):
    good = run_target(resolve(f"{user_module}:plain_packer"), QUICK)
    assert {r.status for r in good} <= {"pass", "skip"} and any(r.status == "pass" for r in good)
    bad = {r.property: r for r in run_target(resolve(f"{user_module}:lossy_packer"), RunSettings(
        profile="dev", seed=0, max_examples=40, database=None), only=["conservation"])}
    assert bad["conservation"].status == "fail"
    assert "never emitted" in bad["conservation"].message
    assert any(row[1] == 3 for row in bad["conservation"].minimal_example["stream"])


def test_a_packer_factory_named_directly_is_the_packer_target(user_module):
    target = resolve(f"{user_module}:direct_packer")
    assert [c.kind for c in target.components] == ["packer"]
    results = {r.property: r for r in run_target(target, QUICK, only=["conservation"])}
    assert results["conservation"].status == "pass"


def test_the_table_folds_properties_of_other_kinds_into_one_line(user_module):
    from properties.report import check_text

    target = resolve(f"{user_module}:direct_packer")
    results = run_target(target, QUICK, only=["conservation", "loader_resume", "stream_resume"])
    text = check_text(target.name, results, profile="ci", seed=0)
    assert re.search(r"^conservation\s+packer\s+pass", text, re.M)
    assert not re.search(r"^loader_resume\s", text, re.M)
    assert "(2 properties for other kinds of components not shown: loader_resume, stream_resume; --json" in text


def test_packer_factory_options_narrow_the_draw(user_module):
    results = {r.property: r for r in run_target(resolve(f"{user_module}:fixed_only_packer"), QUICK,
                                                 only=["gate_state"])}
    assert results["gate_state"].status == "skip" and "stateful" in results["gate_state"].message


def test_a_target_object_with_a_loader_component_plugs_in_and_packer_properties_skip(user_module):
    target = resolve(f"{user_module}:loader_only")
    assert target.name == f"{user_module}:loader_only" and target.kinds() == ("loader",)
    results = run_target(target, QUICK)
    assert results and all(r.status == "skip" and "loader" in r.message for r in results)


@pytest.mark.parametrize("factory, missing", [
    ("raises", "RuntimeError: no GPU here"),
    ("nospec", "spec()"),
    ("claims_fixed", "claims kind 'fixed' but lacks a field (KeyError: 'buffer_size')"),
    ("nostate", "state_dict(), load_state_dict()"),
    ("instance", "packer instance"),
    ("wrong_signature", "(config, gate)"),
    ("number", "returned int"),
    ("NOT_CALLABLE", "not callable"),
    ("no_such_factory", "has no attribute 'no_such_factory'"),
    ("bad_option_packer", "overlong=('truncate',) is not supported; allowed values: emit_alone, drop"),
])
def test_bad_user_targets_get_one_line_naming_what_is_missing(user_module, factory, missing):
    with pytest.raises(TargetError) as e:
        resolve(f"{user_module}:{factory}")
    message = str(e.value)
    assert missing in message and "\n" not in message and f"{user_module}:{factory}" in message


@pytest.mark.parametrize("name, says", [
    ("nope", "unknown target 'nope'; allowed values: dynbsz, torchdata, hf-iterable, litdata"),
    ("mutant:nope", "unknown mutant 'nope'; allowed values: gate-as-capacity"),
    ("no_such_module_xyz:f", "cannot import module 'no_such_module_xyz'"),
    (":f", "is not of the form MODULE:ATTR"),
])
def test_bad_target_names(name, says):
    with pytest.raises(TargetError, match=re.escape(says)):
        resolve(name)


def test_component_kinds_are_checked():
    with pytest.raises(TargetError, match="allowed values: packer, gate, loader"):
        Component(name="x", kind="dataset")
    assert Target(name="t").kinds() == ()
