"""Readable tables and JSON documents for the CLI. Pure functions of the results."""

from __future__ import annotations

import json
from typing import Sequence

from dynbsz.tables import table

from .fuzz import FuzzReport
from .mutation import MutantOutcome
from .runner import Result


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Every column left-aligned, no rule under the header."""
    return table(headers, rows, align="l" * len(headers), rule=False)


def reached_text(r: Result) -> str:
    """'62% gate opened': the share of a passing run's examples that reached the property's state."""
    cov = r.coverage or {}
    if cov.get("share") is None or not cov.get("interesting"):
        return ""
    return f"{100 * cov['share']:.0f}% {cov['interesting']}"


def check_json(target: str, results: Sequence[Result], *, profile: str, seed: int, description: str = "") -> dict:
    return {"target": target, "description": description, "profile": profile, "seed": seed,
            "results": [r.to_json() for r in results]}


def check_text(target: str, results: Sequence[Result], *, profile: str, seed: int, description: str = "") -> str:
    head = f"target {target}" + (f" ({description})" if description else "") + f"; profile {profile}, seed {seed}"
    # A property with no component of its kind says nothing about this target: one line, not a row each.
    other_kind = [r for r in results if r.status == "skip" and r.component == "-"]
    rows = [(r.property, r.component, r.status, r.examples, reached_text(r), r.verdict or "-",
             ", ".join(r.trainers) or "-", r.message if r.status == "skip" else "")
            for r in results if r not in other_kind]
    out = [head, _table(("property", "component", "status", "examples", "reached", "class", "trainers", "note"), rows)]
    if other_kind:
        out.append(f"({len(other_kind)} properties for other kinds of components not shown: "
                   f"{', '.join(r.property for r in other_kind)}; --json lists them)")
    for r in results:
        if r.status == "fail":
            out.append(f"\nFAIL {r.property} [{r.component}] ({r.verdict or 'unclassified'}; trainers: "
                       f"{', '.join(r.trainers) or '-'}): {r.message}")
            if r.minimal_example is not None:
                out.append(f"  minimal example: {json.dumps(r.minimal_example, separators=(',', ':'))}")
            out.append(f"  replay: {r.replay}")
    counts = {s: sum(r.status == s for r in results) for s in ("pass", "fail", "skip")}
    classes = {c: sum(r.verdict == c for r in results) for c in ("bug", "contract gap")}
    out.append(f"\n{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")
    if counts["fail"]:
        out.append(f"failures: {classes['bug']} bugs (a real trainer sees them, or no trainer loop is involved), "
                   f"{classes['contract gap']} contract gaps (the adversarial schedule alone)")
    return "\n".join(out)


def mutants_json(outcomes: Sequence[MutantOutcome], *, profile: str, seed: int) -> dict:
    return {"profile": profile, "seed": seed, "total": len(outcomes),
            "killed": sum(o.status == "killed" for o in outcomes),
            "survived": [o.mutant for o in outcomes if o.status == "survived"],
            "mutants": [o.to_json() for o in outcomes]}


def mutants_text(outcomes: Sequence[MutantOutcome], *, profile: str, seed: int) -> str:
    rows = [(o.mutant, o.kind, o.status, ", ".join(o.killed_by) or "-", o.examples) for o in outcomes]
    killed = sum(o.status == "killed" for o in outcomes)
    out = [f"mutation report; profile {profile}, seed {seed}",
           _table(("mutant", "component", "status", "killed by", "examples"), rows),
           f"\n{killed} of {len(outcomes)} mutants killed"]
    for o in outcomes:
        if o.status == "survived":
            out.append(f"SURVIVED {o.mutant}: {' '.join(o.description.split())} (a blind spot: strengthen the suite)")
    return "\n".join(out)


def fuzz_json(report: FuzzReport) -> dict:
    return {"target": report.target, "seed": report.seed, "minutes": report.minutes, "rounds": report.rounds,
            "saved": report.saved,
            "results": [{"property": p.property, "component": p.component, "status": p.status,
                         "examples": p.examples, "rounds": p.rounds,
                         "replay": p.failure.replay if p.failure else None,
                         "minimal_example": p.failure.minimal_example if p.failure else None,
                         "message": p.failure.message if p.failure else "",
                         "class": p.failure.verdict if p.failure else None,
                         "trainers": list(p.failure.trainers) if p.failure else []} for p in report.pairs]
            + [r.to_json() for r in report.skipped],
            **({"workers": report.workers} if report.workers else {})}


def fuzz_text(report: FuzzReport) -> str:
    rows = [(p.property, p.component, p.status, p.examples, p.rounds) for p in report.pairs]
    rows += [(r.property, r.component, "skip", 0, 0) for r in report.skipped]
    out = [f"fuzz target {report.target}; {report.minutes:g} min, {report.rounds} rounds from seed {report.seed}",
           _table(("property", "component", "status", "examples", "rounds"), rows)]
    if report.workers:
        out.append("\n" + _table(("worker", "pairs", "examples", "rounds", "examples/s"),
                                  [(w["worker"], w["pairs"], w["examples"], w["rounds"], w["examples_per_s"])
                                   for w in report.workers]))
    for p in report.pairs:
        if p.failure is not None:
            verdict = (f" ({p.failure.verdict}; trainers: {', '.join(p.failure.trainers) or '-'})"
                       if p.failure.verdict else "")
            out.append(f"\nFAIL {p.property} [{p.component}]{verdict}: {p.failure.message}\n  replay: {p.failure.replay}")
    return "\n".join(out)
