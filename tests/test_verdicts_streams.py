"""Stream failures classified under the trainer models (properties/verdicts.py) on litdata 0.2.76: the
audit's own example (L3, a checkpoint at an epoch's last batch restores into the next epoch) is a
contract gap, since Lightning moves on after that batch; L1's fault (a resumed iterator that the trainer
abandons leaves the loader resuming) is a bug, because Lightning abandons every epoch's iterator after
len() batches and so loses the epoch after any mid-epoch resume. Skips without the litdata extra."""

from __future__ import annotations

import pytest

from properties import stream_suite as SS
from properties import suite, verdicts
from properties.errors import PropertyViolation
from properties.runner import replay_example
from properties.stream_scenarios import StreamScenario, encode_stream_scenario
from properties.targets import litdata_target as LT
from properties.targets import resolve

pytestmark = pytest.mark.skipif(not LT.available(), reason=LT.MISSING)

#: 4 samples, one chunk each, no workers: killed right after the first batch of epoch 0
L1_UNDER_LIGHTNING = StreamScenario(sources=(4,), chunk_size=1, num_workers=0, batch_size=1, epochs=2,
                                    checkpoints=(1,))


def test_the_audits_example_l3_is_a_contract_gap_lightning_never_sees():
    from properties import corpus
    from properties.stream_fixes import pinned

    entry = corpus.load(pinned("L")["L3"])
    got = verdicts.classify(resolve("litdata"), corpus.replay(entry, "litdata"))
    assert got.status == "fail"
    assert (got.verdict, got.trainers) == ("contract gap", ("adversarial",))


def test_l1_is_a_bug_under_lightning_with_step_checkpoints():
    with pytest.raises(PropertyViolation, match="under trainer 'lightning-steps'.*8 steps uninterrupted vs 4"):
        SS.check_trainer_resume(LT.component(), L1_UNDER_LIGHTNING, "lightning-steps")
    # ModelCheckpoint's default (epoch ends) never loads the loader's state: nothing to resume wrongly
    SS.check_trainer_resume(LT.component(), L1_UNDER_LIGHTNING, "lightning")


def test_l1s_fix_is_what_lightning_needs():
    from properties.stream_fixes import ALL_LITDATA, with_fixes

    prop = suite.get("stream_trainer_resume")
    encoded = encode_stream_scenario(L1_UNDER_LIGHTNING)
    fixed = replay_example(resolve("properties.stream_fixes:litdata_fixed"), prop, "stream:litdata", encoded)
    assert fixed.status == "pass", fixed.message
    without = with_fixes("litdata", [f for f in ALL_LITDATA if f != "L1"])
    got = verdicts.classify(without, replay_example(without, prop, "stream:litdata", encoded))
    assert (got.status, got.verdict, got.trainers) == ("fail", "bug", ("lightning-steps",))
