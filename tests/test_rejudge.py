"""ci/rejudge.py: a finding's verdict from its pinned example and its search under the trainers."""

from __future__ import annotations

from ci import rejudge


def _row(cls, trainers, search=None):
    return {"finding": "L0", "property": "stream_resume", "class": cls, "trainers": trainers, "search": search}


def test_a_pin_a_real_trainer_sees_is_a_bug_under_that_trainer():
    v = rejudge.verdict("L", _row("bug", ["lightning-steps", "adversarial"]))
    assert (v["class"], v["trainers"], v["evidence"]) == ("bug", ["lightning-steps"], "pin")


def test_a_pin_outside_any_trainer_loop_stays_a_bug_with_no_trainer():
    v = rejudge.verdict("L", _row("bug", []))
    assert (v["class"], v["trainers"]) == ("bug", [])


def test_an_adversarial_only_pin_with_nothing_found_under_the_trainers_is_a_contract_gap():
    searched = {"status": "pass", "examples": 30, "trainers": [], "message": "", "minimal_example": None}
    assert rejudge.verdict("L", _row("contract gap", ["adversarial"], searched))["class"] == "contract gap"


def test_a_search_failure_the_fixed_target_shares_is_not_the_findings():
    # with every fix applied it fails too: another fault, not evidence about this finding
    searched = {"status": "fail", "examples": 9, "trainers": ["lightning"], "message": "x", "fixed_status": "fail",
                "minimal_example": {"format": "properties.stream_scenario/1"}}
    v = rejudge.verdict("L", _row("contract gap", ["adversarial"], searched))
    assert (v["class"], v["evidence"]) == ("contract gap", "pin")
