"""The loader state machine is the suite's ``loader_stateful`` property (properties/loader_machine.py):
a Hypothesis ``RuleBasedStateMachine`` interleaving steps, checkpoint-and-restore into a fresh
loader, dropped iterators and epoch changes, run through the suite with its seed and profile on
every loader target's components (dynbsz's run in tests/test_packer_properties.py through the
plugin; the mutants in tests/test_packer_mutants.py). This is its thin pytest entry: its teeth
against the planted ledger bug, seeded, and its runs as replayable data.

The ledger bug (mutant ``ledger-without-ahead``: a restore forgets the positions delivered ahead
of the watermark out of order) is caught at seed 0 here; ``DYNBSZ_STATEFUL_SEEDS=1`` runs seeds
1-20 too (measured: every one of seeds 0-29 catches it in the ci profile, again after the machine's
rule stopped reading where the loader's epoch ran out, 2026-12-02).
"""

from __future__ import annotations

import json
import os

import pytest

from properties import suite
from properties.loader_machine import replay
from properties.runner import RunSettings, replay_example, run_property
from properties.scenarios import LoaderProgram, LoaderScenario, decode_loader_program, encode_loader_program
from properties.targets import resolve

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

STATEFUL = suite.get("loader_stateful")
SEEDS = range(21) if os.environ.get("DYNBSZ_STATEFUL_SEEDS") else range(1)


def search(target: str, seed: int):
    t = resolve(target)
    (component,) = [c for c in t.components if c.kind == "loader"][:1]
    return run_property(t, STATEFUL, component, RunSettings(profile="ci", seed=seed, database=None, shrink=False))


@pytest.mark.parametrize("seed", SEEDS)
def test_the_machine_alone_catches_the_planted_ledger_bug(seed):
    result = search("mutant:ledger-without-ahead", seed)
    assert result.status == "fail", f"seed {seed}: the machine missed ledger-without-ahead in {result.examples} runs"
    assert result.minimal_example is not None and result.minimal_example["format"] == "properties.loader_program/1"


def test_a_deterministic_failure_is_a_program_that_replays_on_the_mutant_and_passes_on_dynbsz():
    # A checkpoint one step short renumbers every step after a restore: no timing involved.
    result = search("mutant:step-off-by-one", 0)
    assert result.status == "fail" and not result.flaky, result.message
    program = decode_loader_program(json.loads(json.dumps(result.minimal_example)))
    assert "restore" in program.ops
    again = replay_example(resolve("mutant:step-off-by-one"), STATEFUL, "loader:main", result.minimal_example)
    assert again.status == "fail" and "differs from the uninterrupted run" in again.message
    assert replay_example(resolve("dynbsz"), STATEFUL, "loader:main", result.minimal_example).status == "pass"


def test_programs_are_data():
    sc = LoaderScenario(num_samples=10, epochs=3)
    program = LoaderProgram(sc, ("step", "restore", "step", "drop", "step"))
    assert decode_loader_program(encode_loader_program(program)) == program
    with pytest.raises(ValueError, match="unknown loader program operation 'jump'"):
        LoaderProgram(sc, ("jump",))
    # dynbsz runs a hand-written program through every operation, in both runtimes
    for component in ("loader:main", "loader:worker"):
        c = resolve("dynbsz").component(component)
        replay(c, LoaderProgram(LoaderScenario(num_samples=12, epochs=3, runtime=c.runtime, num_workers=2,
                                               prefetch_factor=2, in_order=component == "loader:main"),
                                ("step", "restore", "step", "drop", "step", "step", "step", "step", "step", "step",
                                 "next_epoch", "step", "restore")))
