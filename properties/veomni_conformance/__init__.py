"""VeOmni 0.1.12 conformance instruments (docs/veomni-0.1.12-conformance.md).

Three things the report needs besides the plain ``veomni`` target:

* ``documented()``: the ``veomni`` target held only to what VeOmni promises. An example that
  hits one of VeOmni's *documented deviations* (``DEVIATIONS``) is rejected from the search
  (a replay of one is a skip that names the deviation), so what still fails is a bug, not a
  documented choice. Outputs are never changed: only inputs are restricted.
* ``fixed()``: ``documented()`` with the smallest upstream fix of every finding patched into
  VeOmni (``FIXES``), to confirm each root cause: a property that passes with the fixes and
  fails without them failed for the reasons the report gives, and for no other.
  ``fixes_applied(ids)`` applies chosen fixes for the duration of a ``with`` block (the
  conformance tests check each finding's example against its own fix alone).
* ``python -m properties.veomni_conformance deviations``: what the documented deviations lose
  on realistic workloads (overlong samples dropped by the worker runtime, one-token samples
  dropped by the main runtime, epochs of ``train_steps`` steps in the main runtime, padding).

Modules: ``documented`` (deviations and that target), ``patches`` (the fixes as code),
``fixes`` (ids, pins, applying them, the ``fixed`` target), ``studies`` (replays, attribution,
leave-one-out, matrix, campaigns, tables), ``losses`` (deviation counts), ``__main__`` (the CLI).

Both targets are ``MODULE:FACTORY`` targets:
``python -m properties check --target properties.veomni_conformance:documented``.
``fixed()`` patches VeOmni for the rest of the process it is resolved in (its loaders fork
workers that must see the patches too); use it from the command line, not inside a test run.
"""

from __future__ import annotations

from .documented import DEVIATIONS, documented, loader_deviation
from .fixes import (
    ALL_FIXES,
    FIX_COMPONENTS,
    FIXES,
    PINNED,
    UNFIXED,
    builders_fixed,
    fixed,
    fixed_loaders,
    fixes_applied,
)
from .losses import (
    count_main_epochs,
    count_one_token,
    count_overlong,
    count_padding,
    deviations_report,
    lengths_of,
    workloads,
)
from .patches import veomni_modules
from .studies import attribute, campaign, leave_one_out, matrix, matrix_table, replay_with, table

__all__ = ["ALL_FIXES", "DEVIATIONS", "builders_fixed", "FIXES", "FIX_COMPONENTS", "PINNED", "UNFIXED", "attribute", "campaign",
           "count_main_epochs", "count_one_token", "count_overlong", "count_padding", "deviations_report",
           "documented", "fixed", "fixed_loaders", "fixes_applied", "leave_one_out", "lengths_of",
           "loader_deviation", "matrix", "matrix_table", "replay_with", "table", "veomni_modules", "workloads"]
