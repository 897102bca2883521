"""The GPU end-to-end job: dynbsz's loader, both runtimes, feeding a small packed causal LM.

    python -m ci.gpu_job [--device auto|cpu|cuda|cuda:N] [--config auto|small|large]
                         [--runtimes main,worker] [--steps N] [--resume-at N] [--out report.json]
                         [--results-md docs/gpu-results.md] [--no-resume] [--work-dir DIR]

For each runtime it: probes worker start-up on a zero-cost copy of the trace; trains ``steps``
steps (run A) and reports tokens/s, data-stall fraction, first-micro-batch time and fill;
predicts stall and cold start with the simulator for the same trace and config; then trains
``resume_at`` steps and checkpoints (run B), continues in a fresh process (run C,
``python -m ci.gpu_job continue --checkpoint DIR``) and requires C's losses and sample ids
to equal A's exactly. Exit status: 0 all resume checks exact, 1 a mismatch, 2 bad arguments.

``--device auto`` and ``--config auto`` pick the GPU and the large configuration when CUDA is
available, else the CPU and the small one (what CI runs). A run on a GPU appends its figures
to ``docs/gpu-results.md`` (date, device name, command); a CPU run writes only ``--out``.

Run it from the repository root (``python -m``), or through ``ci/gpu_job.sh``, which does.
"""

from __future__ import annotations

import os

# Before torch can create a cuBLAS handle: deterministic GEMMs need a fixed workspace.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import shlex  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from ci.gpujob.config import PRESETS, SDPA_CHOICES  # noqa: E402
from ci.gpujob.device import device_name, select_device, setup_determinism  # noqa: E402
from ci.gpujob.plan import check_fits_one_epoch, compare, model_prediction  # noqa: E402
from ci.gpujob.report import append_results, compare_resume, figures, finite  # noqa: E402
from ci.gpujob.train import RESTORABLE, History, probe, read_job, run  # noqa: E402
from dynbsz.errors import ConfigError  # noqa: E402
from dynbsz.loader_config import RUNTIMES  # noqa: E402
from simulator.predict import measure_task_overhead  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

DEFAULT_RESULTS_MD = ROOT / "docs" / "gpu-results.md"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # exit 2 with one line, like the other CLIs of the project
        self.exit(2, f"{self.prog}: error: {message}\n")


def _run_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="python -m ci.gpu_job", description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda or cuda:N")
    ap.add_argument("--config", default="auto", choices=["auto", *PRESETS],
                    help="auto: large on a GPU, small on the CPU")
    ap.add_argument("--runtimes", default="main,worker", help="comma-separated dynbsz runtimes (main, worker)")
    ap.add_argument("--steps", type=int, help="optimizer steps (default: the config's)")
    ap.add_argument("--resume-at", type=int, help="steps before the resume checkpoint (default: the config's)")
    ap.add_argument("--sdpa", choices=SDPA_CHOICES, help="attention kernels (default: the config's, auto); 'math' is "
                    "the fallback if a torch build has no deterministic backward for its own pick")
    ap.add_argument("--no-resume", action="store_true", help="skip the resume check (figures only)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="probe, train and predict this many times per runtime; the comparison uses the medians "
                         "(3 for the recorded figures: docs/gpu-job.md)")
    ap.add_argument("--check-prediction", action="store_true",
                    help="also exit 1 when a runtime's prediction misses its tolerance (stall 5 points, first step "
                         "15%%); off by default: on a shared machine timing is noise, resume is not")
    ap.add_argument("--out", help="write the JSON report here ('-': stdout)")
    ap.add_argument("--results-md", default=str(DEFAULT_RESULTS_MD),
                    help="GPU runs append their figures here (default: docs/gpu-results.md); never written on the CPU")
    ap.add_argument("--work-dir", help="keep checkpoints here (default: a temporary directory, removed)")
    ap.add_argument("--break-resume", choices=sorted(RESTORABLE),
                    help="test the check itself: the resumed process skips restoring this part, so the job must "
                         "report a mismatch and exit 1")
    return ap


def _continue_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="python -m ci.gpu_job continue", description="Run C of the resume check: load a checkpoint "
                 "written by run B in this fresh process and train to the config's step count.")
    ap.add_argument("--checkpoint", required=True, help="directory written by run B")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--out", required=True, help="write the run's history (JSON) here")
    ap.add_argument("--skip-restore", action="append", default=[], choices=sorted(RESTORABLE),
                    help="deliberately leave this part unrestored (to prove the check catches it)")
    return ap


