"""Each studied library is one folder of one shape (studies/<library>/), found by the suite as a plugin."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest

from properties.targets import TargetError, names, resolve
from properties.targets import studies as S

STUDIES = Path(__file__).resolve().parent.parent / "studies"
#: the shape every study folder has (an independent list: the README's layout section names the same)
SHAPE = ("__init__.py", "adapter.py", "fixes.py", "patches", "repros", "pins", "data", "report.md", "intent.md")


def test_every_folder_under_studies_is_registered_and_every_registered_study_is_a_folder():
    folders = sorted(p.parent.name for p in STUDIES.glob("*/__init__.py"))
    assert folders == sorted(m.__name__.split(".")[1] for m in S.studies().values())
    assert folders == ["hf_datasets", "litdata", "torchtitan", "veomni"]


@pytest.mark.parametrize("folder", sorted(p.parent.name for p in STUDIES.glob("*/__init__.py")))
def test_a_study_folder_has_the_shape(folder):
    root = STUDIES / folder
    assert [part for part in SHAPE if not (root / part).exists()] == []
    module = next(m for m in S.studies().values() if m.__name__ == f"studies.{folder}")
    assert module.TARGETS and module.PATCH_SETS
    for patch_set in module.PATCH_SETS:
        assert patch_set.root == root / "patches" and patch_set.fixes(), patch_set.target
        assert patch_set.target == f"studies.{folder}:{patch_set.target.split(':')[1]}"
    # every pin names its finding, and every finding with a diff has a pin or a script
    pins = [json.loads(p.read_text()) for p in root.glob("pins/**/*.json")]
    assert pins and all(set(p) >= {"format", "target", "property", "example"} for p in pins)
    pinned = {p["finding"] for p in pins if p.get("finding")}
    scripts = {p.stem for p in (root / "repros").glob("*.py")}
    unshown = [f for s in module.PATCH_SETS for f in s.fixes() if f not in pinned | scripts]
    assert unshown == [], f"diffs with neither a pin nor a script: {unshown}"


def test_built_in_names_resolve_through_the_studies():
    assert {"veomni", "veomni-builders", "litdata", "hf-iterable", "torchtitan"} <= set(names())
    assert resolve("litdata").name == "litdata"
    assert S.patch_set_of("studies.litdata:fixed").released == "litdata"
    assert S.patch_set_of("litdata") is None and S.patch_set_of("nope:fixed") is None
    assert S.fix_diff("L19") == STUDIES / "litdata" / "patches" / "L19.diff" and S.fix_diff("L3") is None


class _Point:
    def __init__(self, name: str, module):
        self.name, self.value, self._module = name, f"fake.{name}", module

    def load(self):
        return self._module


def _registry(monkeypatch, *points):
    monkeypatch.setattr(metadata, "entry_points", lambda group: list(points) if group == S.GROUP else [])
    S.studies.cache_clear()


def test_a_registered_study_that_declares_nothing_is_refused_naming_what_it_lacks(monkeypatch):
    import types

    try:
        _registry(monkeypatch, _Point("empty", types.ModuleType("empty")))
        with pytest.raises(S.StudyError, match="'empty' .* lacks TARGETS, PATCH_SETS"):
            S.studies()
        twice = types.SimpleNamespace(TARGETS={"x": lambda: None}, PATCH_SETS=())
        _registry(monkeypatch, _Point("a", twice), _Point("b", twice))
        with pytest.raises(S.StudyError, match="two studies declare the target 'x'"):
            S.targets()
        _registry(monkeypatch)
        with pytest.raises(TargetError, match="unknown target 'litdata'; allowed values: dynbsz, torchdata, mutant"):
            resolve("litdata")
    finally:
        monkeypatch.undo()
        S.studies.cache_clear()
