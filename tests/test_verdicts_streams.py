"""Stream failures classified under the trainer models (properties/verdicts.py) on litdata 0.2.76: the
audit's own example (once L3: a checkpoint at an epoch's last batch restores into the next epoch) is no
failure once the component declares litdata's convention (``epoch_end``: that epoch is over, as Lightning
and litdata's own tests have it), and a component declaring torchdata's instead fails it; L1's fault (a
resumed iterator that the trainer abandons leaves the loader resuming) is a bug, because Lightning abandons every epoch's iterator after
len() batches and so loses the epoch after any mid-epoch resume. Skips without the litdata extra."""

from __future__ import annotations

from dataclasses import replace

import pytest

from properties import stream_suite as SS
from properties import suite, verdicts
from properties.errors import PropertyViolation
from properties.runner import replay_example
from properties.stream_scenarios import StreamScenario, encode_stream_scenario
from properties.targets import resolve
from studies.litdata import adapter as LT

pytestmark = pytest.mark.skipif(not LT.available(), reason=LT.MISSING)

#: 4 samples, one chunk each, no workers: killed right after the first batch of epoch 0
L1_UNDER_LIGHTNING = StreamScenario(sources=(4,), chunk_size=1, num_workers=0, batch_size=1, epochs=2,
                                    checkpoints=(1,))


#: the audit's example (once pinned as L3): 6 samples, chunks of 2, no workers; stream_resume adds checkpoints at
#: epoch 0's last batch (6) and epoch 1's first (7)
AUDITS_EXAMPLE = StreamScenario(sources=(6,), chunk_size=2, num_workers=0, batch_size=1, epochs=2, checkpoints=(2,))


def test_the_audits_example_passes_under_litdatas_own_epoch_end_convention():
    # litdata restores a state saved after an epoch's last batch as that epoch over (its own test says so), and a
    # trainer that knows the epoch ended moves on: the run is the uninterrupted one
    assert LT.component().epoch_end(AUDITS_EXAMPLE)[0] == "closed"
    SS.stream_resume(LT.component(), AUDITS_EXAMPLE)


def test_a_loader_that_moves_on_but_declares_torchdatas_convention_fails_the_resume_property():
    # the broken variant: litdata as released, declared "open" (the trainer re-enters the restored epoch, whose
    # iter() litdata starts as the next one): stream_resume alone catches the mismatch
    misdeclared = replace(LT.component(), epoch_end=lambda sc: ("open", ""))
    with pytest.raises(PropertyViolation, match=r"batch 6 differs.*uninterrupted \(1, \(0,\)\) vs resumed \(0, "):
        SS.stream_resume(misdeclared, AUDITS_EXAMPLE)


def test_l1_is_a_bug_under_lightning_with_step_checkpoints():
    with pytest.raises(PropertyViolation, match="under trainer 'lightning-steps'.*8 steps uninterrupted vs 4"):
        SS.check_trainer_resume(LT.component(), L1_UNDER_LIGHTNING, "lightning-steps")
    # ModelCheckpoint's default (epoch ends) never loads the loader's state: nothing to resume wrongly
    SS.check_trainer_resume(LT.component(), L1_UNDER_LIGHTNING, "lightning")


def l1_under_lightning_here() -> tuple[str, str | None, list[str], str]:
    """stream_trainer_resume on L1's Lightning example, on the litdata this process imports, classified."""
    target = resolve("litdata")
    result = replay_example(target, suite.get("stream_trainer_resume"), "stream:litdata",
                            encode_stream_scenario(L1_UNDER_LIGHTNING))
    got = verdicts.classify(target, result)
    return got.status, got.verdict, list(got.trainers), got.message


def test_l1s_fix_is_what_lightning_needs():
    from studies.litdata.fixes import LITDATA

    here = "tests.test_verdicts_streams:l1_under_lightning_here"
    fixed = LITDATA.call(None, here)
    assert fixed[0] == "pass", fixed
    assert LITDATA.call(LITDATA.without("L1"), here)[:3] == ["fail", "bug", ["lightning-steps"]]
