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


def _add_profile(sub) -> None:
    p = sub.add_parser("profile", help="time every __getitem__ of your map-style dataset in real workers; write the "
                       "trace (id,tokens,cost_s,source) and the fitted cost model (docs/profile.md)")
    p.add_argument("--dataset", required=True, metavar="MODULE:FACTORY",
                   help="a function taking no arguments that returns a map-style dataset")
    p.add_argument("--samples", type=int, default=None, metavar="N",
                   help="samples to profile (default: 1000, or the whole dataset if smaller)")
    p.add_argument("--seed", type=int, default=None, help="profile a random subset drawn with this seed "
                   "(default: the first N samples)")
    p.add_argument("--workers", type=int, default=2, metavar="W", help="worker processes (0: in this process; "
                   "default 2); profile with the count you train with, as workers share the CPU")
    p.add_argument("--start-method", choices=("fork", "spawn", "forkserver"), default=None,
                   help="workers' multiprocessing start method (default: torch's)")
    p.add_argument("--timeout", type=float, default=0.0, metavar="S",
                   help="give up when a worker delivers nothing for S seconds (default 0: wait forever)")
    p.add_argument("--tokens-field", metavar="NAME", help="the field holding a sample's token length (an integer, "
                   "or token ids counted by their length); default: tokens, else len(input_ids)")
    p.add_argument("--out", metavar="FILE", help="write the trace here (CSV: id,tokens,cost_s,source); default: "
                   "write nothing, print the summary")
    p.add_argument("--cost-model", metavar="FILE", help="write the fitted cost model (JSON, what "
                   "LoaderConfig(cost_model=...) accepts) here; default: beside --out, trace.csv -> trace.cost.json")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="always draw the progress bar on stderr (default: only on a terminal)")
    g.add_argument("--no-progress", dest="progress", action="store_false")


def _profile(args) -> int:
    """``python -m dynbsz profile``: 0 when every sample was profiled, 1 at a sample that failed (the rows
    before it are written), 2 for bad arguments or a dataset factory that fails, 130 on Ctrl-C."""
    from pathlib import Path

    from . import profile
    from .errors import ConfigError
    from .progress import ProgressBar

    try:
        if args.workers < 0:
            raise ConfigError(f"--workers must be >= 0, got {args.workers}")
        if not (math.isfinite(args.timeout) and args.timeout >= 0):
            raise ConfigError(f"--timeout must be a finite number of seconds >= 0, got {args.timeout}")
        if args.workers == 0 and (args.timeout or args.start_method):
            raise ConfigError("--timeout and --start-method apply to worker processes; --workers 0 has none")
        tokens_fn = profile.FieldTokens(args.tokens_field) if args.tokens_field is not None else profile.default_tokens
        dataset = profile.load_dataset(args.dataset)
        n = len(dataset)
        samples = args.samples if args.samples is not None else min(profile.DEFAULT_SAMPLES, n)
        if n == 0:
            raise ConfigError(f"--dataset {args.dataset!r} returned an empty dataset: nothing to profile")
        indices = profile.choose_indices(n, samples, args.seed)
        trace_path = args.out
        model_path = args.cost_model or (str(profile.cost_model_path(args.out)) if args.out else None)
        for setting, path in (("--out", trace_path), ("--cost-model", model_path)):
            if path and not Path(path).resolve().parent.is_dir():
                raise ConfigError(f"{setting} {path}: the directory {Path(path).resolve().parent} does not exist")
        if trace_path and model_path and Path(trace_path).resolve() == Path(model_path).resolve():
            raise ConfigError(f"--out and --cost-model name the same file {trace_path}")
    except ConfigError as e:
        print(f"profile: {e}", file=sys.stderr)
        return 2
    with ProgressBar("profiling", enabled=args.progress) as bar:
        result = profile.profile_dataset(dataset, indices, workers=args.workers, tokens_fn=tokens_fn,
                                         on_progress=bar, timeout_s=args.timeout, start_method=args.start_method)
    written_trace = written_model = None
    try:
        if trace_path and len(result.trace):
            result.trace.to_csv(trace_path)
            written_trace = trace_path
        if model_path and result.cost_model is not None:
            Path(model_path).write_text(json.dumps(result.cost_model.to_dict(), indent=2) + "\n")
            written_model = model_path
    except OSError as e:
        print(f"profile: cannot write {e.filename}: {e.strerror}", file=sys.stderr)
        return 2
    if args.json:
        json.dump(profile.to_json(result, dataset=args.dataset, trace_path=written_trace,
                                  cost_model_path=written_model), sys.stdout, indent=2)
        print()
    elif result.ok:
        print(profile.format_text(result, args.dataset))
        for what, path in (("trace", written_trace), ("cost model", written_model)):
            if path:
                print(f"{what}: {path}")
        if not (written_trace or written_model):
            print("nothing written: pass --out trace.csv to save the trace and trace.cost.json")
    if result.error is not None:
        kept = (f"the {len(result.trace)} samples profiled before it are in {written_trace}" if written_trace else
                f"{len(result.trace)} samples were profiled before it" + ("; pass --out FILE to keep them"
                                                                          if len(result.trace) else ""))
        print(f"{result.error.line()} ({kept})", file=sys.stderr)
        return 130 if result.interrupted else 1
    return 0


