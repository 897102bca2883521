"""Findings in the form maintainers take (studies/*/repros/, studies/*/patches/): each standalone reproducer imports only
the library under test (and torch), exits 1 on the installed release, and exits 0 on a pristine copy of the
release with the library's diffs applied by ``patch -p1`` (``properties.targets.patched``), placed first on the
import path. (Every diff, not the finding's alone: H9's example also shows H4 as released. That each example
fails without its own diff is what the conformance pins check.) A finding without a diff (NO_DIFF) runs on the
release only. Each script runs in a fresh interpreter of its own, but VeOmni's plain loader scripts, which run in
one interpreter a side (``_batched``), each as ``python SCRIPT`` would run it. A library that runs in an
overlay of its own (torchtitan: properties.targets.overlay) runs its scripts with the overlay on the import path,
after the patched copy where there is one."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from properties.targets.overlay import VEOMNI as VEOMNI_DATASETS

pytestmark = pytest.mark.studies   # the findings' evidence: a job of its own (docs/guide/tests.md)

ROOT = Path(__file__).resolve().parent.parent
STUDIES = ROOT / "studies"
#: how a script written by ``python -m properties repro`` names the corpus file it was written from
WRITTEN = re.compile(r"Written by `python -m properties repro` from (\S+\.json)")
#: study folder -> the package its scripts study
PACKAGE = {"veomni": "veomni", "litdata": "litdata", "hf_datasets": "datasets", "torchtitan": "torchtitan"}
CASES = [(study, p) for study in PACKAGE for p in sorted((STUDIES / study / "repros").glob("*.py"))]
#: findings whose script has no diff to pass with, and why (each report's table says the same): their scripts run on
#: the release only, where they must exit 1
NO_DIFF = {"V5": "a deviation: VeOmni's design (D5)", "V6": "a deviation: drop_last, as documented (D6)",
           "V14": "no fix proposed: DP ranks agreeing on a step count belongs in the trainer",
           "B2": "no fix proposed: an acknowledged limitation (VeOmni's own resume test turns shuffling off)",
           "T2": "no fix proposed", "T3": "no fix proposed: a partial fix did not hold"}
#: scripts that run in an overlay of the library's declared dependencies the study's patch set does not name:
#: finding -> the overlay (B2: VeOmni's builders over the datasets VeOmni declares)
IN_OVERLAY = {"B2": VEOMNI_DATASETS}


def _diff(study: str, finding: str) -> Path | None:
    """The finding's diff: in the study's patches/, or a subfolder of it (VeOmni's trainer diffs: trainer/)."""
    found = [d for d in sorted((STUDIES / study / "patches").rglob(f"{finding}.diff")) if d.parent.name != "alternatives"]
    return found[0] if found else None


def _patch_set(study: str, finding: str):
    """The study's first patch set (an overlaid library's knows its overlay), over the folder the finding's diff is in
    (a finding without a diff: the first set, in the finding's own overlay where it names one)."""
    import dataclasses

    main = importlib.import_module(f"studies.{study}").PATCH_SETS[0]
    if finding in IN_OVERLAY:
        main = dataclasses.replace(main, overlay=IN_OVERLAY[finding])
    if _diff(study, finding) is None:
        return main
    folder = _diff(study, finding).parent
    return main if folder == main.root else dataclasses.replace(main, target=f"repros:{study}/{folder.name}",
                                                                    root=folder)


def test_every_study_with_findings_is_listed_here():
    assert sorted(PACKAGE) == sorted(p.parent.name for p in STUDIES.glob("*/repros"))


def _run(script: Path, pythonpath: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(pythonpath)
    # run from an empty folder: nothing of this project is importable, as on a maintainer's machine
    return subprocess.run([sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_every_finding_of_a_report_has_its_script_linked_from_the_table():
    for study in PACKAGE:
        report = (STUDIES / study / "report.md").read_text()
        table = report.split("\n| ID | class |", 1)[-1].split("\n\n", 1)[0]   # the summary table, first
        rows = re.findall(r"^\| ([A-Z]\d+) \|(.*)$", table, re.M)
        assert rows, f"studies/{study}/report.md has no summary table"
        for finding, row in rows:
            assert (STUDIES / study / "repros" / f"{finding}.py").exists(), f"{study}: {finding} has no script"
            assert f"](repros/{finding}.py)" in row, f"{study}: {finding}'s row does not link its script"


def test_every_repro_has_its_diff_and_imports_nothing_of_this_project():
    assert CASES, "no reproducer under studies/*/repros/"
    for lib, script in CASES:
        text = script.read_text()
        assert (_diff(lib, script.stem) is None) == (script.stem in NO_DIFF), \
            f"{script.name}: a diff, or a reason in NO_DIFF why there is none (not both)"
        assert len(text.splitlines()) <= 60, f"{script.name} is over 60 lines"
        for own in ("dynbsz", "properties", "simulator"):
            assert f"import {own}" not in text and f"from {own}" not in text, f"{script.name} imports {own}"


def test_written_repros_are_what_the_generator_writes_now():
    from properties import corpus, repro

    written = [(lib, s) for lib, s in CASES if WRITTEN.search(" ".join(s.read_text().split()))]
    assert {s.stem for _, s in written} >= {"H1", "H3"}
    for lib, script in written:
        if importlib.util.find_spec(PACKAGE[lib]) is None:
            continue
        name = WRITTEN.search(" ".join(script.read_text().split())).group(1)
        path = next(STUDIES.glob(f"{lib}/pins/**/{name}"))
        assert repro.write(corpus.load(path), path=str(path)) == script.read_text(), \
            f"{script} is stale: python -m properties repro {path.relative_to(ROOT)} --out {script.relative_to(ROOT)}"


def _run_on_the_release_elsewhere(script: Path) -> str | None:
    """The test id that already runs this committed script's text on the release, or None: a script written by the
    generator is its pin's script, which tests/test_repro_generated.py runs on the release (exit 1, and the batches it
    prints compared with the harness's runs); test_written_repros_are_what_the_generator_writes_now holds the two
    texts equal."""
    from tests.test_repro_generated import PINS

    found = WRITTEN.search(" ".join(script.read_text().split()))
    return next((finding for finding, pin in PINS if found and pin.name == found.group(1)), None)


def _batched(lib: str, script: Path) -> bool:
    """Run in one interpreter a side (tests/script_batch.py: VeOmni's import, 3.5 s, once for all, each script
    as ``python SCRIPT`` runs it): VeOmni's scripts that run with the study's main patch set as it is (not B2, in
    the datasets overlay, which starts a gloo group; not V16, whose diff is to the trainer and which runs
    BaseTrainer)."""
    return lib == "veomni" and _patch_set(lib, script.stem) == _patch_set(lib, "V1")


ALONE = [(lib, p) for lib, p in CASES if not _batched(lib, p)]
BATCHED = [(lib, p) for lib, p in CASES if _batched(lib, p)]


def _installed_or_skip(lib: str, patch_set) -> None:
    if not patch_set.installed() or (patch_set.overlay and not patch_set.overlay.installed()):
        install = patch_set.overlay.install if patch_set.overlay else f"bash ci/install.sh --{PACKAGE[lib]}"
        pytest.skip(f"{PACKAGE[lib]} is not installed ({install})")


@pytest.mark.parametrize("side", ["release", "fixed"])
def test_veomni_repros_fail_on_the_release_and_pass_with_the_diffs(side, tmp_path):
    from tests.script_batch import run_scripts

    assert {p.stem for lib, p in ALONE if lib == "veomni"} == {"B2", "V16"}
    patch_set = _patch_set("veomni", "V1")
    _installed_or_skip("veomni", patch_set)
    scripts = [p for _, p in BATCHED if (side == "release" and _run_on_the_release_elsewhere(p) is None)
               or (side == "fixed" and p.stem not in NO_DIFF)]
    assert scripts
    path = patch_set.import_path(None if side == "release" else patch_set.build())
    ran = run_scripts(scripts, tmp_path, os.pathsep.join(path))
    want = 1 if side == "release" else 0
    wrong = {p.stem: r.stdout[-1500:] + r.stderr[-1500:] for p, r in zip(scripts, ran) if r.returncode != want}
    assert not wrong, f"exit code not {want} on the {side}: {wrong}"


@pytest.mark.parametrize("lib,script", ALONE, ids=[f"{lib}/{p.stem}" for lib, p in ALONE])
def test_repro_fails_on_the_release_and_passes_with_its_diff(lib, script, tmp_path):
    patch_set = _patch_set(lib, script.stem)
    _installed_or_skip(lib, patch_set)
    if _run_on_the_release_elsewhere(script) is None:
        released = _run(script, patch_set.import_path(None), tmp_path)
        assert released.returncode == 1, released.stdout + released.stderr[-2000:]
    if script.stem in NO_DIFF:
        return
    fixed = _run(script, patch_set.import_path(patch_set.build()), tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr[-2000:]
