"""Findings in the form maintainers take (docs/repros/, docs/patches/): each standalone reproducer imports only
the library under test (and torch), exits 1 on the installed release, and exits 0 on a pristine copy of the
release with the library's diffs applied by ``patch -p1`` (``properties.targets.patched``), placed first on the
import path. (Every diff, not the finding's alone: H9's example also shows H4 as released. That each example
fails without its own diff is what the conformance pins check.) H8 has no script: it shows when a worker loses
a race, which its pin forces by slowing the workers (tests/test_hf_conformance.py). A library that runs in an
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

DOCS = Path(__file__).resolve().parent.parent / "docs"
STREAMS = DOCS.parent / "tests" / "regressions" / "streams"
#: how a script written by ``python -m properties repro`` names the corpus file it was written from
WRITTEN = re.compile(r"Written by `python -m properties repro` from (\S+\.json)")
#: repro folder (library-version) -> the package it studies, and the patch folders its findings' diffs are in
#: (two of HF's findings are torchdata's, fixed in torchdata)
LIBRARIES = {"veomni-0.1.12": ("veomni", ("veomni-0.1.12",)), "litdata-0.2.76": ("litdata", ("litdata-0.2.76",)),
             "datasets-5.2.0": ("datasets", ("datasets-5.2.0", "torchdata-0.11.0")),
             "torchtitan-0.3.0": ("torchtitan", ("torchtitan-0.3.0",))}
CASES = [(lib, p) for lib in LIBRARIES for p in sorted((DOCS / "repros" / lib).glob("*.py"))]


def _diff(lib: str, finding: str) -> Path | None:
    found = [DOCS / "patches" / folder / f"{finding}.diff" for folder in LIBRARIES[lib][1]]
    return next((d for d in found if d.exists()), None)


def _patch_set(lib: str):
    """The report's registered patch set (one of an overlaid library knows its overlay), else one of its folders."""
    from properties.targets.patched import PATCH_SETS, PatchSet

    folders = LIBRARIES[lib][1]
    return next((s for s in PATCH_SETS.values() if s.folders == folders), None) or \
        PatchSet(target=f"repros:{lib}", released="", library=lib, folders=folders)


def _run(script: Path, pythonpath: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(pythonpath)
    # run from an empty folder: nothing of this project is importable, as on a maintainer's machine
    return subprocess.run([sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_every_repro_has_its_diff_and_imports_nothing_of_this_project():
    assert CASES, "no reproducer under docs/repros/"
    for lib, script in CASES:
        text = script.read_text()
        assert _diff(lib, script.stem) is not None, f"{script.name} has no diff"
        assert len(text.splitlines()) <= 60, f"{script.name} is over 60 lines"
        for own in ("dynbsz", "properties", "simulator"):
            assert f"import {own}" not in text and f"from {own}" not in text, f"{script.name} imports {own}"


def test_written_repros_are_what_the_generator_writes_now():
    from properties import corpus, repro

    written = [(lib, s) for lib, s in CASES if WRITTEN.search(" ".join(s.read_text().split()))]
    assert {s.stem for _, s in written} >= {"H1", "H3"}
    for lib, script in written:
        if importlib.util.find_spec(LIBRARIES[lib][0]) is None:
            continue
        name = WRITTEN.search(" ".join(script.read_text().split())).group(1)
        path = next(p for p in (STREAMS / name, STREAMS / "trainers" / name) if p.exists())
        assert repro.write(corpus.load(path), path=str(path)) == script.read_text(), \
            f"{script} is stale: python -m properties repro {path.relative_to(DOCS.parent)} --out {script.relative_to(DOCS.parent)}"


@pytest.mark.parametrize("lib,script", CASES, ids=[f"{lib}/{p.stem}" for lib, p in CASES])
def test_repro_fails_on_the_release_and_passes_with_its_diff(lib, script, tmp_path):
    patch_set = _patch_set(lib)
    if not patch_set.installed():
        install = patch_set.overlay.install if patch_set.overlay else f"bash ci/install.sh --{LIBRARIES[lib][0]}"
        pytest.skip(f"{LIBRARIES[lib][0]} is not installed ({install})")
    released = _run(script, patch_set.import_path(None), tmp_path)
    assert released.returncode == 1, released.stdout + released.stderr[-2000:]
    fixed = _run(script, patch_set.import_path(patch_set.build()), tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr[-2000:]
