"""``python -m simulator``: JSON shapes, readable tables, and bad input rejected with the setting or line named."""

from __future__ import annotations

import builtins
import fcntl
import json
import math
import os
import re
import subprocess
import sys
import time

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


@pytest.fixture(autouse=True)
def scratch_cache(tmp_path_factory, monkeypatch):
    """cold-start writes its plot to $XDG_CACHE_HOME by default: never the real cache from a test."""
    cache = tmp_path_factory.mktemp("xdg-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache


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


@pytest.fixture
def without_matplotlib(monkeypatch):
    """Every import of matplotlib fails, as on a machine without the plot extra."""
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)


def test_plot_without_matplotlib_says_how_to_install(capsys, tmp_path, without_matplotlib):
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


# ---- cold-start's default output: the main job's answer at a glance ---------------------------------

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAIN_JOB = ["cold-start", "--calibration"]


def _run_main_job(where):
    """The main job's exact command as a user runs it (its own process, stdout and stderr together, in an empty
    working directory), and its --json twin at the two budgets the summary reads (each point is simulated on
    its own, so its figures do not depend on which other budgets run; the twin costs 2/5 of a study)."""
    work, cache = where / "work", where / "cache"
    work.mkdir()
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    t0 = time.perf_counter()
    text = subprocess.run([sys.executable, "-m", "simulator", *MAIN_JOB], cwd=work, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600)
    wall = time.perf_counter() - t0
    doc = subprocess.run([sys.executable, "-m", "simulator", *MAIN_JOB, "--budgets", "512K,1M", "--json"], cwd=work, env=env,
                         capture_output=True, text=True, timeout=600, check=True)
    return {"code": text.returncode, "output": text.stdout, "wall_s": wall, "json": json.loads(doc.stdout),
            "work": str(work), "cache": str(cache), "work_files": sorted(os.listdir(work))}


