"""``python -m simulator``: run | cold-start | sweep | skew | fidelity | policy | advise.

Every command prints a readable table by default and JSON with ``--json``; long
runs draw a progress bar on stderr when it is a terminal (``--progress`` /
``--no-progress`` to force). Bad input exits with status 2 and one line naming
the setting at fault.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace

from dynbsz.errors import ConfigError, DynbszError, check_int
from dynbsz.progress import ProgressBar
from dynbsz.tables import budget_label, count_label, pct, secs, table
from dynbsz.workload import Trace

from .config import LoaderModelConfig, StepTime
from .executors import DEFAULT_PROCESSES, ExecutorSpec, default_processes, parse_executor
from .gatespec import BUILTIN_FORMS

K = 1024


# ---- argument parsing helpers ------------------------------------------------------------------

def parse_bool(text: str) -> bool:
    t = text.strip().lower()
    if t in ("true", "1", "yes"):
        return True
    if t in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parse_budget(text: str) -> int:
    """``512K``, ``1M``, ``2m`` or a plain token count."""
    t = text.strip().upper()
    mult = {"K": K, "M": K * K}.get(t[-1:], 1)
    digits = t[:-1] if mult != 1 else t
    try:
        value = int(digits) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"a budget is a token count like 131072, 512K or 1M, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"a budget must be >= 1 token, got {text!r}")
    return value


def parse_list(kind):
    def parse(text: str):
        try:
            return tuple(kind(x) for x in text.split(",") if x.strip())
        except (ValueError, argparse.ArgumentTypeError) as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return parse


def _emit_json(obj, indent: int | None = 1) -> None:
    json.dump(obj, sys.stdout, indent=indent, allow_nan=False, default=_json_default)
    sys.stdout.write("\n")


def _json_default(o):
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def _clean(x):
    """NaN -> None for JSON."""
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def _progress(args, label: str) -> ProgressBar:
    return ProgressBar(label, enabled=args.progress)


# ---- shared options ------------------------------------------------------------------------------

def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="always draw the progress bar (default: only on a terminal)")
    g.add_argument("--no-progress", dest="progress", action="store_false")


def _add_loader(p: argparse.ArgumentParser, *, workers=None, prefetch=None, in_order=None, batch=None) -> None:
    p.add_argument("--workers", type=int, default=workers, help="num_workers (0: synchronous fetch)")
    p.add_argument("--prefetch-factor", type=int, default=prefetch,
                   help="tasks in flight per worker (torch's default 2; not allowed with --workers 0)")
    p.add_argument("--batch-size", type=int, default=batch, help="samples per loader batch")
    p.add_argument("--in-order", type=parse_bool, default=in_order, metavar="true|false")
    p.add_argument("--persistent", action="store_true", help="persistent_workers=True")
    p.add_argument("--startup", type=float, default=0.0, metavar="S", help="worker start-up seconds per start")
    p.add_argument("--task-overhead", type=float, default=0.0, metavar="S",
                   help="worker seconds per task on top of its samples' costs (collate, pickling)")
    p.add_argument("--latency", type=float, default=0.0, metavar="S", help="seconds from a worker finishing a batch "
                   "to the main process seeing it")
    p.add_argument("--step-time", type=float, default=0.0, metavar="S", help="consumer seconds per batch / step")
    p.add_argument("--step-time-per-token", type=float, default=0.0, metavar="S",
                   help="consumer seconds per token of the batch, added to --step-time")


def _add_executor(p: argparse.ArgumentParser, default: str, *, jobs: bool = False) -> None:
    p.add_argument("--executor", metavar="SPEC", default=None,
                   help="where the study's independent simulations run: serial (one at a time, in this process), "
                   "processes:N (N processes on this machine) or dask://HOST:PORT (the workers of a Dask scheduler; "
                   f"pip install '.[dask]'); the results are the same on any (default {default})")
    if jobs:
        p.add_argument("--jobs", type=int, default=None, metavar="N",
                       help="an alias of --executor processes:N, kept for existing command lines; not with --executor")


def _executor(args, default: str) -> ExecutorSpec:
    """``--executor`` (or ``--jobs N``, its alias), checked before any work starts."""
    jobs = getattr(args, "jobs", None)
    if jobs is not None:
        if args.executor is not None:
            raise ConfigError(f"--jobs {jobs} and --executor {args.executor} both say where the simulations run; "
                              "give one of them (--jobs N is --executor processes:N)")
        check_int("--jobs", jobs, minimum=1)
        return ExecutorSpec("processes", workers=jobs)
    return parse_executor(default if args.executor is None else args.executor)


def _loader_from(args, base: LoaderModelConfig | None = None) -> LoaderModelConfig:
    base = base or LoaderModelConfig()
    kw = {}
    if args.workers is not None:
        kw["num_workers"] = args.workers
        if args.workers == 0 and args.prefetch_factor is None:
            kw["prefetch_factor"] = None
    if args.prefetch_factor is not None:
        kw["prefetch_factor"] = args.prefetch_factor
    if args.batch_size is not None:
        kw["batch_size"] = args.batch_size
    if args.in_order is not None:
        kw["in_order"] = args.in_order
    if args.persistent:
        kw["persistent_workers"] = True
    kw["worker_startup_s"] = args.startup
    kw["task_overhead_s"] = args.task_overhead
    kw["result_latency_s"] = args.latency
    return replace(base, **kw)


def _step_from(args) -> StepTime:
    return StepTime(args.step_time, args.step_time_per_token)


# ---- run -------------------------------------------------------------------------------------------

def cmd_run(args) -> int:
    from . import metrics
    from .loader_model import physical_bound_s, simulate

    trace = Trace.read_csv(args.trace)
    cfg = _loader_from(args)
    step = _step_from(args)
    with _progress(args, "simulating") as bar:
        run = simulate(trace, cfg, step=step, epochs=args.epochs, progress=bar)
    ids = trace.ids
    sizes = run.batch_sizes()
    summary = {
        "batches": len(run), "samples": int(sizes.sum()), "epochs": args.epochs,
        "makespan_s": run.makespan_s, "cold_start_s": metrics.time_to_first(run.handout_s),
        "throughput_samples_per_s": metrics.steady_throughput(run.handout_s, sizes),
        "stall_fraction": metrics.stall_fraction(run.request_s, run.handout_s),
        "physical_bound_s": physical_bound_s(trace, cfg, args.epochs),
        "dropped_indices": run.n_dropped,
    }
    if args.json:
        offs = run.offsets.tolist()
        sample_ids = ids[run.samples].tolist()
        idx, wk, dl = run.batch.tolist(), run.worker.tolist(), run.handout_s.tolist()
        ep = run.epoch.tolist()
        batches = []
        for i in range(len(run)):
            b = {"index": idx[i], "worker": wk[i], "sample_ids": sample_ids[offs[i]:offs[i + 1]], "delivered_s": dl[i]}
            if args.epochs > 1:
                b["epoch"] = ep[i]
            batches.append(b)
        _emit_json(_clean({"batches": batches, "makespan_s": run.makespan_s, "summary": summary,
                           "config": {**cfg.__dict__, "step_time_s": step.base_s,
                                      "step_time_per_token_s": step.per_token_s}}), indent=None)
        return 0
    print(f"trace {args.trace}: {len(trace)} samples; num_workers={cfg.num_workers} prefetch_factor="
          f"{cfg.prefetch if cfg.num_workers else None} batch_size={cfg.batch_size} in_order={cfg.in_order} "
          f"persistent={cfg.persistent_workers} epochs={args.epochs}")
    print(table(["metric", "value"], [
        ["makespan (s)", secs(summary["makespan_s"])],
        ["physical bound: total cost / workers (s)", secs(summary["physical_bound_s"])],
        ["first batch (s)", secs(summary["cold_start_s"])],
        ["steady throughput (samples/s)", secs(summary["throughput_samples_per_s"])],
        ["consumer stall fraction", pct(summary["stall_fraction"])],
        ["batches / samples", f"{summary['batches']} / {summary['samples']}"],
    ], "lr"))
    n = len(run)
    show = list(range(n)) if args.all or n <= 24 else list(range(12)) + [-1] + list(range(n - 12, n))
    rows = []
    for i in show:
        if i < 0:
            rows.append(["...", "", "", "", ""])
            continue
        s = ids[run.batch_samples(i)].tolist()
        rows.append([run.epoch[i], run.batch[i], run.worker[i], secs(float(run.handout_s[i])),
                     ",".join(map(str, s[:8])) + (",..." if len(s) > 8 else "")])
    print()
    print(table(["epoch", "index", "worker", "delivered_s", "sample_ids"], rows, "rrrrl"))
    return 0


# ---- cold-start and sweep ---------------------------------------------------------------------------

def _add_study(p: argparse.ArgumentParser, gates_default) -> None:
    from .study import DEFAULT_BUDGETS, DEFAULT_DP

    p.add_argument("--budgets", type=parse_list(parse_budget), default=DEFAULT_BUDGETS,
                   help="comma-separated token budgets (default 512K,1M,128K,256K,2M)")
    p.add_argument("--dp", type=parse_list(int), default=DEFAULT_DP, help="comma-separated DP sizes (default 1,2,4,8)")
    p.add_argument("--steps", type=int, default=500, help="steady-state micro-batches after the first (default 500)")
    p.add_argument("--seed", type=int, default=None, help="stream seed (default: the calibrated one)")
    p.add_argument("--trace", metavar="FILE", help="read the stream (sampler order) from a CSV trace instead of "
                   "the calibrated workload")
    p.add_argument("--no-truncate", action="store_true", help="keep samples longer than the budget (default: cut "
                   "to the budget, as VeOmni's transforms do)")
    p.add_argument("--overlong", default="emit_alone", help="packer policy for samples over the budget: "
                   "emit_alone, raise or drop")
    p.add_argument("--plot", metavar="FILE.png", help=PLOT_HELP)
    _add_executor(p, "serial")
    _add_loader(p)
    _add_common(p)


PLOT_HELP = "also write a PNG plot to FILE.png (needs matplotlib: bash ci/install.sh --plot)"


def _study_config(args, gates):
    from .study import CALIBRATED_LOADER, StudyConfig
    from .workloads import SEED_STREAM

    trace = Trace.read_csv(args.trace) if args.trace else None
    return StudyConfig(budgets=tuple(args.budgets), gates=tuple(gates), dp_sizes=tuple(args.dp), steps=args.steps,
                       seed=SEED_STREAM if args.seed is None else args.seed,
                       loader=_loader_from(args, CALIBRATED_LOADER), step=_step_from(args),
                       truncate=not args.no_truncate, overlong=args.overlong, trace=trace)


def _run_study(args, gates, title: str, *, summary: bool = False, default_plot: bool = False) -> int:
    """``summary``: the answer at a glance (``study.summarize``), printed instead of every point unless
    ``--all``, and in the JSON; ``default_plot``: in the table views, write the plot to the scratch directory
    when ``--plot`` names none."""
    from .study import Study, calibration

    executor = _executor(args, "serial")
    config = _study_config(args, gates)
    if getattr(args, "calibration", False) and config.trace is not None:
        raise ConfigError("--calibration compares the calibrated workload with the seed; drop --trace to use it")
    if args.plot:
        from .plot import check_path

        check_path(args.plot)
    study = Study(config)
    with _progress(args, title) as bar:
        rows = study.run(progress=bar, executor=executor)
    calib = calibration(config) if getattr(args, "calibration", False) else None
    plot_note = None
    if args.plot:
        from .plot import cold_start

        cold_start(rows, args.plot)
        plot_note = f"plot written to {args.plot}"
    elif default_plot and not args.json:
        plot_note = _default_plot(rows, title)
    glance = None
    if summary:
        from .study import summarize, summary_scope

        glance = summarize(rows, *summary_scope(config.budgets, config.dp_sizes))
    if args.json:
        out = {"study": title, "config": {"budgets": list(config.budgets), "gates": list(config.gates),
                                          "dp_sizes": list(config.dp_sizes), "steps": config.steps,
                                          "seed": None if config.trace is not None else config.seed,
                                          "trace": args.trace, "truncate": config.truncate,
                                          "loader": config.loader.__dict__, "step_time_s": config.step.base_s},
               "rows": [r.to_json() for r in rows]}
        if calib is not None:
            out["calibration"] = calib
        if glance is not None:
            out["summary"] = {**glance, "conclusion_text": format_conclusion(glance)}
        if args.plot:
            out["plot"] = str(args.plot)
        _emit_json(_clean(out))
        return 0
    lo = config.loader
    source = f"trace {args.trace}" if config.trace is not None else f"seed stream {config.seed}"
    print(f"{title}: {source}, loader per rank: num_workers={lo.num_workers} prefetch_factor="
          f"{lo.prefetch if lo.num_workers else None} in_order={lo.in_order}; steady state over {config.steps} "
          "micro-batches after the first (fewer where a trace ran out: see JSON 'steps')")
    brief = glance is not None and not getattr(args, "all", False)
    if brief:
        print(format_summary(glance, len(rows)))
    else:
        body = []
        for r in rows:
            if r.error:
                body.append([budget_label(r.budget), r.gate, r.dp, "-", "-", "-", "-", "-", "n/a: " + _short(r.error)])
            else:
                body.append([budget_label(r.budget), r.gate, r.dp, secs(r.ready_p50_s), f"{r.candidates_p50:g}",
                             pct(r.first_fill), pct(r.steady_fill), pct(r.steady_fill_min), ""])
        print(table(["budget", "gate", "dp", "ready p50 (s)", "candidates", "first fill", "steady fill", "worst step",
                     "note"], body, "llrrrrrrl"))
    if calib is not None:
        print()
        print(format_calibration(calib))
    if glance is not None:
        print()
        print(format_conclusion(glance))
    if plot_note:
        print(("" if glance is not None else "\n") + plot_note)
    return 0


def _default_plot(rows, title: str) -> str:
    """Writes the plot nobody named; its one line of output. Never fails the study: the plot is extra."""
    from .plot import INSTALL_HINT, MissingMatplotlib, cold_start, default_dir

    try:
        path = default_dir() / f"{title}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        cold_start(rows, path)
    except MissingMatplotlib:
        return f"no plot written: matplotlib is not installed ({INSTALL_HINT})"
    except (OSError, RuntimeError) as e:     # RuntimeError: Path.home() without a home
        return f"no plot written: {e} (--plot FILE.png writes it elsewhere)"
    return f"plot written to {path} (--plot FILE.png to choose, --no-plot for none)"


def format_summary(glance: dict, points: int) -> str:
    """The summary table: per seed budget, one row per distinct policy, each cell smallest / largest DP."""
    dps = glance["dp_sizes"]
    per = " / ".join(f"DP{d}" for d in dps)

    def cells(points, fmt):
        return " / ".join("n/a" if p["error"] else fmt(p) for p in points)

    body, notes = [], False
    for e in glance["table"]:
        errors = [p["error"] for p in e["points"] if p["error"]]
        notes = notes or bool(errors)
        body.append([budget_label(e["budget"]), " = ".join(e["gates"]),
                     cells(e["points"], lambda p: secs(p["ready_p50_s"])),
                     cells(e["points"], lambda p: f"{p['candidates_p50']:g}"),
                     cells(e["points"], lambda p: pct(p["steady_fill"])),
                     cells(e["points"], lambda p: pct(p["steady_fill_min"])),
                     "n/a: " + _short(errors[0]) if errors else ""])
    head = ["budget", "gate", "ready p50 (s)", "candidates", "steady fill", "worst step", "note"]
    if not notes:
        head, body = head[:-1], [r[:-1] for r in body]
    budgets = ",".join(budget_label(b) for b in glance["budgets"])
    return (f"summary: {budgets} at {per} (each cell); gates with identical figures share a row; --all prints "
            f"all {points} points\n" + table(head, body, "ll" + "r" * (len(head) - 2 - notes) + "l" * notes))


def _range(lo: float, hi: float, fmt) -> str:
    if fmt(lo) == fmt(hi):
        return fmt(lo)
    return f"{fmt(lo)} to {fmt(hi)}" if lo < 0 else f"{fmt(lo)}-{fmt(hi)}"


def format_conclusion(glance: dict) -> str:
    """One line: the seed gate against the baseline, at one point and over every DP size run."""
    c = glance["conclusion"]
    gate, base = glance["gate"], glance["baseline"]
    if c is None:
        return f"no conclusion: {glance['no_conclusion']} (--all shows every point)"
    where = f"{budget_label(c['budget'])} DP{c['dp']}"
    verb = "cuts" if c["gate_ready_s"] < c["baseline_ready_s"] else "raises"
    line = (f"conclusion: {gate} {verb} the first micro-batch from {secs(c['baseline_ready_s'])} s ({base}) to "
            f"{secs(c['gate_ready_s'])} s at {where}")
    cost = c["fill_cost_points"]
    if math.isnan(cost):
        line += " (steady fill not measured: --steps 0)"
    else:
        line += (f" and {'costs' if cost >= 0 else 'gains'} {abs(cost):.2f} points of steady fill "
                 f"({pct(c['baseline_steady_fill'])} -> {pct(c['gate_steady_fill'])})")
    over = f"{','.join(budget_label(b) for b in c['over_budgets'])} x DP {','.join(map(str, c['over_dp_sizes']))}"
    spans = []
    if c["speedup_range"]:
        lo, hi = c["speedup_range"]
        one = "{:.1f}".format
        if lo >= 1:
            spans.append(f"{_range(lo, hi, one)}x sooner")
        elif hi < 1:
            spans.append(f"{_range(1 / hi, 1 / lo, one)}x later")
        else:       # sooner at some points, later at others
            spans.append(f"{base} / {gate} ready time {_range(lo, hi, one)}x")
    if c["fill_cost_points_range"]:
        lo, hi = c["fill_cost_points_range"]
        spans.append(f"steady-fill cost {_range(lo, hi, '{:.2f}'.format)} points")
    return line + (f"; over {over}: {', '.join(spans)}" if spans else "")


def format_calibration(calib: list[dict]) -> str:
    from .study import FILL_TOLERANCE_POINTS, READY_TOLERANCE

    rows = [[budget_label(c["budget"]), c["gate"], secs(c["seed_ready_s"]), secs(c["model_ready_s"]),
             f"{100 * c['ready_error']:+.1f}%", pct(c["seed_fill"], 3), pct(c["model_fill"], 3),
             "-" if c["fill_diff_points"] is None else f"{c['fill_diff_points']:+.2f}", "yes" if c["ok"] else "NO"]
            for c in calib]
    ok = sum(bool(c["ok"]) for c in calib)
    verdict = "pass" if ok == len(calib) else "FAIL"
    return (f"calibration against the seed (DP1; goal: ready within {100 * READY_TOLERANCE:g}%, fill within "
            f"{FILL_TOLERANCE_POINTS:g} points): {verdict}, {ok} of {len(calib)} points within\n") + table(
        ["budget", "gate", "seed ready", "model ready", "error", "seed fill", "model fill", "points", "ok"], rows,
        "llrrrrrrl")


def _short(msg: str, n: int = 70) -> str:
    msg = msg.split(";")[0]
    return msg if len(msg) <= n else msg[:n - 3] + "..."


def cmd_cold_start(args) -> int:
    if args.plot and args.no_plot:
        raise ConfigError("--plot and --no-plot contradict each other: give one")
    return _run_study(args, args.gates, "cold-start", summary=True, default_plot=not args.no_plot)


def cmd_sweep(args) -> int:
    gates = list(args.gate)
    if args.baseline:
        gates = ["fixed:200", "fixed:24", "token_aware"] + gates
    return _run_study(args, gates, "sweep")


# ---- skew ------------------------------------------------------------------------------------------

def cmd_skew(args) -> int:
    from . import skew
    from .loader_model import physical_bound_s
    from .workloads import get_workload

    if args.trace:
        trace = Trace.read_csv(args.trace)
    else:
        from dynbsz.errors import check_int

        check_int("--samples", args.samples, minimum=1)
        trace = get_workload(args.workload).sample(args.samples, args.seed)
    loader = _loader_from(args)
    if args.plot:
        from .plot import check_path

        check_path(args.plot)
    step = _step_from(args)
    found = skew.study(trace, loader, step, args.window, cost_noise=args.cost_noise, lookahead=args.lookahead,
                       seed=args.seed, balanced=not args.no_balanced)
    results, names = found.results, trace.source_names
    if args.plot:
        from .plot import skew as plot_skew

        plot_skew(results, names, args.window, args.plot)
    lookahead_ok = all(r.max_displacement <= r.lookahead for r in found.balanced)
    bound = physical_bound_s(found.true, loader)
    if args.json:
        _emit_json(_clean({"samples": len(trace), "window_steps": args.window, "loader": loader.__dict__,
                           "results": [r.to_json(names) for r in found.plain],
                           "balanced": [r.to_json(names) for r in found.balanced],
                           "cost_noise": found.cost_noise, "lookahead": found.lookahead, "seed": args.seed,
                           "lookahead_ok": lookahead_ok, "physical_bound_s": bound}))
        return 0
    print(f"{len(trace)} samples ({', '.join(f'{n} {s:.0%}' for n, s in zip(names, results[0].overall))}); "
          f"num_workers={loader.num_workers} prefetch_factor={loader.prefetch} batch_size={loader.batch_size}; "
          f"windows of {args.window} steps; true costs: the trace's x lognormal noise sigma {found.cost_noise:g} "
          f"(seed {args.seed})")
    rows = []
    for r in results:
        order = "sampler" if r.order == "sampler" else f"balanced {r.costs}"
        rows.append([str(r.in_order), order, secs(r.makespan_s), secs(r.throughput), pct(r.fraction_of_limit, 1),
                     pct(r.stall_fraction), secs(r.cold_start_s), f"{r.shift:.3f}", f"{r.skew:.3f}",
                     f"{r.displacement['mean']:.1f}", f"{r.displacement['max']:.0f}"])
    print(table(["in_order", "order", "makespan (s)", "samples/s", "of limit", "stall", "first batch (s)",
                 "share shift", "share vs mix", "mean displ.", "max displ."], rows))
    print(f"\nphysical bound (total cost / workers): {secs(bound)} s; of limit: that "
          "bound or the consumer's total step time, whichever is longer, over the makespan; share shift: largest "
          "change of a source's share in a window against sampler order (the loader's skew); share vs mix: "
          "against the overall mix (includes the data's own noise)")
    if found.balanced:
        worst = max(r.max_displacement for r in found.balanced)
        print(f"balanced (dynbsz.order.loader_order, in_order=True, lookahead {found.lookahead}): exact costs are "
              "the true ones; estimated costs a CostModel fitted on the trace (tokens, source); largest "
              f"displacement {worst} {'<=' if lookahead_ok else 'EXCEEDS'} lookahead {found.lookahead}")
    elif not args.no_balanced:
        print("balanced: not run, it needs workers (--workers >= 1)")
    if args.plot:
        print(f"\nplot written to {args.plot}")
    return 0 if lookahead_ok else 1


# ---- policy: trained tokens per hour ------------------------------------------------------------

def parse_hours(text: str) -> tuple[float, ...]:
    try:
        hours = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"hours are comma-separated positive numbers like 1,6,24, got {text!r}") \
            from None
    if not hours or any(not math.isfinite(h) or h <= 0 for h in hours):
        raise argparse.ArgumentTypeError(f"hours are comma-separated positive numbers like 1,6,24, got {text!r}")
    return tuple(sorted(set(hours)))


def _ratio_cell(ratio: dict | None, hours) -> str:
    if ratio is None:
        return "-"
    return " ".join(f"{ratio[k]:.3f}" for k in hours)


def _seeds(seeds) -> str:
    return f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"


def _reach_cell(t: float | None) -> str:
    """A time to N tokens in hours; None is a run that did not reach N within the horizon."""
    return "not reached" if t is None else f"{t / 3600:.2f} h"


def beats_note(entry: dict) -> str:
    """Where the advised gate, a warm-up-scoped gate or ``auto`` beats every fixed size at every hour
    (its lowest ratio to the per-hour best fixed size is above 1): by how much, at least."""
    named = [("advised", entry.get("advised_ratio"))]
    named += sorted((entry.get("warmup_ramp_ratio") or {}).items())
    named.append(("auto", entry.get("auto_ratio")))
    out = []
    for name, ratio in named:
        if not ratio:
            continue
        over = min(ratio.values())
        if over > 1.0:
            out.append(f"{name} beats every fixed size by {100 * (over - 1):.1f}%+")
    return "; ".join(out)


def tokens_warning(result: dict, tokens: int, horizon_h: float) -> str | None:
    """The line that says which runs did not reach ``tokens`` within the horizon (None: all did)."""
    rows = [r for r in result["rows"] if not r.get("error")]
    missed = [r for r in rows if r.get("time_to_tokens_s") is None]
    if not missed:
        return None
    line = (f"warning: {len(missed)} of {len(rows)} runs (the fixed-size search included) did not reach {count_label(tokens)} tokens within the "
            f"horizon ({horizon_h:g} h): 'not reached' in the table, time_to_tokens_s null in JSON")
    no_oracle = sum(e.get("best_fixed_gate_to_tokens") is None for e in result["best"])
    if no_oracle:
        line += (f"; at {no_oracle} of {len(result['best'])} points no fixed size reached it (no oracle: "
                 "advised_ratio_to_tokens null, '-' in the table)")
    return line


def cmd_policy(args) -> int:
    from .policy import GOAL_RATIO, PolicyConfig, PolicyStudy
    from .training import parse_step_model

    points = len(args.budgets) * len(args.dp) * len(args.workloads)
    executor = _executor(args, f"processes:{default_processes(points)}")
    config = PolicyConfig(budgets=tuple(args.budgets), dp_sizes=tuple(args.dp), workloads=tuple(args.workloads),
                          gates=tuple(args.gates), hours=tuple(args.hours), step=parse_step_model(args.step_time),
                          seed=args.seed, max_tokens=args.tokens, streams=args.streams)
    if args.plot:
        from .plot import check_path

        check_path(args.plot)
    with _progress(args, "policy") as bar:
        result = PolicyStudy(config).run(progress=bar, executor=executor)
    if args.plot:
        from .plot import policy as plot_policy

        plot_policy(result, config.hours, args.plot)
    hk = [f"{h:g}" for h in config.hours]
    warn = tokens_warning(result, config.max_tokens, config.hours[-1]) if config.max_tokens is not None else None
    if args.json:
        if warn:
            print(warn, file=sys.stderr)
        _emit_json(_clean({"config": {"budgets": list(config.budgets), "dp_sizes": list(config.dp_sizes),
                                      "workloads": list(config.workloads), "gates": list(config.gates),
                                      "hours": list(config.hours), "step_time": config.step.to_json(),
                                      "seed": config.seed, "advice_seed_offset": 1000,
                                      "streams": config.streams, "scored_seeds": list(config.scored_seeds),
                                      "advice_seeds": list(config.advice_seeds),
                                      "fixed_search": list(config.fixed_search), "max_tokens": config.max_tokens},
                           **result}))
        return 0
    print(f"policy: tokens trained by hour {', '.join(hk)} (DP ranks in lockstep, step time "
          f"{config.step.name}: {config.step.base_s:g} s + {config.step.a:.3g} s/token + {config.step.b:.3g} "
          f"s/token^2 per micro-batch); tokens are the mean over {config.streams} scored stream(s), seeds "
          f"{_seeds(config.scored_seeds)}; advice chosen on seeds {_seeds(config.advice_seeds)}")
    shown = set(config.gates) | {r["gate"] for r in result["rows"] if r["kind"] == "advised"}
    body = []
    for r in result["rows"]:
        if r["gate"] not in shown:
            continue
        parity = [] if config.max_tokens is None else ["-" if r.get("error") else _reach_cell(r["time_to_tokens_s"])]
        if r.get("error"):
            body.append([r["workload"], budget_label(r["budget"]), r["dp"], r["gate"], "-", "-", *parity, "-", "-",
                         "-", "n/a: " + _short(r["error"], 40)])
            continue
        tb = r["tokens_by_hour"]
        body.append([r["workload"], budget_label(r["budget"]), r["dp"], r["gate"], secs(r["first_step_s"]),
                     " ".join(f"{tb[k] / 1e6:.1f}M" for k in hk), *parity, pct(r["stall_fraction"], 1),
                     pct(r["straggle_fraction"], 1), pct(r["steady_fill"], 1),
                     f"{r['peak_buffer_samples']} / {r['peak_buffer_tokens'] / 1e6:.1f}M"])
    tl = None if config.max_tokens is None else count_label(config.max_tokens)
    print(table(["workload", "budget", "dp", "gate", "first step (s)", f"tokens by h {','.join(hk)}",
                 *([f"time to {tl} tokens"] if tl else []), "stall", "straggle", "steady fill",
                 "peak buffer (samples / tokens)"], body, "llrlrr" + ("r" if tl else "") + "rrrr"))
    if warn:
        print(warn)
    print()
    body = []
    for e in result["best"]:
        ca = e["context_aware_ratio"]
        note = "; ".join(x for x in ("goal met" if e["goal_met"] else "MISS: " + e["miss"], beats_note(e)) if x)
        parity = [] if tl is None else [
            e["best_fixed_gate_to_tokens"] or "none reached",
            "-" if e["advised_ratio_to_tokens"] is None else f"{e['advised_ratio_to_tokens']:.3f}"]
        body.append([e["workload"], budget_label(e["budget"]), e["dp"],
                     ",".join(dict.fromkeys(e["best_fixed_by_hour"].values())), e["advised_gate"],
                     _ratio_cell(e["advised_ratio"], hk), _ratio_cell(e["fixed_200_ratio"], hk),
                     _ratio_cell(ca, hk), *parity, note])
    print(f"against the best fixed size per hour (searched on the scored streams: an oracle); goal: advised >= "
          f"{GOAL_RATIO} at every hour" + ("" if tl is None else f"; to {tl} tokens: the fixed size that reached "
                                           "them first, and its time over the advised gate's (1.0 at best)"))
    print(table(["workload", "budget", "dp", "best fixed (by hour)", "advised (chosen on the advice streams)",
                 f"advised / best at h {','.join(hk)}", "fixed:200 / best", "context_aware / best",
                 *([f"best fixed to {tl}", f"advised / best to {tl}"] if tl else []), "note"], body,
                "llrllrrr" + ("lr" if tl else "") + "l"))
    met = sum(e["goal_met"] for e in result["best"])
    print(f"\ngoal met at {met} of {len(result['best'])} points; {result['seconds']:.0f} s")
    if args.plot:
        print(f"plot written to {args.plot}")
    return 0


# ---- advise ---------------------------------------------------------------------------------------

def _int_list(flag: str, value: str, what: str) -> tuple[int, ...]:
    """``parse_list(int)``, or 'none' for an empty list; anything else is a one-line error naming the flag."""
    if value.strip().lower() == "none":
        return ()
    try:
        return parse_list(int)(value)
    except argparse.ArgumentTypeError:
        raise ConfigError(f"{flag} takes comma-separated {what}, or 'none', got {value!r}") from None


def cmd_advise(args) -> int:
    from .advise import advise, read_trace
    from .training import parse_step_model

    executor = _executor(args, f"processes:{default_processes()}")
    trace = read_trace(args.trace)
    step = parse_step_model(args.step_time)
    multiples = _int_list("--reorder-buffers", args.reorder_buffers, "multiples of workers x prefetch like 8 or 4,16")
    lookaheads = tuple("auto" if v.strip() == "auto" else v for v in args.lookaheads.split(","))
    lookaheads = tuple(v for v in lookaheads if v == "auto") + _int_list(
        "--lookaheads", ",".join(v for v in lookaheads if v != "auto") or "none",
        "lookaheads of the balanced order like 32 or 16,32,64 or auto")
    with _progress(args, "advise") as bar:
        out = advise(trace, args.budget, args.dp, step, hours=args.hours, memory_cap_tokens=args.memory_cap_tokens,
                     where=f"--trace {args.trace}", reorder_buffers=multiples, lookaheads=lookaheads,
                     deterministic=args.deterministic, progress=bar, executor=executor)
    if args.json:
        _emit_json(_clean(out))
        return 0
    hk = [f"{h:g}" for h in out["hours"]]
    rows = []
    for name in ("recommended", "runner_up", "default"):
        e = out[name]
        if e is None:
            continue
        lo, p = e["loader"], e["predicted"]
        rows.append([name, f"{lo['num_workers']} / {lo['prefetch_factor']} / {e['delivery']}", e["gate_label"],
                     secs(p["first_step_s"]), " ".join(f"{p['tokens_by_hour'][k] / 1e6:.1f}M" for k in hk),
                     pct(p["stall_fraction"], 1), f"{p['peak_buffer_samples']} / {p['peak_buffer_tokens'] / 1e6:.1f}M"])
    print(f"advise: {out['trace']['samples']} samples, budget {budget_label(out['budget'])}, dp {out['dp']}, step time "
          f"{out['step_time']['name']}; {out['configs_searched']} configurations in {out['seconds']:.1f} s")
    print(table(["", "workers / prefetch / order", "gate", "first step (s)", f"tokens by h {','.join(hk)}", "stall",
                 "peak buffer / rank"], rows, "lllrrrr"))
    if out["trace_ended_loaders"]:
        print(f"\n{out['trace_ended_loaders']} of {len(out['loaders_searched'])} loaders used up the trace before "
              f"{hk[-1]} h; they are ranked at their own rate to {hk[-1]} h (a longer trace would measure it)")
    if out["gate_hours"] != out["hours"]:
        print(f"the recommended loader uses up the trace early, so the gate was chosen on tokens by h "
              f"{','.join(f'{h:g}' for h in out['gate_hours'])} (after that every gate has trained all of it)")
    if not out["memory_cap_met"]:
        print(f"\nno loader searched keeps its peak buffer within --memory-cap-tokens {out['memory_cap_tokens']}: "
              "the recommendation is the best regardless")
    alt = out["deterministic_alternative"]
    if alt is not None:
        lo = alt["loader"]
        print(f"\nin_order=False delivers in arrival order (not reproducible; resume is exactly-once but not in the "
              f"uninterrupted order). The best deterministic loader searched, {lo['num_workers']} / "
              f"{lo['prefetch_factor']} / {alt['delivery']}, trains {alt['ratio']:.3f}x its tokens with fixed:24; "
              "--deterministic searches only those")
    print("\nrecommended, as code:\n" + out["recommended"]["code"])
    print("\nas JSON (gate): " + json.dumps(out["recommended"]["gate"]))
    return 0


# ---- fidelity ----------------------------------------------------------------------------------------

def cmd_fidelity(args) -> int:
    from . import fidelity

    cases = fidelity.default_cases(quick=args.quick)
    results = []
    with _progress(args, "real loader runs") as bar:
        bar(0, len(cases) + 1, "measuring per-task overhead")
        overhead = fidelity.measure_overhead() if args.overhead_ms is None else args.overhead_ms / 1e3
        for i, case in enumerate(cases):
            bar(i + 1, len(cases) + 1, case.label)
            results.append(fidelity.run_case(case, tolerance_s=args.tolerance_ms / 1e3, task_overhead_s=overhead))
        bar(len(cases) + 1, len(cases) + 1, "done")
    summary = {**fidelity.summarize(results), "task_overhead_s": overhead}
    if args.json:
        _emit_json(_clean({"summary": summary, "cases": [r.to_json() for r in results]}))
    else:
        rows = [[r.case.label, "yes" if r.order_exact else "no", r.near_ties, f"{r.max_gap_s * 1e3:.1f}",
                 secs(r.real_makespan_s), secs(r.model_makespan_s), pct(r.makespan_error, 1),
                 pct(r.real_fraction_of_limit, 1), pct(r.model_fraction_of_limit, 1),
                 "yes" if r.ok else "NO"] for r in results]
        print(table(["case", "order exact", "near ties", "max gap ms", "real s", "model s", "makespan err",
                     "real of limit", "model of limit", "ok"], rows, "lrrrrrrrrl"))
        print(f"\nper-task overhead measured on a separate trace: {overhead * 1e3:.2f} ms")
        print(f"worst makespan error {100 * summary['worst_makespan_error']:.1f}% ({summary['worst_makespan_case']});"
              f" in_order=True exact: {summary['in_order_true_exact']}; in_order=False: largest overridden "
              f"predicted gap {summary['worst_near_tie_gap_s'] * 1e3:.1f} ms (jitter tolerance "
              f"{summary['tolerance_s'] * 1e3:g} ms)")
        if summary["balanced_cases"]:
            print(f"dynbsz order='balanced' (build_loader vs the model on dynbsz's order): order and workers exact: "
                  f"{summary['balanced_exact']}; worst makespan error "
                  f"{100 * summary['worst_balanced_makespan_error']:.1f}%; of limit = total cost / workers over the "
                  "makespan")
    return 0 if summary["all_ok"] else 1


def cmd_derive_auto(args) -> int:
    """The derivation of dynbsz's AUTO_TABLE (``policy.derive_auto``)."""
    import time

    from .policy import PolicyConfig, derive_auto

    executor = _executor(args, f"processes:{default_processes()}")
    t0 = time.perf_counter()
    check_int("--streams", args.streams, minimum=1)
    out = derive_auto(PolicyConfig(streams=args.streams), executor=executor)
    out["seconds"] = time.perf_counter() - t0
    if args.json:
        json.dump(out, sys.stdout, indent=1)
        print()
        return 0
    for b, e in out["table"].items():
        print(f"{budget_label(b):>5}: {e['label']:28} min {e['min_ratio']:.3f} mean {e['mean_ratio']:.3f}; runner-up "
              f"{e['runner_up']['label']} ({e['runner_up']['min_ratio']:.3f}); best fixed {e['fixed_best']}")
    rows = ", ".join(f"{b}: {tuple(e['row'])}" for b, e in out["table"].items())
    print(f"AUTO_TABLE = {{{rows}}}  ({out['seconds']:.0f} s)")
    return 0


