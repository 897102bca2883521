"""Figures from a run's history, the prediction's errors, the resume comparison, and the GPU results page.

The figures use ``simulator.metrics`` (pure functions of arrays), the same functions that
score the simulator's prediction, so measured and predicted stall mean the same thing.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from dynbsz.tables import pct
from simulator.metrics import stall_fraction

from .train import History


def figures(hist: History) -> dict:
    """tokens/s, data-stall fraction, first-micro-batch time (cold start) and fill of one run.

    * first_micro_batch_s: from ``iter(loader)`` to the first step in hand (one micro-batch per step);
    * stall_fraction: time spent waiting in ``next(loader)`` after the first step, over the span from
      the first hand-out to the last (``simulator.metrics.stall_fraction``); the first wait is the
      cold start, reported on its own;
    * tokens_per_s: real (unpadded) tokens trained over the whole loop, cold start included;
      steady_tokens_per_s: after the first step;
    * fill: real tokens / token budget per micro-batch.
    """
    if not len(hist):
        raise ValueError("no steps were run")
    req, got, done = (np.asarray(x, dtype=np.float64) for x in (hist.request_s, hist.handout_s, hist.done_s))
    tokens = np.asarray(hist.tokens, dtype=np.float64)
    fill = tokens / np.asarray(hist.budgets, dtype=np.float64)
    waits = np.maximum(got[1:] - req[1:], 0.0)
    pinned = [p for p in hist.pinned if p is not None]
    return {
        "steps": len(hist),
        "first_micro_batch_s": float(got[0]),
        "stall_fraction": stall_fraction(req, got),
        "stall_s": float(waits.sum()),
        "max_wait_s": float(waits.max()) if len(waits) else 0.0,
        "tokens": int(tokens.sum()),
        "tokens_per_s": float(tokens.sum() / done[-1]),
        "steady_tokens_per_s": float(tokens[1:].sum() / (done[-1] - done[0])) if len(hist) > 1 else float("nan"),
        "mean_step_compute_s": float(np.mean(done - got)),
        "fill_mean": float(fill.mean()),
        "fill_min": float(fill.min()),
        "fill_p50": float(np.median(fill)),
        "wall_s": float(done[-1]),
        "pinned_fraction": (sum(pinned) / len(pinned)) if pinned else None,
        "final_loss": hist.losses[-1],
    }


def _first_difference(a: list, b: list, offset: int) -> int | None:
    """Step number of the first position where a and b differ (a length difference counts)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return offset + i
    if len(a) != len(b):
        return offset + min(len(a), len(b))
    return None


def compare_resume(reference: History, before: History, after: History, resume_at: int) -> dict:
    """Run B (steps < resume_at) then run C (a fresh process, from B's checkpoint) against run A.

    Equality is exact: the losses are compared as floats with ``==``, not within a tolerance;
    deterministic kernels and identical inputs make anything else a real divergence.
    """
    ref_losses, ref_ids = reference.losses, reference.ids
    checks = {
        "before_losses": _first_difference(before.losses, ref_losses[:resume_at], 0),
        "before_ids": _first_difference(before.ids, ref_ids[:resume_at], 0),
        "losses": _first_difference(after.losses, ref_losses[resume_at:], resume_at),
        "ids": _first_difference(after.ids, ref_ids[resume_at:], resume_at),
    }
    # The loader's own step counter must continue too (Step.index), not restart at 0.
    counter_continues = after.loader_index == list(range(resume_at, resume_at + len(after.loader_index)))
    return {
        "resume_at": resume_at,
        "steps": len(reference),
        "resumed_start_step": after.start_step,
        "resumed_steps": len(after),
        "losses_equal": checks["losses"] is None and checks["before_losses"] is None,
        "ids_equal": checks["ids"] is None and checks["before_ids"] is None,
        "first_loss_mismatch_step": checks["losses"] if checks["losses"] is not None else checks["before_losses"],
        "first_ids_mismatch_step": checks["ids"] if checks["ids"] is not None else checks["before_ids"],
        "loader_steps_continue": counter_continues,
        "ok": all(v is None for v in checks.values()) and after.start_step == resume_at and counter_continues,
    }


def finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def relative_error(predicted: float, measured: float) -> float | None:
    """(predicted - measured) / measured; None where the measured value is zero (undefined)."""
    if not measured:
        return None
    return (predicted - measured) / measured


# ---- docs/gpu-results.md ---------------------------------------------------------------------

RESULTS_HEADER = """# GPU job results

Appended by `ci/gpu_job.py` after every run on a GPU (never on the CPU). What the figures mean:
[gpu-job.md](gpu-job.md).
"""


def _pct(x) -> str:
    return pct(x, 1) if finite(x) else "n/a"


def _num(x, fmt: str) -> str:
    return "n/a" if x is None or not finite(x) else format(x, fmt)


def results_markdown(report: dict) -> str:
    """One dated section: device, command, a row per runtime, the resume results."""
    cfg = report["config"]
    lines = [
        f"## {report['date']} · {report['device_name']} · config `{cfg['name']}`",
        "",
        f"Command: `{report['command']}`  ",
        f"torch {report['torch']}, deterministic algorithms on, CUBLAS_WORKSPACE_CONFIG="
        f"`{report['cublas_workspace_config']}`, bf16 autocast: {cfg['bf16']}. Budget {cfg['budget']} tokens, "
        f"gate `{cfg['gate']}`, {cfg['num_workers']} workers, prefetch {cfg['prefetch_factor']}, "
        f"model d={cfg['d_model']} "
        f"x {cfg['n_layers']} layers, {cfg['steps']} steps, resume at {cfg['resume_at']}.",
        "",
        "| runtime | tokens/s | steady tokens/s | stall measured | predicted | within 5 points | "
        "first micro-batch measured | predicted | within 15% | fill mean | step compute | floor | pinned | resume |",
        "|---|---:|---:|---:|---:|:---:|---:|---:|:---:|---:|---:|---:|---:|---|",
    ]
    for runtime, r in report["runtimes"].items():
        m, c, p, res = r["measured"], r["comparison"], r["prediction"], r.get("resume")
        resume = "not run" if res is None else ("exact" if res["ok"] else
                                                f"MISMATCH (loss at {res['first_loss_mismatch_step']}, "
                                                f"ids at {res['first_ids_mismatch_step']})")
        lines.append(
            f"| {runtime} | {_num(m['tokens_per_s'], ',.0f')} | {_num(m['steady_tokens_per_s'], ',.0f')} | "
            f"{_pct(c['stall_measured'])} | {_pct(c['stall_predicted'])} | {'yes' if c['stall_ok'] else 'NO'} | "
            f"{_num(c['first_step_measured_s'], '.3f')} s | {_num(c['first_step_predicted_s'], '.3f')} s | "
            f"{'yes' if c['first_step_ok'] else 'NO'} | {_pct(m['fill_mean'])} | "
            f"{_num(1e3 * m['mean_step_compute_s'], '.1f')} ms | {_num(1e3 * p['floor_s'], '.1f')} ms | "
            f"{_pct(m['pinned_fraction'])} | {resume} |")
    n = next(iter(report["runtimes"].values()))["comparison"]["repeats"] if report["runtimes"] else 1
    lines += ["", f"Stall and first micro-batch: median of {n} run(s); predicted by the training model (the "
                  "loader model with the main process's per-step floor, measured by the zero-cost probe)."]
    lines.append("")
    return "\n".join(lines)


def append_results(path: Path, report: dict) -> None:
    path = Path(path)
    text = path.read_text() if path.exists() else RESULTS_HEADER
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.rstrip("\n") + "\n\n" + results_markdown(report))
