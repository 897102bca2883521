"""What this process may use of the machine: CPUs and memory, as a container or ``taskset`` limits them.

A study sizes its default process pool from these (``simulator.executors.default_processes``). The
machine's own counts are not enough: in a container (a Kubernetes pod, ``docker run --cpus 4 --memory
16g``) ``os.cpu_count()`` and the physical memory are the host's, and a pool sized from them oversubscribes
the CPU quota and can be killed for memory. The limits come from the process's cgroup (v2, or v1's cpu
and memory controllers), the tightest over its ancestors; a limit that cannot be read is no limit.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

#: Where the cgroup hierarchies are mounted, and where this process's cgroups are listed.
CGROUP_ROOT = "/sys/fs/cgroup"
SELF_CGROUP = "/proc/self/cgroup"
#: cgroup v1 writes "no limit" as a huge page-rounded number (2**63 - 4096 on x86-64): anything above this is none.
_V1_UNLIMITED = 1 << 62


def affinity_cpus() -> int:
    """The CPUs this process may run on (its affinity mask), or ``os.cpu_count()`` where there is no mask."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:     # not on Linux
        return os.cpu_count() or 1


def physical_memory_bytes() -> int | None:
    """The machine's physical memory, or None where ``sysconf`` does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _ancestors(root: Path, rel: str) -> list[Path]:
    """``root/rel`` and each directory above it up to ``root``, the ones that exist. Inside a container's
    cgroup namespace ``rel`` is ``/`` and ``root`` is the container's own cgroup."""
    parts = [p for p in rel.split("/") if p]
    dirs = [root.joinpath(*parts[:k]) for k in range(len(parts), -1, -1)]
    return [d for d in dirs if d.is_dir()]


def _cgroups(self_cgroup: str) -> dict[str, str]:
    """Controller (``"v2"`` for the unified hierarchy) -> this process's cgroup path, from ``/proc/self/cgroup``."""
    out: dict[str, str] = {}
    for line in (_read(Path(self_cgroup)) or "").splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        _, controllers, rel = fields
        if controllers == "":
            out["v2"] = rel
        for c in controllers.split(","):
            if c:
                out[c] = rel
    return out


def _v2_cpus(text: str | None) -> float | None:
    if not text:
        return None
    quota, _, period = text.partition(" ")
    if quota == "max":
        return None
    q, p = _int(quota), _int(period or "100000")
    return q / p if q is not None and p is not None and q > 0 and p > 0 else None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None


def _bytes(text: str | None, unlimited: int | None = None) -> int | None:
    value = _int(text)      # v2's "max" is no limit, as is anything unreadable
    if value is None or value <= 0 or (unlimited is not None and value >= unlimited):
        return None
    return value


def cgroup_limits(root: str = CGROUP_ROOT, self_cgroup: str = SELF_CGROUP) -> tuple[float | None, int | None]:
    """This process's cgroup limits: (CPUs of quota, as a float; bytes of memory), each None where there is
    none or it cannot be read. The tightest over the cgroup and its ancestors, v2 and v1 alike."""
    groups = _cgroups(self_cgroup)
    base = Path(root)
    cpus: list[float] = []
    memory: list[int] = []
    if "v2" in groups:
        for d in _ancestors(base, groups["v2"]):
            if (c := _v2_cpus(_read(d / "cpu.max"))) is not None:
                cpus.append(c)
            if (m := _bytes(_read(d / "memory.max"))) is not None:
                memory.append(m)
    if "cpu" in groups:
        # v1's cpu controller is mounted as cpu, or cpu,cpuacct with a cpu link to it: a directory read twice
        # changes no minimum
        for mount in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
            for d in _ancestors(base / mount, groups["cpu"]):
                quota, period = _int(_read(d / "cpu.cfs_quota_us")), _int(_read(d / "cpu.cfs_period_us"))
                if quota is not None and period is not None and quota > 0 and period > 0:
                    cpus.append(quota / period)
    if "memory" in groups:
        for d in _ancestors(base / "memory", groups["memory"]):
            if (m := _bytes(_read(d / "memory.limit_in_bytes"), _V1_UNLIMITED)) is not None:
                memory.append(m)
    return (min(cpus) if cpus else None), (min(memory) if memory else None)


Limits = tuple[float | None, int | None]


def usable_cpus(limits: Limits | None = None) -> int:
    """The CPUs this process may keep busy: its affinity mask, within its cgroup's CPU quota (rounded up:
    a quota of 2.5 CPUs runs three processes at 83% each, not two at full speed). ``limits``: ``cgroup_limits()``
    if already read."""
    n = affinity_cpus()
    quota, _ = cgroup_limits() if limits is None else limits
    if quota is not None:
        n = min(n, max(1, math.ceil(quota)))
    return n


def memory_limit_bytes(limits: Limits | None = None) -> int | None:
    """The memory this process may use: the machine's, within its cgroup's limit; None where neither is known.
    ``limits``: ``cgroup_limits()`` if already read."""
    cgroup = (cgroup_limits() if limits is None else limits)[1]
    known = [m for m in (physical_memory_bytes(), cgroup) if m is not None]
    return min(known) if known else None


def available() -> tuple[int, int | None]:
    """(usable CPUs, usable memory in bytes or None), the cgroup read once for both."""
    limits = cgroup_limits()
    return usable_cpus(limits), memory_limit_bytes(limits)


__all__ = ["affinity_cpus", "available", "cgroup_limits", "memory_limit_bytes", "physical_memory_bytes", "usable_cpus"]
