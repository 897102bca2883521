"""``python -m ci.library_tests``: a library's own tests on the release and on the copy patched with our diffs.

Hugging Face ``datasets``: ``tests/test_iterable_dataset.py`` from the 5.2.0 source distribution (downloaded once
into the user's cache) must pass on the patched copy wherever it passes on the release. The comparison itself is
a pure function, checked here on outcomes made up for it.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from ci import library_tests as LT


def test_compare_names_a_test_the_patches_break_and_one_they_fix():
    released = {"a": "passed", "b": "failed", "c": "failed", "d": "skipped", "e": "passed"}
    patched = {"a": "failed", "b": "passed", "c": "failed", "d": "skipped"}
    report = LT.compare(released, patched)
    assert report["broken_by_the_patches"] == ["a", "e"]   # e: gone from the patched run (it did not even run)
    assert report["failing_on_the_release_passing_patched"] == ["b"]
    assert report["failing_on_both"] == ["c"]
    assert report["released"] == {"passed": 2, "failed": 2, "skipped": 1}


def test_a_test_that_asserts_the_fixed_behaviour_is_reported_apart_with_its_reason():
    released = {"t::shuffle[1-42]": "passed", "t::shuffle[0-42]": "passed", "t::other": "passed"}
    patched = {"t::shuffle[1-42]": "failed", "t::shuffle[0-42]": "passed", "t::other": "failed"}
    report = LT.compare(released, patched, (("t::shuffle[[]1-*[]]", "H2", "pins the old seed"),))
    assert report["broken_by_the_patches"] == ["t::other"]
    assert report["encode_the_bug_a_diff_fixes"] == {"t::shuffle[1-42]": {"fix": "H2", "why": "pins the old seed"}}


@pytest.mark.studies   # the findings' evidence: a job of its own (docs/guide/tests.md)
@pytest.mark.skipif(importlib.util.find_spec("datasets") is None, reason="datasets is not installed (--hf)")
def test_datasets_own_iterable_dataset_tests_pass_with_our_diffs(tmp_path):
    out = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "ci.library_tests", "datasets", "--json", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["diffs"] and report["broken_by_the_patches"] == []
    # H2's diff changes the generator test_iterable_dataset_shuffle[1-*] recomputes: reported apart, no other
    assert {v["fix"] for v in report["encode_the_bug_a_diff_fixes"].values()} <= {"H2"}
    # the file ran (hundreds of its tests passed on the release), and the patched run ran the same tests
    assert report["released"].get("passed", 0) > 500
    assert report["patched"].get("passed", 0) >= report["released"]["passed"] - len(report["encode_the_bug_a_diff_fixes"])


def test_a_test_that_hangs_is_reported_timed_out_on_its_side():
    released = {"hang": "timed out", "ok": "passed", "slow": "passed"}
    patched = {"hang": "passed", "ok": "passed", "slow": "timed out"}
    report = LT.compare(released, patched)
    assert report["broken_by_the_patches"] == ["slow"]
    assert report["failing_on_the_release_passing_patched"] == ["hang"]
    assert report["timed_out"] == {"released": ["hang"], "patched": ["slow"]}
    assert "timed_out" not in LT.compare({"ok": "passed"}, {"ok": "passed"})


FAKE_TESTS = '''
import signal
import time

import pytest


def test_passes():
    pass


def test_fails():
    assert False


@pytest.mark.skip(reason="skipped")
def test_skipped():
    pass


@pytest.mark.timeout(1)
def test_sleeps():          # the alarm ends it
    time.sleep(60)


@pytest.mark.timeout(1)
def test_ignores_the_alarm():   # SIGALRM blocked: the watchdog ends the run, the tests after it run in a new one
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
    time.sleep(60)


def test_runs_after_the_hang():
    pass


def test_default_limit():   # no mark: the run's limit
    time.sleep(60)


class TestInAClass:
    def test_method(self):
        pass
'''


def test_run_tests_gives_each_test_its_outcome_and_a_hung_one_timed_out(tmp_path):
    tests = tmp_path / "run" / "tests"
    tests.mkdir(parents=True)
    (tests / "test_fake.py").write_text(FAKE_TESTS)
    outcomes = LT.run_tests(tests, ("tests/test_fake.py",), "json", None, tmp_path / "out.jsonl", None,
                            timeout=2, grace=1)
    assert outcomes == {"tests.test_fake::test_passes": "passed", "tests.test_fake::test_fails": "failed",
                        "tests.test_fake::test_skipped": "skipped", "tests.test_fake::test_sleeps": "timed out",
                        "tests.test_fake::test_ignores_the_alarm": "timed out",
                        "tests.test_fake::test_runs_after_the_hang": "passed",
                        "tests.test_fake::test_default_limit": "timed out",
                        "tests.test_fake.TestInAClass::test_method": "passed"}
    # -k selects as before; without a limit and without marks nothing times out
    assert LT.run_tests(tests, ("tests/test_fake.py",), "json", None, tmp_path / "out.jsonl", "passes or method") \
        == {"tests.test_fake::test_passes": "passed", "tests.test_fake.TestInAClass::test_method": "passed"}


def test_litdata_runs_its_parallel_tests_by_default_under_a_time_limit():
    assert "tests/streaming/test_parallel.py" in LT.LIBRARIES["litdata"]
    assert LT.TEST_TIMEOUT_S["litdata"] > 0
    assert "datasets" not in LT.TEST_TIMEOUT_S and "veomni" not in LT.TEST_TIMEOUT_S