def cmd_continue(argv: list[str]) -> int:
    args = _continue_parser().parse_args(argv)
    ckpt = Path(args.checkpoint)
    if not ckpt.is_dir():
        raise ConfigError(f"--checkpoint {ckpt}: no such directory")
    cfg, runtime, _ = read_job(ckpt)
    device = select_device(args.device)
    setup_determinism(device, cfg.threads)
    hist = run(cfg, runtime, device, steps=cfg.steps, resume_from=ckpt,
               restore=RESTORABLE - frozenset(args.skip_restore))
    Path(args.out).write_text(json.dumps(hist.to_json()))
    return 0


def _resumed_in_fresh_process(ckpt: Path, device: torch.device, skip: str | None, timeout_s: float) -> History:
    out = ckpt / "continued.json"
    # ``-m`` from the repository root, whatever this process's working directory
    cmd = [sys.executable, "-m", "ci.gpu_job", "continue", "--checkpoint", str(ckpt.resolve()),
           "--device", str(device), "--out", str(out.resolve())]
    if skip:
        cmd += ["--skip-restore", skip]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"the resumed process failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return History.from_json(json.loads(out.read_text()))


def _median(values) -> float:
    v = sorted(values)
    n = len(v)
    return float(v[n // 2]) if n % 2 else float((v[n // 2 - 1] + v[n // 2]) / 2)


def _runtime_report(cfg, runtime: str, device: torch.device, overhead_s: float, work: Path | None,
                    args) -> dict:
    # Each repeat measures everything the prediction needs again (probe, step time) and predicts its
    # own run: the comparison is between the medians of the measured and of the predicted figures.
    repeats, first = [], None
    # Untimed: a process's first loader pays one-off costs (imports and page faults in the first forked
    # workers) that would otherwise land on the first repeat's probe alone; every timed probe is then warm,
    # like the run it predicts.
    probe(cfg, runtime, device)
    for _ in range(args.repeats):
        # The cold start is probed just before the run, from the process state the run starts from (a
        # process that has just trained forks its workers more slowly); the floor just after it, paced
        # by the run's step compute as the run's own requests were.
        cold = probe(cfg, runtime, device, steps=4)   # 4: every worker hands over a step (worker runtime)
        a = run(cfg, runtime, device, steps=cfg.steps)
        measured = figures(a)
        paced = probe(cfg, runtime, device, pace_s=measured["mean_step_compute_s"])
        probed = {**paced, "startup_s": cold["startup_s"], "first_step_s": cold["first_step_s"],
                  "first_fetch_s": cold["first_fetch_s"], "paced_startup_s": paced["startup_s"],
                  "paced_first_step_s": paced["first_step_s"]}
        pred, one = model_prediction(cfg, runtime, cfg.steps, measured["mean_step_compute_s"], probed, overhead_s)
        repeats.append({"measured": {k: measured[k] for k in ("stall_fraction", "first_micro_batch_s",
                                                             "mean_step_compute_s", "tokens_per_s")},
                        "prediction": {k: one[k] for k in ("stall_fraction", "first_micro_batch_s", "floor_s",
                                                           "worker_startup_s", "zero_cost_first_step_s")},
                        # in_order=True: what the loader hands out is a pure function of the config; the
                        # simulator (driving the real packer) must predict the exact sample ids of every step
                        "order_matches_prediction": pred.ids == a.ids})
        if first is None:
            first = (a, measured, one, probed)
    a, measured, one, probed = first
    comparison = compare(*(_median(r[side][k] for r in repeats) for side, k in (
        ("measured", "stall_fraction"), ("measured", "first_micro_batch_s"),
        ("prediction", "stall_fraction"), ("prediction", "first_micro_batch_s"))))
    comparison["repeats"] = len(repeats)
    out = {"measured": measured, "prediction": one, "comparison": comparison, "probe": probed,
           "repeats": repeats, "order_matches_prediction": all(r["order_matches_prediction"] for r in repeats),
           "losses": a.losses, "resume": None}
    if not args.no_resume:
        with tempfile.TemporaryDirectory(prefix="gpu_job_") as tmp:
            ckpt = (work if work is not None else Path(tmp)) / f"ckpt_{runtime}"
            b = run(cfg, runtime, device, steps=cfg.resume_at, checkpoint_dir=ckpt)
            c = _resumed_in_fresh_process(ckpt, device, args.break_resume,
                                          timeout_s=max(600.0, 20 * measured["wall_s"]))
            out["resume"] = compare_resume(a, b, c, cfg.resume_at)
            out["resume"]["broken_on_purpose"] = args.break_resume
            out["resume"]["checkpoint_s"] = b.checkpoint_s
    return out


def cmd_run(argv: list[str]) -> int:
    args = _run_parser().parse_args(argv)
    runtimes = tuple(r.strip() for r in args.runtimes.split(",") if r.strip())
    bad = [r for r in runtimes if r not in RUNTIMES]
    if not runtimes or bad:
        raise ConfigError(f"--runtimes must name some of {', '.join(RUNTIMES)}, got {args.runtimes!r}")
    device = select_device(args.device)
    name = args.config if args.config != "auto" else ("large" if device.type == "cuda" else "small")
    cfg = PRESETS[name].with_run(args.steps, args.resume_at, args.sdpa)
    if args.repeats < 1:
        raise ConfigError(f"--repeats must be an integer >= 1, got {args.repeats}")
    check_fits_one_epoch(cfg, runtimes)
    setup_determinism(device, cfg.threads)
    work = Path(args.work_dir) if args.work_dir else None
    overhead_s = measure_task_overhead(cfg.num_workers)
    report = {
        "job": "ci/gpu_job.py",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        # ci/gpu_job.sh passes the command it was given; run directly, this is the equivalent
        "command": os.environ.get("DYNBSZ_GPU_JOB_COMMAND") or shlex.join(["python", "-m", "ci.gpu_job", *argv]),
        "device": str(device),
        "device_name": device_name(device),
        "torch": torch.__version__,
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        "threads": torch.get_num_threads(),
        "config": cfg.to_dict(),
        "runtimes": {r: _runtime_report(cfg, r, device, overhead_s, work, args) for r in runtimes},
    }
    resumes = [r["resume"] for r in report["runtimes"].values() if r["resume"] is not None]
    predictions_finite = all(finite(r["prediction"][k]) for r in report["runtimes"].values()
                             for k in ("stall_fraction", "first_micro_batch_s"))
    report["prediction_ok"] = all(r["comparison"]["ok"] for r in report["runtimes"].values())
    report["ok"] = all(r["ok"] for r in resumes) and predictions_finite and (
        report["prediction_ok"] or not args.check_prediction)
    text = json.dumps(report, indent=1)
    if args.out == "-":
        print(text)
    elif args.out:
        Path(args.out).write_text(text)
    if device.type == "cuda":
        append_results(Path(args.results_md), report)
    print(summary(report), file=sys.stderr if args.out == "-" else sys.stdout)
    return 0 if report["ok"] else 1


def summary(report: dict) -> str:
    cfg = report["config"]
    n = next(iter(report["runtimes"].values()))["comparison"]["repeats"] if report["runtimes"] else 1
    lines = [f"gpu_job: config {cfg['name']} on {report['device_name']}, {cfg['steps']} steps, resume at "
             f"{cfg['resume_at']}; stall and first step: median of {n} run(s), predicted by the training model "
             "(loader model + main-process floor)",
             f"{'runtime':8} {'tokens/s':>10} {'stall meas':>10} {'pred':>6} {'<=5pt':>6} {'1st mb meas':>11} "
             f"{'pred':>8} {'<=15%':>6} {'fill':>6} {'order':>6}  resume"]
    for runtime, r in report["runtimes"].items():
        m, c, res = r["measured"], r["comparison"], r["resume"]
        resume = "skipped" if res is None else ("exact" if res["ok"] else
                                                f"MISMATCH loss@{res['first_loss_mismatch_step']} "
                                                f"ids@{res['first_ids_mismatch_step']}")
        lines.append(f"{runtime:8} {m['tokens_per_s']:10.0f} {c['stall_measured']:10.1%} {c['stall_predicted']:6.1%} "
                     f"{'pass' if c['stall_ok'] else 'FAIL':>6} {c['first_step_measured_s']:10.3f}s "
                     f"{c['first_step_predicted_s']:7.3f}s {'pass' if c['first_step_ok'] else 'FAIL':>6} "
                     f"{m['fill_mean']:6.1%} {'exact' if r['order_matches_prediction'] else 'DIFF':>6}  {resume}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] == "continue":
            return cmd_continue(argv[1:])
        return cmd_run(argv)
    except ConfigError as e:
        print(f"python -m ci.gpu_job: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
