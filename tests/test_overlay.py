"""Targets that run a library with the dependency versions it declares re-run the command in that library's
overlay: by the target's name, and by the name of its fixed variant too."""

from __future__ import annotations

from types import SimpleNamespace

from properties.targets import overlay


def test_a_fixed_variant_runs_in_the_same_overlay_as_its_library():
    assert overlay.OVERLAYS["veomni-builders"] is overlay.VEOMNI
    assert overlay.OVERLAYS["studies.veomni:builders_fixed"] is overlay.VEOMNI
    assert overlay.OVERLAYS["torchtitan"] is overlay.TORCHTITAN
    assert "veomni" not in overlay.OVERLAYS   # the hand-assembled target runs beside the venv's datasets


def test_a_process_already_in_the_overlay_never_re_runs_itself(monkeypatch):
    monkeypatch.setenv(overlay.VEOMNI.active_env, "1")
    args = SimpleNamespace(target="studies.veomni:builders_fixed", command="check")
    assert overlay.rerun_in_overlay(args, ["check"]) is None
