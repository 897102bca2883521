"""Hugging Face datasets' findings fixed (studies/hf_datasets/report.md): the fixes are the diffs under
studies/hf_datasets/patches/ (H4's and H9's are to torchdata's StatefulDataLoader), applied to a copy of the
installed packages that a process of its own imports (``HF``, this study's patch set). In that process the
released adapter runs the patched code: there is no second copy of any fix here.
"""

from __future__ import annotations

from pathlib import Path

from properties.targets.fixset import StreamFixes
from properties.targets.patched import PatchSet

from . import adapter

HERE = Path(__file__).resolve().parent
#: the proposed fixes, run as the target ``studies.hf_datasets:fixed``
HF = PatchSet(target="studies.hf_datasets:fixed", released="hf-iterable",
              library="Hugging Face datasets 5.2.0 and torchdata 0.11.0", root=HERE / "patches")
FIXES = StreamFixes(HF, adapter, family="hf", prefix="H", pins=HERE / "pins",
                    described=lambda: f"Hugging Face datasets {adapter.version()} and torchdata")
fixed = FIXES.fixed
