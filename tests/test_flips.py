"""ci/flips.py reads JUnit XML outcomes and reports a test whose outcome differed between runs."""

from __future__ import annotations

from collections import Counter

from ci import flips


def _xml(tmp_path, name, cases):
    body = "".join(f'<testcase classname="t" name="{n}">{inner}</testcase>' for n, inner in cases)
    path = tmp_path / name
    path.write_text(f'<?xml version="1.0"?><testsuites><testsuite>{body}</testsuite></testsuites>')
    return path


def test_outcomes_read_pass_fail_skip_and_xfail(tmp_path):
    path = _xml(tmp_path, "a.xml", [("a", ""), ("b", '<failure message="x"/>'),
                                    ("c", '<skipped type="pytest.skip" message="no extra"/>'),
                                    ("d", '<skipped type="pytest.xfail" message="a bug"/>')])
    assert flips.outcomes(path) == {"t::a": "passed", "t::b": "failed", "t::c": "skipped", "t::d": "xfailed"}


def test_a_test_whose_outcome_changed_is_a_flip_and_a_steady_one_is_not():
    runs = [{"t::a": "passed", "t::b": "xfailed"}, {"t::a": "passed", "t::b": "failed"}, {"t::a": "passed"}]
    assert flips.flips(runs) == {"t::b": Counter({"xfailed": 1, "failed": 1, "absent": 1})}
    assert flips.flips(runs[:1] * 3) == {}


def test_a_failure_s_message_is_kept_to_diagnose_the_flip(tmp_path):
    path = _xml(tmp_path, "a.xml", [("a", ""), ("b", '<failure message="assert 1 == 2   in\n run"/>'),
                                    ("c", '<error message="">Traceback: boom</error>')])
    assert flips.failure_messages(path) == {"t::b": "assert 1 == 2 in run", "t::c": "Traceback: boom"}
