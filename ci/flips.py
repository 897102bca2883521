"""Run the verdict tests many times and report every test whose outcome ever changed.

    python -m ci.flips                       # 20 runs of every finding pin, fixed target and mutant test
    python -m ci.flips --reps 5 -k V8        # a quick look at a few
    python -m ci.flips --json out.json       # the per-test outcome counts as a document

A verdict that flips (a pinned finding that sometimes passes, a mutant that is sometimes caught)
teaches everyone to rerun until green, so the goal is 0 flips. Each run is one pytest process over
the files below (their own xdist workers with ``-n``), its outcomes read from its JUnit XML; a test
whose outcomes over the runs are not all the same is a flip. Not part of the default suite: 20 runs
take about as long as 20 suites of these files. Run it on a quiet machine (timing benchmarks aside,
load is what makes a timing-dependent test flip, so a busy machine is the harsher trial).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The tests whose outcome is a verdict about someone's code: finding pins (as shipped, without their own
#: fix, with every fix), the fixed targets, the corpus replays, and the mutant kills.
VERDICT_FILES = (
    "tests/test_veomni_conformance.py",
    "tests/test_litdata_conformance.py",
    "tests/test_hf_conformance.py",
    "tests/test_properties_regressions.py",
    "tests/test_packer_mutants.py",
    "tests/test_trainer_pins.py",
    "tests/test_verdicts_streams.py",
    "tests/test_trainers_lightning.py",
    "tests/test_torchtitan_target.py",
    "tests/test_veomni_builders.py",
    "tests/test_loader_no_hang.py",      # the no-hang mutants (a silent worker, a stuck rank) and their bounds
    "tests/test_repros.py",              # the standalone reproducers, on the release and with their diffs
    "tests/test_repro_generated.py",     # the scripts `properties repro` writes, against the harness's runs
)


def outcomes(junit_xml: Path) -> dict[str, str]:
    """test id -> passed | failed | error | skipped (an xfail reads as skipped in JUnit XML)."""
    out = {}
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        status = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                status = {"failure": "failed"}.get(child.tag, child.tag)
                if child.tag == "skipped" and "xfail" in (child.get("type") or "") + (child.get("message") or ""):
                    status = "xfailed"
        out[name] = status
    return out


def failure_messages(junit_xml: Path, limit: int = 600) -> dict[str, str]:
    """test id -> the first ``limit`` characters of its failure or error message, for the tests that failed:
    a flip is diagnosed from what it said when it failed, which the run's own XML (a temporary file) loses."""
    out = {}
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        for child in case:
            if child.tag in ("failure", "error"):
                text = child.get("message") or (child.text or "")
                out[f"{case.get('classname')}::{case.get('name')}"] = " ".join(text.split())[:limit]
                break
    return out


def flips(runs: list[dict[str, str]]) -> dict[str, Counter]:
    """Tests whose outcome differed between runs (a test missing from a run counts as 'absent')."""
    names = set().union(*runs) if runs else set()
    seen: dict[str, Counter] = defaultdict(Counter)
    for run in runs:
        for name in names:
            seen[name][run.get(name, "absent")] += 1
    return {name: c for name, c in sorted(seen.items()) if len(c) > 1}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ci.flips", description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=20, help="runs of the whole selection (default 20)")
    p.add_argument("-k", dest="keyword", help="pytest -k expression to narrow the selection")
    p.add_argument("-n", dest="workers", default="auto", help="pytest-xdist workers per run (default auto)")
    p.add_argument("--json", dest="json_out", help="write the per-test outcome counts here")
    p.add_argument("files", nargs="*", help=f"test files (default: {', '.join(VERDICT_FILES)})")
    args = p.parse_args(argv)
    if args.reps < 2:
        p.error(f"--reps must be at least 2 to see a flip, got {args.reps}")
    files = args.files or list(VERDICT_FILES)
    runs: list[dict[str, str]] = []
    failures: dict[str, list[str]] = defaultdict(list)   # test id -> "run k: message", every run it failed in
    with tempfile.TemporaryDirectory(prefix="dynbsz-flips-") as tmp:
        for k in range(args.reps):
            xml = Path(tmp) / f"run{k}.xml"
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", str(args.workers),
                   f"--junitxml={xml}", "-o", "addopts=", *files]
            if args.keyword:
                cmd += ["-k", args.keyword]
            subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            if not xml.exists():
                print(f"run {k + 1}: pytest wrote no report ({' '.join(cmd)})", file=sys.stderr)
                return 2
            runs.append(outcomes(xml))
            for name, message in failure_messages(xml).items():
                failures[name].append(f"run {k + 1}: {message}")
            print(f"run {k + 1}/{args.reps}: {dict(Counter(runs[-1].values()))}", flush=True)
            if args.json_out:  # after every run, so a campaign stopped early still says what it saw
                Path(args.json_out).write_text(json.dumps(report(runs, args, files, failures), indent=1) + "\n")
    doc = report(runs, args, files, failures)
    print(f"{len(doc['flipped'])} of {doc['tests']} tests flipped over {args.reps} runs")
    for name, counts in doc["flipped"].items():
        print(f"  FLIP {name}: {counts}")
        for line in doc["failure_messages"][name][:3]:
            print(f"    {line}")
    return 1 if doc["flipped"] else 0


def report(runs: list[dict[str, str]], args: argparse.Namespace, files: list[str],
           failures: dict[str, list[str]] | None = None) -> dict:
    """The campaign so far: runs done of those asked for, tests seen, every flip's outcome counts, and what
    each flipped test said in the runs it failed in."""
    flipped = flips(runs)
    return {"reps": args.reps, "runs_done": len(runs), "files": files, "keyword": args.keyword,
            "tests": len(set().union(*runs)) if runs else 0,
            "outcomes": dict(Counter(v for run in runs for v in run.values())),
            "flipped": {n: dict(c) for n, c in flipped.items()},
            "failure_messages": {n: (failures or {}).get(n, []) for n in flipped}}


if __name__ == "__main__":
    sys.exit(main())
