"""The streaming loaders' findings fixed: each proposed upstream fix is a unified diff under docs/patches/,
applied to a copy of the installed package that a process of its own imports (``properties.targets.patched``);
in that process the released adapter runs the patched code (docs/litdata-0.2.76-conformance.md,
docs/hf-datasets-5.2.0-conformance.md).

Targets (``MODULE:FACTORY``, usable wherever a target name is; ``python -m properties`` re-runs a command
naming one in such a process):

* ``properties.stream_fixes:litdata_fixed``: litdata 0.2.76 with every diff of ``LITDATA_FIXES`` (``litdata.py``).
* ``properties.stream_fixes:hf_fixed``: Hugging Face datasets and torchdata with every diff of ``HF_FIXES``
  (``hf.py``).

``replay_with(family, fixes, entry)`` replays an example with any subset (in a process whose copy carries it),
so a test can check a finding's example against every fix but its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ..corpus import replay_with_fixes
from ..runner import Result
from ..targets.base import Target
from ..targets.patched import HF, LITDATA, PatchSet
from .hf import ALL_HF, HF_FIXES, hf_component, hf_fixed
from .litdata import ALL_LITDATA, LITDATA_FIXES, litdata_component, litdata_fixed

__all__ = ["ALL_HF", "ALL_LITDATA", "HF_FIXES", "LITDATA_FIXES", "STREAM_CORPUS", "hf_component",
           "hf_fixed", "litdata_component", "litdata_fixed", "FAMILIES", "pinned", "replay_with",
           "with_fixes"]


#: every finding's minimal example, one corpus file each, named by its ``finding`` field
STREAM_CORPUS = Path(__file__).resolve().parents[2] / "tests" / "regressions" / "streams"


def pinned(prefix: str) -> dict[str, Path]:
    """Finding id -> its corpus file, for the findings whose id starts with ``prefix`` (L: litdata, H: HF)."""
    from .. import corpus

    out = {}
    for path in corpus.files(STREAM_CORPUS):
        finding = corpus.load(path).get("finding", "")
        if finding.startswith(prefix):
            out[finding] = path
    return dict(sorted(out.items(), key=lambda kv: int(kv[0][1:])))


#: each family's patch set
FAMILIES: dict[str, PatchSet] = {"litdata": LITDATA, "hf": HF}


def _patch_set(family: str) -> PatchSet:
    if family not in FAMILIES:
        raise ValueError(f"family={family!r}; allowed values: {', '.join(FAMILIES)}")
    return FAMILIES[family]


def with_fixes(family: str, fixes: Iterable[str]) -> Target:
    """litdata (``family='litdata'``) or HF (``'hf'``) with exactly ``fixes`` applied, e.g. all but one: it
    resolves only in a process whose copy carries ``fixes`` (``replay_with`` starts one)."""
    fixes = _patch_set(family).check(fixes)
    component = litdata_component(fixes) if family == "litdata" else hf_component(fixes)
    return Target(name=f"{family}-with-{'+'.join(fixes) or 'no-fix'}", components=(component,))


def replay_with(family: str, fixes: Iterable[str], entry: dict) -> Result:
    """The corpus entry replayed on ``family`` with exactly ``fixes``, in a process of its own."""
    return replay_with_fixes(entry, _patch_set(family), fixes)
