"""litdata 0.2.76 conformance pins (docs/litdata-0.2.76-conformance.md).

Each finding's minimal example is a file of the stream corpus (tests/regressions/streams/, its
``finding`` field names it), replayed three ways:

* on litdata as released it fails: an expected failure that counts only when the replay ran and
  failed (a skip or an error is a failure of the test; a pass is the strict XPASS: fixed upstream);
* with every proposed fix (``properties.stream_fixes:litdata_fixed``) it passes;
* with every fix but its own it still fails: that fix is what makes the difference.

The target runs in the ci profile through the CLI (``check --json``) with a small fixed budget, as
released and with the fixes. Skips with the reason when the litdata extra is absent.
"""

from __future__ import annotations

import pytest

from properties import corpus, suite
from properties import stream_suite as SS
from properties.runner import replay_example
from properties.stream_scenarios import StreamScenario, decode_stream_scenario
from properties.targets import litdata_target as L
from properties.targets import resolve
from tests.stream_pins import STREAM_PROPERTIES, ci_check, first_failure, fixes

pytestmark = pytest.mark.skipif(not L.available(), reason=L.MISSING)

FIXED = "properties.stream_fixes:litdata_fixed"
def _pins() -> list[tuple[str, str]]:
    return [(k, str(v)) for k, v in fixes().pinned("L").items()] if L.available() else []


def expect_litdata_bug(name: str, result) -> None:
    if result.status == "skip":
        pytest.fail(f"{name}: the replay did not run ({result.message}); a skip is no evidence of the bug")
    if result.status == "pass":
        pytest.fail(f"[XPASS(strict)] {name} passes on litdata as released: fixed upstream? update the pin")
    assert result.status == "fail", result
    pytest.xfail(f"a litdata 0.2.76 bug (docs/litdata-0.2.76-conformance.md): {name}: {result.message}")


def test_target_resolves_with_one_stream_component():
    t = resolve("litdata")
    assert t.unavailable is None and [c.kind for c in t.components] == ["stream"]


def test_plain_epochs_deliver_every_sample_once():
    SS.stream_exactly_once(L.component(), StreamScenario(sources=(6,), chunk_size=2, num_workers=1))


def test_every_fix_is_pinned_and_every_pin_expects_litdata_to_fail_and_the_fixes_to_pass():
    pins = dict(_pins())
    assert sorted(pins) == sorted(fixes().LITDATA_FIXES)
    for finding, path in pins.items():
        entry = corpus.load(path)
        assert entry["expect"] == {"litdata": "fail", FIXED: "pass"}, finding
        assert decode_stream_scenario(entry["example"]).to_json() == entry["example"]["scenario"]


@pytest.mark.parametrize("finding,path", _pins(), ids=[k for k, _ in _pins()])
def test_finding_fails_on_litdata_as_released(finding, path):
    expect_litdata_bug(finding, corpus.replay(corpus.load(path)))


@pytest.mark.parametrize("finding,path", _pins(), ids=[k for k, _ in _pins()])
def test_finding_passes_with_every_fix_and_fails_without_its_own(finding, path):
    entry = corpus.load(path)
    prop = suite.get(entry["property"])
    fixed = replay_example(resolve(FIXED), prop, entry["component"], entry["example"])
    assert fixed.status == "pass", fixed.message
    others = [f for f in fixes().LITDATA_FIXES if f != finding]
    without = replay_example(fixes().with_fixes("litdata", others), prop, entry["component"], entry["example"])
    assert without.status == "fail", f"{finding}'s example passes without its fix: the pin proves nothing"


def test_a_fixed_loader_built_without_fixes_behaves_as_released():
    # The patches are subclasses switched per instance: no fix, no change (same transcript as litdata's own).
    from properties import stream_props as S

    sc = StreamScenario(sources=(6,), chunk_size=2, checkpoints=(2,))
    plain, none = L.component(), fixes().litdata_component(())
    a = S.run_stream(plain.make_loader, sc, ids_of=plain.ids_of)
    b = S.run_stream(none.make_loader, sc, ids_of=none.ids_of)
    assert a.steps == b.steps and len(a.steps) == 12


