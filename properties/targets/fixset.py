"""A stream study's fix set (studies/litdata/fixes.py, studies/hf_datasets/fixes.py): each fix is a diff under the
study's ``patches/`` applied to a copy of the installed package that a process of its own imports
(``properties.targets.patched``). In that process the released adapter runs the patched code, so the component
and the ``:fixed`` target are the adapter's own; elsewhere they say how to get such a process."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable, Iterable

from .base import Target
from .patched import PatchSet
from .stream import StreamComponent


@dataclass(frozen=True)
class StreamFixes:
    """``patch_set`` run by the released ``adapter`` (a stream adapter module: ``component()``, ``available()``,
    ``MISSING``); ``family`` names its partial copies, ``prefix`` its findings' ids, ``pins`` the folder of their
    minimal examples (``pins/trainers/``: those judged under a trainer), ``described()`` the library as installed."""

    patch_set: PatchSet
    adapter: ModuleType
    family: str
    prefix: str
    pins: Path
    described: Callable[[], str]

    def summaries(self) -> dict[str, str]:
        """Fix id -> what it fixes (each diff's first paragraph), in the order the diffs apply."""
        return {fix.id: fix.summary for fix in self.patch_set.fixes().values()}

    def component(self, fixes: Iterable[str] | None = None) -> StreamComponent:
        """The released adapter's component, in a process whose copy carries exactly ``fixes`` (None: all;
        ``patch_set.call`` or ``patch_set.env_for_subprocess`` start one); elsewhere a ValueError says so."""
        fixes = self.patch_set.check(fixes)
        applied = self.patch_set.applied()
        if applied != fixes:
            raise ValueError(f"fixes={list(fixes)}: this process imports "
                             f"{'the release' if applied is None else list(applied)}; {self.patch_set.unavailable()}")
        return self.adapter.component()

    def fixed(self) -> Target:
        """``patch_set.target``: the library with every diff applied, in a process whose copy carries them all;
        unavailable, with the reason, where the extra is absent or this process imports another copy."""
        name, library = self.patch_set.target, self.patch_set.library
        if not self.adapter.available():
            return Target(name=name, description=f"{library} with fixes", unavailable=self.adapter.MISSING)
        every = self.patch_set.check(None)
        applied = self.patch_set.applied()
        if applied != every:
            reason = self.patch_set.unavailable() if applied is None else \
                f"this process's copy carries {list(applied)}, not every fix"
            return Target(name=name, description=f"{library} with fixes", unavailable=reason)
        return Target(name=name, components=(self.adapter.component(),),
                      description=f"{self.described()} with the diffs {', '.join(every)} of {self.patch_set.root} "
                                  "applied (properties.targets.patched)")

    def with_fixes(self, fixes: Iterable[str]) -> Target:
        """The library with exactly ``fixes`` applied, e.g. all but one: it resolves only in a process whose copy
        carries ``fixes`` (``patch_set.call`` starts one)."""
        fixes = self.patch_set.check(fixes)
        return Target(name=f"{self.family}-with-{'+'.join(fixes) or 'no-fix'}", components=(self.component(fixes),))

    def pinned(self) -> dict[str, Path]:
        """Finding id -> its pin (the corpus file whose ``finding`` field names it) under ``pins`` (not
        ``pins/trainers``), in the findings' order."""
        out = {}
        for path in sorted(self.pins.glob("*.json")):
            finding = json.loads(path.read_text()).get("finding") or ""
            if finding.startswith(self.prefix):
                out[finding] = path
        return dict(sorted(out.items(), key=lambda kv: int(kv[0][len(self.prefix):])))
