"""``simulator.machine``: the CPUs and memory a container lets this process use, read from fake cgroup trees
(v2, v1, nested, unlimited, unreadable) laid out as the kernel lays them out."""

from __future__ import annotations

import pytest

from simulator import machine

GIB = 1024 ** 3


def _tree(tmp_path, self_cgroup: str, files: dict[str, str]):
    root = tmp_path / "cgroup"
    root.mkdir()
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    proc = tmp_path / "self_cgroup"
    proc.write_text(self_cgroup)
    return str(root), str(proc)


def test_v2_quota_and_memory_of_the_process_cgroup(tmp_path):
    root, proc = _tree(tmp_path, "0::/kubepods/pod1/ctr\n", {
        "kubepods/pod1/ctr/cpu.max": "250000 100000",           # 2.5 CPUs
        "kubepods/pod1/ctr/memory.max": str(16 * GIB),
        "kubepods/cpu.max": "max 100000",                        # an ancestor without a limit
    })
    assert machine.cgroup_limits(root, proc) == (2.5, 16 * GIB)


def test_the_tightest_ancestor_wins(tmp_path):
    root, proc = _tree(tmp_path, "0::/a/b\n", {
        "a/b/cpu.max": "800000 100000", "a/cpu.max": "300000 100000",
        "a/b/memory.max": "max", "a/memory.max": str(8 * GIB),
    })
    assert machine.cgroup_limits(root, proc) == (3.0, 8 * GIB)


def test_inside_a_cgroup_namespace_the_root_is_the_container(tmp_path):
    root, proc = _tree(tmp_path, "0::/\n", {"cpu.max": "100000 100000", "memory.max": str(GIB)})
    assert machine.cgroup_limits(root, proc) == (1.0, GIB)


def test_v1_cpu_and_memory_controllers(tmp_path):
    root, proc = _tree(tmp_path, "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n1:name=systemd:/\n", {
        "cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "400000",
        "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000",
        "memory/docker/abc/memory.limit_in_bytes": str(4 * GIB),
        "memory/memory.limit_in_bytes": "9223372036854771712",   # v1's "no limit" at the root
    })
    assert machine.cgroup_limits(root, proc) == (4.0, 4 * GIB)


@pytest.mark.parametrize("self_cgroup, files", [
    ("0::/\n", {"cpu.max": "max 100000", "memory.max": "max"}),                  # v2, no limits
    ("3:cpu,cpuacct:/\n4:memory:/\n", {"cpu,cpuacct/cpu.cfs_quota_us": "-1", "cpu,cpuacct/cpu.cfs_period_us": "100000",
                                       "memory/memory.limit_in_bytes": "9223372036854771712"}),   # v1, no limits
    ("0::/gone\n", {}),                                                          # nothing mounted
    ("0::/\n", {"cpu.max": "banana 100000", "memory.max": "-5"}),              # unreadable values
    ("garbage", {"cpu.max": "100000 100000", "memory.max": str(GIB)}),          # an unreadable /proc/self/cgroup
])
def test_no_limit_or_an_unreadable_one_is_none(tmp_path, self_cgroup, files):
    root, proc = _tree(tmp_path, self_cgroup, files)
    assert machine.cgroup_limits(root, proc) == (None, None)


def test_usable_cpus_is_the_affinity_within_the_quota_rounded_up(monkeypatch):
    monkeypatch.setattr(machine, "affinity_cpus", lambda: 64)
    monkeypatch.setattr(machine, "cgroup_limits", lambda: (2.5, None))
    assert machine.usable_cpus() == 3
    monkeypatch.setattr(machine, "cgroup_limits", lambda: (0.2, None))
    assert machine.usable_cpus() == 1
    monkeypatch.setattr(machine, "cgroup_limits", lambda: (None, None))
    assert machine.usable_cpus() == 64
    monkeypatch.setattr(machine, "affinity_cpus", lambda: 2)
    monkeypatch.setattr(machine, "cgroup_limits", lambda: (8.0, None))
    assert machine.usable_cpus() == 2


def test_memory_is_the_machine_within_the_container_limit(monkeypatch):
    monkeypatch.setattr(machine, "physical_memory_bytes", lambda: 256 * GIB)
    monkeypatch.setattr(machine, "cgroup_limits", lambda: (None, 16 * GIB))
    assert machine.memory_limit_bytes() == 16 * GIB
    monkeypatch.setattr(machine, "cgroup_limits", lambda: (None, None))
    assert machine.memory_limit_bytes() == 256 * GIB
    monkeypatch.setattr(machine, "physical_memory_bytes", lambda: None)
    assert machine.memory_limit_bytes() is None


def test_this_machine_reads_without_error():
    cpus, memory = machine.cgroup_limits()
    assert cpus is None or cpus > 0
    assert memory is None or memory > 0
    assert machine.usable_cpus() >= 1
