"""``properties fuzz --workers``: examples per second with 1 and N worker processes, side by side, as a figure.

    python -m ci.bench_fuzz [--target dynbsz] [--minutes 1] [--workers 2] [--seed 7]

Runs the same campaign (target, seed, time budget, no example database) once per worker count, in that order,
each as ``python -m properties fuzz ... --json`` in a subprocess, and prints one JSON report: the examples each
ran, their rate over the campaign's wall time, and the ratio of the N-worker rate to the 1-worker one. A
campaign's examples differ in cost from property to property, so the ratio is of throughput on this target's
mix, not of a fixed workload. Run it on a quiet machine; it asserts nothing.
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


def campaign(target: str, minutes: float, workers: int, seed: int) -> dict:
    with tempfile.TemporaryDirectory() as corpus:
        cmd = [sys.executable, "-m", "properties", "fuzz", "--target", target, "--minutes", str(minutes),
               "--workers", str(workers), "--seed", str(seed), "--database", "none", "--corpus", corpus, "--json"]
        started = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    doc = json.loads(done.stdout)
    examples = sum(r.get("examples", 0) for r in doc["results"])
    return {"workers": workers, "examples": examples, "wall_s": round(wall, 1),
            "examples_per_s": round(examples / wall, 2), "per_worker": doc.get("workers", [])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ci.bench_fuzz", description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="dynbsz")
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    one = campaign(args.target, args.minutes, 1, args.seed)
    many = campaign(args.target, args.minutes, args.workers, args.seed)
    report = {"target": args.target, "minutes": args.minutes, "cores": os.cpu_count(), "python": platform.python_version(),
              "runs": [one, many],
              "ratio": round(many["examples_per_s"] / one["examples_per_s"], 2) if one["examples_per_s"] else None}
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