def _add_chaos(sub) -> None:
    c = sub.add_parser("chaos", help="kill -9 a small training job at seeded points (between steps, mid-checkpoint, "
                       "in the epoch-end drain, with batches prefetched), restart it from its last complete "
                       "checkpoint, and check nothing was lost or repeated (docs/chaos.md)")
    c.add_argument("--trials", type=int, default=16, help="configurations to run, one trial each (default 16)")
    c.add_argument("--seed", type=int, default=0, help="draws configurations, kill points and damaged copies")
    c.add_argument("--kills-per-trial", type=int, default=4, metavar="K", help="kills before the last attempt "
                   "runs to the end (default 4)")
    c.add_argument("--work-dir", metavar="DIR", help="keep logs and checkpoints here (default: a temporary "
                   "directory, removed at the end)")
    c.add_argument("--timeout", type=float, default=120.0, metavar="S",
                   help="seconds one attempt may take before it counts as hung (default 120)")
    c.add_argument("--json", action="store_true", help="print one JSON document instead of the summary")


def _lookahead(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be 'auto' or an integer, got {text!r}") from None


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
    bl.add_argument("--lookahead", type=_lookahead, default="auto",
                    help="order='balanced' lookahead: 'auto' (default: dynbsz.order.auto_lookahead) or an integer")
    bl.add_argument("--suite", action="store_true",
                    help="balanced (exact and estimated costs) against plain in_order=False only, on the bench mix "
                         "and two traces whose slow samples are a tenth, at prefetch 2 and 4 (--prefetch-factor "
                         "and --trace are not read)")
    bl.add_argument("--reorder-buffer", type=int, default=64, help="the reorder-buffer row's reorder_buffer")
    bl.add_argument("--seed", type=int, default=0)
    bl.add_argument("--repeat", type=int, default=3)
    _add_profile(sub)
    _add_chaos(sub)
    args = parser.parse_args(argv)
    if args.command == "chaos":
        if args.trials < 1 or args.kills_per_trial < 0 or not args.timeout > 0:
            parser.error("--trials must be >= 1, --kills-per-trial >= 0 and --timeout > 0")
        from .chaos import cli as chaos_cli

        return chaos_cli.run(args)
    if args.command == "profile":
        return _profile(args)

    if args.command == "bench-loader":
        from . import bench_loader

        # One error per flag, naming it, what it allows and what was given (the first bad flag wins).
        for flag, value, least in (("--samples", args.samples, 1), ("--workers", args.workers, 1),
                                   ("--prefetch-factor", args.prefetch_factor, 1), ("--repeat", args.repeat, 1),
                                   ("--lookahead", args.lookahead, 0), ("--reorder-buffer", args.reorder_buffer, 1)):
            if value != "auto" and value < least:
                parser.error(f"{flag} must be an integer >= {least}, got {value}")
        if not (args.cost_noise >= 0 and math.isfinite(args.cost_noise)):
            parser.error(f"--cost-noise must be a finite number >= 0, got {args.cost_noise}")
        if args.suite:
            out = bench_loader.suite(args.samples, args.workers, seed=args.seed, repeat=args.repeat,
                                     cost_noise=args.cost_noise, lookahead=args.lookahead)
            if args.json:
                json.dump({"benchmark": "loader-suite", "workers": args.workers, "cost_noise": args.cost_noise,
                           "lookahead": args.lookahead, "rows": out}, sys.stdout, indent=2)
                print()
            else:
                print(bench_loader.format_suite(out))
            return 0
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
                parser.error("--vs veomni needs VeOmni 0.1.12: run `bash ci/install.sh --veomni` (see docs/guide/packer.md, 'Packer benchmark')")
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
