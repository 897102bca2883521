"""``python -m dynbsz chaos``: kill -9 a training job at chosen points, restart it from its last
complete checkpoint, and check that nothing was lost or repeated.

* ``dynbsz.chaos.trainer``: the training loop under test (tiny LM, Adam, dynbsz loader, gloo DP,
  ``dynbsz.checkpoint`` files) and the four kill kinds;
* ``dynbsz.chaos.runner``: trials, attempts, process groups, damaged-checkpoint refusals, report;
* ``dynbsz.chaos.judge``: the oracle, on plain log records.

See docs/chaos.md.
"""

from .judge import Verdict, judge_rank, surviving_steps
from .runner import ChaosReport, TrialResult, draw_configs, run_chaos
from .trainer import KINDS, ChaosConfig, KillPlan

__all__ = ["KINDS", "ChaosConfig", "ChaosReport", "KillPlan", "TrialResult", "Verdict", "draw_configs",
           "judge_rank", "run_chaos", "surviving_steps"]
