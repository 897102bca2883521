"""``python -m properties``: run the property suite against a target from the command line.

    check    --target NAME|MODULE:FACTORY [--profile ci|dev|fuzz] [--json]   every property that applies
             [--property P] [--component C] [--no-shrink]                   (only these; first failure as found)
    fuzz     --target ... --minutes M [--corpus DIR] [--component C]          a long run, saving every failure
    replay   FILE [--target NAME] [--runs N]                                  one saved failure (N times)
    repro    FILE [--trainer NAME] [--out repro.py]                           that failure as a standalone script
    (check, fuzz, replay, mutants: --step-timeout S, the wall-time bound of a loader's iter() and next())
    mutants  [--json] [--profile ...] [--mutant NAME]                         the mutation report
    list                                                                      targets, properties, mutants

Exit codes: 0 nothing failed, 1 a property failed (or a mutant survived), 2 bad input.
Every failure is printed with the one command that replays it and saved as a small JSON file:
by default in a scratch directory of the user's cache (``$XDG_CACHE_HOME/dynbsz-harness/failures``,
printed on stderr), in a corpus only when one is named (``--corpus tests/regressions``). A run
never adds or rewrites files in the directory it starts in; a failure already saved (same
property, component and example) is left byte for byte as it is. The example database is in the
same cache (``$DYNBSZ_HYPOTHESIS_DB`` when set).
"""

from __future__ import annotations

import argparse
import json
import secrets
import shlex
import sys
from dataclasses import replace
from typing import Sequence

from . import corpus, mutants, mutation, profiles, report, repro, suite, trainers, verdicts
from .runner import Result, RunSettings, run_target
from .targets import BUILTIN, MUTANT_PREFIX, TargetError, names, resolve
from .targets.overlay import rerun_in_overlay
from .targets.patched import PatchError, rerun_patched
from .watchdog import DEFAULT_STEP_TIMEOUT_S

PROG = "python -m properties"


