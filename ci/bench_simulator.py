"""Simulator speed, as figures (never as timed asserts in unit tests).

    python -m ci.bench_simulator [--repeat 3] [--full] [--samples 1000000]

Prints one JSON report:

* ``cold_start_point``: one point of the cold-start study (1M budget, fixed:24, DP1, first
  micro-batch plus 500 steady-state micro-batches); goal: under 1 s. Also the heaviest
  point of the default table (2M, fixed:200, DP8).
* ``million_samples``: 1,000,000 samples (batch size 1: a million tasks) through the
  loader model with 8 workers, in_order True and False; goal: under 10 s.
* ``million_samples_packed``: the same stream through main-process dynamic batching
  (the real GreedyPacker, 8 workers): the simulator plus the packer's own cost.
* ``seed_run``: the seed's measured 5,063.80 s run (1M budget, buffer 200, DP1, first
  micro-batch): simulated seconds per wall second.
* ``policy_point``: one point of ``simulator policy``'s default grid (seed stream, 256K, DP8: 3 scored
  and 3 advice streams, ~97 training runs to 24 h), wall and CPU seconds.
* ``full_study`` (with ``--full``): the whole default cold-start table.
* ``policy_grid`` (with ``--policy-grid``): the whole default ``simulator policy`` grid (60 points) on
  ``processes:2``, wall and CPU seconds (this process and its workers); issue 27's goal: 180 CPU-s.
  With ``--baseline REF`` (a git commit) instead: ``python -m simulator policy --json`` run as the CLI
  runs it, by this checkout and by REF's files (``git archive``, in a temporary directory), one after
  the other, each's wall and CPU seconds, their ratios, and whether the two JSON documents are
  identical (all but the ``seconds`` field); ``--policy-args`` narrows the grid of both
  (e.g. ``"--budgets 128K,1M --dp 1,2"``).

Inputs (traces) are built before the clock starts; each figure is the best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ci.cpu import cpu_seconds
from dynbsz import FixedGate, PackerConfig
from simulator.config import LoaderModelConfig
from simulator.dynbatch import run_rank
from simulator.loader_model import simulate
from simulator.policy import PolicyConfig, PolicyStudy
from simulator.study import SEED_READY_S, Study, StudyConfig
from simulator.workloads import TEXT_VIDEO

K = 1024
SEED_MEASURED_RUN_S = SEED_READY_S[(1024 * K, "fixed:200")]


def best(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


ROOT = Path(__file__).resolve().parents[1]


def _policy_cli(cwd: Path, extra: list[str]) -> tuple[float, float, dict]:
    """``python -m simulator policy --json`` with ``cwd``'s packages first on the path: wall, CPU, the document."""
    c0, t0 = cpu_seconds(), time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "simulator", "policy", "--json", "--no-progress", *extra], cwd=cwd,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(cwd)})
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    if out.returncode:
        raise SystemExit(f"policy in {cwd} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    doc = json.loads(out.stdout)
    doc.pop("seconds", None)
    return wall, cpu, doc


def policy_vs_baseline(ref: str, extra: list[str]) -> dict:
    """The policy grid by this checkout and by commit ``ref``, one after the other on the same machine."""
    with tempfile.TemporaryDirectory() as d:
        archive = subprocess.run(["git", "archive", "--format=tar", ref], cwd=ROOT, capture_output=True)
        if archive.returncode:
            raise SystemExit(f"git archive {ref}: {archive.stderr.decode()[-500:]}")
        subprocess.run(["tar", "-x", "-C", d], input=archive.stdout, check=True)
        base_wall, base_cpu, base_doc = _policy_cli(Path(d), extra)
        wall, cpu, doc = _policy_cli(ROOT, extra)
    return {"benchmark": "simulator policy, this checkout vs a baseline commit", "python": platform.python_version(),
            "cpus": os.cpu_count(), "policy_args": extra, "baseline": ref,
            "baseline_wall_s": base_wall, "baseline_cpu_s": base_cpu, "wall_s": wall, "cpu_s": cpu,
            "cpu_ratio": base_cpu / cpu, "wall_ratio": base_wall / wall, "identical_json": doc == base_doc,
            "goal_cpu_s": 180.0 if not extra else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ci.bench_simulator", description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--full", action="store_true", help="also time the whole default cold-start table")
    ap.add_argument("--policy-grid", action="store_true",
                    help="also time the whole default policy grid (about 10-25 CPU-minutes)")
    ap.add_argument("--baseline", metavar="REF",
                    help="with --policy-grid: run the policy CLI of this checkout and of git commit REF, side by side")
    ap.add_argument("--policy-args", default="", metavar="ARGS",
                    help="with --baseline: options for both policy runs, e.g. '--budgets 128K,1M --dp 1,2'")
    args = ap.parse_args(argv)
    if args.baseline and not args.policy_grid:
        ap.error("--baseline REF compares policy grids: add --policy-grid")
    if args.policy_grid and args.baseline:
        json.dump(policy_vs_baseline(args.baseline, shlex.split(args.policy_args)), sys.stdout, indent=1)
        print()
        return 0
    report: dict = {"benchmark": "simulator", "python": platform.python_version(), "cpus": os.cpu_count(),
                    "repeat": args.repeat}

    study = Study(StudyConfig())
    study.point(1024 * K, "fixed:24", 1)                    # warm the stream cache (input preparation)
    study.point(2048 * K, "fixed:200", 8)
    wall, row = best(lambda: study.point(1024 * K, "fixed:24", 1), args.repeat)
    heavy, hrow = best(lambda: study.point(2048 * K, "fixed:200", 8), args.repeat)
    report["cold_start_point"] = {"point": "1M fixed:24 dp1, 500 steady steps", "wall_s": wall, "goal_s": 1.0,
                                  "met": wall < 1.0, "heaviest_point": "2M fixed:200 dp8, 500 steady steps",
                                  "heaviest_wall_s": heavy, "ready_p50_s": row.ready_p50_s}

    trace = TEXT_VIDEO.sample(args.samples, 0)
    mm = {}
    for in_order in (True, False):
        cfg = LoaderModelConfig(num_workers=8, prefetch_factor=2, batch_size=1, in_order=in_order)
        w, run = best(lambda: simulate(trace, cfg), args.repeat)
        mm[f"in_order_{in_order}"] = {"wall_s": w, "samples_per_wall_s": args.samples / w,
                                      "simulated_s": run.makespan_s, "met": w < 10.0}
    report["million_samples"] = {"samples": args.samples, "workers": 8, "goal_s": 10.0, **mm}

    cfg = LoaderModelConfig(num_workers=8, prefetch_factor=2, batch_size=1, in_order=True)
    w, rank = best(lambda: run_rank(trace, PackerConfig(32 * K), FixedGate(200), cfg), max(1, args.repeat - 2))
    report["million_samples_packed"] = {"samples": args.samples, "budget": 32 * K, "gate": "fixed:200",
                                        "wall_s": w, "micro_batches": len(rank), "samples_per_wall_s": args.samples / w}

    seed_study = Study(StudyConfig(steps=0))
    seed_study.point(1024 * K, "fixed:200", 1)
    w, srow = best(lambda: seed_study.point(1024 * K, "fixed:200", 1), args.repeat)
    report["seed_run"] = {"point": "1M fixed:200 dp1, first micro-batch", "seed_measured_s": SEED_MEASURED_RUN_S,
                          "simulated_s": srow.ready_p50_s, "wall_s": w,
                          "simulated_s_per_wall_s": srow.ready_p50_s / w,
                          "seed_measured_s_per_wall_s": SEED_MEASURED_RUN_S / w}

    cfg = PolicyConfig()
    c0 = cpu_seconds()
    w, _ = best(lambda: PolicyStudy(cfg).point(256 * K, 8, "seed"), 1)
    report["policy_point"] = {"point": "seed 256K dp8, default streams and searches", "wall_s": w,
                              "cpu_s": cpu_seconds() - c0}

    if args.policy_grid:
        c0, t0 = cpu_seconds(), time.perf_counter()
        PolicyStudy(cfg).run(executor="processes:2")
        report["policy_grid"] = {"points": len(PolicyStudy(cfg).points()), "executor": "processes:2",
                                 "wall_s": time.perf_counter() - t0, "cpu_s": cpu_seconds() - c0,
                                 "goal_cpu_s": 180.0}

    if args.full:
        t0 = time.perf_counter()
        rows = Study(StudyConfig()).run()
        report["full_study"] = {"points": len(rows), "wall_s": time.perf_counter() - t0}

    json.dump(report, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
