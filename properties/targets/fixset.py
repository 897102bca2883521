"""What the stream studies' fix sets share (studies/litdata/fixes.py, studies/hf_datasets/fixes.py): each fix is
a diff under the study's ``patches/`` applied to a copy of the installed package that a process of its own imports
(``properties.targets.patched``). In that process the released adapter runs the patched code, so the component
and the ``:fixed`` target are the adapter's own; elsewhere they say how to get such a process."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Iterable

from properties.targets.base import Target
from properties.targets.patched import PatchSet
from properties.targets.stream import StreamComponent


def summaries(patch_set: PatchSet) -> dict[str, str]:
    """Fix id -> what it fixes (each diff's first paragraph), in the order the diffs apply."""
    return {fix.id: fix.summary for fix in patch_set.fixes().values()}


def component_in_copy(patch_set: PatchSet, adapter: ModuleType, fixes: Iterable[str] | None) -> StreamComponent:
    """The released adapter's component, in a process whose copy carries exactly ``fixes`` (None: all;
    ``patch_set.call`` or ``patch_set.env_for_subprocess`` start one); elsewhere a ValueError says so."""
    fixes = patch_set.check(fixes)
    applied = patch_set.applied()
    if applied != fixes:
        raise ValueError(f"fixes={list(fixes)}: this process imports "
                         f"{'the release' if applied is None else list(applied)}; {patch_set.unavailable()}")
    return adapter.component()


def fixed_target(patch_set: PatchSet, adapter: ModuleType, described: str) -> Target:
    """``patch_set.target``: the library with every diff applied, in a process whose copy carries them all;
    unavailable, with the reason, where the extra is absent or this process imports another copy."""
    name, library = patch_set.target, patch_set.library
    if not adapter.available():
        return Target(name=name, description=f"{library} with fixes", unavailable=adapter.MISSING)
    every = patch_set.check(None)
    applied = patch_set.applied()
    if applied != every:
        reason = patch_set.unavailable() if applied is None else f"this process's copy carries {list(applied)}, " \
                                                                 "not every fix"
        return Target(name=name, description=f"{library} with fixes", unavailable=reason)
    return Target(name=name, components=(adapter.component(),),
                  description=f"{described} with the diffs {', '.join(every)} of {patch_set.root} applied "
                              "(properties.targets.patched)")


def with_fixes_target(patch_set: PatchSet, adapter: ModuleType, fixes: Iterable[str], family: str) -> Target:
    """The library with exactly ``fixes`` applied, e.g. all but one: it resolves only in a process whose copy
    carries ``fixes`` (``patch_set.call`` starts one)."""
    fixes = patch_set.check(fixes)
    return Target(name=f"{family}-with-{'+'.join(fixes) or 'no-fix'}",
                  components=(component_in_copy(patch_set, adapter, fixes),))


def pinned(pins: Path, prefix: str) -> dict[str, Path]:
    """Finding id -> its pin (the corpus file whose ``finding`` field names it) under ``pins``, for the ids that
    start with ``prefix``, in the findings' order."""
    import json

    out = {}
    for path in sorted(pins.glob("*.json")):
        finding = json.loads(path.read_text()).get("finding") or ""
        if finding.startswith(prefix):
            out[finding] = path
    return dict(sorted(out.items(), key=lambda kv: int(kv[0][len(prefix):])))
