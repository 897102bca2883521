"""``fuzz --workers N`` (properties/fuzz_workers.py): the pairs dealt out by position, one report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from properties import cli
from properties.fuzz import FuzzReport, PairStats, fuzz
from properties.fuzz_workers import merge
from properties.targets import resolve

ROOT = Path(__file__).resolve().parent.parent


def _pairs(report: FuzzReport) -> list[tuple[str, str]]:
    return [(p.property, p.component) for p in report.pairs]


def test_shards_partition_the_pairs_and_only_shard_zero_reports_the_skips():
    target = resolve("mutant:eager-drain")
    whole = fuzz(target, 0.0, seed=0, corpus_dir=None, database=None)   # no time: the plan, nothing run
    shards = [fuzz(target, 0.0, seed=0, corpus_dir=None, database=None, shard=(i, 3)) for i in range(3)]
    got = [pair for s in shards for pair in _pairs(s)]
    assert sorted(got) == sorted(_pairs(whole)) and len(got) == len(set(got))
    assert all(s.pairs for s in shards)
    assert [len(s.skipped) for s in shards] == [len(whole.skipped), 0, 0]


def test_merge_keeps_every_pair_and_reports_each_workers_rate():
    a = FuzzReport("t", 5, 1.0, rounds=3, pairs=[PairStats("p", "c", examples=40, seconds=2.0)], saved=["x.json"])
    b = FuzzReport("t", 5, 1.0, rounds=2, pairs=[PairStats("q", "c", examples=10, seconds=0.0)])
    m = merge([a, b])
    assert _pairs(m) == [("p", "c"), ("q", "c")] and m.rounds == 3 and m.saved == ["x.json"]
    assert [(w["worker"], w["examples"], w["examples_per_s"]) for w in m.workers] == [(0, 40, 20.0), (1, 10, 0.0)]


def test_two_workers_run_one_campaign_into_one_database(tmp_path, capsys):
    db, saved = tmp_path / "db", tmp_path / "corpus"
    code = cli.main(["fuzz", "--target", "mutant:eager-drain", "--minutes", "0.1", "--workers", "2", "--seed", "3",
                     "--database", str(db), "--corpus", str(saved), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert [w["worker"] for w in doc["workers"]] == [0, 1]
    assert all(w["examples"] > 0 for w in doc["workers"])
    run = [r for r in doc["results"] if r["status"] != "skip"]
    assert sum(w["pairs"] for w in doc["workers"]) == len(run)
    assert any(db.iterdir())   # both processes wrote the one example database
    assert code == (1 if any(r["status"] == "fail" for r in run) else 0)


def test_workers_must_be_positive(capsys):
    assert cli.main(["fuzz", "--target", "dynbsz", "--minutes", "1", "--workers", "0"]) == 2
    assert "--workers must be > 0" in capsys.readouterr().err


PROBE = """
import multiprocessing
from properties.fuzz_workers import worker_pool


def start_method():   # a function of this script: a bound method of multiprocessing's would pickle our context
    return multiprocessing.get_start_method()


if __name__ == "__main__":
    with worker_pool(2) as pool:
        seen = {pool.submit(start_method).result() for _ in range(4)}
    print(sorted(seen), multiprocessing.get_start_method())
"""


def test_worker_processes_start_dataloader_workers_as_this_process_does(tmp_path):
    # A spawned process makes spawn its own default. Asked from a script's main module, as `python -m properties`
    # runs (pytest's own process may have fixed its default already), the pool's processes must answer with ours.
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    seen, ours = done.stdout.rsplit(" ", 1)
    assert seen == f"['{ours.strip()}']", done.stdout
