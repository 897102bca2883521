"""``python -m dynbsz chaos``: run the chaos trials, print the report, exit 1 on any failure."""

from __future__ import annotations

import json
import sys
from typing import Any

from .runner import ChaosReport, TrialResult, run_chaos
from .trainer import KINDS


def _progress(result: TrialResult, total: int) -> None:
    kinds = ", ".join(k["kind"] for k in result.kills) or "none"
    status = "ok" if result.ok else "FAILED: " + "; ".join(result.verdict.problems[:3] or
                                                           [f"lost {result.verdict.lost}, duplicated "
                                                            f"{result.verdict.duplicated}, mismatches "
                                                            f"{result.verdict.trajectory_mismatches}"])
    print(f"trial {result.index + 1}/{total} [{result.label}]: {len(result.kills)} kills ({kinds}), restarts from "
          f"{result.starts[1:] or '-'}, {result.refused} damaged checkpoints refused, {result.wall_s:.1f} s: "
          f"{status}", file=sys.stderr, flush=True)


def summary(report: ChaosReport) -> str:
    d = report.to_json()
    by_kind = ", ".join(f"{k} {d['kills_by_kind'][k]}" for k in KINDS)
    lines = [
        f"{d['trials']} trials over {d['configs']} configurations, {d['kills']} kills ({by_kind}), "
        f"{d['restarts']} restarts, "
        f"{d['wall_s']:.1f} s",
        f"lost {d['lost']}, duplicated {d['duplicated']}, trajectory mismatches {d['trajectory_mismatches']}, "
        f"hung {d['hung']}",
        f"damaged or foreign checkpoints refused {d['refused_checkpoints']}, accepted {d['accepted_checkpoints']}",
    ]
    lines += [f"FAILURE {f}" for f in d["failures"]]
    lines.append("ok" if report.ok else "FAILED")
    return "\n".join(lines)


def run(args: Any) -> int:
    report = run_chaos(args.trials, args.seed, kills_per_trial=args.kills_per_trial, work_dir=args.work_dir,
                       timeout_s=args.timeout, progress=None if args.json else _progress)
    if args.json:
        json.dump(report.to_json(), sys.stdout, indent=2)
        print()
    else:
        print(summary(report))
    return 0 if report.ok else 1
