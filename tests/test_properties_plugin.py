"""The pytest plugin from another project's point of view: a fresh directory with one test module
that imports ``test_dynbsz_properties``, run by a separate pytest process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

USER_GATE = '''
from dynbsz.gates import covers_budget


class MyFixed:
    def ready(self, view):
        return view.num_samples >= 2 and covers_budget(view)

    def spec(self):
        return {"kind": "fixed", "buffer_size": 2, "policy": "fixed"}


def my_gate():
    return MyFixed()
'''

SUITE = "from properties.pytest_plugin import test_dynbsz_properties  # noqa: F401\n"
PINNED = SUITE + "import pytest\npytestmark = pytest.mark.dynbsz_target('userg:my_gate')\n"


def pytest_in(project, *args, verbosity="-q"):
    env = {**os.environ, "PYTHONPATH": str(project), "DYNBSZ_PROFILE": "dev"}
    env.pop("DYNBSZ_TARGET", None)
    return subprocess.run([sys.executable, "-m", "pytest", verbosity, "-rs", "-p", "no:cacheprovider", *args],
                          cwd=project, env=env, capture_output=True, text=True, timeout=300)


def make_project(tmp_path):
    (tmp_path / "userg.py").write_text(textwrap.dedent(USER_GATE))
    (tmp_path / "test_suite.py").write_text(SUITE)
    (tmp_path / "test_pinned.py").write_text(PINNED)
    return tmp_path


def test_option_and_marker_targets_run_fail_with_a_replay_command_and_save(tmp_path):
    project = make_project(tmp_path)
    corpus = tmp_path / "corpus"
    proc = pytest_in(project, "--dynbsz-target", "mutant:gate-strict-count", "--dynbsz-corpus", str(corpus),
                     verbosity="-v")
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    # the mutant (via the option) fails its gate rule; the user's gate (via the marker) passes it
    assert "test_suite.py::test_dynbsz_properties[mutant:gate-strict-count-gate_rule-gate:fixed] FAILED" in out
    assert "test_pinned.py::test_dynbsz_properties[userg:my_gate-gate_rule-gate:fixed] PASSED" in out
    assert "gate_rule [gate:fixed] fails on mutant:gate-strict-count" in out
    saved = list(corpus.glob("gate_rule-gate_fixed-mutant_gate-strict-count-*.json"))
    assert len(saved) == 1 and f"replay: python -m properties replay {saved[0]}" in out
    assert f"saved: {saved[0]}" in out
    assert "applies to packer components" in out  # packer-only properties are reported as skipped
    # the same failure again: the file is the corpus's already, and the report says so instead of "saved"
    again = pytest_in(project, "test_suite.py", "--dynbsz-target", "mutant:gate-strict-count", "--dynbsz-corpus",
                      str(corpus)).stdout
    assert f"already in the corpus: {saved[0]}" in again and f"saved: {saved[0]}" not in again


def test_bad_target_is_a_one_line_usage_error(tmp_path):
    project = make_project(tmp_path)
    proc = pytest_in(project, "test_suite.py", "--dynbsz-target", "userg:nothing_here")
    assert proc.returncode == 4  # pytest's usage error
    assert "--dynbsz-target: target 'userg:nothing_here': module 'userg' has no attribute 'nothing_here'" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    (project / "test_pinned.py").write_text(SUITE + "import pytest\npytestmark = pytest.mark.dynbsz_target('nope')\n")
    proc = pytest_in(project, "test_pinned.py")
    assert proc.returncode == 2  # a collection error in that module, with the one line
    assert "pytest.mark.dynbsz_target: unknown target 'nope'" in proc.stdout
    assert "Traceback" not in proc.stdout


def test_without_a_target_the_suite_skips_and_says_how_to_give_one(tmp_path):
    project = make_project(tmp_path)
    proc = pytest_in(project, "test_suite.py")
    assert proc.returncode == 0 and "1 skipped" in proc.stdout
    assert "pass --dynbsz-target MODULE:FACTORY" in proc.stdout
