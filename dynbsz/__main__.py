"""``python -m dynbsz``: the packer's command line (benchmarks)."""

from __future__ import annotations

import argparse
import json
import math
import sys


def _positive_ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers separated by commas, e.g. 200,1000; got {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dynbsz", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bench", help="packer throughput, optionally against VeOmni's TextBatchingStrategy")
    b.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    b.add_argument("--vs", choices=("veomni",), help="run VeOmni 0.1.12's packer side by side (needs the extra)")
    b.add_argument("--samples", type=int, default=50_000)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--repeat", type=int, default=3, help="best of this many runs per row")
    b.add_argument("--buffers", type=_positive_ints, default=None, metavar="N,N,...",
                   help="buffer sizes (FixedGate), comma-separated; default 24,200,1000")
    bl = sub.add_parser("bench-loader", help="loader throughput on uneven decode costs (fast text, slow video)")
    bl.add_argument("--json", action="store_true")
    bl.add_argument("--samples", type=int, default=2000, help="samples drawn from the benchmark mix (without --trace)")
    bl.add_argument("--trace", metavar="FILE", help="run on this trace (id,tokens,cost_s,source) instead of the mix")
    bl.add_argument("--workers", type=int, default=4)
    bl.add_argument("--prefetch-factor", type=int, default=2)
    bl.add_argument("--cost-noise", type=float, default=0.3, metavar="SIGMA",
                    help="lognormal sigma of each sample's true cost around the trace's (what estimates cannot know)")
    bl.add_argument("--lookahead", type=int, default=16, help="order='balanced' lookahead")
    bl.add_argument("--reorder-buffer", type=int, default=64, help="the reorder-buffer row's reorder_buffer")
    bl.add_argument("--seed", type=int, default=0)
    bl.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    if args.command == "bench-loader":
        from . import bench_loader

        if args.samples < 1 or args.workers < 1 or args.prefetch_factor < 1 or args.repeat < 1:
            parser.error("--samples, --workers, --prefetch-factor and --repeat must be >= 1")
        if not (args.cost_noise >= 0 and math.isfinite(args.cost_noise)) or args.lookahead < 0 \
                or args.reorder_buffer < 1:
            parser.error("--cost-noise must be a finite number >= 0, --lookahead an integer >= 0 and "
                         "--reorder-buffer an integer >= 1")
        trace = None
        if args.trace:
            from .workload import Trace

            try:
                trace = Trace.read_csv(args.trace)
            except (OSError, ValueError) as e:
                parser.error(f"--trace {args.trace}: {e}")
        rows = bench_loader.run(args.samples, args.workers, args.prefetch_factor, args.seed, args.repeat,
                                trace=trace, cost_noise=args.cost_noise, lookahead=args.lookahead,
                                reorder_buffer=args.reorder_buffer)
        if args.json:
            json.dump({"benchmark": "loader", "workers": args.workers, "prefetch_factor": args.prefetch_factor,
                       "cost_noise": args.cost_noise, "lookahead": args.lookahead,
                       "reorder_buffer": args.reorder_buffer, "trace": args.trace,
                       "rows": bench_loader.rows_to_json(rows)},
                      sys.stdout, indent=2)
            print()
        else:
            print(bench_loader.format_table(rows))
        return 0

    if args.command == "bench":
        from . import bench

        if args.samples < 1 or args.repeat < 1:
            parser.error("--samples and --repeat must be >= 1")
        if args.vs == "veomni":
            from .compat import veomni

            if not veomni.available():
                parser.error("--vs veomni needs VeOmni 0.1.12: run `bash ci/install.sh --veomni` (see README)")
        rows = bench.run(samples=args.samples, seed=args.seed, vs_veomni=args.vs == "veomni", repeat=args.repeat,
                         buffers=args.buffers or bench.BUFFERS)
        if args.json:
            json.dump({"benchmark": "packer", "rows": bench.rows_to_json(rows)}, sys.stdout, indent=2)
            print()
        else:
            print(bench.format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