@pytest.fixture(scope="session")
def main_job(tmp_path_factory):
    """A full study and a part of one (~35 s): once per session. Under xdist every worker would run its own, so the
    workers share one through a lock in the session's common temporary directory."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return _run_main_job(tmp_path_factory.mktemp("main-job"))
    shared = tmp_path_factory.getbasetemp().parent / "main-job"
    shared.mkdir(exist_ok=True)
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / "result.json"
        if not done.exists():
            done.write_text(json.dumps(_run_main_job(shared)))
        return json.loads(done.read_text())


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def test_main_job_default_output_fits_40_lines_and_writes_its_plot_to_the_cache(main_job):
    lines = main_job["output"].splitlines()
    assert main_job["code"] == 0 and len(lines) <= 40, main_job["output"]
    assert main_job["work_files"] == []                       # nothing left in the working directory
    assert sum(ln.startswith("conclusion: ") for ln in lines) == 1
    png = os.path.join(main_job["cache"], "dynbsz-harness", "cold-start.png")
    if _has_matplotlib():
        assert f"plot written to {png} " in main_job["output"]
        with open(png, "rb") as f:
            assert f.read(8) == PNG_MAGIC
    else:
        assert [ln for ln in lines if "no plot written" in ln and "pip install matplotlib" in ln]


def test_main_job_calibration_check_matches_the_json(main_job):
    out, calib = main_job["output"], main_job["json"]["calibration"]
    verdict = "pass" if all(c["ok"] for c in calib) else "FAIL"
    assert (f"calibration against the seed (DP1; goal: ready within 10%, fill within 1.5 points): {verdict}, "
            f"{sum(c['ok'] for c in calib)} of {len(calib)} points within") in out
    for c in calib:
        label = {512 * 1024: "512K", 1024 * 1024: "1M"}[c["budget"]]
        assert re.search(rf"^{label} +{c['gate']} +{c['seed_ready_s']:,.2f} +{c['model_ready_s']:,.2f} .*"
                         rf"{'yes' if c['ok'] else 'NO'}$", out, re.M)


def test_main_job_conclusion_numbers_are_the_json_figures(main_job):
    """Recomputed here from the JSON rows: context_aware against fixed:200 at 512K DP1, and the ranges over
    512K and 1M at every DP size."""
    doc = main_job["json"]
    assert {"study", "config", "rows", "calibration", "summary"} <= set(doc)
    at = {(r["budget"], r["gate"], r["dp"]): r for r in doc["rows"]}
    budgets, dps = (512 * 1024, 1024 * 1024), doc["config"]["dp_sizes"]
    line = next(ln for ln in main_job["output"].splitlines() if ln.startswith("conclusion: "))
    num = r"([\d,]+\.\d+)"
    m = re.fullmatch(rf"conclusion: context_aware cuts the first micro-batch from {num} s \(fixed:200\) to {num} s "
                     rf"at 512K DP1 and costs {num} points of steady fill \({num}% -> {num}%\); over 512K,1M x DP "
                     rf"{','.join(map(str, dps))}: {num}-{num}x sooner, steady-fill cost {num}-{num} points", line)
    assert m, line
    got = [float(x.replace(",", "")) for x in m.groups()]
    base, gate = at[(budgets[0], "fixed:200", 1)], at[(budgets[0], "context_aware", 1)]
    pairs = [(at[(b, "fixed:200", d)], at[(b, "context_aware", d)]) for b in budgets for d in dps]
    speedups = [p["ready_p50_s"] / g["ready_p50_s"] for p, g in pairs]
    costs = [100 * (p["steady_fill"] - g["steady_fill"]) for p, g in pairs]
    want = [base["ready_p50_s"], gate["ready_p50_s"], 100 * (base["steady_fill"] - gate["steady_fill"]),
            100 * base["steady_fill"], 100 * gate["steady_fill"], min(speedups), max(speedups), min(costs),
            max(costs)]
    half_unit = [0.005] * 5 + [0.05] * 2 + [0.005] * 2          # what the printed digits can round away
    assert all(math.isclose(g, w, abs_tol=h + 1e-9) for g, w, h in zip(got, want, half_unit)), (got, want)


def test_main_job_summary_rows_are_the_json_rows(main_job):
    """Every default gate at 512K and 1M appears once; gates on one row have identical DP1 and DP8 figures."""
    doc = main_job["json"]
    at = {(r["budget"], r["gate"], r["dp"]): r for r in doc["rows"]}
    dps = (min(doc["config"]["dp_sizes"]), max(doc["config"]["dp_sizes"]))
    block = main_job["output"].split("\nsummary: ", 1)[1].split("\n\n", 1)[0].splitlines()
    for budget, label in ((512 * 1024, "512K"), (1024 * 1024, "1M")):
        rows = [ln for ln in block if ln.startswith(label + " ")]
        named = [cell.split(" = ") for cell in (re.split(r"\s{2,}", ln)[1] for ln in rows)]
        assert sorted(g for names in named for g in names) == sorted(doc["config"]["gates"])
        for ln, names in zip(rows, named):
            ready = " / ".join(f"{at[(budget, names[0], d)]['ready_p50_s']:,.2f}" for d in dps)
            assert ready in ln
            for other in names[1:]:
                for d in dps:
                    a, b = at[(budget, names[0], d)], at[(budget, other, d)]
                    assert {k: a[k] for k in a if k not in ("gate", "gate_spec", "wall_s")} == \
                           {k: b[k] for k in b if k not in ("gate", "gate_spec", "wall_s")}


def _budget_rows(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if re.match(r"^(512K|1M) ", ln)]


def test_all_prints_every_point_the_summary_does_not(capsys):
    small = ["cold-start", "--budgets", "512K,1M", "--dp", "1,2,8", "--steps", "5", "--no-plot"]
    code, brief, _ = run_cli(capsys, *small)
    assert code == 0 and len(brief.splitlines()) <= 40
    code, full, _ = run_cli(capsys, *small, "--all")
    assert code == 0 and len(_budget_rows(full)) == 2 * 7 * 3 > len(_budget_rows(brief))
    assert "conclusion: context_aware cuts" in full and "plot written" not in full + brief


def test_all_is_in_the_help(capsys):
    with pytest.raises(SystemExit):
        main(["cold-start", "--help"])
    assert "--all" in capsys.readouterr().out


def test_default_plot_goes_to_the_cache_else_home_never_the_working_directory(capsys, tmp_path, monkeypatch,
                                                                             scratch_cache):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    small = ["cold-start", "--budgets", "512K", "--dp", "1", "--gates", "fixed:200,context_aware", "--steps", "2"]
    code, out, _ = run_cli(capsys, *small)
    png = scratch_cache / "dynbsz-harness" / "cold-start.png"
    assert code == 0 and f"plot written to {png} " in out and png.read_bytes()[:8] == PNG_MAGIC
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/not/allowed")     # the XDG spec: ignored
    code, out, _ = run_cli(capsys, *small)
    png = home / ".cache" / "dynbsz-harness" / "cold-start.png"
    assert code == 0 and f"plot written to {png} " in out and png.read_bytes()[:8] == PNG_MAGIC
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]
    code, out, _ = run_cli(capsys, *small, "--plot", tmp_path / "named.png")
    assert code == 0 and f"plot written to {tmp_path / 'named.png'}" in out
    code, out, _ = run_cli(capsys, *small, "--json")                  # JSON writes a plot only when named
    assert code == 0 and "plot" not in json.loads(out)


def test_default_plot_without_matplotlib_is_one_line_not_a_crash(capsys, without_matplotlib, scratch_cache):
    code, out, err = run_cli(capsys, "cold-start", "--budgets", "512K", "--dp", "1", "--steps", "2")
    said = [ln for ln in (out + err).splitlines() if "plot" in ln]
    assert code == 0 and len(said) == 1 and "no plot written" in said[0] and "pip install matplotlib" in said[0]
    assert not (scratch_cache / "dynbsz-harness" / "cold-start.png").exists()


def test_plot_and_no_plot_contradict(capsys, tmp_path):
    code, _, err = run_cli(capsys, "cold-start", "--plot", tmp_path / "x.png", "--no-plot")
    assert code == 2 and "--no-plot" in err


def test_conclusion_follows_the_figures():
    """The conclusion is computed: a seed gate slower and fuller than the baseline reads the other way."""
    from simulator.cli import format_conclusion
    from simulator.study import StudyRow, summarize

    def row(gate, dp, ready, fill):
        return StudyRow(512 * 1024, gate, dp, ready_p50_s=ready, candidates_p50=24, first_fill=fill,
                        steady_fill=fill, steady_fill_min=fill, steps=10)

    rows = [row("fixed:200", 1, 100.0, 0.90), row("context_aware", 1, 200.0, 0.95),
            row("fixed:200", 8, 100.0, 0.90), row("context_aware", 8, 400.0, 0.91)]
    glance = summarize(rows, (512 * 1024,), (1, 8))
    assert format_conclusion(glance) == (
        "conclusion: context_aware raises the first micro-batch from 100.00 s (fixed:200) to 200.00 s at 512K DP1 "
        "and gains 5.00 points of steady fill (90.00% -> 95.00%); over 512K x DP 1,8: 2.0-4.0x later, "
        "steady-fill cost -5.00 to -1.00 points")
    assert [e["gates"] for e in glance["table"]] == [["fixed:200"], ["context_aware"]]
    alone = summarize(rows[:1], (512 * 1024,), (1,))
    assert alone["conclusion"] is None and "context_aware is not among the gates run" in format_conclusion(alone)
