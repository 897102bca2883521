"""Run one property against one component with Hypothesis, and say what happened.

The search is an ordinary ``@given`` test built on the fly: a counter records how
many examples really ran, the failing example is kept (Hypothesis calls the test
with the minimal one last), and the ``@reproduce_failure`` blob is read from the
exception's notes. Nothing is printed to stdout: targets that print (VeOmni does)
are redirected to stderr so ``--json`` stays parseable.

A seed reproduces a search for the same code and Hypothesis version, whatever ran before in
the process and (ci and dev profiles) whatever passing runs left in the example database
(``hermetic_search``, ``_FailuresOnly``); only a failure saved there is replayed first, by design.
The saved regression file is the exact reproduction across code changes.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import warnings
from dataclasses import dataclass
from random import Random
from typing import Any, Iterable, Iterator

import hypothesis
from hypothesis import HealthCheck, Phase, Verbosity, example, given, seed, settings
from hypothesis.database import ExampleDatabase
from hypothesis.errors import HypothesisException

from dynbsz.errors import DroppedSampleWarning
from dynbsz.loader_config import LoaderWarning

from . import coverage, profiles, suite
from .errors import PropertyViolation, Unsupported
from .registry import Property
from .targets.base import Component, Target
from .watchdog import DEFAULT_STEP_TIMEOUT_S, LoaderHang, StopSearch, check_timeout, step_timeout

#: Hypothesis's own default location; .gitignore keeps it out of the repository and CI may cache it.
DEFAULT_DATABASE = ".hypothesis/examples"
STATUSES = ("pass", "fail", "skip")


@dataclass(frozen=True)
class RunSettings:
    """How hard to search. ``profile=None`` uses whatever Hypothesis profile is loaded (under pytest)."""

    profile: str | None = "ci"
    seed: int = 0
    max_examples: int | None = None
    database: str | None = DEFAULT_DATABASE
    shrink: bool = True
    explicit: tuple[dict, ...] = ()   # encoded examples to run first (the regression corpus)
    #: the wall-time bound on one iter() or next() of a loader (properties.watchdog; None: steps bound only)
    step_timeout_s: float | None = DEFAULT_STEP_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.profile is not None and self.profile not in profiles.PROFILES:
            raise ValueError(f"profile={self.profile!r} is not a profile; allowed values: {', '.join(profiles.PROFILES)}")
        if self.max_examples is not None and self.max_examples < 1:
            raise ValueError(f"max_examples must be >= 1, got {self.max_examples}")
        check_timeout(self.step_timeout_s)


@dataclass(frozen=True)
class Result:
    target: str
    property: str
    component: str
    status: str                      # pass | fail | skip
    examples: int = 0                # examples the check really ran (shrinking included)
    message: str = ""                # the violation, or why the property was skipped
    minimal_example: dict | None = None
    seed: int | None = None
    blob: str | None = None          # Hypothesis's @reproduce_failure blob, when there is one
    replay: str | None = None        # the one command that reproduces a failure (set once it is saved)
    file: str | None = None
    flaky: bool = False              # failed, then passed on the same example (timing): not replayable
    coverage: dict | None = None     # properties.coverage.Tally.to_json: what the examples reached
    verdict: str | None = None       # a failure's class (properties.verdicts): bug, contract gap, ...
    trainers: tuple[str, ...] = ()   # the trainer models it reproduces under (properties.trainers)

    @property
    def saveable(self) -> bool:
        """A failure whose example replays: it may go to the regression corpus. A flaky one would
        make the corpus flaky (a loader out of order fails by timing); its seed replays the search."""
        return self.status == "fail" and self.minimal_example is not None and not self.flaky

    def to_json(self) -> dict:
        return {"property": self.property, "component": self.component, "status": self.status,
                "examples": self.examples, "replay": self.replay, "minimal_example": self.minimal_example,
                "message": self.message, "seed": self.seed, "blob": self.blob, "file": self.file, "flaky": self.flaky,
                "coverage": self.coverage, "class": self.verdict, "trainers": list(self.trainers)}


#: Libraries whose per-call log lines (torchdata's in_order=False caveat on every state_dict(),
#: VeOmni's line per dropped sample) would bury a report; raised to ERROR while a check runs.
NOISY_LOGGERS = ("torchdata", "veomni")


@contextlib.contextmanager
def quiet_target():
    """Targets may print, log or warn (about drops, in_order=False, worker counts); none of it may
    reach our stdout or become an error. Property outcomes carry what matters."""
    loggers = [logging.getLogger(name) for name in NOISY_LOGGERS]
    levels = [log.level for log in loggers]
    for log in loggers:
        log.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
            warnings.simplefilter("ignore", DroppedSampleWarning)
            warnings.simplefilter("ignore", LoaderWarning)
            warnings.filterwarnings("ignore", message=".*(worker processes in total|set_vital|pin_memory).*")
            yield
    finally:
        for log, level in zip(loggers, levels):
            log.setLevel(level)


class _FailuresOnly(ExampleDatabase):
    """The example database as a search sees it: failures pass (Hypothesis's primary key, the minimal
    failing examples, replayed first in the next run; its secondary key, their larger predecessors),
    the pareto front does not. Hypothesis keeps the examples that score best on the suite's
    ``target()`` observations under ``<key>.pareto`` and replays up to a tenth of ``max_examples`` of
    them, drawn with the search's own random, before generating: a run that passed changed the examples
    of the next run of the same seed (``check --json`` on dynbsz's packer and gates, seed 0:
    ``progress[gate:context_aware]`` reached 38 of 60 with no database, 37 with an empty one, 27 in the
    next run on the same database). A search with the target phase keeps it (``_search_database``)."""

    def __init__(self, db: ExampleDatabase) -> None:
        super().__init__()
        self._wrapped = db

    def __repr__(self) -> str:
        return f"_FailuresOnly({self._wrapped!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _FailuresOnly) and self._wrapped == other._wrapped

    @staticmethod
    def _kept(key: bytes) -> bool:
        return not key.endswith(b".pareto")

    def fetch(self, key: bytes) -> Iterable[bytes]:
        if self._kept(key):
            yield from self._wrapped.fetch(key)

    def save(self, key: bytes, value: bytes) -> None:
        if self._kept(key):
            self._wrapped.save(key, value)

    def delete(self, key: bytes, value: bytes) -> None:
        if self._kept(key):
            self._wrapped.delete(key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        if self._kept(src) and self._kept(dest):
            self._wrapped.move(src, dest, value)
        elif self._kept(dest):
            self._wrapped.save(dest, value)
        elif self._kept(src):
            self._wrapped.delete(src, value)

    def _start_listening(self) -> None:   # nothing in a search listens; a listener would see no change
        pass

    def _stop_listening(self) -> None:
        pass


def _search_database(spec: str | None, phases: Iterable[Phase]) -> ExampleDatabase | None:
    """``spec``'s database (``profiles.example_database``), without its pareto front (``_FailuresOnly``)
    unless the search has the target phase (the fuzz profile): there the front carried from round to
    round and run to run is what the phase climbs from, and a campaign's failures replay from the saved
    file, not from a seed."""
    db = profiles.example_database(spec)
    return db if db is None or Phase.target in phases else _FailuresOnly(db)


@contextlib.contextmanager
def hermetic_search() -> Iterator[None]:
    """Inside the block the examples of a search depend on its seed, the strategies and the Hypothesis
    version only, not on what ran before in the process nor on the example database's passing entries.

    Two process-wide inputs of Hypothesis's generator are fixed here (private Hypothesis hooks: where
    one is absent, an older or a reworked Hypothesis, it is left as it is):

    * **local constants.** Hypothesis (6.131 on) sometimes draws a literal it found in the source of
      the local (not site-packages, not test) modules in ``sys.modules`` at the time of the draw. Which
      modules those are depends on what the process imported before (other tests, the simulator, a
      regression file imported from a temporary directory), so the same seed gave other examples after
      other work: ``minimum_gate[gate:context_aware]``, seed 0, 60 examples, reached the gate in 44
      alone, 42 after importing the simulator and the test modules, 29 once in a full ``pytest -n
      auto``. Here that pool is empty; Hypothesis's own global constants (fixed per version) stay.
    * **the pareto front's random.** With an example database Hypothesis keeps a pareto front of the
      ``target()`` scores, and evicting from it drew from the search's random: the same seed gave
      other examples with a database than without (besides replaying the front, which
      ``_FailuresOnly`` stops). Here the front draws from a random of its own.
    """
    patches = []
    try:
        from hypothesis.internal.conjecture import engine, providers

        empty = providers.Constants()
        patches.append((providers, "_get_local_constants", lambda: empty))
        front = engine.ParetoFront

        class _OwnRandomFront(front):   # type: ignore[misc,valid-type]
            def __init__(self, random) -> None:  # noqa: ARG002 - the search's random, left to the search
                super().__init__(Random(0))

        patches.append((engine, "ParetoFront", _OwnRandomFront))
        cache = providers.CONSTANTS_CACHE.cache   # holds the local pool it was built with: cleared in and out
    except (ImportError, AttributeError):  # pragma: no cover - another Hypothesis
        patches, cache = [], {}
    with _PATCH_LOCK:   # nested or concurrent searches: the first in patches, the last out restores
        if _PATCHED["depth"] == 0:
            _PATCHED["originals"] = [(module, name, getattr(module, name)) for module, name, _ in patches]
            for module, name, value in patches:
                setattr(module, name, value)
            cache.clear()
        _PATCHED["depth"] += 1
    try:
        yield
    finally:
        with _PATCH_LOCK:
            _PATCHED["depth"] -= 1
            if _PATCHED["depth"] == 0:
                for module, name, value in _PATCHED.pop("originals"):
                    setattr(module, name, value)
                cache.clear()


_PATCH_LOCK = threading.Lock()
_PATCHED: dict[str, Any] = {"depth": 0}


def guarded_check(prop: Property, component: Component, ex: Any) -> None:
    """Run a check; a crash of the target on a valid example is a violation, not a harness error."""
    try:
        prop.check(component, ex)
    except (PropertyViolation, HypothesisException, Unsupported):
        raise
    except Exception as e:  # noqa: BLE001
        text = " ".join(str(e).split())
        raise PropertyViolation(f"{prop.name}: the target raised {type(e).__name__}: {text}") from e


def _settings(rs: RunSettings, prop: Property | None = None) -> settings:
    profiles.register()
    base = settings.default if rs.profile is None else settings.get_profile(rs.profile)
    phases = [p for p in base.phases if rs.shrink or p is not Phase.shrink]
    if rs.explicit and Phase.explicit not in phases:
        phases.insert(0, Phase.explicit)
    # An explicit count is taken as asked; a profile's is scaled by what the property's examples cost.
    examples = rs.max_examples or (prop.examples_for(base.max_examples) if prop is not None
                                   else base.max_examples)
    return settings(base, database=_search_database(rs.database, phases),
                    max_examples=examples, deadline=None, print_blob=True,
                    report_multiple_bugs=False, verbosity=Verbosity.quiet, phases=phases,
                    suppress_health_check=list(HealthCheck))


def _blob(exc: BaseException) -> str | None:
    for note in getattr(exc, "__notes__", ()):
        start = note.find("@reproduce_failure(")
        if start >= 0:
            return note[start:note.index(")", start) + 1]
    return None


def _first_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def skip_reason(target: Target, prop: Property, component: Component | None) -> str | None:
    """Why ``prop`` does not run on ``component`` of ``target`` (None: it runs). Component None
    stands for "no component of a kind the property applies to"."""
    if target.unavailable:
        return target.unavailable
    if component is None:
        return (f"applies to {'/'.join(sorted(prop.kinds))} components; "
                f"{target.name} has {', '.join(target.kinds()) or 'no'} components")
    return prop.skip_reason(component)


def skipped(target: Target, prop: Property, component: Component | None, reason: str) -> Result:
    return Result(target=target.name, property=prop.name, component=component.name if component else "-",
                  status="skip", message=reason)


def run_property(target: Target, prop: Property, component: Component, rs: RunSettings = RunSettings()) -> Result:
    """Search for a counterexample to ``prop`` on ``component``; pass, fail (with the minimal example) or skip."""
    reason = skip_reason(target, prop, component)
    if reason:
        return skipped(target, prop, component, reason)
    if prop.machine is not None:
        return _run_machine(target, prop, component, rs)
    base = dict(target=target.name, property=prop.name, component=component.name, seed=rs.seed)
    state: dict[str, Any] = {"n": 0, "failing": None, "message": ""}
    tally = coverage.Tally()

    def property_test(ex):
        state["n"] += 1
        with coverage.recording() as labels:
            try:
                guarded_check(prop, component, ex)
            except Unsupported:
                hypothesis.reject()  # an explicit (corpus) example this component cannot run: not evidence
            except PropertyViolation as e:
                state["failing"], state["message"] = ex, str(e)
                tally.add(labels)
                if isinstance(e, LoaderHang):
                    raise StopSearch(e) from e   # not shrunk: every attempt would wait the bound out again
                raise
        tally.add(labels)

    test = given(prop.examples(component))(property_test)
    for encoded in rs.explicit:
        try:
            test = example(prop.decode(encoded))(test)
        except Exception as e:  # noqa: BLE001 - a stale corpus entry must not hide the search itself
            warnings.warn(f"{prop.name}[{component.name}]: skipping an explicit example that no longer decodes "
                          f"({type(e).__name__}: {e})", stacklevel=2)
    # seed inside settings: Hypothesis's @seed sets database=None on the settings it finds, so applied last it
    # would switch the example database off and a failure found in one run would not be replayed in the next.
    test = _settings(rs, prop)(seed(rs.seed)(test))
    # One database entry per (target, component, property): the same search replays its own failures.
    test.hypothesis.inner_test._hypothesis_internal_add_digest = (
        f"{target.name}|{component.name}|{prop.name}".encode())
    return _outcome(prop, base, state, tally, test, rs)


def _outcome(prop: Property, base: dict, state: dict, tally: coverage.Tally, test, rs: RunSettings) -> Result:
    """Run a built Hypothesis test and turn what happened into a Result (``state`` holds the
    example count, the failing example and its message, as the test function recorded them)."""
    base = {**base, "coverage": None}
    try:
        with quiet_target(), step_timeout(rs.step_timeout_s), hermetic_search():
            test()
    except StopSearch as e:
        return Result(**base, status="fail", examples=state["n"],
                      message=f"{state['message'] or e} [the example as drawn: a hang is not shrunk]",
                      minimal_example=prop.encode(state["failing"]) if state["failing"] is not None else None)
    except PropertyViolation as e:
        return Result(**base, status="fail", examples=state["n"], message=state["message"] or str(e),
                      minimal_example=prop.encode(state["failing"]) if state["failing"] is not None else None,
                      blob=_blob(e))
    except BaseException as e:  # noqa: BLE001 - Flaky, Unsatisfiable, health checks: reported, never hidden
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        flaky = "Flaky" in type(e).__name__
        what = "flaky: the check failed and then passed on the same example" if flaky else f"hypothesis: {type(e).__name__}"
        return Result(**base, status="fail", examples=state["n"], message=f"{what}: {state['message'] or _first_line(e)}",
                      minimal_example=prop.encode(state["failing"]) if state["failing"] is not None else None,
                      flaky=flaky)
    return Result(**{**base, "coverage": tally.to_json(prop.interesting)}, status="pass", examples=state["n"])


def _run_machine(target: Target, prop: Property, component: Component, rs: RunSettings) -> Result:
    """A stateful property: Hypothesis runs the component's state machine (``prop.machine``), each run
    one example. The machine records each run as a plain example (its class attribute
    ``last_program``) and reports what it reached (``coverage.reached``); a failing run's program
    is the minimal example, replayed by ``prop.check``. Corpus examples run first, outside Hypothesis."""
    from hypothesis.stateful import get_state_machine_test

    base = dict(target=target.name, property=prop.name, component=component.name, seed=rs.seed)
    for encoded in rs.explicit:
        try:
            program = prop.decode(encoded)
        except Exception as e:  # noqa: BLE001 - a stale corpus entry must not hide the search itself
            warnings.warn(f"{prop.name}[{component.name}]: skipping an explicit example that no longer decodes "
                          f"({type(e).__name__}: {e})", stacklevel=2)
            continue
        try:
            with quiet_target(), step_timeout(rs.step_timeout_s):
                guarded_check(prop, component, program)
        except Unsupported:
            continue
        except PropertyViolation as e:
            return Result(**base, status="fail", examples=1, message=str(e), minimal_example=encoded)
    machine = prop.machine(component)
    state: dict[str, Any] = {"n": 0, "failing": None, "message": ""}
    tally = coverage.Tally()
    machine.observe = lambda labels: (state.__setitem__("n", state["n"] + 1), tally.add(labels))
    machine.on_violation = lambda program, message: state.update(failing=program, message=message)
    settings_ = _settings(rs, prop)
    settings_ = settings(settings_, stateful_step_count=getattr(machine, "step_count", settings_.stateful_step_count))
    seed(rs.seed)(machine)
    test = get_state_machine_test(machine, settings=settings_)
    test.hypothesis.inner_test._hypothesis_internal_add_digest = (
        f"{target.name}|{component.name}|{prop.name}".encode())
    return _outcome(prop, base, state, tally, test, rs)


def plan(target: Target, only: Iterable[str] | None = None,
         components: Iterable[str] | None = None) -> list[tuple[Property, Component | None]]:
    """(property, component) pairs to run, in report order; component None: the property applies to
    no component of this target (a skip row says why). ``components`` keeps only those names."""
    wanted = None if only is None else set(only)
    keep = None if components is None else set(components)
    chosen = [c for c in target.components if keep is None or c.name in keep]
    pairs: list[tuple[Property, Component | None]] = []
    for prop in suite.properties():
        if wanted is not None and prop.name not in wanted:
            continue
        matching = [c for c in chosen if c.kind in prop.kinds]
        if matching:
            pairs.extend((prop, c) for c in matching)
        elif keep is None:
            pairs.append((prop, None))
    return pairs


def run_target(target: Target, rs: RunSettings = RunSettings(), only: Iterable[str] | None = None,
               components: Iterable[str] | None = None) -> list[Result]:
    out = []
    for prop, component in plan(target, only, components):
        reason = skip_reason(target, prop, component)
        out.append(skipped(target, prop, component, reason) if reason else run_property(target, prop, component, rs))
    return out


def replay_example(target: Target, prop: Property, component_name: str, encoded: dict, *,
                   step_timeout_s: float | None = DEFAULT_STEP_TIMEOUT_S) -> Result:
    """Run one saved example, exactly, outside Hypothesis (``step_timeout_s``: ``RunSettings``'s)."""
    base = dict(target=target.name, property=prop.name, component=component_name)
    component = target.component(component_name)
    if component is None and not target.unavailable:
        have = ", ".join(c.name for c in target.components)
        return Result(**base, status="skip", message=f"{target.name} has no component {component_name!r} (it has {have})")
    reason = skip_reason(target, prop, component)
    if reason:
        return Result(**base, status="skip", message=reason)
    try:
        with quiet_target(), step_timeout(check_timeout(step_timeout_s)):
            guarded_check(prop, component, prop.decode(encoded))
    except Unsupported as e:
        return Result(**base, status="skip", message=str(e))
    except PropertyViolation as e:
        return Result(**base, status="fail", examples=1, message=str(e), minimal_example=encoded)
    return Result(**base, status="pass", examples=1)


def hypothesis_version() -> str:
    return hypothesis.__version__
