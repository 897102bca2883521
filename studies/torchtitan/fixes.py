"""torchtitan 0.3.0's findings fixed (report.md): T1, T4 and T5 as diffs under patches/, applied to a copy of
torchtitan taken from its overlay, which a process of its own imports (``FIXES``, this study's patch set). In that
process the released adapter runs the patched code: there is no second copy of any fix here."""

from __future__ import annotations

from pathlib import Path

from properties.targets.base import Target
from properties.targets.patched import PatchSet

from .adapter import OVERLAY, VERSION, available, components, target

#: T1, T4 and T5 as diffs, copied from the overlay: the target ``studies.torchtitan:fixed``
FIXES = PatchSet(target="studies.torchtitan:fixed", released="torchtitan", library=f"torchtitan {VERSION}",
                 root=Path(__file__).resolve().parent / "patches", overlay=OVERLAY)
PATCH_SET = FIXES


def fixed():
    """torchtitan with every diff of studies/torchtitan/patches/ applied (T1, T4, T5; T2 and T3 have none): the
    patch set ``FIXES``, whose copy of torchtitan only a process of its own
    imports (``python -m properties`` re-runs the command in one)."""

    description = f"torchtitan {VERSION} with the diffs of studies/torchtitan/patches/ applied"
    applied = FIXES.applied()
    if applied != FIXES.check(None):
        reason = FIXES.unavailable() if applied is None else f"this process's copy carries {list(applied)}, not all"
        return Target(name=FIXES.target, description=description, unavailable=reason)
    if not available():
        return Target(name=FIXES.target, description=description, unavailable=OVERLAY.missing())
    return Target(name=FIXES.target, components=components(),
                  description=f"{description} ({', '.join(applied)}); otherwise the target torchtitan: "
                              f"{target().description}")
