"""The regression corpus (tests/regressions/): every saved failure replays as its file expects.

A file found on a mutant must still fail on that mutant (the example still has teeth after
any change to the suite) and pass on dynbsz (no false alarm); one found on VeOmni pins an
upstream bug that dynbsz must not share; a file found on dynbsz itself fails here until the
bug is fixed. The same files also run first, as explicit Hypothesis
examples, in tests/test_packer_properties.py (through the pytest plugin)."""

from __future__ import annotations

from pathlib import Path

import pytest

from properties import corpus
from properties.pytest_plugin import corpus_examples
from properties.runner import Result
from properties.targets import resolve

CORPUS = Path(__file__).parent / "regressions"
#: the suite's own corpus (mutants, the plain torchdata loader) and VeOmni's pins, which dynbsz must pass too
FILES = corpus.files(CORPUS) + corpus.files(Path(__file__).resolve().parent.parent / "studies" / "veomni" / "pins")


def test_the_corpus_holds_mutant_findings_that_prove_something():
    # With no files the parametrized test below would pass vacuously: require the seeded ones.
    entries = [corpus.load(f) for f in FILES]
    mutant_entries = [e for e in entries if e["target"].startswith("mutant:")]
    assert mutant_entries, f"{CORPUS} holds no regression found on a mutant"
    assert all(e["expect"][e["target"]] == "fail" and e["expect"]["dynbsz"] == "pass" for e in mutant_entries)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_regression_file_replays_as_expected(path):
    entry = corpus.load(path)
    if resolve("dynbsz").component(entry["component"]) is not None:
        assert entry["expect"].get("dynbsz") == "pass", "every finding in this project's corpus holds for dynbsz"
    else:  # VeOmni's multi-source mixture: dynbsz has no such component to hold it to
        assert entry["target"] == "veomni" and "dynbsz" not in entry["expect"]
    checked = 0
    for target, expected, result, note in corpus.check_expectations(entry):
        # A user's module not importable here, or VeOmni without its extra: nothing to replay it on.
        if result is None or (result.status == "skip" and target != "dynbsz" and "not importable" in note):
            assert target != "dynbsz", note
            continue
        assert result.status == expected, f"{path.name} on {target}: expected {expected}, got {result.status}: {note}"
        checked += 1
    assert checked >= 1


def test_saving_is_idempotent_and_loads_back(tmp_path):
    example = corpus.load(FILES[0])["example"]
    failure = Result(target="mutant:x", property="budget", component="packer", status="fail", examples=3,
                     message="budget: too many tokens", minimal_example=example, seed=5, blob=None)
    first = corpus.save(failure, tmp_path)
    assert corpus.save(failure, tmp_path) == first and len(list(tmp_path.iterdir())) == 1
    entry = corpus.load(first)
    assert entry["example"] == example and entry["seed"] == 5
    assert entry["expect"] == {"mutant:x": "fail", "dynbsz": "pass"}
    assert corpus.replay_command(first) == f"python -m properties replay {first}"
    own_gate = corpus.entry_for(Result(target="mypkg:gate", property="resume", component="gate:mine", status="fail",
                                       minimal_example=example))
    assert own_gate["expect"] == {"mypkg:gate": "fail"}  # dynbsz has no such component to hold it to
    with pytest.raises(ValueError, match="only a failure"):
        corpus.save(Result(target="dynbsz", property="budget", component="packer", status="pass"), tmp_path)


def test_corrupt_files_are_named_in_the_error(tmp_path):
    (tmp_path / "a.json").write_text("{not json")
    with pytest.raises(corpus.CorpusError, match="a.json: not a readable JSON"):
        corpus.load(tmp_path / "a.json")
    (tmp_path / "b.json").write_text('{"format": "properties.regression/1", "target": "dynbsz"}')
    with pytest.raises(corpus.CorpusError, match="missing field.*property"):
        corpus.load(tmp_path / "b.json")


def test_the_plugin_feeds_matching_files_as_explicit_examples():
    entry = corpus.load(FILES[0])
    examples = corpus_examples(str(CORPUS), entry["property"], entry["component"])
    assert entry["example"] in examples
    assert corpus_examples(str(CORPUS), "no-such-property", entry["component"]) == []
