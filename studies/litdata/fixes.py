"""litdata 0.2.76's findings fixed (studies/litdata/report.md): the fixes are the diffs under
studies/litdata/patches/, applied to a copy of the installed package that a process of its own imports
(``LITDATA``, this study's patch set). In that process the released adapter runs the patched code:
there is no second copy of any fix here.
"""

from __future__ import annotations

from pathlib import Path

from properties.targets.fixset import StreamFixes
from properties.targets.patched import PatchSet

from . import adapter

HERE = Path(__file__).resolve().parent
#: the proposed fixes, run as the target ``studies.litdata:fixed``
LITDATA = PatchSet(target="studies.litdata:fixed", released="litdata", library="litdata 0.2.76", root=HERE / "patches")
FIXES = StreamFixes(LITDATA, adapter, family="litdata", prefix="L", pins=HERE / "pins",
                    described=lambda: f"litdata {adapter.lib().version}")
fixed = FIXES.fixed
