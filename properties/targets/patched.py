"""A ``:fixed`` target runs the library as its maintainers would after merging the proposed fixes.

Each fix is a unified diff against the released source, ``studies/<library>/patches/<ID>.diff``
(its leading paragraph says what it fixes; ``patch`` skips it). A diff written on top of others says so in a
line of its head, ``Applies after: L8, L10.``: its leave-one-out copy for one of those (``without``) leaves it
out too, as a maintainer who declines the first would not take it. ``PatchSet.build(fixes)`` copies the
installed packages the diffs touch into a directory of their own (cached under the system's temporary
directory, keyed by the diffs' and the packages' content), applies the chosen diffs with ``patch -p1``,
and ``env_for_subprocess`` puts that directory first on ``PYTHONPATH``: a package is imported once per
process, so the released and the patched copy cannot share one, and DataLoader workers (forked or
spawned) import the same copy as their parent. A library that runs in an overlay of its own
(``properties.targets.overlay``: torchtitan) is copied from its overlay, which comes next on that
``PYTHONPATH`` (it holds the versions the library declares). ``python -m properties`` re-runs a command
whose target is a patch set's in such a process (``rerun_patched``, called by ``properties.cli.main``);
``call`` runs one function there (the pins' leave-one-out runs: every diff but one). Nothing is written
into the checkout.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from .overlay import Overlay, target_of
from .studies import patch_set_of

#: the checkout: first on a patched process's path after the copy, so the suite and the studies import as here
ROOT = Path(__file__).resolve().parents[2]
#: set in a patched process: the directory of its copy (whose MARKER names the fixes applied)
ENV = "DYNBSZ_PATCHED_COPY"
MARKER = "PATCHED.json"
#: overrides where copies are cached (default: <temp>/dynbsz-patched-<uid>)
CACHE_ENV = "DYNBSZ_PATCHED_CACHE"


class PatchError(RuntimeError):
    """A diff that does not apply, a fix that is not known, a package that is not installed."""


@dataclass(frozen=True)
class Fix:
    id: str
    diff: Path
    package: str                   # the top-level package the diff patches (its first ``--- a/PKG/...`` line)
    summary: str                   # the diff's first paragraph, its id left out
    after: tuple[str, ...] = ()    # the fixes it is written on top of (its head's ``Applies after:`` line)


def read_fix(diff: Path) -> Fix:
    text = diff.read_text()
    start = re.search(r"^--- a/([^/\s]+)/", text, re.M)
    if start is None:
        raise PatchError(f"{diff}: not a unified diff against a/<package>/... (no '--- a/' line)")
    head, package = text[:start.start()], start.group(1)
    first = " ".join(head.strip().split("\n\n")[0].split())
    after = re.search(r"^Applies after: ([\w, ]+)\.?\s*$", head, re.M)
    return Fix(id=diff.stem, diff=diff, package=package,
               summary=first[len(diff.stem):].lstrip(" :") if first.startswith(diff.stem) else first,
               after=tuple(f.strip() for f in after.group(1).split(",")) if after else ())


@dataclass(frozen=True)
class PatchSet:
    """The fixes of one report: every ``*.diff`` in ``root`` (a study's ``patches/`` folder), run as ``target``
    by the released adapter's target ``released`` in a process with the patched copy. A study declares its
    patch sets in ``PATCH_SETS`` (``properties.targets.studies``)."""

    target: str
    released: str
    library: str
    root: Path
    #: the overlay the library is installed in, for one that runs in an overlay (properties.targets.overlay)
    overlay: Overlay | None = None

    def fixes(self) -> dict[str, Fix]:
        out = {}
        for diff in sorted(self.root.glob("*.diff")):
            out[diff.stem] = read_fix(diff)
        return dict(sorted(out.items(), key=lambda kv: _order(kv[0])))

    def check(self, fixes: Iterable[str] | None) -> tuple[str, ...]:
        known = self.fixes()
        fixes = tuple(known) if fixes is None else tuple(fixes)
        bad = [f for f in fixes if f not in known]
        if bad:
            raise ValueError(f"fixes={bad!r}: allowed values: {', '.join(known) or 'none'} (the diffs under "
                             f"{self.root})")
        missing = {f: [a for a in known[f].after if a not in fixes] for f in fixes}
        missing = {f: m for f, m in missing.items() if m}
        if missing:
            raise ValueError(f"fixes={list(fixes)!r}: " + "; ".join(f"{f} applies after {', '.join(m)}, not chosen"
                                                                   for f, m in missing.items()))
        return tuple(f for f in known if f in fixes)   # in the order the diffs apply

    def without(self, fix: str) -> tuple[str, ...]:
        """Every fix but ``fix`` and those written on top of it (``Applies after:``, followed through): the
        leave-one-out pins' copy."""
        known = self.fixes()
        if fix not in known:
            self.check([fix])   # the error naming the allowed values
        dropped = {fix}
        while True:
            more = {f for f, d in known.items() if f not in dropped and dropped.intersection(d.after)}
            if not more:
                return tuple(f for f in known if f not in dropped)
            dropped |= more

    def build(self, fixes: Iterable[str] | None = None) -> Path:
        """The directory holding the installed packages with ``fixes`` (default: all) applied."""
        fixes = self.check(fixes)
        known = self.fixes()
        packages = sorted({known[f].package for f in known})
        origins = {}
        for package in packages:
            origin = self.release(package)
            if origin is None:
                raise PatchError(f"{package} is not installed: the patch set {self.target} copies it "
                                 f"({self.overlay.install if self.overlay else 'bash ci/install.sh --hf'})")
            origins[package] = origin
        key = hashlib.sha256(json.dumps([self.target, fixes, {p: str(o) for p, o in origins.items()}]).encode())
        for f in fixes:
            key.update(known[f].diff.read_bytes())
        for package in packages:
            key.update(_version(package, self.import_path(None)).encode())
        root = Path(os.environ.get(CACHE_ENV) or Path(tempfile.gettempdir()) / f"dynbsz-patched-{os.getuid()}")
        final = root / key.hexdigest()[:16]
        if (final / MARKER).exists():
            return final
        root.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(dir=root, prefix=".build-"))
        try:
            for package, origin in origins.items():
                shutil.copytree(origin, work / package, ignore=shutil.ignore_patterns("__pycache__"))
            for f in fixes:
                done = subprocess.run(["patch", "-p1", "--forward", "--batch", "-i", str(known[f].diff)], cwd=work,
                                      capture_output=True, text=True)
                if done.returncode != 0:
                    raise PatchError(f"{known[f].diff} does not apply to the installed {known[f].package} "
                                     f"(after {', '.join(fixes[:fixes.index(f)]) or 'no other diff'}): "
                                     f"{(done.stdout + done.stderr).strip()[-800:]}")
            (work / MARKER).write_text(json.dumps({"target": self.target, "fixes": list(fixes)}))
            with contextlib.suppress(OSError):   # another process built the same copy first: keep its
                os.rename(work, final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return final

    def release(self, package: str) -> Path | None:
        """The folder of the released ``package`` the copy is made from: the overlay's, for a library that runs
        in one (this process need not have the overlay on its path), else the one this process imports."""
        spec = None
        if self.overlay is not None:
            spec = importlib.machinery.PathFinder.find_spec(package, self.import_path(None))
        if spec is None:
            spec = importlib.util.find_spec(package)
        return None if spec is None or spec.origin is None else Path(spec.origin).parent

    def import_path(self, copy: Path | None) -> list[str]:
        """The folders a process puts first on its import path to run the library: the patched ``copy`` (None:
        the release), then the library's overlay, if it runs in one."""
        return [str(p) for p in (copy, self.overlay.dir() if self.overlay else None) if p]

    def installed(self) -> bool:
        return all(self.release(f.package) is not None for f in self.fixes().values())

    def env_for_subprocess(self, fixes: Iterable[str] | None = None, base: dict | None = None) -> dict:
        copy = self.build(fixes)
        env = dict(os.environ if base is None else base)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (*self.import_path(copy), str(ROOT), env.get("PYTHONPATH")) if p)
        env[ENV] = str(copy)
        return env

    def applied(self) -> tuple[str, ...] | None:
        """The fixes this process's copy of the packages carries, or None in a process without this set's copy."""
        copy = os.environ.get(ENV)
        if not copy or not (Path(copy) / MARKER).exists():
            return None
        marker = json.loads((Path(copy) / MARKER).read_text())
        if marker.get("target") != self.target:
            return None
        for package in {fix.package for fix in self.fixes().values()}:
            spec = importlib.util.find_spec(package)
            if spec is None or not str(spec.origin).startswith(copy + os.sep):
                return None   # PYTHONPATH lost the copy: this process imports the release
        return tuple(marker["fixes"])

    def unavailable(self) -> str:
        return (f"{self.target} is {self.library} with the diffs under {self.root} applied to a copy of the installed "
                f"packages, which a process imports instead of the release: run it through `python -m properties` "
                "(which re-runs the command in such a process), or from Python with "
                "properties.targets.patched.call")

    def rerun(self, module: str, argv: Sequence[str]) -> int:
        """``python -m module argv`` in a process with every diff applied: its exit code. PatchError where the
        diffs do not apply (the command line says so)."""
        return subprocess.run([sys.executable, "-m", module, *argv], env=self.env_for_subprocess()).returncode

    def call(self, fixes: Iterable[str] | None, function: str, *args: Any, timeout: float = 600) -> Any:
        """``MODULE:FUNCTION(*args)`` in a process with the copy carrying ``fixes``: its JSON result."""
        module, _, name = function.partition(":")
        code = (f"import json, sys; from {module} import {name} as f; "
                f"sys.stdout.write('\\n' + json.dumps(f(*json.loads(sys.argv[1]))))")
        done = subprocess.run([sys.executable, "-c", code, json.dumps(list(args))], env=self.env_for_subprocess(fixes),
                              capture_output=True, text=True, timeout=timeout, cwd=ROOT)
        if done.returncode != 0:
            raise PatchError(f"{function} with {self.target}'s fixes {list(self.check(fixes))} exited "
                             f"{done.returncode}: {done.stderr.strip()[-2000:]}")
        return json.loads(done.stdout.rstrip().rsplit("\n", 1)[-1])


def _order(fix: str) -> tuple:
    """H2 before H10: the diffs apply in the order of their ids."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", fix))


def _version(package: str, first: Sequence[str] = ()) -> str:
    """``package``'s installed version, looked up in ``first`` before this process's path."""
    from importlib import metadata

    dist = next(iter(metadata.distributions(name=package, path=[*first, *sys.path])), None)
    return dist.version if dist is not None else "?"


def rerun_patched(args: Any, argv: Sequence[str] | None) -> int | None:
    """If this command's target is a patch set's and this process lacks its copy, run the same command in a
    process with every diff applied and return its exit code (PatchError where the diffs do not apply); else None (run here: the target then resolves,
    or reports itself unavailable, e.g. with the install command of a library that is not installed)."""
    patch_set = patch_set_of(target_of(args) or "")
    if patch_set is None or patch_set.applied() is not None or not patch_set.installed():
        return None
    return patch_set.rerun("properties", list(sys.argv[1:] if argv is None else argv))


__all__ = ["ENV", "Fix", "PatchError", "PatchSet", "read_fix", "rerun_patched"]
