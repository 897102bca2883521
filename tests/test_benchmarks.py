"""The benchmark commands run end to end and report what they claim (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys


def test_bench_loader_json_reports_every_mode():
    out = subprocess.run([sys.executable, "-m", "dynbsz", "bench-loader", "--json", "--samples", "40", "--workers", "2",
                          "--repeat", "1", "--lookahead", "6"], capture_output=True, text=True, check=True, timeout=300)
    report = json.loads(out.stdout)
    modes = [r["mode"] for r in report["rows"]]
    assert modes == ["torchdata in_order=True", "torchdata in_order=False", "dynbsz in_order=True",
                     "dynbsz exactly-once in_order=False", "dynbsz balanced in_order=True, exact costs",
                     "dynbsz balanced in_order=True, estimated costs", "dynbsz in_order=True, reorder_buffer=64",
                     "torchdata in_order=False, snapshot_every_n_steps=0"]
    for r in report["rows"]:
        assert r["exactly_once"] is True
        assert r["samples"] == 40 and r["seconds"] > 0
        # Sleeping samples cannot be delivered faster than the physical limit allows.
        assert 0 < r["fraction_of_limit"] <= 1.0
        # Only the balanced rows move samples, and never farther than the lookahead.
        assert (r["max_displacement"] is None) == ("balanced" not in r["mode"])
        assert r["max_displacement"] is None or 0 < r["max_displacement"] <= 6
        assert (r["reorder_peak"] is None) == ("reorder_buffer" not in r["mode"])


def test_bench_loader_runs_any_trace(tmp_path):
    from dynbsz.workload import SourceSpec, Workload

    path = tmp_path / "trace.csv"
    Workload((SourceSpec("a", 0.5, median_tokens=100, cost_base_s=0.001),
              SourceSpec("b", 0.5, median_tokens=900, cost_base_s=0.004))).sample(30, 2).to_csv(path)
    out = subprocess.run([sys.executable, "-m", "dynbsz", "bench-loader", "--json", "--trace", str(path), "--workers",
                          "2", "--repeat", "1", "--cost-noise", "0", "--lookahead", "4"],
                         capture_output=True, text=True, check=True, timeout=300)
    report = json.loads(out.stdout)
    assert report["trace"] == str(path) and report["cost_noise"] == 0
    assert all(r["samples"] == 30 and r["exactly_once"] for r in report["rows"])
    assert max(r["max_displacement"] or 0 for r in report["rows"]) <= 4
    bad = subprocess.run([sys.executable, "-m", "dynbsz", "bench-loader", "--trace", str(tmp_path / "missing.csv")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--trace" in bad.stderr


def test_bench_packer_json_without_veomni():
    out = subprocess.run([sys.executable, "-m", "dynbsz", "bench", "--json", "--samples", "2000", "--repeat", "1"],
                         capture_output=True, text=True, check=True, timeout=300)
    rows = json.loads(out.stdout)["rows"]
    assert len(rows) == 6 and all(r["veomni_s"] is None and r["micro_batches"] > 0 for r in rows)


def test_bench_packer_takes_buffer_sizes():
    out = subprocess.run([sys.executable, "-m", "dynbsz", "bench", "--json", "--samples", "500", "--repeat", "1",
                          "--buffers", "7,3000"], capture_output=True, text=True, check=True, timeout=300)
    rows = json.loads(out.stdout)["rows"]
    assert [r["buffer"] for r in rows] == [7, 3000, 7, 3000]
    bad = subprocess.run([sys.executable, "-m", "dynbsz", "bench", "--buffers", "200,0"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "--buffers" in bad.stderr and "positive integers" in bad.stderr


def test_bench_rejects_bad_arguments():
    out = subprocess.run([sys.executable, "-m", "dynbsz", "bench-loader", "--workers", "0"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and "--workers" in out.stderr


def test_bench_epoch_start_reports_both_orders_against_the_whole_stream_peer(capsys):
    from ci import bench_epoch_start

    assert bench_epoch_start.main(["--samples", "3000", "--repeat", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = {r["order"]: r for r in report["rows"]}
    assert set(rows) == {"sampler order", "balanced order"}
    assert all(r["seconds_to_first_step"] > 0 and r["peer_seconds"] > 0 for r in rows.values())
    # Allocations, not time: the peer holds every key of the epoch, the lazy sequencer a window.
    sampler = rows["sampler order"]
    assert sampler["peak_bytes"] < sampler["peer_peak_bytes"]


def test_bench_floor_replays_each_run_and_refuses_a_replay_that_cuts_otherwise():
    import gc

    import pytest

    from ci.bench_floor import measure, recording_runs, replay
    from simulator import training
    from simulator.policy import PolicyConfig
    from simulator.training import TRAINING_WORKLOADS, Trainer, TrainingConfig

    budget = 512 * 1024
    original = training.Lockstep.advance
    rec = {"runs": [], "recording_s": 0.0}
    trainer = Trainer(TrainingConfig(workload=TRAINING_WORKLOADS["seed_8w"], horizon_s=3600.0))
    with recording_runs(rec):
        for _ in range(3):      # one entry per run, even where a finished run's id() is reused by the next
            trainer.run(budget, "fixed:2", 2)
            gc.collect()        # a run is a reference cycle (its feeds' generators): free it now
        trainer.start(budget, "fixed:4", 2).advance(1800.0).advance()    # advanced twice, recorded once
    assert training.Lockstep.advance is original            # the recording is undone on exit
    assert [r[0] for r in rec["runs"]] == ["fixed:2"] * 3 + ["fixed:4"]
    gate, b, ranks = rec["runs"][0]
    seconds, puts, cuts = replay(gate, b, ranks)
    assert seconds > 0 and cuts == sum(g for _, _, g in ranks) > 0 and puts > cuts
    with pytest.raises(RuntimeError, match="the replay cut"):
        replay("fixed:200", b, ranks)                       # another gate cuts less in the same hour

    report = measure(PolicyConfig(budgets=(budget,), dp_sizes=(1,), workloads=("seed",), hours=(1.0,),
                                  fixed_search=(4, 24), gates=("fixed:200",), streams=1))
    (point,) = report["points"]
    assert point["runs"] >= 4 and point["cuts"] > 0 and point["samples_put"] >= point["cuts"]
    assert 0 < report["dynbsz_cpu_s"] and 0 < report["dynbsz_share"] < 1


def test_bench_floor_bad_input_is_one_line_naming_the_setting(capsys):
    import pytest

    from ci.bench_floor import main

    for argv, setting in ((["--budgets", "12Q"], "--budgets"), (["--workloads", "nope"], "workload")):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2 and setting in capsys.readouterr().err
