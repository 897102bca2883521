"""``python -m properties``: check, replay, mutants, fuzz and list; JSON shape, tables, exit codes.

Run in-process through ``main(argv)`` with few examples (the point is the plumbing, not the
search), plus one real subprocess to prove the module entry point and its stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from properties import cli, mutants, suite
from properties.runner import RunSettings

RESULT_KEYS = {"property", "component", "status", "examples", "replay", "minimal_example"}


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def check(capsys, tmp_path, target, *extra) -> tuple[int, dict]:
    code, out, _ = run(capsys, "check", "--target", target, "--json", "--max-examples", "5", "--database", "none",
                       "--corpus", str(tmp_path / "corpus"), *extra)
    return code, json.loads(out)


PACKER_AND_GATES = ("packer", "gate:fixed", "gate:token_aware", "gate:context_aware", "gate:warmup_ramp", "gate:auto")


def test_check_dynbsz_json_passes_and_counts_examples(capsys, tmp_path):
    # The packer and gates here; dynbsz's loader components run the loader properties through the
    # plugin (tests/test_packer_properties.py) and tests/test_properties_loaders.py.
    code, doc = check(capsys, tmp_path, "dynbsz", *[a for c in PACKER_AND_GATES for a in ("--component", c)])
    assert code == 0
    assert doc["target"] == "dynbsz" and doc["profile"] == "ci" and doc["seed"] == 0
    assert doc["results"] and all(RESULT_KEYS <= set(r) for r in doc["results"])
    assert {r["status"] for r in doc["results"]} == {"pass"}
    # the counter in the test function: exactly the examples asked for, on every row
    assert {r["examples"] for r in doc["results"]} == {5}
    assert {r["component"] for r in doc["results"]} == set(PACKER_AND_GATES)
    assert {r["property"] for r in doc["results"]} == {p.name for p in suite.properties()
                                                        if p.kinds & {"packer", "gate"}}
    assert not (tmp_path / "corpus").exists()  # nothing failed, nothing saved


def test_check_a_mutant_fails_saves_and_prints_one_replay_command(capsys, tmp_path):
    code, doc = check(capsys, tmp_path, "mutant:gate-as-capacity", "--max-examples", "60")
    assert code == 1
    by_status = {}
    for r in doc["results"]:
        by_status.setdefault(r["status"], []).append(r)
    assert {r["property"] for r in by_status["fail"]} >= {"gate_rule"}
    assert all(r["message"].startswith("applies to") and "has gate components" in r["message"]
               for r in by_status["skip"])
    for r in by_status["fail"]:
        assert r["replay"].startswith("python -m properties replay ") and Path(r["file"]).exists()
        assert r["minimal_example"]["gate"]["kind"] == "fixed" and r["message"]
        assert r["blob"].startswith("@reproduce_failure(")


def test_table_by_default(capsys, tmp_path):
    code, out, _ = run(capsys, "check", "--target", "mutant:gate-strict-count", "--property", "gate_rule",
                       "--database", "none", "--corpus", str(tmp_path))
    assert code == 1
    assert out.splitlines()[1].split() == ["property", "component", "status", "examples", "reached", "class",
                                           "trainers", "note"]
    # a gate's rule is a promise whatever drives it: a bug, under no trainer loop
    assert "FAIL gate_rule [gate:fixed] (bug; trainers: -)" in out and "replay: python -m properties replay" in out
    assert "0 passed, 1 failed, 0 skipped" in out and "failures: 1 bugs" in out


def test_replay_round_trip(capsys, tmp_path):
    code, doc = check(capsys, tmp_path, "mutant:eager-drain", "--property", "resume", "--max-examples", "60")
    assert code == 1
    path = doc["results"][0]["file"]
    code, out, _ = run(capsys, "replay", path)
    assert code == 1 and out.startswith("FAIL resume [packer] on mutant:eager-drain")
    code, out, _ = run(capsys, "replay", path, "--target", "dynbsz", "--json")
    assert code == 0 and json.loads(out)["status"] == "pass"
    assert json.loads(out)["file"] == str(path)      # the file replayed, not the result's unsaved None
    entry = json.loads(Path(path).read_text())
    assert entry["expect"] == {"mutant:eager-drain": "fail", "dynbsz": "pass"}
    assert entry["example"]["restore_after"]  # the mid-run checkpoint is part of the saved example


def test_replay_bad_files(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    code, _, err = run(capsys, "replay", str(bad))
    assert code == 2 and "format is 'something else'" in err and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "replay", str(tmp_path / "missing.json"))
    assert code == 2 and "no such regression file" in err


@pytest.mark.parametrize("argv, says", [
    (["check", "--target", "nope"], "unknown target 'nope'"),
    (["check", "--target", "mutant:nope"], "unknown mutant 'nope'"),
    (["check", "--target", "json:nothing"], "module 'json' has no attribute 'nothing'"),
    (["check", "--target", "os:getcwd"], "the factory returned str"),
    (["check", "--target", "dynbsz", "--property", "nope"], "--property 'nope' is not a property; allowed values"),
    (["check", "--target", "dynbsz", "--max-examples", "0"], "--max-examples must be > 0"),
    (["check", "--target", "torchdata", "--component", "packer"],
     "--component 'packer' is not a component of torchdata; allowed values: loader:main"),
    (["mutants", "--mutant", "nope"], "unknown mutant 'nope'"),
])
def test_bad_input_exits_2_with_one_line(capsys, argv, says):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith("python -m properties: error: ") and says in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_bad_target_with_json_still_prints_json(capsys):
    code, out, _ = run(capsys, "check", "--target", "nope", "--json")
    assert code == 2 and "unknown target" in json.loads(out)["error"]


def test_mutants_report_json(capsys):
    code, out, _ = run(capsys, "mutants", "--json", "--mutant", "gate-as-capacity", "--mutant", "drain-stops-early")
    doc = json.loads(out)
    assert code == 0 and doc["total"] == 2 and doc["killed"] == 2 and doc["survived"] == []
    for m in doc["mutants"]:
        assert m["status"] == "killed" and m["killed_by"] and m["message"] and m["examples"] > 0
        prop = m["killed_by"][0].split("[")[0]
        assert prop in {p.name for p in suite.properties()}


def test_a_surviving_mutant_fails_the_report(capsys, monkeypatch):
    from dynbsz import GreedyPacker

    equivalent = mutants.Mutant("not-a-bug", "packer", "the real packer under another name", GreedyPacker)
    monkeypatch.setattr(mutants, "MUTANTS", mutants.MUTANTS + (equivalent,))
    code, out, _ = run(capsys, "mutants", "--mutant", "not-a-bug", "--max-examples", "5")
    assert code == 1
    assert "SURVIVED not-a-bug" in out and "0 of 1 mutants killed" in out


def test_fuzz_saves_every_failure_and_stops_on_time(capsys, tmp_path):
    corpus = tmp_path / "fuzzed"
    code, out, err = run(capsys, "fuzz", "--target", "mutant:margin-on-pool-cap", "--minutes", "0.05", "--seed", "3",
                         "--property", "gate_rule", "--corpus", str(corpus),
                         "--database", "none", "--json")
    doc = json.loads(out)
    assert code == 1 and doc["seed"] == 3 and doc["rounds"] >= 1
    failed = [r for r in doc["results"] if r["status"] == "fail"]
    assert [r["property"] for r in failed] == ["gate_rule"]
    assert all(r["replay"] and Path(r["replay"].split()[-1]).exists() for r in failed)
    assert sorted(map(str, corpus.glob("*.json"))) == sorted(doc["saved"])
    assert "fuzzing mutant:margin-on-pool-cap" in err


def test_fuzz_runs_only_the_components_asked_for_and_names_a_wrong_one(capsys, tmp_path):
    code, out, _ = run(capsys, "fuzz", "--target", "dynbsz", "--minutes", "0.02", "--seed", "1", "--property",
                       "minimum_gate", "--component", "gate:fixed", "--corpus", str(tmp_path), "--database", "none",
                       "--json")
    doc = json.loads(out)
    assert code == 0 and {r["component"] for r in doc["results"] if r["status"] != "skip"} == {"gate:fixed"}
    code, _, err = run(capsys, "fuzz", "--target", "dynbsz", "--minutes", "0.02", "--component", "gate:fixd")
    assert code == 2 and "--component 'gate:fixd' is not a component of dynbsz; allowed values:" in err


def test_fuzz_rounds_grow_and_respect_the_clock(tmp_path):
    from properties.fuzz import fuzz
    from properties.targets import resolve

    reads = iter(range(0, 10_000))
    clock = lambda: 2.0 * next(reads)  # noqa: E731 - every read of the clock is 2 "seconds" later
    report = fuzz(resolve("dynbsz"), minutes=1.0, seed=7, corpus_dir=tmp_path, only=["minimum_gate"],
                  profile="dev", clock=clock)
    assert not report.failed and not list(tmp_path.iterdir())
    assert [p.component for p in report.pairs] == list(PACKER_AND_GATES)
    # every pair ran in round one, a second round started, and nothing ran once the minute was up
    assert report.rounds >= 2 and all(p.rounds >= 1 and p.examples >= 10 for p in report.pairs)
    assert sum(p.seconds for p in report.pairs) <= 60.0


def test_fuzz_rounds_stop_a_campaign_after_a_fixed_amount_of_work_however_it_is_sharded(tmp_path, capsys):
    from properties.fuzz import fuzz
    from properties.fuzz_workers import merge
    from properties.targets import resolve

    kw = dict(minutes=60.0, seed=5, corpus_dir=tmp_path, only=["minimum_gate", "ready_idempotent"], profile="dev",
              database=None, rounds=1)
    whole = fuzz(resolve("dynbsz"), **kw)
    assert whole.rounds == 1 and all(p.rounds == 1 for p in whole.pairs)
    halves = merge([fuzz(resolve("dynbsz"), shard=(i, 2), **kw) for i in range(2)])
    examples = lambda r: sorted((p.property, p.component, p.examples) for p in r.pairs)  # noqa: E731
    assert examples(halves) == examples(whole) and halves.rounds == 1
    two = fuzz(resolve("dynbsz"), **{**kw, "rounds": 2, "only": ["minimum_gate"]})
    assert two.rounds == 2 and all(p.rounds == 2 for p in two.pairs)
    with pytest.raises(ValueError, match="rounds=0"):
        fuzz(resolve("dynbsz"), **{**kw, "rounds": 0})
    code, _, err = run(capsys, "fuzz", "--target", "dynbsz", "--minutes", "1", "--rounds", "0")
    assert code == 2 and "--rounds must be > 0, got 0" in err


def test_list_names_targets_properties_and_mutants(capsys):
    code, out, _ = run(capsys, "list", "--json")
    doc = json.loads(out)
    assert code == 0 and "dynbsz" in doc["targets"] and doc["profiles"] == ["ci", "dev", "fuzz"]
    assert len(doc["mutants"]) == len(mutants.MUTANTS) >= 12


def test_module_entry_point_keeps_stdout_json_only(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "properties", "check", "--target", "veomni", "--json",
                           "--property", "warmup", "--max-examples", "3", "--database", "none",
                           "--corpus", str(tmp_path)], capture_output=True, text=True, timeout=300)
    doc = json.loads(proc.stdout)  # VeOmni's import-time logging must not land here
    assert proc.returncode == 0 and doc["target"] == "veomni"
    assert doc["results"][0]["status"] in ("pass", "skip")


def test_run_settings_reject_bad_values():
    with pytest.raises(ValueError, match="allowed values: ci, dev, fuzz"):
        RunSettings(profile="fast")
    with pytest.raises(ValueError, match="max_examples must be >= 1"):
        RunSettings(max_examples=0)


# ---- check leaves the checkout alone ----------------------------------------------------------------

def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_check_saves_to_a_scratch_directory_and_leaves_its_working_directory_alone(tmp_path):
    checkout, cache = tmp_path / "checkout", tmp_path / "cache"
    checkout.mkdir()
    (checkout / "kept.txt").write_text("untouched\n")
    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "DYNBSZ_HYPOTHESIS_DB"}
    env.update(XDG_CACHE_HOME=str(cache), PYTHONPATH=str(root))
    argv = [sys.executable, "-m", "properties", "check", "--target", "mutant:gate-strict-count", "--property",
            "gate_rule", "--json"]
    first = subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 1, first.stderr
    failures = cache / "dynbsz-harness" / "failures"
    (row,) = json.loads(first.stdout)["results"]
    assert Path(row["file"]).parent == failures and f"saved in {failures}" in first.stderr
    assert _tree(checkout) == {"kept.txt": b"untouched\n"}   # no corpus file, no .hypothesis/, nothing
    saved = _tree(failures)
    stamp = Path(row["file"]).stat().st_mtime_ns
    # The same failure again (the example database replays it): the file is not rewritten.
    again = subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 1 and json.loads(again.stdout)["results"][0]["file"] == row["file"]
    assert _tree(failures) == saved and Path(row["file"]).stat().st_mtime_ns == stamp
    assert _tree(checkout) == {"kept.txt": b"untouched\n"}


def test_saving_an_unchanged_failure_keeps_the_file_byte_identical(tmp_path):
    from properties import corpus
    from properties.runner import Result

    example = {"format": "properties.packer_example/1", "config": {"budget": 4}, "gate": {"kind": "fixed"},
               "stream": [[0, 1, None, "text"]], "restore_after": []}
    first = Result(target="mutant:x", property="budget", component="packer", status="fail", message="one",
                   minimal_example=example, seed=1, blob="@reproduce_failure('a', b'1')")
    path = corpus.save(first, tmp_path)
    before = path.read_bytes()
    # Another run finds the same failure with another blob, seed and message: same file, same bytes.
    path2 = corpus.save(replace(first, message="two", seed=9, blob="@reproduce_failure('a', b'2')"), tmp_path)
    assert path2 == path and path.read_bytes() == before
    # A different example is another file.
    other = corpus.save(replace(first, minimal_example={**example, "restore_after": [0]}), tmp_path)
    assert other != path and len(list(tmp_path.iterdir())) == 2


def test_check_json_reports_what_share_of_examples_reached_each_property_s_state(capsys, tmp_path):
    # The ci profile, seed 0, on dynbsz's packer and gates: every property reaches the state it is
    # about (gate opened, multi-sample micro-batch, restore with samples buffered, ...) in at least
    # half of its examples, and says so per row.
    code, doc = check(capsys, tmp_path, "dynbsz", "--max-examples", "60",
                      *[a for c in PACKER_AND_GATES for a in ("--component", c)])
    assert code == 0
    for r in doc["results"]:
        cov = r["coverage"]
        assert cov["interesting"] and cov["of"] == r["examples"] == 60, r
        # The lowest share is 0.633 (progress[gate:context_aware], 38 of 60) whatever ran before in the process:
        # the runner keeps Hypothesis from drawing constants out of the modules loaded (runner.hermetic_search,
        # tests/test_properties_seed.py); before that, the examples of one seed depended on them (29 of 60 once
        # in a full suite run, 44 alone, for minimum_gate[gate:context_aware]).
        assert cov["share"] >= 0.5, f"{r['property']}[{r['component']}] reached {cov['interesting']!r} in {cov}"
        assert cov["events"][cov["interesting"]] == cov["reached"]


def test_fuzz_saves_to_the_scratch_directory_by_default(capsys, tmp_path, monkeypatch):
    cwd, cache = tmp_path / "checkout", tmp_path / "cache"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    code, out, err = run(capsys, "fuzz", "--target", "mutant:margin-on-pool-cap", "--minutes", "0.05", "--seed", "3",
                         "--property", "gate_rule", "--database", "none", "--json")
    doc = json.loads(out)
    failures = cache / "dynbsz-harness" / "failures"
    assert code == 1 and doc["saved"] and all(Path(p).parent == failures for p in doc["saved"])
    assert f"failures go to {failures}" in err
    assert not list(cwd.iterdir())


def test_the_example_database_replays_a_failure_first_in_the_next_run(capsys, tmp_path):
    """Hypothesis's @seed switches the database off on the settings it finds; a seeded search must keep it."""
    db = tmp_path / "db"
    args = ("check", "--target", "mutant:budget-off-by-one", "--property", "budget", "--database", str(db), "--json",
            "--corpus", str(tmp_path / "corpus"))
    code, out, _ = run(capsys, *args)
    first = json.loads(out)["results"][0]
    assert code == 1 and first["status"] == "fail"
    assert any(p.is_file() for p in db.rglob("*")), "nothing was written to the example database"
    code, out, _ = run(capsys, *args)
    again = json.loads(out)["results"][0]
    assert code == 1 and again["message"] == first["message"]
    assert again["examples"] < first["examples"] / 4, (again["examples"], first["examples"])
