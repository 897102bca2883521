"""``python -m simulator``: JSON shapes, readable tables, and bad input rejected with the setting or line named."""

from __future__ import annotations

import builtins
import json
import subprocess
import sys

import numpy as np
import pytest

from dynbsz.workload import Trace
from simulator.cli import main, parse_budget
from simulator.fidelity import FIDELITY_WORKLOAD


@pytest.fixture
def trace_file(tmp_path):
    path = tmp_path / "trace.csv"
    FIDELITY_WORKLOAD.sample(30, 4).to_csv(path)
    return path


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_run_json_lists_batches_in_delivery_order(capsys, trace_file):
    code, out, _ = run_cli(capsys, "run", "--trace", trace_file, "--workers", 3, "--prefetch-factor", 2,
                           "--batch-size", 4, "--in-order", "false", "--step-time", 0.01, "--json")
    assert code == 0
    doc = json.loads(out)
    batches = doc["batches"]
    assert set(batches[0]) == {"index", "worker", "sample_ids", "delivered_s"}
    assert [b["delivered_s"] for b in batches] == sorted(b["delivered_s"] for b in batches)
    assert sorted(i for b in batches for i in b["sample_ids"]) == list(range(30))
    assert doc["makespan_s"] == batches[-1]["delivered_s"]
    trace = Trace.read_csv(trace_file)
    assert doc["makespan_s"] >= trace.total_cost_s() / 3


def test_run_in_order_true_epochs_and_persistent(capsys, trace_file):
    code, out, _ = run_cli(capsys, "run", "--trace", trace_file, "--workers", 2, "--batch-size", 3, "--in-order",
                           "true", "--epochs", 2, "--persistent", "--startup", 0.2, "--json")
    batches = json.loads(out)["batches"]
    assert code == 0 and [b["epoch"] for b in batches] == [0] * 10 + [1] * 10
    assert [b["index"] for b in batches] == list(range(10)) * 2
    assert batches[0]["delivered_s"] >= 0.2


def test_run_table_by_default(capsys, trace_file):
    code, out, _ = run_cli(capsys, "run", "--trace", trace_file, "--workers", 2)
    assert code == 0
    assert "makespan (s)" in out and "physical bound" in out and "delivered_s" in out


@pytest.mark.parametrize("body, needle", [
    ("id,tokens,source\n0,5,text\n", "line 1: missing column(s) cost_s"),
    ("id,tokens,cost_s,source\n0,5,0.1,text\n1,5,-1,text\n", "line 3: cost_s must be a finite number >= 0"),
    ("id,tokens,cost_s,source\n0,5.5,0.1,text\n", "line 2: tokens must be a non-negative integer"),
])
def test_malformed_trace_is_rejected_with_the_line(capsys, tmp_path, body, needle):
    path = tmp_path / "bad.csv"
    path.write_text(body)
    code, out, err = run_cli(capsys, "run", "--trace", path)
    assert code == 2 and needle in err and not out


@pytest.mark.parametrize("args, needle", [
    (["--workers", "0", "--prefetch-factor", "2"], "prefetch_factor=2 needs num_workers >= 1"),
    (["--workers", "0", "--persistent"], "persistent_workers=True needs num_workers >= 1"),
    (["--workers", "-2"], "num_workers must be an integer >= 0"),
    (["--batch-size", "0"], "batch_size"),
])
def test_impossible_loader_settings_exit_2_with_the_fix(capsys, trace_file, args, needle):
    code, _, err = run_cli(capsys, "run", "--trace", trace_file, *args)
    assert code == 2 and needle in err


def test_missing_trace_file(capsys, tmp_path):
    code, _, err = run_cli(capsys, "run", "--trace", tmp_path / "nope.csv")
    assert code == 2 and "nope.csv" in err


def test_in_order_flag_must_be_a_boolean(capsys, trace_file):
    with pytest.raises(SystemExit):
        main(["run", "--trace", str(trace_file), "--in-order", "maybe"])
    assert "expected true or false" in capsys.readouterr().err


def test_budgets_parse():
    assert parse_budget("512K") == 512 * 1024 and parse_budget("1m") == 1 << 20 and parse_budget("4096") == 4096


