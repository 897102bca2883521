"""Every failure replayable from a seed: the same seed draws the same examples, whatever ran before.

Two inputs besides the seed used to reach Hypothesis's generator (``properties.runner.hermetic_search``):

* the literal constants of the local modules in ``sys.modules``, which Hypothesis (6.131 on) draws
  now and then: a search drew other examples after the process had imported other modules
  (``minimum_gate[gate:context_aware]`` reached the gate in 44 of 60 examples alone, 29 of 60 once in
  a full suite run, with the same seed);
* the example database: the pareto front of ``target()`` scores a passing run left there was replayed
  first by the next run, and keeping that front drew from the search's random, so a run with a
  database drew other examples than one without (``runner._FailuresOnly``; the fuzz profile, whose
  target phase climbs from that front, keeps it).

These tests import a module full of constants in the strategies' ranges between two runs of the same
search, with another search between them, and run a search with no database, an empty one and the
one a run left, and compare the examples themselves.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import replace

import pytest

from properties import runner, suite
from properties.runner import RunSettings
from properties.targets import resolve

providers = pytest.importorskip("hypothesis.internal.conjecture.providers")

SETTINGS = RunSettings(seed=0, max_examples=60, database=None, step_timeout_s=None)
#: A constant Hypothesis would pick up (it skips integers in (-100, 100), which it favours anyway).
MARKER = 104_729
PROBE = "seed_probe_constants"


def _search(prop_name: str, component_name: str, rs: RunSettings = SETTINGS) -> tuple[list[dict], dict]:
    """The examples a search ran, encoded, in order, and its coverage."""
    target = resolve("dynbsz")
    prop, component = suite.get(prop_name), target.component(component_name)
    seen: list[dict] = []

    def check(comp, ex):
        seen.append(prop.encode(ex))
        prop.check(comp, ex)

    result = runner.run_property(target, replace(prop, check=check), component, rs)
    assert result.status == "pass", result
    return seen, result.coverage


@pytest.fixture
def hypothesis_constants(monkeypatch):
    """Hypothesis's process-wide pool of local constants, as it is now, put back afterwards (the
    module imported here must not change the examples of the tests that run after this one)."""
    for name in ("_get_local_constants", "_local_constants", "_sys_modules_len", "_seen_modules",
                 "CONSTANTS_CACHE"):
        if not hasattr(providers, name):
            pytest.skip(f"this Hypothesis has no providers.{name}: no pool of local constants to perturb")
    monkeypatch.setattr(providers, "_local_constants", providers._local_constants)
    monkeypatch.setattr(providers, "_sys_modules_len", providers._sys_modules_len)
    monkeypatch.setattr(providers, "_seen_modules", set(providers._seen_modules))
    yield
    sys.modules.pop(PROBE, None)
    providers.CONSTANTS_CACHE.cache.clear()


def _import_module_of_constants(tmp_path, monkeypatch) -> None:
    """A local module (not site-packages, not a test file) whose literals fall in the ranges the
    packer and gate strategies draw from (budgets, lengths and limits up to a few hundred)."""
    (tmp_path / f"{PROBE}.py").write_text(
        f"MARKER = {MARKER}\nINTS = [{', '.join(str(n) for n in range(100, 700))}]\n"
        f"FLOATS = [{', '.join(f'{n / 7:.3f}' for n in range(1, 200))}]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(PROBE, None)
    importlib.import_module(PROBE)   # the fixture hypothesis_constants takes it out again


def test_the_same_seed_draws_the_same_examples_after_other_modules_and_searches(tmp_path, monkeypatch,
                                                                                 hypothesis_constants):
    first, first_coverage = _search("minimum_gate", "gate:context_aware")
    assert len(first) == 60 and first_coverage["of"] == 60

    _import_module_of_constants(tmp_path, monkeypatch)
    # The premise: outside a search, Hypothesis now holds the module's constants and would draw them.
    assert MARKER in providers._get_local_constants().integers
    _search("budget", "packer")   # another search between the two

    second, second_coverage = _search("minimum_gate", "gate:context_aware")
    assert second_coverage == first_coverage
    assert second == first
    # ... and the pool is Hypothesis's own again once the searches are over.
    assert MARKER in providers._get_local_constants().integers


def test_the_same_seed_draws_the_same_examples_with_or_without_an_example_database(tmp_path):
    # packer: the suite's target() calls (micro-batches, peak buffer) give Hypothesis a pareto front to keep
    alone, alone_coverage = _search("progress", "packer")
    db = str(tmp_path / "db")
    for run in ("an empty database", "the database the last run left"):
        examples, coverage = _search("progress", "packer", replace(SETTINGS, database=db))
        assert coverage == alone_coverage, run
        assert examples == alone, run


def test_only_the_fuzz_profile_s_target_phase_keeps_the_pareto_front_in_the_database(tmp_path):
    db = str(tmp_path / "db")
    assert isinstance(runner._settings(replace(SETTINGS, database=db)).database, runner._FailuresOnly)
    assert isinstance(runner._settings(replace(SETTINGS, database=db, profile="dev")).database, runner._FailuresOnly)
    fuzz = runner._settings(replace(SETTINGS, database=db, profile="fuzz")).database
    assert fuzz is not None and not isinstance(fuzz, runner._FailuresOnly)
    assert runner._settings(SETTINGS).database is None


def test_the_database_keeps_failures_and_drops_the_pareto_front():
    from hypothesis.database import InMemoryExampleDatabase

    inner = InMemoryExampleDatabase()
    db = runner._FailuresOnly(inner)
    db.save(b"k", b"failure")
    db.save(b"k.secondary", b"larger failure")
    db.save(b"k.pareto", b"best score")
    assert set(db.fetch(b"k")) == {b"failure"} and set(db.fetch(b"k.secondary")) == {b"larger failure"}
    assert list(db.fetch(b"k.pareto")) == [] and list(inner.fetch(b"k.pareto")) == []
    db.move(b"k", b"k.secondary", b"failure")   # Hypothesis downgrading a failure that shrank further
    assert set(inner.fetch(b"k.secondary")) == {b"failure", b"larger failure"} and list(inner.fetch(b"k")) == []
    db.delete(b"k.secondary", b"failure")
    assert set(inner.fetch(b"k.secondary")) == {b"larger failure"}


def test_the_patches_hold_only_inside_a_search_and_nest():
    from hypothesis.internal.conjecture import engine

    original, front = providers._get_local_constants, engine.ParetoFront
    with runner.hermetic_search():
        patched = providers._get_local_constants
        assert patched is not original and len(patched()) == 0
        assert engine.ParetoFront is not front and issubclass(engine.ParetoFront, front)
        with runner.hermetic_search():
            assert providers._get_local_constants is patched
        assert providers._get_local_constants is patched
    assert providers._get_local_constants is original and engine.ParetoFront is front
    with pytest.raises(RuntimeError), runner.hermetic_search():
        raise RuntimeError("a search that raises")
    assert providers._get_local_constants is original and engine.ParetoFront is front
