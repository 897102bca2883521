"""Findings decided under a trainer model (studies/litdata/report.md and
studies/hf_datasets/report.md, "Verdicts under the trainers"): where a finding's pinned example
needed the adversarial schedule, a search under the library's trainers found another example. Each is a
corpus entry in studies/*/pins/trainers/ (written by ``python -m ci.rejudge --markdown FILE
--pin DIR``), replayed three ways under the trainers its component declares:

* on the library as released it fails (a strict expected failure: a bug a real trainer sees) or, for a
  latent requirement, passes;
* with every proposed fix it passes;
* with every fix but the finding's own it fails: that fix is what the trainer needs (a finding with no
  fix patched, its ``expect`` saying so, fails with every fix too).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from properties import corpus
from tests.stream_pins import fixes, replays_with_every_fix

pytestmark = pytest.mark.studies   # the findings' evidence: a job of its own (docs/guide/tests.md)

STUDIES = Path(__file__).resolve().parent.parent / "studies"
PINS = [STUDIES / "litdata" / "pins" / "trainers", STUDIES / "hf_datasets" / "pins" / "trainers"]
FAMILY = {"L": "litdata", "H": "hf"}


@functools.cache
def _with_every_fix(family: str) -> dict[str, object]:
    """The family's pins replayed with every diff, once per test process: pin file name -> Result."""
    named = [(name, e) for name, e in _entries() if FAMILY[e["finding"][0]] == family]
    return replays_with_every_fix(fixes(family).patch_set, named, 1)


def _entries():
    return [(p.name, corpus.load(p)) for d in PINS for p in corpus.files(d)]


def _available(entry) -> bool:
    from studies.hf_datasets import adapter as hf_iterable
    from studies.litdata import adapter as litdata_target

    lib = litdata_target if entry["finding"].startswith("L") else hf_iterable
    return lib.available()


@pytest.mark.parametrize("name,entry", _entries(), ids=[n for n, _ in _entries()])
def test_a_finding_decided_under_a_trainer_replays_as_decided(name, entry):
    if not _available(entry):
        pytest.skip("the library's extra is not installed (bash ci/install.sh --litdata --hf)")
    finding, family = entry["finding"], FAMILY[entry["finding"][0]]
    released = corpus.replay_until(entry, "fail", 3)
    fixed_target = [t for t in entry["expect"] if t != entry["target"]][0]
    assert fixed_target == fixes(family).patch_set.target, fixed_target
    fixed = _with_every_fix(family)[name]
    if entry["expect"][fixed_target] == "fail":   # a finding with no fix patched: it fails with every fix too
        assert fixed.status == "fail", f"{name}: passes with the other fixes, but no fix is proposed for it"
        assert released.status == "fail", released
        pytest.xfail(f"{finding} under {', '.join(entry['trainers'])} (no fix patched): {released.message}")
    assert fixed.status == "pass", f"{name}: fails with every proposed fix: {fixed.message}"
    patch_set = fixes(family).patch_set
    other = corpus.replay_with_fixes(entry, patch_set, patch_set.without(finding))
    assert other.status == "fail", f"{name}: passes without {finding}'s fix: it is not what the trainer needs"
    if entry["class"] == "latent":
        assert released.status == "pass", f"{name}: a latent requirement fails on the release: {released.message}"
        return
    if released.status == "pass":
        pytest.fail(f"[XPASS(strict)] {name} passes on {entry['target']} as released: fixed upstream? update the pin")
    assert released.status == "fail", released
    pytest.xfail(f"{finding} under {', '.join(entry['trainers'])}: {released.message}")
