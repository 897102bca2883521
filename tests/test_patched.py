"""properties.targets.patched: a patch set's copy of the installed packages with its diffs applied, on a
package of this test's own (so it runs without any extra), and the HF patch set's diffs against the release."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from properties.targets import patched as P
from studies.hf_datasets.fixes import HF
from studies.litdata.fixes import LITDATA
from studies.torchtitan.fixes import FIXES as TORCHTITAN

DIFF = """\
T1: greet the world, not nobody.

The bug: hello() greets nobody.

--- a/toypkg/core.py
+++ b/toypkg/core.py
@@ -1,2 +1,2 @@
 def hello():
-    return "hello nobody"
+    return "hello world"
"""
BROKEN = DIFF.replace('-    return "hello nobody"', '-    return "hello somebody"').replace("T1:", "T2:")


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """A package ``toypkg`` on the import path, a patches folder with T1 (applies) and a cache of the test's own."""
    site = tmp_path / "site"
    (site / "toypkg").mkdir(parents=True)
    (site / "toypkg" / "__init__.py").write_text("")
    (site / "toypkg" / "core.py").write_text('def hello():\n    return "hello nobody"\n')
    monkeypatch.syspath_prepend(str(site))
    (tmp_path / "patches" / "toy-1.0").mkdir(parents=True)
    (tmp_path / "patches" / "toy-1.0" / "T1.diff").write_text(DIFF)
    monkeypatch.setenv(P.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(P.ENV, raising=False)
    return P.PatchSet(target="toy:fixed", released="toy", library="toy 1.0", root=tmp_path / "patches" / "toy-1.0")


def test_a_fix_is_read_from_its_diff(toy):
    fix = toy.fixes()["T1"]
    assert (fix.package, fix.summary) == ("toypkg", "greet the world, not nobody.")


def test_the_copy_carries_the_diff_and_the_release_is_left_as_it_is(toy, tmp_path):
    copy = toy.build()
    assert (copy / "toypkg" / "core.py").read_text().endswith('"hello world"\n')
    assert (tmp_path / "site" / "toypkg" / "core.py").read_text().endswith('"hello nobody"\n')
    assert json.loads((copy / P.MARKER).read_text()) == {"target": "toy:fixed", "fixes": ["T1"]}
    assert toy.build() == copy, "a second build reuses the cached copy"
    assert toy.build(()) != copy and (toy.build(()) / "toypkg" / "core.py").read_text().endswith('nobody"\n')


def test_a_process_with_the_copy_imports_it_and_knows_its_fixes(toy):
    env = toy.env_for_subprocess()
    code = ("import toypkg.core, json; from properties.targets import patched as P; "
            "s = P.PatchSet(target='toy:fixed', released='toy', library='toy', root=__import__('pathlib').Path('no-such-dir')); "
            "print(json.dumps([toypkg.core.hello(), s.applied()]))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["hello world", ["T1"]]
    assert toy.applied() is None, "this process imports the release"


def test_an_unknown_fix_names_the_allowed_values(toy):
    with pytest.raises(ValueError, match=r"fixes=\['T9'\]: allowed values: T1"):
        toy.build(["T9"])
    assert toy.without("T1") == ()


#: written on top of T1: its context is T1's line
ON_TOP = """\
T3: greet the whole world.

Applies after: T1.

--- a/toypkg/core.py
+++ b/toypkg/core.py
@@ -1,2 +1,2 @@
 def hello():
-    return "hello world"
+    return "hello whole world"
"""


def test_a_diff_written_on_top_of_another_is_left_out_with_it_and_never_chosen_alone(toy, tmp_path):
    (tmp_path / "patches" / "toy-1.0" / "T3.diff").write_text(ON_TOP)
    assert toy.fixes()["T3"].after == ("T1",) and toy.fixes()["T1"].after == ()
    assert toy.without("T1") == () and toy.without("T3") == ("T1",)
    assert (toy.build() / "toypkg" / "core.py").read_text().endswith('"hello whole world"\n')
    with pytest.raises(ValueError, match=r"fixes=\['T3'\]: T3 applies after T1, not chosen"):
        toy.build(["T3"])


def test_litdata_diffs_apply_together_and_without_each_one(tmp_path, monkeypatch):
    # L11 is written on top of L8's and L10's (it shares L10's per-worker count), L4 on L8's shared epoch: leaving one out
    # leaves its dependents out
    if not LITDATA.installed():
        pytest.skip("litdata is not installed (bash ci/install.sh --litdata)")
    monkeypatch.setenv(P.CACHE_ENV, str(tmp_path))
    fixes = LITDATA.fixes()
    assert fixes["L11"].after == ("L8", "L10") and fixes["L4"].after == ("L8",)
    assert all(not f.after for k, f in fixes.items() if k not in ("L4", "L11"))
    assert "L11" not in LITDATA.without("L10") and {"L4", "L11"}.isdisjoint(LITDATA.without("L8"))
    for fix in fixes:
        assert (LITDATA.build(LITDATA.without(fix)) / P.MARKER).exists()


def test_a_diff_that_does_not_apply_is_an_error_naming_it(toy, tmp_path):
    (tmp_path / "patches" / "toy-1.0" / "T2.diff").write_text(BROKEN)
    with pytest.raises(P.PatchError, match=r"T2\.diff does not apply to the installed toypkg \(after T1\)"):
        toy.build()


def test_a_file_that_is_no_diff_is_refused(tmp_path):
    bad = tmp_path / "X1.diff"
    bad.write_text("X1: nothing here\n")
    with pytest.raises(P.PatchError, match="not a unified diff"):
        P.read_fix(bad)


def test_hf_diffs_each_apply_alone_and_all_together_to_the_release():
    if not HF.installed():
        pytest.skip("datasets is not installed (bash ci/install.sh --hf)")
    fixes = HF.fixes()
    assert set(fixes) == {f"H{i}" for i in range(1, 10)}
    assert {f.package for f in fixes.values()} == {"datasets", "torchdata"}
    assert all(f.summary and not f.summary.startswith("H") for f in fixes.values())
    for fix in fixes:
        assert (HF.build(HF.without(fix)) / P.MARKER).exists()
    released = Path(importlib.util.find_spec("datasets").origin).with_name("iterable_dataset.py")
    assert (HF.build() / "datasets" / "iterable_dataset.py").read_text() != released.read_text()


def test_a_library_in_an_overlay_is_copied_from_it_and_the_overlay_comes_next(toy, tmp_path, monkeypatch):
    # toypkg lives only in the overlay here, not on this process's path (as torchtitan in the venv)
    from properties.targets.overlay import Overlay

    overlay = tmp_path / "overlay"
    (tmp_path / "site").rename(overlay)
    importlib.invalidate_caches()
    monkeypatch.setenv("TOY_OVERLAY", str(overlay))
    lib = Overlay(target="toy", library="toy 1.0", folder="toy", marker="toypkg", datasets=((0,), (99,)),
                  high_inclusive=False, env="TOY_OVERLAY", install="bash ci/install.sh --toy")
    plain = P.PatchSet(target="toy:fixed", released="toy", library="toy 1.0", root=toy.root)
    assert not plain.installed()
    in_overlay = P.PatchSet(target="toy:fixed", released="toy", library="toy 1.0", root=toy.root,
                            overlay=lib)
    assert in_overlay.installed() and in_overlay.release("toypkg") == overlay / "toypkg"
    copy = in_overlay.build()
    assert (copy / "toypkg" / "core.py").read_text().endswith('"hello world"\n')
    assert in_overlay.import_path(None) == [str(overlay)] and in_overlay.import_path(copy) == [str(copy), str(overlay)]
    assert in_overlay.env_for_subprocess()["PYTHONPATH"].split(os.pathsep)[:2] == [str(copy), str(overlay)]


def test_torchtitan_diffs_each_apply_alone_and_all_together_to_the_overlay_release():
    if not TORCHTITAN.installed():
        pytest.skip(f"torchtitan's overlay is not installed ({TORCHTITAN.overlay.install})")
    fixes = TORCHTITAN.fixes()
    assert set(fixes) == {"T1", "T4", "T5"} and {f.package for f in fixes.values()} == {"torchtitan"}
    assert all(f.summary and not f.summary.startswith("T") for f in fixes.values())
    for fix in fixes:
        assert (TORCHTITAN.build([fix]) / P.MARKER).exists()
    released = TORCHTITAN.release("torchtitan") / "hf_datasets" / "text_datasets.py"
    assert str(released).startswith(TORCHTITAN.overlay.dir())
    assert (TORCHTITAN.build() / "torchtitan" / "hf_datasets" / "text_datasets.py").read_text() != released.read_text()
