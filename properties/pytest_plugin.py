"""pytest plugin (entry point ``pytest11``): the suite's Hypothesis profiles, and the property
suite as tests of any project's own packer or gate.

Profiles: installed with the package, this plugin is active in any project's test run. Pass
``--hypothesis-profile=ci|dev|fuzz`` or set ``DYNBSZ_PROFILE``; the default is ``ci``.

Running the suite against your own target, from your own test run (two lines in any test module)::

    # tests/test_dynbsz_suite.py
    from properties.pytest_plugin import test_dynbsz_properties  # noqa: F401  (one test per property x component)

    pytest --dynbsz-target mypkg.packing:make_packer          # or DYNBSZ_TARGET=mypkg.packing:make_packer

or pin the target in the module, so a plain ``pytest`` runs it::

    import pytest
    pytestmark = pytest.mark.dynbsz_target("mypkg.packing:make_packer")

``MODULE:FACTORY`` is described in ``properties.targets.user`` (a gate, a packer factory, or a
Target); built-in names (``dynbsz``, ``veomni``, ``mutant:NAME``) work too. Each property that
applies becomes one test, ``test_dynbsz_properties[<target>-<property>-<component>]``; the ones
that do not apply are reported as skipped with the reason. Every file of the regression corpus
(``--dynbsz-corpus``, default ``<rootdir>/tests/regressions``) for the same property and component
runs first, as an explicit example. A failure is saved as a regression file, into the corpus only
when ``--dynbsz-corpus`` names one (otherwise into ``$XDG_CACHE_HOME/dynbsz-harness/failures``,
so a test run leaves the checkout alone), and its message ends with the one command that replays it. ``--dynbsz-seed`` (default 0) seeds the search; the example
database is Hypothesis's usual ``<rootdir>/.hypothesis/examples``. A target that cannot be
resolved stops the run with a one-line usage error.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from . import profiles

# At import, before Hypothesis's own plugin reads --hypothesis-profile.
profiles.register()

MARKER = "dynbsz_target"
ENV_TARGET = "DYNBSZ_TARGET"


def pytest_addoption(parser) -> None:
    group = parser.getgroup("dynbsz", "dynbsz property suite (properties.pytest_plugin)")
    group.addoption("--dynbsz-target", action="append", default=[], metavar="NAME",
                    help="run test_dynbsz_properties against this target: dynbsz, veomni, mutant:NAME or "
                         f"MODULE:FACTORY (repeatable; default: ${ENV_TARGET})")
    group.addoption("--dynbsz-corpus", default=None, metavar="DIR",
                    help="regression corpus: replayed first, and failures are saved here (default: replay "
                         "<rootdir>/tests/regressions, save to $XDG_CACHE_HOME/dynbsz-harness/failures)")
    group.addoption("--dynbsz-seed", type=int, default=0, metavar="N", help="Hypothesis seed of the suite (default 0)")


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(*names): run test_dynbsz_properties in this module against these targets")
    if not config.getoption("hypothesis_profile", default=None):
        profiles.load()
    # Targets named on the command line or in the environment are checked before collection, so a
    # typo stops the run with one line instead of an error in every module that imports the suite.
    for name in _global_targets(config):
        _resolve(name, pytest.UsageError, "--dynbsz-target")


@dataclass(frozen=True)
class SuiteCase:
    """One property on one component of one target: what a ``dynbsz_case`` parameter holds."""

    target: str
    property: str
    component: str          # "-" when the property applies to no component of the target
    corpus: str             # replayed first
    seed: int
    database: str
    save_to: str = ""       # where a failure is saved ("": the scratch directory, corpus.failures_dir())

    @property
    def id(self) -> str:
        return f"{self.target}-{self.property}-{self.component}"

    def run(self) -> None:
        from . import corpus, suite
        from .runner import RunSettings, run_property, skip_reason, skipped
        from .targets import resolve

        target = resolve(self.target)
        prop = suite.get(self.property)
        component = target.component(self.component)
        reason = skip_reason(target, prop, component)
        if reason:
            pytest.skip(skipped(target, prop, component, reason).message)
        rs = RunSettings(profile=None, seed=self.seed, database=self.database,
                         explicit=tuple(corpus_examples(self.corpus, self.property, self.component)))
        result = run_property(target, prop, component, rs)
        if result.status == "skip":
            pytest.skip(result.message)
        if result.status == "fail":
            lines = [f"{self.property} [{self.component}] fails on {self.target}: {result.message}"]
            if result.saveable:
                where = self.save_to or corpus.failures_dir()
                known = corpus.path_for(result, where).exists()   # the same failure, saved by an earlier run
                path = corpus.save(result, where)
                lines.append(f"{'already in the corpus' if known else 'saved'}: {path}")
                lines.append(f"replay: {corpus.replay_command(path)}")
            else:
                lines.append(f"replay: python -m properties check --target {self.target} --property {self.property} "
                             f"--seed {self.seed}")
            pytest.fail("\n".join(lines), pytrace=False)


def corpus_examples(directory: str, prop: str, component: str) -> list[dict]:
    from . import corpus

    out = []
    for path in corpus.files(directory):
        try:
            entry = corpus.load(path)
        except corpus.CorpusError as e:
            warnings.warn(f"dynbsz corpus: skipping {e}", stacklevel=2)
            continue
        if entry["property"] == prop and entry["component"] == component:
            out.append(entry["example"])
    return out


def _global_targets(config) -> list[str]:
    chosen = config.getoption("dynbsz_target", default=None) or []
    if chosen:
        return list(chosen)
    return [t for t in os.environ.get(ENV_TARGET, "").split(",") if t]


def _targets(metafunc) -> list[str]:
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is not None and marker.args:
        return list(marker.args)
    return _global_targets(metafunc.config)


def _resolve(name: str, error: type[Exception], where: str):
    from .targets import TargetError, resolve

    try:
        return resolve(name)
    except TargetError as e:
        raise error(f"{where}: {e}") from None


def pytest_generate_tests(metafunc) -> None:
    if "dynbsz_case" not in metafunc.fixturenames:
        return
    from .runner import plan

    config = metafunc.config
    root = Path(str(config.rootpath))
    named = config.getoption("dynbsz_corpus")
    corpus_dir = named or str(root / "tests" / "regressions")
    base = SuiteCase("", "", "", corpus_dir, config.getoption("dynbsz_seed"), str(root / ".hypothesis" / "examples"),
                     save_to=named or "")
    cases = []
    for name in _targets(metafunc):
        # A bad marker target fails this module's collection with the one-line message (no traceback).
        target = _resolve(name, pytest.Collector.CollectError, f"pytest.mark.{MARKER}")
        cases += [replace(base, target=name, property=p.name, component=c.name if c else "-") for p, c in plan(target)]
    if not cases:
        metafunc.parametrize("dynbsz_case", [pytest.param(None, marks=pytest.mark.skip(
            reason=f"no target: pass --dynbsz-target MODULE:FACTORY, set {ENV_TARGET}, or mark the module "
                   f"with pytest.mark.{MARKER}(...)"))], ids=["no-target"])
        return
    metafunc.parametrize("dynbsz_case", cases, ids=[c.id for c in cases])


def test_dynbsz_properties(dynbsz_case) -> None:
    """One property of the suite on one component of the target (import this into a test module)."""
    dynbsz_case.run()