def test_unknown_fix_is_named_in_the_error():
    with pytest.raises(ValueError, match="fixes=\\['L99'\\]: allowed values: L1, "):
        fixes().litdata_component(("L99",))


# Found by the campaigns on the fixed target (litdata with L1-L7); no fix patch yet
# (docs/litdata-0.2.76-conformance.md, "Open findings").
OPEN = {
    # L8: a persistent worker counts epochs itself (StreamingDataset.__next__ bumps current_epoch at its
    # StopIteration); an epoch the loop broke off never gets there, so the worker's next epoch reuses the
    # last one's shuffle while the loader's state names the next: a restore then repeats and loses samples
    "L8-persistent-break": ("stream_exactly_once", StreamScenario(
        sources=(4,), chunk_size=1, shuffle=True, num_workers=1, persistent_workers=True, checkpoints=(0, 2),
        break_after=1)),
    # a non-cycling parallel mixture, shuffled, one persistent worker, restored at the epoch end:
    # epoch 1 draws the second source in another order than the uninterrupted run
    "O1-parallel-persistent": ("stream_resume", StreamScenario(
        sources=(4, 4), mix="parallel", chunk_size=1, shuffle=True, shuffle_buffer=1, num_workers=1,
        persistent_workers=True, checkpoints=(0, 1), restore_at_epoch_end=True)),
    # a weighted mixture over 3 workers restored after a batch: a source's summed count exceeds its length
    "O2-weighted-three-workers": ("stream_mixture", StreamScenario(
        sources=(4, 4, 4), mix="combined", weights=(0.3333, 0.3333, 0.3333), chunk_size=1, num_workers=3,
        checkpoints=(0, 1), restore_at_epoch_end=True)),
    # a cycling parallel mixture over 2 workers holding unequal chunk counts, batches of 3: the restored
    # per-worker counts disagree between sources and _ParallelDatasetIterator's assert fails
    "O3-parallel-cycling-batches": ("stream_resume", StreamScenario(
        sources=(14, 12), mix="parallel", cycle_length=14, chunk_size=4, num_workers=2, batch_size=3,
        checkpoints=(1,))),
}


def open_configuration(sc: StreamScenario) -> bool:
    """The knobs every open finding needs: a fixed-target failure outside them is new."""
    return sc.persistent_workers or (sc.mix == "parallel" and sc.num_workers >= 2) or (
        sc.mix == "combined" and sc.weights is not None and sc.num_workers >= 2)


@pytest.mark.xfail(strict=True, reason="open litdata findings on the fixed target (no fix patch yet)")
@pytest.mark.parametrize("name", sorted(OPEN))
def test_open_finding_fails_with_every_fix(name):
    prop, sc = OPEN[name]
    assert open_configuration(sc)
    failure = first_failure(prop, fixes().litdata_component(), sc)
    assert failure is None, failure


def test_ci_check_of_litdata_as_released_gives_every_stream_property_a_status(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))   # failures go to this test's own scratch directory
    code, doc = ci_check(capsys, "litdata", 1)
    rows = {r["property"]: r for r in doc["results"]}
    assert doc["target"] == "litdata" and set(rows) == set(STREAM_PROPERTIES)
    assert all(r["component"] == "stream:litdata" and r["status"] in ("pass", "fail") for r in rows.values())
    assert code == (1 if any(r["status"] == "fail" for r in rows.values()) else 0)


def test_ci_check_of_litdata_with_the_fixes_fails_only_where_a_finding_is_open(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    code, doc = ci_check(capsys, FIXED, 2)
    rows = {r["property"]: r for r in doc["results"]}
    assert set(rows) == set(STREAM_PROPERTIES) and all(r["examples"] >= 1 for r in rows.values())
    for r in rows.values():
        assert r["status"] == "pass" or open_configuration(decode_stream_scenario(r["minimal_example"])), r
