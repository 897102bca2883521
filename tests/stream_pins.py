"""What the litdata and Hugging Face conformance pins share (tests/test_litdata_conformance.py,
tests/test_hf_conformance.py)."""

from __future__ import annotations

import json

from properties import cli
from properties import stream_suite as SS
from properties.stream_scenarios import StreamScenario

STREAM_PROPERTIES = ("stream_resume", "stream_exactly_once", "stream_epochs", "stream_dp_shards", "stream_mixture")


def first_failure(prop: str, component, sc: StreamScenario) -> str | None:
    """The property's failure as text, raised by the caller outside the ``except``: a kept exception
    would hold the failed run's frames, and with them loaders whose crashed workers slowed every later
    test in the process (26 s instead of 1 s for the next check)."""
    try:
        getattr(SS, prop)(component, sc)
    except Exception as e:  # noqa: BLE001 - a crashed worker raises whatever the library raised
        return f"{type(e).__name__}: {e}"
    return None


def failure_here(prop: str, target: str, scenario: dict) -> str | None:
    """``first_failure`` of the target's stream component on an encoded scenario (what ``failure_in_copy``
    calls in a patched copy's process)."""
    from properties.targets import resolve

    return first_failure(prop, resolve(target).components[0], StreamScenario.from_json(scenario))


def failure_in_copy(patch_set, fixes, prop: str, sc: StreamScenario) -> str | None:
    """The property's failure on the released adapter in a process whose library carries ``fixes`` of
    ``patch_set`` (None: all)."""
    return patch_set.call(fixes, "tests.stream_pins:failure_here", prop, patch_set.released, sc.to_json())


def replays_with_every_fix(patch_set, named: list[tuple[str, dict]], tries: int) -> dict[str, object]:
    """Each named corpus entry replayed with every diff of ``patch_set``, all in one patched process (a process
    each would start torch and the library again, 2 s a replay), each tried up to ``tries`` times for a failure:
    name -> Result."""
    from properties import corpus

    results = corpus.replay_many_until_with_fixes([e for _, e in named], patch_set, None, "fail", tries)
    return {name: r for (name, _), r in zip(named, results)}


#: a stream family's study, whose ``fixes.FIXES`` is its fix set (pins, diffs, patch set)
FAMILIES = {"litdata": "studies.litdata.fixes", "hf": "studies.hf_datasets.fixes"}


def fixes(family: str):
    """The family's ``properties.targets.fixset.StreamFixes``."""
    import importlib

    return importlib.import_module(FAMILIES[family]).FIXES


def ci_check(capsys, target: str, examples: int) -> tuple[int, dict]:
    """``python -m properties check --target TARGET --json`` over the stream properties, hermetic (seed 0,
    no database, no shrinking): its exit code and its JSON document."""
    code = cli.main(["check", "--target", target, "--json", "--max-examples", str(examples), "--no-shrink",
                     "--database", "none", "--seed", "0", *[a for p in STREAM_PROPERTIES for a in ("--property", p)]])
    return code, json.loads(capsys.readouterr().out)
