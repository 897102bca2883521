"""The studied libraries, found as plugins: every module registered under the entry-point group
``dynbsz_harness.studies`` (this project's ``pyproject.toml`` registers the folders under ``studies/``; a
package of your own can register its study the same way). The suite never imports a study by name, as
Hypothesis never imports what its ``hypothesis`` entry points name: imports go from the studies to the suite.

A study module declares two things:

* ``TARGETS``: built-in target name -> a factory returning a ``Target`` (``litdata``, ``veomni``, ...);
* ``PATCH_SETS``: its ``targets.patched.PatchSet`` values (the proposed fixes as diffs), each run as the
  ``MODULE:FACTORY`` target its ``target`` names.

Study modules import their library lazily, so listing the studies never needs the extras.
"""

from __future__ import annotations

import functools
from importlib import metadata
from types import ModuleType
from typing import Any, Callable

GROUP = "dynbsz_harness.studies"


class StudyError(RuntimeError):
    """A registered study that does not import or does not declare what a study declares."""


@functools.cache
def studies() -> dict[str, ModuleType]:
    """Entry-point name -> the study's module, every registered study (sorted by name)."""
    out = {}
    for ep in sorted(metadata.entry_points(group=GROUP), key=lambda e: e.name):
        module = ep.load()
        missing = [a for a in ("TARGETS", "PATCH_SETS") if not hasattr(module, a)]
        if missing:
            raise StudyError(f"the study {ep.name!r} ({ep.value}) lacks {', '.join(missing)}: a study module "
                             "declares TARGETS (name -> factory) and PATCH_SETS (a tuple of PatchSet)")
        out[ep.name] = module
    return out


def targets() -> dict[str, Callable[[], Any]]:
    """Built-in target name -> factory, over every study."""
    out: dict[str, Callable[[], Any]] = {}
    for name, module in studies().items():
        for target, factory in module.TARGETS.items():
            if target in out:
                raise StudyError(f"two studies declare the target {target!r} (the second: {name!r})")
            out[target] = factory
    return out


def patch_sets() -> dict[str, Any]:
    """The ``:fixed`` target name -> its PatchSet, over every study."""
    return {s.target: s for module in studies().values() for s in module.PATCH_SETS}


def patch_set_of(target: str) -> Any:
    """The PatchSet that runs ``target`` (None: the target is not a patch set's)."""
    return patch_sets().get(target) if ":" in target else None


def fix_diff(finding: str) -> Any:
    """The diff (a Path) that fixes ``finding`` in any study (None: no study proposes one)."""
    for patch_set in patch_sets().values():
        fix = patch_set.fixes().get(finding)
        if fix is not None:
            return fix.diff
    return None
