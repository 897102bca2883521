"""``properties fuzz --workers``: the same campaign in 1 and N worker processes, side by side, as a figure.

    python -m ci.bench_fuzz [--target dynbsz] [--rounds 1] [--minutes 30] [--workers 2] [--seed 7]

Runs one campaign (target, seed, no example database) once per worker count, in that order, each as ``python -m
properties fuzz ... --json`` in a subprocess, and prints one JSON report: per run the examples, the wall seconds,
the CPU seconds of the run (its processes and their DataLoader workers, ``ci.cpu``; this process only waits), examples per wall
second and per CPU second, and the ratio of the N-worker rate to the 1-worker one.

By default the work is fixed: ``--rounds 1`` stops each campaign after its first round (``--minutes`` is only a
cap), and a round runs the same examples with the same seeds however the pairs are dealt out, so the two runs do
the same work and the ratio is of throughput alone (the runs' ``examples`` must be equal; the report says whether
they are). ``--rounds 0`` measures time-budgeted campaigns of ``--minutes`` instead: there a one-minute campaign
may not finish its first round and the processes reach different pairs, whose examples cost differently, so that
ratio mixes throughput with the pairs reached. Run it on a quiet machine; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

from ci.cpu import cpu_seconds


def campaign(target: str, minutes: float, workers: int, seed: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as corpus:
        cmd = [sys.executable, "-m", "properties", "fuzz", "--target", target, "--minutes", str(minutes),
               "--workers", str(workers), "--seed", str(seed), "--database", "none", "--corpus", corpus, "--json"]
        if rounds:
            cmd += ["--rounds", str(rounds)]
        before = cpu_seconds()
        started = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - started
        cpu = cpu_seconds() - before
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    doc = json.loads(done.stdout)
    examples = sum(r.get("examples", 0) for r in doc["results"])
    return {"workers": workers, "examples": examples, "rounds": doc.get("rounds"), "wall_s": round(wall, 1),
            "cpu_s": round(cpu, 1), "examples_per_s": round(examples / wall, 2),
            "examples_per_cpu_s": round(examples / cpu, 2) if cpu > 0 else None, "per_worker": doc.get("workers", [])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ci.bench_fuzz", description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="dynbsz")
    ap.add_argument("--minutes", type=float, default=30.0,
                    help="each campaign's time (with --rounds: a cap, default 30; give 1 for --rounds 0)")
    ap.add_argument("--rounds", type=int, default=1, help="stop after this many rounds (0: run until --minutes)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    if args.rounds < 0 or args.workers < 2 or args.minutes <= 0:
        ap.error("--rounds must be >= 0, --workers >= 2 and --minutes > 0")
    one = campaign(args.target, args.minutes, 1, args.seed, args.rounds)
    many = campaign(args.target, args.minutes, args.workers, args.seed, args.rounds)
    report = {"target": args.target, "minutes": args.minutes, "rounds": args.rounds or None, "cores": os.cpu_count(),
              "python": platform.python_version(), "runs": [one, many],
              "same_work": one["examples"] == many["examples"] and one["rounds"] == many["rounds"],
              "ratio": round(many["examples_per_s"] / one["examples_per_s"], 2) if one["examples_per_s"] else None,
              "cpu_ratio": round(many["cpu_s"] / one["cpu_s"], 2) if one["cpu_s"] else None}
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
