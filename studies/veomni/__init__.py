"""VeOmni 0.1.12 conformance instruments (studies/veomni/report.md).

Three things the report needs besides the plain ``veomni`` target:

* ``documented()``: the ``veomni`` target held only to what VeOmni promises. An example that
  hits one of VeOmni's *documented deviations* (``DEVIATIONS``) is rejected from the search
  (a replay of one is a skip that names the deviation), so what still fails is a bug, not a
  documented choice. Outputs are never changed: only inputs are restricted.
* ``fixed()``: ``documented()`` run on VeOmni with the proposed diffs (studies/veomni/patches/,
  ``FIXES``) applied to a copy of the installed package that a process of its own imports
  (``VEOMNI``, this study's patch set), to confirm each root cause: a property that passes with
  the fixes and fails without them failed for the reasons the report gives, and for no other.
  ``replay_with(entry, ids)`` replays an example with chosen fixes (the conformance tests check each
  finding's example with every fix but its own).
* ``python -m studies.veomni deviations``: what the documented deviations lose
  on realistic workloads (overlong samples dropped by the worker runtime, one-token samples
  dropped by the main runtime, epochs of ``train_steps`` steps in the main runtime, padding).

Modules: ``documented`` (deviations and that target), ``fixes`` (ids, pins, the ``fixed`` targets),
``studies`` (replays, attribution,
leave-one-out, matrix, campaigns, tables), ``losses`` (deviation counts), ``__main__`` (the CLI).

Both targets are ``MODULE:FACTORY`` targets:
``python -m properties check --target studies.veomni:documented``.
``fixed()`` resolves only in a process with the patched copy: ``python -m properties`` (and this
package's CLI) re-run such a command in one.
"""

from __future__ import annotations

from studies.veomni.campaigns import attribute, campaign, leave_one_out, matrix, matrix_table, replay_with, table
from studies.veomni.documented import DEVIATIONS, documented, loader_deviation
from studies.veomni.fixes import (
    ALL_FIXES,
    DEVIATION_PINS,
    FIX_COMPONENTS,
    FIXES,
    LATENT,
    PINNED,
    UNFIXED,
    UNMASKED_BY,
    VEOMNI,
    VEOMNI_BUILDERS,
    builders_fixed,
    fixed,
)
from studies.veomni.losses import (
    count_main_epochs,
    count_one_token,
    count_overlong,
    count_padding,
    deviations_report,
    lengths_of,
    workloads,
)

from . import adapter, builders

TARGETS = {"veomni": adapter.target, "veomni-builders": builders.target}
PATCH_SETS = (VEOMNI, VEOMNI_BUILDERS)

__all__ = ["ALL_FIXES", "PATCH_SETS", "TARGETS", "VEOMNI", "VEOMNI_BUILDERS", "DEVIATIONS", "DEVIATION_PINS", "LATENT", "UNMASKED_BY", "builders_fixed", "FIXES", "FIX_COMPONENTS", "PINNED", "UNFIXED",
           "attribute", "campaign",
           "count_main_epochs", "count_one_token", "count_overlong", "count_padding", "deviations_report",
           "documented", "fixed", "leave_one_out", "lengths_of",
           "loader_deviation", "matrix", "matrix_table", "replay_with", "table", "workloads"]
