"""The packages import in one direction: no cycles, no upward imports, every module on its own.

The graph is read from the source with ``ast``, so an import inside a function (a lazy import
that dodges a cycle at load time) counts like any other: it is still a cycle.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("dynbsz", "simulator", "properties", "studies")
#: Which package may import which: dynbsz at the bottom, the simulator above it, the suite above both, and the
#: studied libraries on top (the suite finds them through entry points, never by import).
MAY_IMPORT = {"dynbsz": {"dynbsz"}, "simulator": {"dynbsz", "simulator"},
              "properties": {"dynbsz", "simulator", "properties"},
              "studies": {"dynbsz", "simulator", "properties", "studies"}}


def modules() -> dict[str, Path]:
    found = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if any(not (d / "__init__.py").exists() for d in path.parents if ROOT / pkg in (d, *d.parents)):
                continue   # a script beside the package (a study's repros/ and data/), not one of its modules
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imported_names(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every project module ``name`` imports, anywhere in its source (functions included)."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".") if is_package else name.split(".")[:-1]
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            # ``from pkg import mod`` imports the module pkg.mod; ``from mod import name`` imports mod
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known and "." in target:
                target = target.rpartition(".")[0]
            if target in known and target != name:
                out.add(target)
            elif target.split(".")[0] in ("ci", "tests"):
                out.add(target)
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported_names(name, path, known) for name, path in known.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in g:
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in g:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(g[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_lazy_cycle():
    # the oracle itself must be able to fail: a -> b at module level, b -> a inside a function
    g = {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    assert cycles(g) == [["a", "b"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_lazy_imports_included():
    assert cycles(graph()) == []


def test_no_upward_imports_and_nothing_from_ci_or_tests():
    bad = [f"{m} imports {d}" for m, deps in graph().items() for d in deps
           if d.split(".")[0] not in MAY_IMPORT[m.split(".")[0]]]
    assert bad == []


def test_every_module_imports_on_its_own():
    """Each module in an interpreter where no other project module was imported before it (third
    party packages stay loaded: torch once, not eighty times)."""
    names = sorted(modules())
    script = "\n".join([
        "import importlib, sys, traceback",
        f"names = {names!r}",
        "failed = []",
        "for name in names:",
        "    for m in [m for m in sys.modules if m.split('.')[0] in ('dynbsz', 'simulator', 'properties')]:",
        "        del sys.modules[m]",
        "    try:",
        "        importlib.import_module(name)",
        "    except Exception:",
        "        failed.append(name + ': ' + traceback.format_exc().strip().splitlines()[-1])",
        "print('\\n'.join(failed))",
        "sys.exit(1 if failed else 0)",
    ])
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]


def private_imports(path: Path, root: Path = ROOT) -> list[str]:
    """``from x import _name`` of a project module: a private name used outside its module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__" and (
                node.level or (node.module or "").split(".")[0] in PACKAGES):
            found += [f"{path.relative_to(root)}:{node.lineno} imports {a.name}" for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_private_imports_are_found(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from dynbsz.packer import (GreedyPacker,\n    _check_id)\nfrom os import _exit\n"
                     "def f():\n    from .x import _y\n")
    assert private_imports(probe, tmp_path) == ["probe.py:1 imports _check_id", "probe.py:5 imports _y"]


def test_no_private_names_imported_across_modules():
    assert [p for path in modules().values() for p in private_imports(path)] == []


@pytest.mark.parametrize("package", PACKAGES)
def test_the_graph_sees_every_package(package):
    assert any(m == package or m.startswith(package + ".") for m in graph())
