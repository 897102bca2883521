"""The streaming loaders' findings fixed: each proposed upstream fix as a patch, and the targets
that run them (docs/litdata-0.2.76-conformance.md, docs/hf-datasets-5.2.0-conformance.md).

Each patch is the library's own function, copied, with only the change its fix describes (marked
with the fix's id); a loader built with ``fixes=()`` behaves as released, so the plain targets in
the same process stay as released. litdata's patches are subclasses the adapter builds its
loaders from; HF datasets builds its pipeline through its own methods, so its patches are
installed on ``IterableDataset`` once and act only on a dataset that carries the fixes (torchdata's
``StatefulDataLoader`` fixes, H4 and H9, are a subclass again).

Targets (``MODULE:FACTORY``, usable wherever a target name is):

* ``properties.stream_fixes:litdata_fixed``: litdata 0.2.76 with every fix in ``LITDATA_FIXES``
  (``litdata.py``).
* ``properties.stream_fixes:hf_fixed``: Hugging Face datasets and torchdata with every diff of
  ``HF_FIXES`` applied (``hf.py``; it runs in a process of its own, ``properties.targets.patched``).

``replay_with(family, fixes, entry)`` replays an example with any subset, so a test can check a
finding's example against every fix but its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ..corpus import replay_with_fixes
from ..runner import Result
from ..targets.base import Target
from ..targets.patched import HF
from .hf import ALL_HF, HF_FIXES, hf_component, hf_fixed
from .litdata import ALL_LITDATA, LITDATA_FIXES, litdata_classes, litdata_component, litdata_fixed

__all__ = ["ALL_HF", "ALL_LITDATA", "HF_FIXES", "LITDATA_FIXES", "STREAM_CORPUS", "hf_component",
           "hf_fixed", "litdata_classes", "litdata_component", "litdata_fixed", "pinned", "replay_with",
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


def _check_family(family: str) -> None:
    if family not in ("litdata", "hf"):
        raise ValueError(f"family={family!r}; allowed values: litdata, hf")


def with_fixes(family: str, fixes: Iterable[str]) -> Target:
    """litdata (``family='litdata'``) or HF (``'hf'``) with exactly ``fixes`` applied, e.g. all but one.
    HF's fixes are diffs: its target resolves only in a process whose copy carries ``fixes``
    (``replay_with`` starts one)."""
    _check_family(family)
    fixes = tuple(fixes)
    component = litdata_component(fixes) if family == "litdata" else hf_component(fixes)
    return Target(name=f"{family}-with-{'+'.join(fixes) or 'no-fix'}", components=(component,))


def replay_with(family: str, fixes: Iterable[str], entry: dict) -> Result:
    """The corpus entry replayed on ``family`` with exactly ``fixes`` (HF's in a process of its own)."""
    _check_family(family)
    if family == "hf":
        return replay_with_fixes(entry, HF, fixes)
    from ..runner import replay_example
    from ..suite import get

    return replay_example(with_fixes(family, fixes), get(entry["property"]), entry["component"], entry["example"])
