"""A library that declares other dependency versions than the venv's runs in an overlay of its own.

VeOmni 0.1.12 declares ``datasets>=2.20,<=2.21`` and torchtitan 0.3.0 ``datasets>=3.6,<4.8``, while the
venv keeps the datasets 5.2.0 the Hugging Face report is about. ``ci/install.sh`` installs each library's
versions into a directory of its own (``pip install --no-deps --target``), and ``python -m properties``
re-runs a command whose target needs one in a subprocess with that directory first on ``PYTHONPATH``
(``rerun_in_overlay``, called by ``properties.cli.main``): datasets is imported once per process, so the
versions cannot be switched inside one.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Sequence


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("+")[0].split(".")[:3] if p.isdigit())


def datasets_version() -> str | None:
    """The datasets this process imports (or would import), without importing it."""
    if "datasets" in sys.modules:
        return getattr(sys.modules["datasets"], "__version__", None)
    from importlib import metadata

    try:
        return metadata.version("datasets")
    except metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class Overlay:
    """One target's overlay. ``datasets`` is the declared range ``(low, high)``, ``high`` inclusive
    where ``high_inclusive``; ``marker`` a package whose folder shows the overlay is installed."""

    target: str
    library: str
    folder: str
    marker: str
    datasets: tuple[tuple[int, ...], tuple[int, ...]]
    high_inclusive: bool
    env: str          # overrides the folder
    install: str      # the command that installs it
    also: tuple[str, ...] = ()   # other target names that run the same library (e.g. its fixed variant)

    @property
    def active_env(self) -> str:
        return self.env + "_ACTIVE"   # set in the re-run process, so it never re-runs itself

    @property
    def declared(self) -> str:
        low, high = (".".join(map(str, v)) for v in self.datasets)
        return f"datasets>={low},{'<=' if self.high_inclusive else '<'}{high}"

    def dir(self) -> str:
        """``$<env>``, else ``<the active environment>/overlays/<folder>`` (inside .venv/, which git ignores)."""
        return os.environ.get(self.env) or os.path.join(sys.prefix, "overlays", self.folder)

    def installed(self) -> bool:
        return os.path.isdir(os.path.join(self.dir(), self.marker))

    def datasets_in_range(self) -> bool:
        v = datasets_version()
        if v is None:
            return False
        low, high = self.datasets
        return low <= _version(v) and (_version(v) <= high if self.high_inclusive else _version(v) < high)

    def missing(self) -> str:
        """Why the target cannot run in this process, and what to do."""
        if not self.installed():
            return (f"{self.library} runs with its declared {self.declared}, which is not installed (install its "
                    f"overlay: {self.install}; it goes to {self.dir()})")
        return (f"{self.library} declares {self.declared} but this process has datasets {datasets_version()}: run "
                f"it through `python -m properties` (which re-runs the command with the overlay {self.dir()} first "
                f"on PYTHONPATH) or set PYTHONPATH={self.dir()}")

    def env_for_subprocess(self, base: dict | None = None) -> dict:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ if base is None else base)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (self.dir(), root, env.get("PYTHONPATH")) if p)
        env[self.active_env] = "1"
        return env


TORCHTITAN = Overlay(target="torchtitan", library="torchtitan 0.3.0", folder="torchtitan", marker="torchtitan",
                     datasets=((3, 6, 0), (4, 8, 0)), high_inclusive=False, env="DYNBSZ_TORCHTITAN_OVERLAY",
                     install="bash ci/install.sh --torchtitan")
#: VeOmni 0.1.12's METADATA: Requires-Dist: datasets<=2.21.0,>=2.20.0
VEOMNI = Overlay(target="veomni-builders", library="VeOmni 0.1.12", folder="veomni", marker="datasets",
                 datasets=((2, 20, 0), (2, 21, 0)), high_inclusive=True, env="DYNBSZ_VEOMNI_OVERLAY",
                 install="bash ci/install.sh --veomni --veomni-datasets",
                 also=("studies.veomni:builders_fixed",))
#: every target that runs in an overlay, by target name
OVERLAYS: dict[str, Overlay] = {name: o for o in (TORCHTITAN, VEOMNI) for name in (o.target, *o.also)}


def target_of(args: Any) -> str | None:
    """The target a parsed command runs (a replay's or a repro's: the one its file names, unless --target says)."""
    name = getattr(args, "target", None)
    if name is None and getattr(args, "command", None) in ("replay", "repro") and getattr(args, "file", None):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            with open(args.file) as f:
                name = json.load(f).get("target")
    return name


def rerun_in_overlay(args: Any, argv: Sequence[str] | None) -> int | None:
    """If this command's target runs in an overlay that is installed and this process's datasets is outside
    the target's declared range, run the same command in a subprocess with the overlay first on PYTHONPATH
    and return its exit code; else None (run here: the target then resolves, or reports itself unavailable
    with the install command)."""
    overlay = OVERLAYS.get(target_of(args) or "")
    if (overlay is None or os.environ.get(overlay.active_env) or overlay.datasets_in_range()
            or not overlay.installed()):
        return None
    argv = list(sys.argv[1:] if argv is None else argv)
    return subprocess.run([sys.executable, "-m", "properties", *argv], env=overlay.env_for_subprocess()).returncode


__all__ = ["OVERLAYS", "Overlay", "TORCHTITAN", "VEOMNI", "datasets_version", "rerun_in_overlay", "target_of"]