class UsageError(Exception):
    """Bad input: printed as one line, exit code 2."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    def search_options(sp, profile_default: str) -> None:
        sp.add_argument("--target", required=True, help=f"{', '.join(BUILTIN)}, mutant:NAME (python -m properties list) or "
                        "MODULE:FACTORY (your gate, packer factory or Target)")
        sp.add_argument("--property", action="append", dest="properties", metavar="NAME",
                        help="run only this property (repeatable; default: every one that applies)")
        sp.add_argument("--profile", choices=profiles.PROFILES, default=profile_default)
        sp.add_argument("--corpus", default=None, metavar="DIR",
                        help="save failures into this corpus (e.g. tests/regressions); default: a scratch directory, "
                             "$XDG_CACHE_HOME/dynbsz-harness/failures")
        sp.add_argument("--database", default=None, metavar="SPEC",
                        help="Hypothesis example database: a directory, redis://HOST:PORT[/DB], ro:SPEC (read only) "
                             "or SPEC,SPEC (all at once) (default: $DYNBSZ_HYPOTHESIS_DB, else "
                             "$XDG_CACHE_HOME/dynbsz-harness/hypothesis); 'none' for no database")
        sp.add_argument("--json", action="store_true", help="print a JSON document instead of a table")
        trainer_option(sp)
        timeout_option(sp, DEFAULT_STEP_TIMEOUT_S)

    def timeout_option(sp, default: float) -> None:
        sp.add_argument("--step-timeout", type=float, default=default, metavar="S",
                        help="a loader's iter() or next() that takes longer than S seconds fails the property as a "
                             f"hang (properties.watchdog; default {default:g}; 0: no wall-time bound, the bound on "
                             "steps per epoch stays)")

    def component_option(sp) -> None:
        sp.add_argument("--component", action="append", dest="components", metavar="NAME",
                        help="run only this component of the target (repeatable; e.g. loader:main)")

    def trainer_option(sp) -> None:
        sp.add_argument("--trainer", action="append", dest="trainers", metavar="NAME", choices=tuple(trainers.TRAINERS),
                        help="drive loaders as this trainer model only (repeatable; allowed values: "
                             f"{', '.join(trainers.TRAINERS)}; default: every one the target declares)")

    c = sub.add_parser("check", help="run every property that applies to a target")
    search_options(c, "ci")
    c.add_argument("--seed", type=int, default=0, help="Hypothesis seed (default 0: the same search every time)")
    c.add_argument("--max-examples", type=int, help="override the profile's examples per property")
    component_option(c)
    c.add_argument("--no-shrink", action="store_true",
                   help="report the first failing example as found instead of shrinking it (faster status tables)")

    f = sub.add_parser("fuzz", help="long run with fresh seeds until time is up, saving every failure")
    search_options(f, "fuzz")
    f.add_argument("--minutes", type=float, required=True)
    f.add_argument("--seed", type=int, help="first round's seed (default: a fresh one, printed in the report)")
    f.add_argument("--workers", type=int, default=1, metavar="N",
                   help="run the campaign in N processes, the (property, component) pairs dealt out among them, all "
                        "writing one example database (default: 1, this process)")
    f.add_argument("--rounds", type=int, default=None, metavar="R",
                   help="stop after R rounds if --minutes is not up first (default: until it is); with time to "
                        "spare, every pair then runs the same examples however many --workers share the campaign")
    component_option(f)

    r = sub.add_parser("replay", help="replay one saved failure; exit 1 if it still fails")
    r.add_argument("file")
    r.add_argument("--target", help="replay on this target instead of the one recorded in the file")
    r.add_argument("--runs", type=int, default=1, metavar="N",
                   help="replay N times and say how often it reproduced (an example with two or more workers "
                        "can depend on timing)")
    r.add_argument("--json", action="store_true")
    trainer_option(r)
    timeout_option(r, DEFAULT_STEP_TIMEOUT_S)

    w = sub.add_parser("repro", help="write a saved failure as a standalone script that imports only the library "
                                     "under test (exit 1 while the bug is present, 0 once fixed)")
    w.add_argument("file")
    w.add_argument("--trainer", choices=repro.TRAINERS, default=None,
                   help="the trainer model whose loop the script inlines (default: the one the failure names, "
                        "else the adversarial schedule the example was drawn for)")
    w.add_argument("--out", default=None, metavar="PATH", help="write the script here (default: print it)")

    m = sub.add_parser("mutants", help="mutation report: is every deliberately broken variant caught?")
    m.add_argument("--profile", choices=profiles.PROFILES, default="ci")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--max-examples", type=int, help="override the profile's examples per property")
    m.add_argument("--mutant", action="append", dest="mutants", metavar="NAME", help="only this mutant (repeatable)")
    m.add_argument("--all-properties", action="store_true",
                   help="run every property on every mutant (default: stop at the first that kills it)")
    m.add_argument("--json", action="store_true")
    timeout_option(m, mutation.MUTANT_STEP_TIMEOUT_S)

    lst = sub.add_parser("list", help="targets, properties and mutants")
    lst.add_argument("--json", action="store_true")
    return p


def _emit(doc_or_text, as_json: bool) -> None:
    if as_json:
        json.dump(doc_or_text, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(doc_or_text)


def _check_properties(wanted: Sequence[str] | None) -> None:
    known = [p.name for p in suite.properties()]
    bad = [w for w in wanted or () if w not in known]
    if bad:
        raise UsageError(f"--property {bad[0]!r} is not a property; allowed values: {', '.join(known)}")


def _check_positive(setting: str, value) -> None:
    if value is not None and value <= 0:
        raise UsageError(f"{setting} must be > 0, got {value}")


def _step_timeout(args) -> float | None:
    """--step-timeout: seconds > 0, or 0 for no wall-time bound."""
    if args.step_timeout < 0:
        raise UsageError(f"--step-timeout must be >= 0 seconds (0: no wall-time bound), got {args.step_timeout:g}")
    return args.step_timeout or None


def _seed_command(args, result: Result) -> str:
    parts = PROG.split() + ["check", "--target", args.target, "--property", result.property, "--profile",
                            args.profile, "--seed", str(result.seed)]
    if getattr(args, "max_examples", None):
        parts += ["--max-examples", str(args.max_examples)]
    return " ".join(shlex.quote(p) for p in parts)


def _corpus_dir(args) -> str:
    """Where failures go: the corpus named with --corpus, else the scratch directory in the cache."""
    return args.corpus or str(corpus.failures_dir())


def _saved(args, result: Result) -> Result:
    """Save a failure (to ``_corpus_dir``) and attach the command that replays it."""
    if result.status != "fail":
        return result
    if result.saveable:
        where = _corpus_dir(args)
        try:
            path = corpus.save(result, where)
        except OSError as e:
            print(f"{PROG}: could not save the failure to {where} ({e}); replay it by seed instead", file=sys.stderr)
        else:
            return replace(result, file=str(path), replay=corpus.replay_command(path))
    return replace(result, replay=_seed_command(args, result))


def _say_where_saved(args, results) -> None:
    saved = [r for r in results if r.file]
    if saved:
        how = "" if args.corpus else " (a scratch directory; --corpus DIR saves into a corpus)"
        print(f"{PROG}: {len(saved)} failure(s) saved in {_corpus_dir(args)}{how}", file=sys.stderr)


def _database(args) -> str | None:
    """The --database value (a directory, redis://HOST:PORT, ro:SPEC, SPEC,SPEC; none), checked here, at the
    command line, rather than in the first property that opens it."""
    if args.database is None:
        return profiles.database_dir()
    if args.database.lower() == "none":
        return None
    try:
        profiles.example_database(args.database)
    except ValueError as e:
        raise UsageError(str(e)) from None
    return args.database


def _check_components(target, wanted: Sequence[str] | None) -> None:
    have = [c.name for c in target.components]
    bad = [w for w in wanted or () if w not in have]
    if bad:
        raise UsageError(f"--component {bad[0]!r} is not a component of {target.name}; allowed values: "
                         f"{', '.join(have) or 'none'}")


def cmd_check(args) -> int:
    _check_properties(args.properties)
    _check_positive("--max-examples", args.max_examples)
    target = resolve(args.target)
    _check_components(target, args.components)
    rs = RunSettings(profile=args.profile, seed=args.seed, max_examples=args.max_examples, database=_database(args),
                     shrink=not args.no_shrink, step_timeout_s=_step_timeout(args))
    with trainers.only(args.trainers):
        found = run_target(target, rs, args.properties, args.components)
    # every failure re-run under every trainer model its component declares, whatever --trainer selected
    results = [_saved(args, verdicts.classify(target, r)) for r in found]
    _say_where_saved(args, results)
    fmt = report.check_json if args.json else report.check_text
    _emit(fmt(target.name, results, profile=args.profile, seed=args.seed, description=target.description), args.json)
    return 1 if any(r.status == "fail" for r in results) else 0


def _progress(line: str) -> None:
    """A campaign's progress lines, on stderr (module level: ``fuzz --workers`` pickles it into each worker)."""
    print(line, file=sys.stderr, flush=True)


def cmd_fuzz(args) -> int:
    from .fuzz import fuzz

    _check_properties(args.properties)
    _check_positive("--minutes", args.minutes)
    _check_positive("--workers", args.workers)
    if args.rounds is not None:
        _check_positive("--rounds", args.rounds)
    target = resolve(args.target)
    _check_components(target, args.components)
    seed = secrets.randbelow(2**31) if args.seed is None else args.seed
    workers = f" in {args.workers} processes" if args.workers > 1 else ""
    print(f"fuzzing {target.name} for {args.minutes:g} min from seed {seed} (profile {args.profile}){workers}; "
          f"failures go to {_corpus_dir(args)}", file=sys.stderr)
    kw = dict(seed=seed, corpus_dir=_corpus_dir(args), only=args.properties, database=_database(args),
              profile=args.profile, step_timeout_s=_step_timeout(args), components=args.components,
              rounds=args.rounds)
    if args.workers > 1:
        from .fuzz_workers import fuzz_in_workers

        result = fuzz_in_workers(args.target, args.workers, chosen_trainers=args.trainers, minutes=args.minutes,
                                 progress=_progress, **kw)
    else:
        with trainers.only(args.trainers):
            result = fuzz(target, args.minutes, progress=_progress, **kw)
    _emit(report.fuzz_json(result) if args.json else report.fuzz_text(result), args.json)
    return 1 if result.failed else 0


def cmd_replay(args) -> int:
    _check_positive("--runs", args.runs)
    try:
        entry = corpus.load(args.file)
    except corpus.CorpusError as e:
        raise UsageError(str(e)) from None
    with trainers.only(args.trainers):
        results = [corpus.replay(entry, args.target, step_timeout_s=_step_timeout(args)) for _ in range(args.runs)]
    result = next((r for r in results if r.status == "fail"), results[0])
    result = verdicts.classify(resolve(args.target or entry["target"]), result)
    failed = sum(r.status == "fail" for r in results)
    timing = corpus.timing_may_matter(entry)
    runs = {"runs": args.runs, "failed_runs": failed, "timing_may_matter": timing,
            "outcome_varied": len({r.status for r in results}) > 1}
    if args.json:
        # the result's own "file" (where a check saved it) is None on a replay: the file replayed is args.file
        _emit({"target": result.target, **result.to_json(), "file": args.file, **runs}, True)
    else:
        note = f": {result.message}" if result.message else ""
        print(f"{result.status.upper()} {result.property} [{result.component}] on {result.target}{note}")
        if result.verdict:
            print(f"class: {result.verdict}; reproduces under trainers: {', '.join(result.trainers) or '-'}")
        if args.runs > 1:
            varied = "; the outcome depends on timing" if runs["outcome_varied"] else ""
            print(f"reproduced in {failed} of {args.runs} runs{varied}")
        elif timing:
            print("two or more workers: the outcome can depend on timing; --runs N says how often it reproduces")
        if failed and repro.supports(entry):
            print(f"as a standalone script: {repro.command(args.file)}")
    return 1 if failed else 0


def cmd_repro(args) -> int:
    try:
        script = repro.write_file(args.file, trainer=args.trainer)
    except (repro.ReproError, TargetError) as e:
        raise UsageError(str(e)) from None
    if args.out is None:
        sys.stdout.write(script)
    else:
        with open(args.out, "w") as f:
            f.write(script)
        print(f"wrote {args.out}: python {shlex.quote(args.out)} exits 1 while the bug is present", file=sys.stderr)
    return 0


def cmd_mutants(args) -> int:
    _check_positive("--max-examples", args.max_examples)
    rs = mutation.default_settings(args.profile, args.seed, args.max_examples, step_timeout_s=_step_timeout(args))
    try:
        outcomes = mutation.run_mutants(rs, args.mutants, first_kill=not args.all_properties)
    except KeyError as e:
        raise UsageError(f"--mutant: {e.args[0]}") from None
    fmt = report.mutants_json if args.json else report.mutants_text
    _emit(fmt(outcomes, profile=args.profile, seed=args.seed), args.json)
    return 1 if any(o.status == "survived" for o in outcomes) else 0


def cmd_list(args) -> int:
    doc = {"targets": names(), "profiles": list(profiles.PROFILES),
           "properties": [{"property": p.name, "applies_to": sorted(p.kinds), "doc": p.doc}
                          for p in suite.properties()],
           "mutants": [{"mutant": m.name, "component": m.component, "description": " ".join(m.description.split())}
                       for m in mutants.MUTANTS]}
    if args.json:
        _emit(doc, True)
        return 0
    builtin = [t for t in doc["targets"] if not t.startswith(MUTANT_PREFIX)]
    print("targets: " + ", ".join(builtin) + ", mutant:NAME, MODULE:FACTORY")
    print("\nproperties:")
    for p in doc["properties"]:
        print(f"  {p['property']:18} {'/'.join(p['applies_to']):18} {p['doc']}")
    print("\nmutants (target mutant:NAME):")
    for m in doc["mutants"]:
        print(f"  {m['mutant']:31} {m['component']:7} {m['description']}")
    return 0


COMMANDS = {"check": cmd_check, "fuzz": cmd_fuzz, "replay": cmd_replay, "repro": cmd_repro, "mutants": cmd_mutants,
            "list": cmd_list}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    rerun = rerun_in_overlay(args, argv)   # torchtitan, veomni-builders: their declared datasets (an overlay)
    if rerun is None:
        try:
            rerun = rerun_patched(args, argv)   # a :fixed target: the library with a study's diffs applied
        except PatchError as e:
            print(f"{PROG}: error: {e}", file=sys.stderr)
            return 2
    if rerun is not None:
        return rerun
    try:
        with profiles.storage_in_cache():
            return COMMANDS[args.command](args)
    except (TargetError, UsageError) as e:
        if getattr(args, "json", False):
            _emit({"target": getattr(args, "target", None), "error": str(e)}, True)
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
