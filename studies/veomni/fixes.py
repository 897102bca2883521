"""The fixes: the diffs under studies/veomni/patches/ (``VEOMNI``), where each
shows, the pinned example of each finding, and the targets that run VeOmni with them.

A package is imported once per process, so VeOmni with fixes runs in a process of its own whose import path
starts with a patched copy (``VEOMNI.call``, ``VEOMNI.env_for_subprocess``); there the ``documented`` target
runs the patched code. There is no second copy of any fix here.
"""

from __future__ import annotations

from pathlib import Path

from properties.targets import overlay as _overlay
from properties.targets.base import Target
from properties.targets.patched import PatchSet
from studies.veomni import builders as veomni_builders
from studies.veomni.documented import documented_components

#: V1-V4, V7-V13, V15, V17 and B1 as diffs (V4's is to torchdata's sampler), run by the target that holds VeOmni
#: to its documentation
VEOMNI = PatchSet(target="studies.veomni:fixed", released="studies.veomni:documented",
                  library="VeOmni 0.1.12 (and torchdata 0.11.0's sampler)",
                  root=Path(__file__).resolve().parent / "patches")
#: the same diffs under VeOmni's own builders, which run in VeOmni's overlay (its declared datasets)
VEOMNI_BUILDERS = PatchSet(target="studies.veomni:builders_fixed", released="veomni-builders",
                           library=VEOMNI.library, root=VEOMNI.root, overlay=_overlay.VEOMNI)
#: diffs to VeOmni's trainer (V16), not to its loaders: no target runs them, since the trainer model ``veomni`` is a
#: copy of the released loop; tests run them under VeOmni's own loop (``studies.veomni.trainer_real``) in a process
#: with the patched copy (``TRAINER_FIXES.call``)
TRAINER_FIXES = PatchSet(target="studies.veomni.trainer_real:run", released="", library="VeOmni 0.1.12's trainer",
                         root=VEOMNI.root / "trainer")

#: fix id -> what it fixes (each diff's first paragraph): V1-V4 (V4: torchdata's sampler), V7-V13, V15, V17, and B1 (the
#: builders report's: the main runtime's re-read pass over a resumed HF mixture)
FIXES: dict[str, str] = {fix.id: fix.summary for fix in VEOMNI.fixes().values()}
ALL_FIXES = tuple(FIXES)
#: fix -> the regression file (tests/regressions/) that pins its finding: an example that fails on VeOmni as
#: shipped and with every other fix applied, and passes with all of them. B1's pin is the builders report's
#: (tests/test_veomni_builders.py).
PINNED: dict[str, str] = {
    "V1": "loader_resume-loader_main-veomni-a0fc1e421b.json",
    "V2": "loader_resume-loader_main-veomni-0a6accac3a.json",
    "V3": "trainers/trainer_resume-loader_main-veomni-V3.json",
    "V4": "loader_resume-loader_main-veomni-f1a8149079.json",
    "V7": "epoch_reshuffle-loader_worker-veomni-f1a25a8832.json",
    "V8": "loader_resume-loader_worker-veomni-faa6e37e0b.json",
    "V9": "loader_resume-loader_multisource-veomni-b3acb1e834.json",
    "V10": "loader_resume-loader_multisource-veomni-c07368a626.json",
    "V11": "budget-packer-veomni-9975e069ad.json",
    "V12": "loader_resume-loader_main-veomni-b4c225fb8f.json",
    "V13": "exactly_once-loader_worker-veomni-468453fcdc.json",
    "V15": "exactly_once-loader_worker-veomni-f24dd8d34b.json",
    "V17": "loader_resume-loader_main-veomni-eca47567ee.json",
}
#: Pinned findings that VeOmni as shipped (held to its docs) does not show, because another finding masks them: finding
#: -> why. Their pins pass on the release, fail with the masking finding's diff alone, and pass with both.
LATENT: dict[str, str] = {
    "V15": "V8 masks it as shipped: a worker restored into the previous epoch restores nothing of the state V15 "
           "keeps; with V8's diff alone the example fails, with V8's and V15's it passes",
}
#: the diff that unmasks each latent finding
UNMASKED_BY: dict[str, str] = {"V15": "V8"}
#: Findings without a proposed fix: finding -> (what fails, the regression file that pins it). Each fails on VeOmni
#: as shipped, held to its docs and with every fix applied (tests/test_veomni_conformance.py).
UNFIXED: dict[str, tuple[str, str]] = {
    "V14": ("the worker runtime has no length bound: under BaseTrainer's loop (at most train_steps steps an "
            "epoch, the epoch ending early on StopIteration) DP ranks that pack their shards into different "
            "numbers of steps stop at different steps, and the rank still stepping waits in its next collective",
            "dp_step_counts-loader_worker-veomni-1ff2675553.json"),
}
#: Deviations found as failures before they were judged VeOmni's design or documented default: finding -> (the
#: deviation the documented target declares, the regression file). Each fails on VeOmni as shipped and is not a
#: failure of the documented target (D5: a skip naming it; D6: drop_last=False keeps the sample).
DEVIATION_PINS: dict[str, tuple[str, str]] = {
    "V5": ("D5", "epoch_reshuffle-loader_main-veomni-9a43053d22.json"),
    "V6": ("D6", "exactly_once-loader_worker-veomni-45af2abdca.json"),
}
#: Where each fix can show: the components whose code it changes (for the leave-one-out search).
FIX_COMPONENTS: dict[str, tuple[str, ...]] = {
    **{f: ("loader:main",) for f in ("V1", "V2", "V3", "V4", "V12", "V17")},
    **{f: ("loader:worker", "loader:multisource") for f in ("V7", "V8", "V13", "V15")},
    **{f: ("loader:multisource",) for f in ("V9", "V10")},
    "V11": ("packer",),
}


def _unavailable(name: str, applied: tuple[str, ...] | None, patch_set=VEOMNI) -> str:
    return (patch_set.unavailable() if applied is None
            else f"{name}: this process's copy carries {list(applied)}, not every fix")


def fixed() -> Target:
    """``documented()`` in a process whose VeOmni carries every diff (``python -m properties`` re-runs a command
    with this target in such a process)."""
    name = VEOMNI.target
    applied = VEOMNI.applied()
    if applied != ALL_FIXES:
        return Target(name=name, description="VeOmni 0.1.12 with the proposed fixes",
                      unavailable=_unavailable(name, applied))
    return Target(name=name, components=documented_components(),
                  description=f"VeOmni 0.1.12 held to what it documents (D1-D6), with the diffs {', '.join(ALL_FIXES)} "
                              "of studies/veomni/patches/ applied (properties.targets.patched)")


def builders_fixed() -> Target:
    """``veomni-builders`` (VeOmni's loaders as its own builders build them, held to D1-D5) in a process whose
    VeOmni carries every diff: a campaign on the real path looks past the known bugs. Runs in VeOmni's overlay
    (``python -m properties`` re-runs itself there, then in the patched process)."""
    name = VEOMNI_BUILDERS.target
    base = veomni_builders.target()
    if base.unavailable:
        return Target(name=name, description="veomni-builders with fixes", unavailable=base.unavailable)
    applied = VEOMNI_BUILDERS.applied()
    if applied != ALL_FIXES:
        return Target(name=name, description="veomni-builders with fixes",
                      unavailable=_unavailable(name, applied, VEOMNI_BUILDERS))
    return Target(name=name, components=base.components,
                  description=base.description + "; with the diffs " + ", ".join(ALL_FIXES)
                  + " of studies/veomni/patches/ applied (studies.veomni:builders_fixed)")