def test_cold_start_json_small(capsys):
    code, out, _ = run_cli(capsys, "cold-start", "--budgets", "512K,128K", "--gates", "fixed:24,context_aware",
                           "--dp", "1,2", "--steps", "20", "--json", "--no-progress")
    rows = json.loads(out)["rows"]
    assert code == 0 and len(rows) == 8
    failed = [r for r in rows if r["error"]]
    assert {(r["budget"], r["gate"]) for r in failed} == {(128 * 1024, "context_aware")}
    ok = [r for r in rows if not r["error"]]
    assert all(0 < r["first_fill"] <= 1 and 0 < r["steady_fill"] <= 1 and r["ready_p50_s"] > 0 for r in ok)


def test_cold_start_table_with_calibration(capsys):
    code, out, _ = run_cli(capsys, "cold-start", "--budgets", "1M", "--gates", "fixed:24", "--dp", "1",
                           "--steps", "5", "--calibration")
    assert code == 0 and "ready p50 (s)" in out and "calibration against the seed" in out
    assert "NO" not in out.split("calibration against the seed")[1]


def test_sweep_user_gate(capsys, tmp_path, monkeypatch):
    (tmp_path / "cli_gates_sim.py").write_text("from dynbsz import FixedGate\n\ndef make(budget):\n"
                                               "    return FixedGate(12)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, _ = run_cli(capsys, "sweep", "--gate", "cli_gates_sim:make", "--baseline", "--budgets", "512K",
                           "--dp", "1", "--steps", "5", "--json")
    rows = json.loads(out)["rows"]
    assert code == 0 and [r["gate"] for r in rows] == ["fixed:200", "fixed:24", "token_aware", "cli_gates_sim:make"]
    assert rows[-1]["candidates_p50"] >= 12 and rows[-1]["gate_spec"]["buffer_size"] == 12
    sys.modules.pop("cli_gates_sim", None)


def test_sweep_rejects_a_missing_module(capsys):
    code, _, err = run_cli(capsys, "sweep", "--gate", "no_such_mod_qq:f", "--budgets", "512K", "--dp", "1")
    assert code == 2 and "cannot import module 'no_such_mod_qq'" in err


def test_skew_in_order_false_skews_and_displaces(capsys):
    code, out, _ = run_cli(capsys, "skew", "--samples", 3000, "--workers", 4, "--window", 20, "--json")
    res = {r["in_order"]: r for r in json.loads(out)["results"]}
    assert code == 0
    assert res[True]["displacement"]["max"] == 0 and res[True]["shift_vs_sampler"] == 0
    assert res[False]["displacement"]["max"] > 0 and res[False]["shift_vs_sampler"] > 0
    assert res[False]["makespan_s"] <= res[True]["makespan_s"] * 1.001


def test_skew_balanced_rows_beside_in_order(capsys):
    code, out, _ = run_cli(capsys, "skew", "--workload", "bench_mix", "--samples", 2000, "--workers", 4,
                           "--step-time", 0, "--lookahead", 12, "--cost-noise", 0.3, "--json")
    doc = json.loads(out)
    assert code == 0 and [r["mode"] for r in doc["results"]] == ["in_order=True", "in_order=False"]
    assert [r["mode"] for r in doc["balanced"]] == ["balanced, exact costs", "balanced, estimated costs"]
    assert doc["lookahead"] == 12 and doc["cost_noise"] == 0.3 and doc["lookahead_ok"]
    plain = doc["results"][0]
    for r in doc["balanced"]:
        assert r["in_order"] and r["order"] == "balanced" and r["lookahead"] == 12
        assert 0 < r["displacement"]["max"] <= 12
        assert r["fraction_of_limit"] > plain["fraction_of_limit"] + 0.15
        assert {"shift_vs_sampler", "skew", "window_shares", "limit_s"} <= set(r)
    assert all(0 < r["fraction_of_limit"] <= 1 for r in doc["results"] + doc["balanced"])


