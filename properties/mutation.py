"""The mutation report: every mutant against every property that applies to it.

A mutant is *killed* when some property fails on it, *survived* when every applicable
property passes (a blind spot in the suite), and *skip* when nothing applies (no
adapter for its kind yet). Shrinking is off by default: a kill needs one
counterexample, not the smallest, and shrinking costs more than the search.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable

from . import mutants as M
from .runner import Result, RunSettings, plan, run_property
from .targets import resolve

STATUSES = ("killed", "survived", "skip")


@dataclass(frozen=True)
class MutantOutcome:
    mutant: str
    kind: str
    description: str
    status: str                      # killed | survived | skip
    killed_by: tuple[str, ...]       # "property[component]", in run order (Mutant.aims_at first)
    message: str                     # the first kill's violation
    examples: int                    # examples run against this mutant, all properties
    results: tuple[Result, ...]

    def to_json(self) -> dict:
        return {"mutant": self.mutant, "component": self.kind, "status": self.status,
                "killed_by": list(self.killed_by), "message": self.message, "examples": self.examples,
                "description": " ".join((self.description or "").split())}


def run_mutant(mutant: M.Mutant, rs: RunSettings, *, first_kill: bool = True) -> MutantOutcome:
    target = resolve("mutant:" + mutant.name)
    results: list[Result] = []
    pairs = plan(target)
    if mutant.aims_at is not None:   # the property it was written to break first (Mutant.aims_at)
        pairs.sort(key=lambda pair: pair[0].name != mutant.aims_at)
    for prop, component in pairs:
        if component is None:
            continue
        result = run_property(target, prop, component, rs)
        results.append(result)
        if first_kill and result.status == "fail":
            break
    kills = [r for r in results if r.status == "fail"]
    ran = [r for r in results if r.status != "skip"]
    status = "killed" if kills else ("survived" if ran else "skip")
    message = kills[0].message if kills else (target.unavailable or "")
    return MutantOutcome(mutant.name, mutant.component, mutant.description, status,
                         tuple(f"{r.property}[{r.component}]" for r in kills), message,
                         sum(r.examples for r in results), tuple(results))


def run_mutants(rs: RunSettings, names: Iterable[str] | None = None, *, first_kill: bool = True) -> list[MutantOutcome]:
    chosen = list(M.MUTANTS) if names is None else [_get(n) for n in names]
    return [run_mutant(m, rs, first_kill=first_kill) for m in chosen]


def _get(name: str) -> M.Mutant:
    m = M.by_name(name)
    if m is None:
        raise KeyError(f"unknown mutant {name!r}; allowed values: {', '.join(x.name for x in M.MUTANTS)}")
    return m


#: The wall-time bound per loader call in a mutation run (``properties.watchdog``): a hang mutant is killed
#: once it is crossed, and the slowest step of a mutant that does not hang (worker start-up with spawn under
#: ``pytest -n auto`` on two cores, a few seconds) stays well below it.
MUTANT_STEP_TIMEOUT_S = 20.0


def default_settings(profile: str = "ci", seed: int = 0, max_examples: int | None = None,
                     step_timeout_s: float | None = MUTANT_STEP_TIMEOUT_S) -> RunSettings:
    """Hermetic by default: no example database, so a report depends only on the profile and seed."""
    return replace(RunSettings(profile=profile, seed=seed, max_examples=max_examples, step_timeout_s=step_timeout_s),
                   database=None, shrink=False)
