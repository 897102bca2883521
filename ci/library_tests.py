"""A library's own tests on the release and on a copy patched with the proposed diffs, side by side.

``python -m ci.library_tests datasets [--sdist FILE] [--json OUT] [-k EXPR]``
``python -m ci.library_tests litdata|veomni --repo GIT_DIR --ref TAG [--tests PATH ...] [--json OUT]``

The tests are run twice with pytest from a scratch folder: against the installed release, and against a
pristine copy of the installed package with the study's diffs (``studies/<library>/patches/``) applied by
``patch -p1``, first on the import path (a library with its own dependency overlay, VeOmni's, has the overlay
next on the path, as its targets run).

* Hugging Face ``datasets`` 5.2.0: ``tests/test_iterable_dataset.py`` from its source distribution (downloaded
  with ``pip download --no-binary :all: --no-deps``, or ``--sdist``). The sdist ships neither
  ``tests/utils.py`` nor ``tests/conftest.py``; ``ci/datasets_tests/`` stands in for the names the file
  imports (a test needing the repository's fixtures skips, on both sides alike).
* litdata and VeOmni ship no tests in their sdists: ``tests/`` comes from a clone of their repository at
  ``--ref`` (``git archive``), the test files named by ``--tests`` (defaults: the files of the modules the
  diffs touch). Where the clone has no tag of the installed release, the report says which ref ran.

A fix breaks a test when the test passes on the release and fails on the patched copy: the report lists every
such test (exit 1), and the counts of both runs; a test listed in ``ENCODE_THE_BUG`` (it asserts the behaviour a
diff fixes, and says so there) is reported apart, with the reason. Tests that fail on both sides (this machine has no network, no
Hub) are counted, not judged.

Each test has a time limit (``--timeout``; litdata's default in ``TEST_TIMEOUT_S``, since some of its resume tests
hang on the release; a test's own ``@pytest.mark.timeout`` wins), kept by the pytest plugin
``ci/library_tests_timeout.py``, which also logs each outcome: a test past its limit fails on its side, reported as
"timed out" (and listed under ``timed_out``); one that ignores the signal ends its pytest run, and the tests after it
run in a new one.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIM = Path(__file__).resolve().parent / "datasets_tests"
#: the pytest plugin that logs each test's outcome and limits its time (pytest-timeout is no dependency)
TIMEOUT_PLUGIN = Path(__file__).resolve().parent / "library_tests_timeout.py"
#: package -> seconds a test may take by default (its own ``@pytest.mark.timeout`` wins); --timeout overrides
TEST_TIMEOUT_S = {"litdata": 180.0}
#: seconds past its limit before a test that ignores the limit (blocked in C code) ends its run
HUNG_GRACE_S = 30.0
#: package -> the test files run by default (those of the modules its diffs touch)
LIBRARIES = {"datasets": ("tests/test_iterable_dataset.py",),
             # v0.2.71's resume tests in test_parallel.py hang on the 0.2.76 release itself: each test has a time
             # limit (TEST_TIMEOUT_S), and one that hangs fails on its side, "timed out"
             "litdata": ("tests/streaming/test_dataloader.py", "tests/streaming/test_combined.py",
                         "tests/streaming/test_dataset.py", "tests/streaming/test_parallel.py"),
             "veomni": ("tests/data/test_dynamic_batching_dataset.py", "tests/data/test_dataloader.py",
                        "tests/data/test_multisource_dataset.py", "tests/checkpoints/test_checkpoint_callback.py")}


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def cache_dir() -> Path:
    """Where a downloaded sdist is kept between runs (the harness's user cache, never the checkout)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dynbsz-harness" / "sdists"


def fetch_sdist(package: str, version: str, into: Path) -> Path:
    found = sorted(into.glob(f"{package}-{version}.tar.gz"))
    if found:
        return found[0]
    cmd = [sys.executable, "-m", "pip", "download", f"{package}=={version}", "--no-binary", ":all:", "--no-deps",
           "-q", "-d", str(into)]
    if importlib.util.find_spec("setuptools") is not None:
        cmd.insert(-3, "--no-build-isolation")   # its metadata builds with the setuptools at hand, no download
    done = subprocess.run(cmd, capture_output=True, text=True)
    found = sorted(into.glob(f"{package}-{version}.tar.gz"))
    if done.returncode or not found:
        raise SystemExit(f"could not download the {package} {version} sdist ({' '.join(cmd)}):\n{done.stderr[-2000:]}")
    return found[0]


def tests_from_repo(git_dir: Path, ref: str, into: Path) -> Path:
    """``into/tests/``: the repository's whole tests/ tree at ``ref`` (helpers and conftest included)."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", ref, "tests"], capture_output=True)
    if archive.returncode:
        raise SystemExit(f"git archive {ref} tests failed in {git_dir}: {archive.stderr.decode()[-1000:]}")
    subprocess.run(["tar", "x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "tests"


def tests_folder(sdist: Path, member: str, into: Path) -> Path:
    """``into/tests/`` with the sdist's test file and the stand-ins for what the sdist lacks."""
    tests = into / "tests"
    tests.mkdir(parents=True)
    with tarfile.open(sdist) as tar:
        name = next((m for m in tar.getnames() if m.endswith("/" + member)), None)
        if name is None:
            raise SystemExit(f"{sdist.name} has no {member}")
        (tests / Path(member).name).write_bytes(tar.extractfile(name).read())
    for f in ("__init__.py", "utils.py", "conftest.py"):
        shutil.copy(SHIM / f, tests / f)
    return tests


#: the study whose diffs a library's tests run with, and which of them: those against the packages named (None: every
#: diff of the study; VeOmni's V4 is to torchdata's sampler, which VeOmni's loaders run)
STUDY = {"datasets": ("hf_datasets", ("datasets",)), "litdata": ("litdata", None), "veomni": ("veomni", None)}


def patch_set(package: str, version: str, work: Path):
    """Every diff of the study (``studies/<library>/patches/``, and its subfolders but ``alternatives/``: VeOmni's
    trainer diffs are in ``trainer/``), gathered into ``work/patches`` as one ``targets.patched.PatchSet``, and the
    ids of the diffs its tests run with; a library whose targets run with a dependency overlay (VeOmni's declared
    datasets) carries it, so its tests run with it too."""
    from properties.targets.overlay import VEOMNI
    from properties.targets.patched import PatchSet
    study, packages = STUDY[package]
    root = ROOT / "studies" / study / "patches"
    gathered = work / "patches"
    gathered.mkdir(parents=True)
    for diff in sorted(root.glob("*.diff")) + sorted(root.glob("*/*.diff")):
        if diff.parent.name != "alternatives":
            shutil.copy(diff, gathered / diff.name)
    overlay = VEOMNI if package == "veomni" and VEOMNI.installed() else None
    found = PatchSet(target=f"library-tests:{package}", released="", library=f"{package} {version}", root=gathered,
                     overlay=overlay)
    return found, [f.id for f in found.fixes().values() if packages is None or f.package in packages]


def patched_copy(patches, fixes: list[str]) -> tuple[Path, list[str]]:
    """The installed package with ``fixes`` of the patch set applied, and their ids."""
    from properties.targets.patched import PatchError

    try:
        return patches.build(fixes), list(patches.check(fixes))
    except PatchError as e:
        raise SystemExit(str(e)) from None


def run_tests(folder: Path, test_files: tuple[str, ...], package: str, pythonpath: str | None, log: Path,
              k: str | None, patched: Path | None = None, timeout: float | None = None,
              grace: float = HUNG_GRACE_S) -> dict[str, str]:
    """pytest on the test files; each test's outcome (passed, failed, skipped, timed out) as the plugin
    ``ci/library_tests_timeout.py`` logs it. A test runs at most ``timeout`` seconds (its ``timeout`` mark wins):
    a test past it fails, "timed out"; one that does not stop ``grace`` seconds later ends the run, and the tests
    not yet run run again in a new one (as many times as tests hang)."""
    env = {key: v for key, v in os.environ.items() if key != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    env["HF_DATASETS_OFFLINE"] = "1"
    # the last line: a library may print on import (VeOmni logs its environment)
    where = (subprocess.run([sys.executable, "-c", f"import {package}; print({package}.__file__)"], cwd=folder.parent,
                            env=env, capture_output=True, text=True).stdout.strip().splitlines() or [""])[-1]
    if patched is not None and not where.startswith(str(patched)):
        raise SystemExit(f"the patched run would import {package} from {where!r}, not from the copy {patched}")
    # the plugin next to the tests: `python -m pytest` imports from its working directory first
    shutil.copy(TIMEOUT_PLUGIN, folder.parent / TIMEOUT_PLUGIN.name)
    log.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
           "-p", TIMEOUT_PLUGIN.stem, f"--lt-log={log}", f"--lt-grace={grace:g}",
           *([f"--lt-timeout={timeout:g}"] if timeout else []),
           "--rootdir", str(folder.parent), *[str(folder.parent / f) for f in test_files]]
    if k:
        cmd += ["-k", k]
    outcomes: dict[str, str] = {}
    done: list[str] = []   # node ids, to deselect from a run after one a hung test ended
    while True:
        subprocess.run([*cmd, *[f"--deselect={n}" for n in done]], cwd=folder.parent, env=env, capture_output=True,
                       text=True)
        records = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        log.unlink(missing_ok=True)
        new = [r for r in records if "nodeid" in r and r["nodeid"] not in done]
        for r in new:
            outcomes[r["name"]] = r["outcome"]
            done.append(r["nodeid"])
        # the session ended (every selected test has its line), or a run that logged nothing new: no progress
        if any("finished" in r for r in records) or not new:
            return outcomes


#: package -> tests that assert the behaviour a diff fixes, as (pytest id pattern, the fix, why): a fix breaks
#: them by design, and an upstream pull request would change them with it. Listed in the report, not judged.
ENCODE_THE_BUG: dict[str, tuple[tuple[str, str, str], ...]] = {
    "datasets": (("tests.test_iterable_dataset::test_iterable_dataset_shuffle[[]1-*[]]", "H2",
                  "its expected order shuffles the shards of epoch 1 with np.random.default_rng(epoch), the "
                  "seed-independent generator H2 replaces (test_iterable_dataset.py:2959); with H2 it would derive "
                  "the generator from the shuffle seed and the epoch as the diff does"),),
    "litdata": (("tests.streaming.test_dataloader::test_custom_collate_multiworker", "L16",
                 "it expects workers 1 and 2 to draw their first batch of the weighted mixture exactly as worker 0 "
                 "does ([1, 1] each, test_dataloader.py:240-244): every worker drawing the same sequence of datasets "
                 "is the bug L16 fixes; with L16 worker 1 draws [0, 2]"),
                ("tests.streaming.test_dataloader::test_streaming_dataloader", "L19",
                 "it compares the whole state of a weighted mixture saved after its epoch's iteration ended with the "
                 "released dict (test_dataloader.py:101-106), which cannot say that the epoch ended: the bug L19 fixes "
                 "(a state saved there resumes the finished epoch). With L19 that state carries epoch_complete: True; "
                 "an upstream pull request would add the key to the expected dict"),
                *((f"tests.streaming.test_parallel::test_parallel_dataset_partial_iteration_resume[[]{ids}[]]", "L9",
                   "after the restore its loader iterates the restored state 3 times, breaking each after 4 batches; "
                   "the 2nd yields [7, 2, 8, 3] (workers 1, 0, 1, 0) and the test expects the 3rd to come in the same "
                   "order (expected_2/batches_2 swapped, test_parallel.py:993-994, asserted at 1017-1024): as "
                   "released it does only because the 2nd iteration's batches were filed under workers 0, 1, 0, 1, "
                   "its last (sample 3, worker 0's) under worker 1, the worker the 3rd iteration's routing starts at "
                   "(_StreamingMultiProcessingDataLoaderIter._indexes). With L9 it is filed under worker 0, and the "
                   "3rd iteration replays the restored state in the order the 1st did ([2, 7, 3, 8])")
                  for ids in ("*-False-*", "False-True-None"))),
}


#: a hung test fails on its side ("timed out": see ``run_tests``)
TIMED_OUT = "timed out"
FAILING = ("failed", TIMED_OUT)


def compare(released: dict[str, str], patched: dict[str, str],
            encode_the_bug: tuple[tuple[str, str, str], ...] = ()) -> dict:
    broken = sorted(t for t, o in released.items() if o == "passed" and patched.get(t) != "passed")
    by_design = {t: {"fix": fix, "why": why} for t in broken for pattern, fix, why in encode_the_bug
                 if fnmatch.fnmatchcase(t, pattern)}
    fixed = sorted(t for t, o in released.items() if o in FAILING and patched.get(t) == "passed")
    both = sorted(t for t, o in released.items() if o in FAILING and patched.get(t) in FAILING)
    timed_out = {side: sorted(t for t, o in outcomes.items() if o == TIMED_OUT)
                 for side, outcomes in (("released", released), ("patched", patched))}
    return {"released": dict(Counter(released.values())), "patched": dict(Counter(patched.values())),
            "broken_by_the_patches": [t for t in broken if t not in by_design],
            "encode_the_bug_a_diff_fixes": by_design, "failing_on_the_release_passing_patched": fixed,
            "failing_on_both": both, **({"timed_out": timed_out} if any(timed_out.values()) else {})}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ci.library_tests", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("library", choices=sorted(LIBRARIES))
    p.add_argument("--sdist", type=Path, help="the source distribution (default: pip download it, once, into "
                                               "$XDG_CACHE_HOME/dynbsz-harness/sdists)")
    p.add_argument("--json", type=Path, help="write the report here too")
    p.add_argument("-k", default=None, help="only the tests pytest -k selects (default: the whole files)")
    p.add_argument("--repo", type=Path, help="litdata, veomni: a git clone of the library (its .git directory)")
    p.add_argument("--ref", help="litdata, veomni: the tag or commit whose tests/ to run")
    p.add_argument("--timeout", type=float, default=None,
                   help=f"seconds a test may take, 0 for no limit (defaults: {TEST_TIMEOUT_S}, else none; a test's own "
                        "timeout mark wins); a test past it fails on its side, reported as 'timed out'")
    p.add_argument("--tests", nargs="+", help=f"test files, relative to the repository (defaults: {LIBRARIES})")
    args = p.parse_args(argv)
    package = args.library
    files = tuple(args.tests or LIBRARIES[package])
    version = _version(package)
    if package != "datasets" and not (args.repo and args.ref):
        p.error(f"{package} ships no tests in its sdist: --repo GIT_DIR and --ref TAG are required")
    with tempfile.TemporaryDirectory(prefix="library-tests-") as tmp:
        work = Path(tmp)
        if package == "datasets":
            sdist = args.sdist or fetch_sdist(package, version, cache_dir())
            tests = tests_folder(sdist, files[0], work / "run")
            files, source = (f"tests/{Path(files[0]).name}",), f"{', '.join(files)} from {sdist.name}"
        else:
            tests = tests_from_repo(args.repo, args.ref, work / "run")
            source = f"{', '.join(files)} from the repository at {args.ref}"
        if importlib.util.find_spec(package) is None:
            raise SystemExit(f"{package} is not installed (bash ci/install.sh --{package})")
        patches, chosen = patch_set(package, version, work)
        patched, diffs = patched_copy(patches, chosen)
        timeout = args.timeout if args.timeout is not None else TEST_TIMEOUT_S.get(package)
        released = run_tests(tests, files, package, os.pathsep.join(patches.import_path(None)) or None,
                             work / "released.jsonl", args.k, timeout=timeout or None)
        with_diffs = run_tests(tests, files, package, os.pathsep.join(patches.import_path(patched)),
                               work / "patched.jsonl", args.k, patched=patched, timeout=timeout or None)
    report = {"library": f"{package} {version}", "tests": source, "diffs": diffs,
              "selection": args.k or "the whole files",
              **compare(released, with_diffs, ENCODE_THE_BUG.get(package, ()))}
    text = json.dumps(report, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 1 if report["broken_by_the_patches"] or not released else 0


if __name__ == "__main__":
    sys.exit(main())