def test_skew_table_and_no_balanced(capsys):
    code, out, _ = run_cli(capsys, "skew", "--samples", 300)
    assert code == 0 and "balanced exact" in out and "balanced estimated" in out and "of limit" in out
    assert "<= lookahead 16" in out
    code, out, _ = run_cli(capsys, "skew", "--samples", 300, "--no-balanced", "--json")
    assert code == 0 and json.loads(out)["balanced"] == []
    code, out, _ = run_cli(capsys, "skew", "--samples", 300, "--workers", 0)
    assert code == 0 and "balanced: not run, it needs workers" in out


@pytest.mark.parametrize("args, needle", [(["--lookahead", "-1"], "lookahead"), (["--cost-noise", "-1"], "sigma"),
                                          (["--workload", "nope"], "'bench_mix'")])
def test_skew_bad_balanced_settings_exit_2(capsys, args, needle):
    code, _, err = run_cli(capsys, "skew", "--samples", 100, *args)
    assert code == 2 and needle in err


def test_plot_needs_png_suffix(capsys, tmp_path):
    code, _, err = run_cli(capsys, "skew", "--samples", 200, "--plot", tmp_path / "x.jpg")
    assert code == 2 and ".png" in err


def test_plot_without_matplotlib_says_how_to_install(capsys, tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    code, _, err = run_cli(capsys, "skew", "--samples", 200, "--plot", tmp_path / "s.png")
    assert code == 2 and "pip install matplotlib" in err


def test_plots_are_written(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    skew_png, cs_png = tmp_path / "skew.png", tmp_path / "cs.png"
    assert run_cli(capsys, "skew", "--samples", 500, "--plot", skew_png)[0] == 0
    assert run_cli(capsys, "cold-start", "--budgets", "512K", "--gates", "fixed:8,fixed:24", "--dp", "1,2",
                   "--steps", "5", "--plot", cs_png)[0] == 0
    for p in (skew_png, cs_png):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_module_entry_point(tmp_path):
    path = tmp_path / "t.csv"
    FIDELITY_WORKLOAD.sample(6, 0).to_csv(path)
    out = subprocess.run([sys.executable, "-m", "simulator", "run", "--trace", str(path), "--workers", "1", "--json"],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    assert len(json.loads(out)["batches"]) == 6
    assert np.isfinite(json.loads(out)["makespan_s"])


def test_cold_start_on_a_trace_file(capsys, tmp_path):
    path = tmp_path / "long.csv"
    from simulator.workloads import SEED_TEXT

    SEED_TEXT.sample(300, 1).to_csv(path)
    code, out, _ = run_cli(capsys, "cold-start", "--trace", path, "--budgets", "512K", "--gates", "fixed:24",
                           "--dp", "1,2", "--steps", "500", "--json")
    rows = json.loads(out)["rows"]
    assert code == 0 and all(r["error"] is None for r in rows)
    assert all(0 < r["steps"] < 500 for r in rows)        # the trace runs out: measured as far as it goes


def test_budget_below_smallest_sample_with_overlong_raise(capsys, tmp_path):
    code, _, err = run_cli(capsys, "cold-start", "--budgets", "8", "--no-truncate", "--overlong", "raise",
                           "--gates", "fixed:24", "--dp", "1")
    assert code == 2 and "below the smallest possible sample" in err and "budget=8" in err


def test_fidelity_command_reports_the_worst_case(capsys):
    code, out, _ = run_cli(capsys, "fidelity", "--quick", "--overhead-ms", "0.3", "--tolerance-ms", "15", "--json")
    doc = json.loads(out)
    s = doc["summary"]
    assert len(doc["cases"]) == s["cases"] == 6 and s["balanced_cases"] == 1 and s["reorder_cases"] == 1
    assert {"worst_makespan_error", "worst_near_tie_gap_s", "in_order_true_exact", "balanced_exact",
            "worst_balanced_makespan_error", "reorder_exact", "worst_reorder_makespan_error"} <= set(s)
    assert s["in_order_true_exact"] and s["balanced_exact"] and s["reorder_exact"] and (code == 0) == s["all_ok"]
    assert {"real_fraction_of_limit", "model_fraction_of_limit"} <= set(doc["cases"][-2])
    assert doc["cases"][-2]["case"]["order"] == "balanced" and doc["cases"][-1]["case"]["reorder_buffer"]
