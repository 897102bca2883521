"""``simulator advise`` speed on a 20,000-sample trace (goal: under 60 s on 2 cores), as a figure, not a test.

    python -m ci.bench_advise [--samples 20000] [--dp 2] [--budget 524288] [--repeat 1]

The trace (the text/video training mixture, seed 5) is written before the clock starts; the clock
covers reading it and the whole search, as ``python -m simulator advise --trace FILE`` runs it.
Prints one JSON report (the recommended loader and gate, how many loaders stage 1 ran, and with an
in_order=False recommendation the best deterministic loader's tokens ratio); exits 1 if the best run
took 60 s or more. The machine is shared: compare figures with ``--repeat`` and medians, run before
and after a change alternately.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

from simulator.advise import advise, read_trace
from simulator.training import STEP_PRESETS, TEXT_VIDEO_LONG
from simulator.workloads import Stream

GOAL_S = 60.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ci.bench_advise", description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=20_000)
    ap.add_argument("--dp", type=int, default=2)
    ap.add_argument("--budget", type=int, default=512 * 1024)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.csv")
        Stream(TEXT_VIDEO_LONG, 5).take(args.samples).to_csv(path)
        times, out = [], None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            out = advise(read_trace(path), args.budget, args.dp, STEP_PRESETS["1b-h100"], hours=(24.0,))
            times.append(time.perf_counter() - t0)
    report = {"benchmark": "advise", "python": platform.python_version(), "cpus": os.cpu_count(),
              "samples": args.samples, "dp": args.dp, "budget": args.budget, "seconds": min(times),
              "all_seconds": times, "median_seconds": statistics.median(times),
              "configs_searched": out["configs_searched"], "loaders_searched": len(out["loaders_searched"]),
              "goal_s": GOAL_S, "recommended": out["recommended"]["gate_label"], "loader": out["recommended"]["loader"],
              "deterministic_alternative": out.get("deterministic_alternative")}
    json.dump(report, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0 if min(times) < GOAL_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
