"""A pytest plugin of ``ci.library_tests``: each test's outcome, one JSON line each, and a per-test time limit.

``ci.library_tests`` copies this file next to the library's tests and runs pytest with
``-p library_tests_timeout --lt-log FILE [--lt-timeout S] [--lt-grace S]``; it imports pytest and the standard
library only (pytest-timeout is not a dependency). A test's limit is ``@pytest.mark.timeout(S)`` where the test
has one (the mark pytest-timeout reads: litdata's tests carry it), else ``--lt-timeout``; none without either.

* The limit covers the test's setup, call and teardown. When it passes, SIGALRM fails the test where it runs
  (``pytest.fail``: a ``BaseException``, which no ``except Exception`` in the library swallows) and the test is
  logged "timed out".
* A test that does not end ``--lt-grace`` seconds after that (blocked in C code, the signal blocked, the exception
  swallowed and the wait resumed) is logged "timed out" by a watchdog thread, which dumps every thread's stack to
  stderr and ends the process (``os._exit``): the caller runs the tests not yet logged again.

The log's lines: ``{"nodeid", "name", "outcome"}`` per test (outcome: passed, failed, skipped or "timed out";
name: the JUnit XML ``classname::name`` the reports use), and ``{"finished": exitstatus}`` when the session ends.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import threading

import pytest

TIMED_OUT = "timed out"
#: the exit status of a run the watchdog ended
HUNG_EXIT = 70


def pytest_addoption(parser):
    group = parser.getgroup("library-tests", "ci.library_tests: outcomes and per-test time limits")
    group.addoption("--lt-log", default=None, help="append each test's outcome to this file (JSON lines)")
    group.addoption("--lt-timeout", type=float, default=None, help="seconds a test may take (a timeout mark wins)")
    group.addoption("--lt-grace", type=float, default=30.0,
                    help="seconds after the limit before a test that ignores it ends the process")


def pytest_configure(config):
    # pytest-timeout's mark, which the plugin reads; registering it keeps pytest from warning about it
    config.addinivalue_line("markers", "timeout(seconds): this test's time limit (ci.library_tests)")
    config.pluginmanager.register(_Plugin(config), "library-tests-timeout")


def junit_name(nodeid: str) -> str:
    """``tests/a/test_b.py::TestC::test_d[x]`` -> ``tests.a.test_b.TestC::test_d[x]`` (as JUnit XML names it)."""
    parts = nodeid.split("::")
    module = parts[0][:-3] if parts[0].endswith(".py") else parts[0]
    return "::".join((".".join([module.replace("/", "."), *parts[1:-1]]), parts[-1])) if len(parts) > 1 else module


class _Log:
    def __init__(self, path: str | None):
        self.path = path
        self.lock = threading.Lock()

    def write(self, record: dict) -> None:
        if not self.path:
            return
        with self.lock, open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())


class _Plugin:
    def __init__(self, config):
        self.log = _Log(config.getoption("--lt-log"))
        self.default = config.getoption("--lt-timeout")
        self.grace = config.getoption("--lt-grace")
        self.phases: dict[str, str] = {}     # nodeid -> the outcome so far
        self.fired: set[str] = set()         # the tests whose limit passed
        self.logged: set[str] = set()

    def limit(self, item) -> float | None:
        mark = item.get_closest_marker("timeout")
        if mark is not None:
            seconds = mark.args[0] if mark.args else mark.kwargs.get("timeout")
            if seconds is not None:
                return float(seconds) if float(seconds) > 0 else None
        return self.default

    def record(self, nodeid: str, outcome: str) -> None:
        if nodeid in self.logged:
            return
        self.logged.add(nodeid)
        self.log.write({"nodeid": nodeid, "name": junit_name(nodeid), "outcome": outcome})

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        seconds = self.limit(item)
        if not seconds or threading.current_thread() is not threading.main_thread():
            yield
            return
        nodeid = item.nodeid

        def on_alarm(signum, frame):
            self.fired.add(nodeid)
            pytest.fail(f"{TIMED_OUT} after {seconds:g} s (ci.library_tests' per-test limit)", pytrace=False)

        def hung():
            # the alarm did not end the test: log it, show where every thread is, and end the process
            self.fired.add(nodeid)
            self.record(nodeid, TIMED_OUT)
            sys.stderr.write(f"\n{nodeid}: {TIMED_OUT} after {seconds:g} s and did not stop in {self.grace:g} s "
                             "more: ending the run (the tests after it run again)\n")
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
            sys.stderr.flush()
            os._exit(HUNG_EXIT)

        watchdog = threading.Timer(seconds + self.grace, hung)
        watchdog.daemon = True
        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        watchdog.start()
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            watchdog.cancel()

    def pytest_runtest_logreport(self, report):
        # a test failed if any of its phases did (a setup error and a skipped call is an error), else skipped if
        # one was (a skip mark skips the setup; an xfail is a skip, as JUnit XML has it), else passed
        now = "failed" if report.failed else "skipped" if report.skipped else "passed"
        before = self.phases.get(report.nodeid, "passed")
        self.phases[report.nodeid] = "failed" if "failed" in (before, now) else \
            "skipped" if "skipped" in (before, now) else "passed"

    def pytest_runtest_logfinish(self, nodeid, location):
        outcome = self.phases.pop(nodeid, "passed")
        self.record(nodeid, TIMED_OUT if nodeid in self.fired else outcome)

    def pytest_collectreport(self, report):
        if report.failed:   # a file that does not import: one failed entry, as JUnit XML reports it
            self.record(report.nodeid or "<collection>", "failed")

    def pytest_sessionfinish(self, session, exitstatus):
        self.log.write({"finished": int(exitstatus)})
        self.exitstatus = int(exitstatus)

    def pytest_unconfigure(self, config):
        # every test is logged: a process that then hangs on its way out (a library's threads or child processes)
        # ends after the grace period, with the session's status
        status = getattr(self, "exitstatus", HUNG_EXIT)
        watchdog = threading.Timer(self.grace, os._exit, (status,))
        watchdog.daemon = True
        watchdog.start()
