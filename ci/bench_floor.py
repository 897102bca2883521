"""How much of the policy grid's cost is dynbsz's own packing: the floor no faster simulator can go below.

    python -m ci.bench_floor [--budgets 128K,1M] [--dp 1,8] [--workloads seed_8w]

The simulator calls dynbsz's ``pack`` / ``GreedyPacker`` / gate for every packing decision (issue 27
part 3 forbids re-implementing them), so a policy grid costs at least what those calls cost. This runs
``PolicyStudy.point`` for each point in this process, CPU-timed, and records every training run's
hand-outs per DP rank (which trace rows, in which fetched items; the gate and the budget). Then it
replays each rank's hand-outs through ``dynbsz.packing.pack`` on a fresh packer and gate, alone,
CPU-timed: the same puts, ``ready()`` calls and cuts as in the run (the packer sees only what was put
and when it was asked, never a time), so the replay's cost is dynbsz's share of the run. Runs
abandoned early (pruned ramps, a stream doubled) count up to where they stopped, as they did in the study.

One JSON report: per point, the study's CPU seconds and the replay's, the samples put and the cuts;
totals, and the floor (dynbsz's share) as a fraction of the study's cost. A benchmark, never a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import weakref
from contextlib import contextmanager

from dynbsz import GreedyPacker, PackerConfig
from dynbsz.packing import pack
from simulator import training
from simulator.cli import parse_budget, parse_list
from simulator.gatespec import parse_gate
from simulator.policy import DEFAULT_BUDGETS, DEFAULT_DP, DEFAULT_WORKLOADS, PolicyConfig, PolicyStudy


@contextmanager
def recording_runs(into: dict):
    """While active, every ``Lockstep`` records, after each ``advance``, what its ranks were handed out
    (``into["runs"]``, a list with one entry per run: a run advanced hour by hour is recorded once, as far as
    it went) and the CPU time the recording took (``into["recording_s"]``)."""
    original = training.Lockstep.advance
    # run -> its entry; weak, so that a finished run is freed (an id() would be reused by the next run's object)
    entry_of: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def advance(self, until_s=float("inf")):
        out = original(self, until_s)
        t0 = time.process_time()
        record = (self.gate, self.budget, [(f.model.result(), f.trace, _gated(f.cuts)) for f in self.feeds])
        runs = into["runs"]
        k = entry_of.setdefault(self, len(runs))
        if k == len(runs):
            runs.append(record)
        else:
            runs[k] = record
        into["recording_s"] += time.process_time() - t0    # not the study's: subtracted from its time
        return out

    training.Lockstep.advance = advance
    try:
        yield into
    finally:
        training.Lockstep.advance = original


def _gated(cuts: list) -> int:
    """The cuts the gate allowed (those before an end-of-stream drain): what the replay must reproduce."""
    n = len(cuts)
    while n and cuts[n - 1].drained:
        n -= 1
    return n


def replay(gate: str, budget: int, ranks) -> tuple[float, int, int]:
    """dynbsz's cost of one run: each rank's hand-outs (``ranks``: (LoaderRun, Trace, gated cuts) per rank)
    through ``pack`` on a fresh packer and gate; (CPU s, puts, cuts). Refuses a replay that does not cut
    what the run cut: it would be the cost of another workload."""
    spec = parse_gate(gate)
    jobs = []
    for run, trace, _ in ranks:
        rows = trace.put_rows
        flat, offsets = run.samples.tolist(), run.offsets.tolist()
        items = [[rows[i] for i in flat[a:b]] for a, b in zip(offsets, offsets[1:])]
        jobs.append(items)
    counts = []
    t0 = time.process_time()
    for items in jobs:
        packer = GreedyPacker(PackerConfig(budget), spec.gate_for(budget))
        n = 0
        for _ in pack(packer, items, drain=False):
            n += 1
        counts.append(n)
    dt = time.process_time() - t0
    expected = [g for _, _, g in ranks]
    if counts != expected:
        raise RuntimeError(f"{gate} at {budget}: the replay cut {counts} micro-batches per rank, the run {expected}")
    cuts = sum(counts)
    puts = sum(len(item) for items in jobs for item in items)
    return dt, puts, cuts


def measure(config: PolicyConfig) -> dict:
    study = PolicyStudy(config)
    points = []
    for budget, dp, workload in study.points():
        rec: dict = {"runs": [], "recording_s": 0.0}
        with recording_runs(rec):
            t0 = time.process_time()
            study.point(budget, dp, workload)
            study_s = time.process_time() - t0 - rec["recording_s"]
        floor_s = puts = cuts = 0
        for gate, b, ranks in rec["runs"]:
            dt, p, c = replay(gate, b, ranks)
            floor_s, puts, cuts = floor_s + dt, puts + p, cuts + c
        points.append({"budget": budget, "dp": dp, "workload": workload, "runs": len(rec["runs"]),
                       "study_cpu_s": study_s, "dynbsz_cpu_s": floor_s, "samples_put": puts, "cuts": cuts})
        print(f"{workload} {budget} dp{dp}: study {study_s:.1f} CPU-s, dynbsz alone {floor_s:.1f}", file=sys.stderr)
    study_total = sum(p["study_cpu_s"] for p in points)
    floor_total = sum(p["dynbsz_cpu_s"] for p in points)
    return {"benchmark": "policy grid: dynbsz's share (the floor)", "python": platform.python_version(),
            "cpus": os.cpu_count(), "points": points, "study_cpu_s": study_total, "dynbsz_cpu_s": floor_total,
            "dynbsz_share": floor_total / study_total if study_total else None,
            "samples_put": sum(p["samples_put"] for p in points), "cuts": sum(p["cuts"] for p in points),
            "goal_cpu_s": 180.0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ci.bench_floor", description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", type=parse_list(parse_budget), default=DEFAULT_BUDGETS,
                    help="comma-separated token budgets (K/M suffixes), default: the policy grid's")
    ap.add_argument("--dp", type=parse_list(int), default=DEFAULT_DP, help="comma-separated DP sizes")
    ap.add_argument("--workloads", type=parse_list(str), default=DEFAULT_WORKLOADS,
                    help="comma-separated training workloads")
    args = ap.parse_args(argv)
    try:
        config = PolicyConfig(budgets=tuple(args.budgets), dp_sizes=tuple(args.dp), workloads=tuple(args.workloads))
    except ValueError as e:
        ap.error(str(e))
    json.dump(measure(config), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
