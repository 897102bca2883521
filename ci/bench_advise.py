"""``simulator advise`` speed on a 20,000-sample trace (goal: 10 s of wall time on 2 cores), as a figure, not a test.

    python -m ci.bench_advise [--samples 20000] [--dp 2] [--budget 524288] [--repeat 1] [--executor SPEC ...]

The trace (the text/video training mixture, seed 5) is written before the clock starts; the clock
covers reading it and the whole search, as ``python -m simulator advise --trace FILE`` runs it.
``--executor`` (repeatable; default: serial and processes:2, the CLI's default on 2 cores) times the
search on each, alternating, with each one's wall and CPU seconds (this process and its workers).
Prints one JSON report (the recommended loader and gate, how many loaders stage 1 ran, and with an
in_order=False recommendation the best deterministic loader's tokens ratio); exits 1 if the executors
disagree on the result (the goal is a figure in the report, not an exit code). The machine is shared:
compare figures with ``--repeat`` and medians, run before and after a change alternately.
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

from ci.cpu import cpu_seconds
from simulator.advise import advise, read_trace
from simulator.executors import parse_executor
from simulator.training import STEP_PRESETS, TEXT_VIDEO_LONG
from simulator.workloads import Stream

#: issue 27 part 3: a 20,000-sample advise in at most 10 s of wall time, as the CLI runs it
GOAL_S = 10.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ci.bench_advise", description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=20_000)
    ap.add_argument("--dp", type=int, default=2)
    ap.add_argument("--budget", type=int, default=512 * 1024)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--executor", action="append", default=None, metavar="SPEC",
                    help="serial, processes:N or dask://HOST:PORT; repeat to compare (default: serial and processes:2)")
    args = ap.parse_args(argv)
    specs = args.executor or ["serial", "processes:2"]
    for spec in specs:
        parse_executor(spec)                      # a bad spec is refused before the trace is written
    walls: dict[str, list[float]] = {s: [] for s in specs}
    cpus: dict[str, list[float]] = {s: [] for s in specs}
    outs: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.csv")
        Stream(TEXT_VIDEO_LONG, 5).take(args.samples).to_csv(path)
        for _ in range(args.repeat):
            for spec in specs:                    # alternating: the machine's load falls on each alike
                c0, t0 = cpu_seconds(), time.perf_counter()
                outs[spec] = advise(read_trace(path), args.budget, args.dp, STEP_PRESETS["1b-h100"], hours=(24.0,),
                                    executor=spec)
                walls[spec].append(time.perf_counter() - t0)
                cpus[spec].append(cpu_seconds() - c0)
    out = outs[specs[0]]
    same = all({k: v for k, v in o.items() if k != "seconds"} == {k: v for k, v in out.items() if k != "seconds"}
               for o in outs.values())
    report = {"benchmark": "advise", "python": platform.python_version(), "cpus": os.cpu_count(),
              "samples": args.samples, "dp": args.dp, "budget": args.budget,
              "executors": {s: {"seconds": min(walls[s]), "all_seconds": walls[s],
                                "median_seconds": statistics.median(walls[s]), "cpu_seconds": min(cpus[s])}
                            for s in specs},
              "same_result_on_every_executor": same,
              "configs_searched": out["configs_searched"], "loaders_searched": len(out["loaders_searched"]),
              "goal_s": GOAL_S, "recommended": out["recommended"]["gate_label"], "loader": out["recommended"]["loader"],
              "deterministic_alternative": out.get("deterministic_alternative")}
    json.dump(report, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