def cmd_skew_sweep(args) -> int:
    """The ordering comparison over several skewed traces (``skew_sweep.sweep``)."""
    from dataclasses import asdict

    from .skew_sweep import format_rows, sweep

    rows = sweep()
    if args.json:
        json.dump([asdict(r) for r in rows], sys.stdout, indent=1)
        print()
    else:
        print(format_rows(rows))
    return 0


# ---- entry point -------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    from .study import DEFAULT_GATES

    parser = argparse.ArgumentParser(prog="python -m simulator", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="a trace through the modelled loader (map-style, in order)")
    r.add_argument("--trace", required=True, metavar="FILE", help="CSV with header id,tokens,cost_s,source")
    _add_loader(r, workers=2, batch=1, in_order=True)
    r.add_argument("--epochs", type=int, default=1)
    r.add_argument("--all", action="store_true", help="print every batch, not the first and last 12")
    _add_common(r)
    r.set_defaults(func=cmd_run)

    c = sub.add_parser("cold-start", help="the seed's cold-start study: budgets x gates x DP sizes",
                       description="The seed's cold-start study over budgets x gates x DP sizes. By default it "
                       "prints a summary (the seed's budgets at the smallest and largest DP size, the calibration "
                       "with --calibration, a one-line conclusion: context_aware against fixed:200) and writes a "
                       "PNG plot of every point to $XDG_CACHE_HOME/dynbsz-harness/ (else ~/.cache/dynbsz-harness/)"
                       "; --all prints every point, --json all of it as JSON.")
    c.add_argument("--gates", type=parse_list(str), default=DEFAULT_GATES,
                   help=f"comma-separated gates ({', '.join(BUILTIN_FORMS)}, MODULE:FACTORY)")
    c.add_argument("--calibration", action="store_true", help="also compare the DP1 points with the seed")
    c.add_argument("--all", action="store_true", help="print every budget x gate x DP point, not the summary")
    c.add_argument("--no-plot", action="store_true", help="write no plot (default: the table views write one to "
                   "the cache directory unless --plot names the file; --json writes one only with --plot)")
    _add_study(c, DEFAULT_GATES)
    c.set_defaults(func=cmd_cold_start)

    s = sub.add_parser("sweep", help="user-written gates through the cold-start study")
    s.add_argument("--gate", action="append", required=True, metavar="MODULE:FACTORY",
                   help="a gate object or factory (called with budget= if it takes it); repeatable")
    s.add_argument("--baseline", action="store_true", help="also run fixed:200, fixed:24 and token_aware")
    _add_study(s, ())
    s.set_defaults(func=cmd_sweep)

    k = sub.add_parser("skew", help="in_order=True vs False vs dynbsz's balanced order on uneven costs: "
                       "throughput, source share, displacement")
    k.add_argument("--trace", metavar="FILE", help="CSV trace (default: a generated text/video mixture)")
    k.add_argument("--workload", default="text_video",
                   help="generated workload: text_video, bench_mix (bench-loader's) or seed_text")
    k.add_argument("--samples", type=int, default=20_000)
    k.add_argument("--seed", type=int, default=0, help="seed of the generated trace and of the cost noise")
    k.add_argument("--window", type=int, default=50, help="steps per share window")
    k.add_argument("--cost-noise", type=float, default=0.3, metavar="SIGMA",
                   help="true costs are the trace's times a lognormal factor of this sigma (default 0.3, as "
                   "bench-loader; 0: the trace's costs are true); the estimated balanced order cannot see it")
    k.add_argument("--lookahead", type=lambda v: v if v == "auto" else int(v), default=16, metavar="L",
                   help="balanced order: no sample moves more than L places (default 16; 'auto': "
                   "dynbsz.order.auto_lookahead)")
    k.add_argument("--no-balanced", action="store_true", help="only in_order=True and False")
    k.add_argument("--plot", metavar="FILE.png", help=PLOT_HELP)
    _add_loader(k, workers=4, batch=1, in_order=None)
    k.set_defaults(step_time=0.01)
    _add_common(k)
    k.set_defaults(func=cmd_skew)

    pol = sub.add_parser("policy", help="which buffer policy trains the most tokens by hour 1, 6, 24: DP ranks in "
                         "lockstep, a step-time model, the advised gate against the best fixed size")
    from .policy import DEFAULT_BUDGETS as P_BUDGETS
    from .policy import DEFAULT_DP as P_DP
    from .policy import DEFAULT_GATES as P_GATES
    from .policy import DEFAULT_HOURS, DEFAULT_WORKLOADS
    from .training import DEFAULT_STEP

    pol.add_argument("--budgets", type=parse_list(parse_budget), default=P_BUDGETS,
                     help="comma-separated token budgets (default 128K,256K,512K,1M,2M)")
    pol.add_argument("--dp", type=parse_list(int), default=P_DP, help="comma-separated DP sizes (default 1,2,4,8)")
    pol.add_argument("--workloads", type=parse_list(str), default=DEFAULT_WORKLOADS,
                     help="comma-separated training workloads: seed, seed_8w, mix (default all)")
    pol.add_argument("--gates", type=parse_list(str), default=P_GATES,
                     help="gates to compare besides the fixed-size search and the advised gate (default "
                     f"{','.join(P_GATES)})")
    pol.add_argument("--hours", type=parse_hours, default=DEFAULT_HOURS, help="comma-separated hours (default 1,6,24)")
    pol.add_argument("--step-time", default=DEFAULT_STEP, metavar="PRESET|BASE,A,B",
                     help=f"step-time model: a preset (none, 1b-h100, 7b-h100, 8b-h200; default {DEFAULT_STEP}) or "
                     "BASE,A,B: seconds per micro-batch = BASE + A*sum(l) + B*sum(l^2)")
    pol.add_argument("--tokens", type=int, default=None, metavar="N",
                     help="token parity: also compare the gates by the time each took to train N tokens (a "
                     "column; per point the fixed size that got there first and the advised gate's ratio to it; "
                     "a run that does not reach N by the last --hours is 'not reached', null in JSON)")
    from .policy import DEFAULT_STREAMS

    pol.add_argument("--seed", type=int, default=22, help="first scored stream's seed (scored: seed..seed+S-1; "
                     "advice: seed+1000..seed+1000+S-1)")
    pol.add_argument("--streams", type=int, default=DEFAULT_STREAMS, metavar="S",
                     help=f"scored streams per point, and as many advice streams; tokens are the mean over them "
                     f"(default {DEFAULT_STREAMS})")
    _add_executor(pol, DEFAULT_PROCESSES, jobs=True)
    pol.add_argument("--plot", metavar="FILE.png", help=PLOT_HELP)
    _add_common(pol)
    pol.set_defaults(func=cmd_policy)

    a = sub.add_parser("advise", help="search workers, prefetch, order, reorder buffer and the gate on your trace; print the "
                       "recommended LoaderConfig and gate")
    a.add_argument("--trace", required=True, metavar="FILE", help="CSV with header id,tokens,cost_s,source (sampler order)")
    a.add_argument("--budget", required=True, type=parse_budget, help="token budget per micro-batch (e.g. 512K)")
    a.add_argument("--dp", type=int, default=1, help="DP size (default 1)")
    a.add_argument("--step-time", default=DEFAULT_STEP, metavar="PRESET|BASE,A,B",
                   help=f"step-time model (default {DEFAULT_STEP})")
    a.add_argument("--memory-cap-tokens", type=int, default=None, metavar="T",
                   help="only configurations whose peak buffered tokens per rank stay within T")
    a.add_argument("--hours", type=parse_hours, default=(24.0,), help="comma-separated hours (default 24)")
    from .advise import LOOKAHEADS, REORDER_BUFFERS

    multiples, lookaheads = (",".join(map(str, values)) for values in (REORDER_BUFFERS, LOOKAHEADS))
    a.add_argument("--reorder-buffers", default=multiples, metavar="M[,M...]|none",
                   help=f"reorder_buffer sizes searched, as multiples of workers x prefetch (default {multiples}; "
                   "'none': no reorder buffer)")
    a.add_argument("--lookaheads", default=lookaheads, metavar="L[,L...]|none",
                   help=f"lookaheads of order='balanced' searched (default {lookaheads}: a rarer slow source needs a "
                   "longer one; 'none': the balanced order is not searched)")
    a.add_argument("--deterministic", action="store_true",
                   help="search only loaders that deliver a deterministic order (no in_order=False)")
    _add_executor(a, DEFAULT_PROCESSES)
    _add_common(a)
    a.set_defaults(func=cmd_advise)

    f = sub.add_parser("fidelity", help="the real StatefulDataLoader and dynbsz's balanced loader (sleep costs) "
                       "against the model")
    f.add_argument("--quick", action="store_true",
                   help="five cases (one of them dynbsz's balanced order) instead of fifteen")
    f.add_argument("--tolerance-ms", type=float, default=6.0, help="scheduling jitter bound for near-ties")
    f.add_argument("--overhead-ms", type=float, default=None,
                   help="per-task worker overhead to model (default: measured first on a near-zero-cost trace)")
    _add_common(f)
    f.set_defaults(func=cmd_fidelity)
    da = sub.add_parser("derive-auto", help="derive dynbsz's AUTO_TABLE: per budget the maximin warm-up schedule "
                        "over the policy grid's advice streams (~40 min on 2 cores)")
    _add_executor(da, DEFAULT_PROCESSES, jobs=True)
    da.add_argument("--streams", type=int, default=1, metavar="S",
                    help="advice streams per point, the mean over them (default 1: what AUTO_TABLE was derived on)")
    da.add_argument("--json", action="store_true")
    da.set_defaults(func=cmd_derive_auto)

    ss = sub.add_parser("skew-sweep", help="every ordering on five skewed traces, prefetch 2 and 4, lookahead 16, "
                        "32 and 64: ratios to in_order=False and True (~10 s)")
    ss.add_argument("--json", action="store_true")
    ss.set_defaults(func=cmd_skew_sweep)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for name in ("epochs",):
        if getattr(args, name, 1) is not None and getattr(args, name, 1) < 1:
            parser.error(f"--{name} must be >= 1")
    try:
        return args.func(args)
    except (DynbszError, ConfigError, FileNotFoundError, IsADirectoryError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # output piped into `head` and the like: stop quietly, without a second error at exit
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
