"""litdata 0.2.76 conformance pins (studies/litdata/report.md).

Each finding's minimal example is a file of the study's pins (studies/litdata/pins/, its
``finding`` field names it), replayed three ways:

* on litdata as released it fails: an expected failure that counts only when the replay ran and
  failed (a skip or an error is a failure of the test; a pass is the strict XPASS: fixed upstream);
* with every proposed fix (``studies.litdata:fixed``: the diffs of studies/litdata/patches/
  applied to a copy of litdata, in a process of its own) it passes;
* with every diff but its own it still fails: that fix is what makes the difference.

A check that needs a copy with some of the diffs runs its function there (``LITDATA.call``): the functions
ending in ``_here`` below are those, run on the released adapter whose litdata is the copy.

The target runs in the ci profile through the CLI (``check --json``) with a small fixed budget, as
released and with the fixes. Skips with the reason when the litdata extra is absent.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

import pytest

from properties import corpus
from properties import stream_suite as SS
from properties.errors import Unsupported
from properties.stream_scenarios import StreamScenario, decode_stream_scenario
from properties.targets import resolve
from studies.litdata import adapter as L
from studies.litdata.fixes import LITDATA
from tests.stream_pins import STREAM_PROPERTIES, ci_check, failure_in_copy, first_failure, fixes, replays_with_every_fix

# studies: the findings' evidence, a job of its own (docs/guide/tests.md)
pytestmark = [pytest.mark.studies, pytest.mark.skipif(not L.available(), reason=L.MISSING)]

FIXED = "studies.litdata:fixed"
#: this module as a patched copy's process imports it (pytest may import it under another name)
HERE = "tests.test_litdata_conformance"


@functools.cache
def _with_every_fix() -> dict[str, object]:
    """Every pin's and merged example's replay with every diff, once per test process: corpus file name -> Result.
    Each is tried up to 3 times for a failure (2+ workers: scheduling), so a pass is no lucky run."""
    paths = [Path(p) for _, p in _pins()] + [fixes("litdata").pins / file for _, file in MERGED.values()]
    return replays_with_every_fix(LITDATA, [(p.name, corpus.load(p)) for p in paths], 3)


def _pins() -> list[tuple[str, str]]:
    return [(k, str(v)) for k, v in fixes("litdata").pinned().items()] if L.available() else []


def expect_litdata_bug(name: str, result) -> None:
    if result.status == "skip":
        pytest.fail(f"{name}: the replay did not run ({result.message}); a skip is no evidence of the bug")
    if result.status == "pass":
        pytest.fail(f"[XPASS(strict)] {name} passes on litdata as released: fixed upstream? update the pin")
    assert result.status == "fail", result
    pytest.xfail(f"a litdata 0.2.76 bug (studies/litdata/report.md): {name}: {result.message}")


def test_target_resolves_with_one_stream_component():
    t = resolve("litdata")
    assert t.unavailable is None and [c.kind for c in t.components] == ["stream"]


def test_plain_epochs_deliver_every_sample_once():
    SS.stream_exactly_once(L.component(), StreamScenario(sources=(6,), chunk_size=2, num_workers=1))


def test_every_fix_is_pinned_and_every_pin_expects_litdata_to_fail_and_the_fixes_to_pass():
    pins = dict(_pins())
    # a finding decided under a trainer (L18: no restore, only Lightning's len()-bounded epoch shows it) is pinned
    # in trainers/ instead, where tests/test_trainer_pins.py replays it the same three ways
    under_trainers = {corpus.load(p)["finding"] for p in corpus.files(fixes("litdata").pins / "trainers")}
    under_trainers = {f for f in under_trainers if f.startswith("L")} - set(pins)
    assert sorted(set(pins) | under_trainers) == sorted(fixes("litdata").summaries()), under_trainers
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
    fixed = _with_every_fix()[Path(path).name]
    assert fixed.status == "pass", fixed.message
    without = corpus.replay_with_fixes(entry, LITDATA, LITDATA.without(finding))
    assert without.status == "fail", f"{finding}'s example passes without its fix: the pin proves nothing"


def weighted_epoch_end_here() -> tuple[str, str | None, str | None]:
    """L4's pin on the copy's litdata: the convention the adapter declares, and stream_resume's failure as
    declared and when declared "closed" (None: it passes)."""
    entry = corpus.load(fixes("litdata").pinned()["L4"])
    sc = decode_stream_scenario(entry["example"])
    fixed = fixes("litdata").component()
    closed = replace(fixed, epoch_end=lambda sc: ("closed", "misdeclared"))
    return (fixed.epoch_end(sc)[0], first_failure("stream_resume", fixed, sc),
            first_failure("stream_resume", closed, sc))


def test_a_weighted_mixtures_epoch_end_is_open_and_declaring_it_closed_fails():
    # a weighted mixture ends when a source runs out, which only the fetch after its last batch finds: the state
    # at that batch restores as the same epoch (litdata's count is below the length). L4's pin restores there;
    # with every fix it passes as declared ("open") and fails when declared "closed" (the trainer moves on, the
    # restored loader resumes its finished epoch: epoch 1 delivers nothing)
    sc = decode_stream_scenario(corpus.load(fixes("litdata").pinned()["L4"])["example"])
    assert L.component().epoch_end(replace(sc, weights=None))[0] == "closed"
    convention, as_declared, closed = LITDATA.call(None, f"{HERE}:weighted_epoch_end_here")
    assert convention == "open" and as_declared is None, as_declared
    assert "16 batches uninterrupted vs 8 resumed" in (closed or ""), closed


#: L1's first pin: 4 samples, no workers, epoch 0's loop broken off after batch 1, a restore after batch 1
BROKEN_OFF_RESUME = StreamScenario(sources=(4,), chunk_size=1, num_workers=0, batch_size=1, epochs=2, checkpoints=(1,),
                                   break_after=1)


def test_a_broken_off_resumed_epoch_is_judged_alone_as_litdata_documents_the_replay_after_it():
    # litdata keeps `restore` after a loop breaks off a resumed epoch, on purpose: the next iter() replays the loaded
    # state. Declared so (after_break "replays"), the adversarial properties judge epoch 0 alone, and it passes as
    # released; declared "fresh" (the broken variant), stream_resume fails at the replay
    assert L.component().replays_after_break(BROKEN_OFF_RESUME)
    assert SS.judged(L.component(), BROKEN_OFF_RESUME).epochs == 1
    SS.stream_resume(L.component(), BROKEN_OFF_RESUME)
    fresh = replace(L.component(), after_break=lambda sc: ("fresh", ""))
    with pytest.raises(Exception, match=r"batch 1 differs.*uninterrupted \(1, \(0,\)\) vs resumed \(1, \(1,\)\)"):
        SS.stream_resume(fresh, BROKEN_OFF_RESUME)
    # a restore after the break (epoch 1's first batch) is no broken-off resumed epoch: both epochs are judged
    assert not L.component().replays_after_break(replace(BROKEN_OFF_RESUME, checkpoints=(2,)))
    # but stream_resume restores at the break itself (every epoch end): the campaign's 2026-12-05 example, drawn with
    # restores at batches 0 and 2, a checkpoint on resume and at epoch ends, failed as released until judged so
    drawn = replace(BROKEN_OFF_RESUME, checkpoints=(0, 2), restore_at_epoch_end=True, checkpoint_on_resume=True)
    SS.stream_resume(L.component(), drawn)
    with pytest.raises(Exception, match=r"batch 1 differs.*uninterrupted \(1, \(0,\)\) vs resumed \(1, \(1,\)\)"):
        SS.stream_resume(fresh, drawn)


def test_lightning_with_limit_train_batches_after_a_preemption_is_skipped_naming_the_documented_replay():
    with pytest.raises(Unsupported, match="limit_train_batches=1, preempted after \\[1\\].*replays the loaded state"):
        SS.check_trainer_resume(L.component(), BROKEN_OFF_RESUME, "lightning-steps")


def test_an_epoch_end_convention_outside_the_allowed_values_is_refused():
    from properties.targets.base import TargetError

    sc = StreamScenario(sources=(6,), chunk_size=2, checkpoints=(2,))
    with pytest.raises(TargetError, match="epoch_end returned 'shut'; allowed values: open, closed"):
        replace(L.component(), epoch_end=lambda sc: ("shut", "x")).epoch_end_convention(sc)
    with pytest.raises(TargetError, match="epoch_end 'closed' needs its reason"):
        replace(L.component(), epoch_end=lambda sc: ("closed", "")).epoch_end_convention(sc)


def test_unknown_fix_is_named_in_the_error():
    with pytest.raises(ValueError, match="fixes=\\['L99'\\]: allowed values: L1, L2, L4, .*studies/litdata/patches"):
        fixes("litdata").component(("L99",))


def test_the_fixed_target_outside_a_patched_process_says_how_to_run_it():
    t = resolve(FIXED)
    assert not t.components and "python -m properties" in t.unavailable
    with pytest.raises(ValueError, match="this process imports the release"):
        fixes("litdata").component()


# The first fixed-target campaign's open failures (O1-O3) were traced: O2 is L9, O3 is L10 (with L7 for a
# parallel mixture) and O1 is L8: a non-cycling parallel mixture stops at its first exhausted source, so a
# persistent worker's other source never raised its StopIteration and kept the last epoch (the uninterrupted
# run was the wrong one). O1's example is a second pin of L8; its corpus file names no ``finding`` (one file
# per id).
# The campaign on L1-L12 then failed a cycling parallel mixture restored after one worker had delivered its whole
# part of the epoch and the other nothing: L10's part-boundary case (a count of 0 modulo the part), pinned the
# same way.
# And the campaign on L1-L11 failed, now and then, a parallel mixture with persistent workers and an early
# break: a race in the first version of L8's fix (a worker's first iter() of epoch 0 may run after the loader
# has set the next epoch; taking the shared epoch only when it changed then skipped the next one): O4.
# The campaign on L1-L14 left O6 and O7 open; both are now findings whose corpus files carry the id: O6 is L15 (a
# cycling parallel mixture's workers all resumed in the epoch of the last batch's worker), O7 is L16 (a weighted
# combined mixture drew the same sources in every worker). As released both examples crash first (an earlier
# finding's ValueError); L16's deviation shows there too without a checkpoint (below).
# The campaign on L1-L16 left O8 open: a cycling parallel mixture over 1 persistent worker, epoch 0's loop broken
# after 1 batch, started epoch 1 at (3, 1003) uninterrupted and at (1, 1001) resumed. The first version of L11's fix
# continued the persistent worker's own iterator, which had run ahead of the loader by the batches it prefetched and
# the loader dropped at the break (the uninterrupted run was the wrong one); L11's fix now hands the worker the
# loader's state where its counts differ from the loader's. O8's example is a second pin of L11 (as released, L11's
# own start-over fails it); a third (2 persistent workers, batches of 2, drop_last) needs the revised fix's other half:
# a worker that had delivered its whole part resumes with an empty part, not the indexes its copy had prefetched.
# Checking that fix found a second case of L13, without persistent workers: a cycling parallel mixture over 2 workers
# restored after epoch 0's first batch, whose resumed iterator the loop dropped unstarted (it broke there). The loader's
# own hand-over at the next epoch (state_dict, then load_state_dict) named the worker after the last one, as L13's
# checkpoint did, and the resumed run started epoch 1 one worker off. The first version of L13's fix corrected
# state_dict() only.
# The campaign on L1-L16 with L11's and L13's revised fixes (seed 5) left O9 open: an unweighted CombinedStreamingDataset
# of 21, 6 and 26 samples, no workers, batches of 3, restored after batch 17, once its third source had run out: the last
# batch of epoch 0 is (20, 1005) uninterrupted and (1005, 20) resumed. It is L17 (a resume replayed its draws of sources
# as if no source had run out); L17's pin is a smaller example that fails L17's own way as released too. O9's example is
# L17's second pin while the schedule re-entered an epoch restored after its last batch (as released it failed at
# batch 18, that epoch end). Since the schedule moves on there, as litdata's convention says (epoch_end "closed"), the
# release passes it, and so does every diff (below).
# The first campaign on the diffs (seed 9, 2026-12-05) found L1 under Lightning on a ParallelStreamingDataset without
# a length (2 sources of 4, 1 worker, a preemption after step 1): L1's diff closed only a single dataset's or an
# unweighted combined mixture's delivered epoch, so epoch 1 replayed the loaded state from sample 1 (with every other
# diff; as released it trains nothing in epoch 1). L1's diff now closes such a parallel mixture's too: a second pin.
MERGED = {"O1": ("L8", "stream_resume-stream_litdata-litdata-d87e432c72.json"),
          "L10-part-boundary": ("L10", "stream_resume-stream_litdata-litdata-d24df505ec.json"),
          "L1-parallel": ("L1", "stream_trainer_resume-stream_litdata-litdata-8e034fbf53.json"),
          # the second campaign on the diffs (seed 10): a weighted mixture of 4 and 4, 2 workers, a state saved before
          # the first batch resumed (every weighted state did) and routed the first batch to worker 1; L19's diff
          # resumes a weighted state only if it yielded samples, as litdata does for an unweighted one
          "L19-before-first-batch": ("L19", "stream_resume-stream_litdata-litdata-6939454b04.json"),
}
# O4, O8, O8-drop-last and L13's second example (a cycling hand-over) broke off epoch 0 after a restore in it: what
# they showed came in the next epoch, which litdata documents replays the loaded state (after_break "replays"). Judged
# on epoch 0 alone, as the adapter now declares, each passes as released and without its fix, so they left the corpus
# (2026-12-05), as did L12's pin and L1's adversarial one for the same reason (studies/litdata/report.md).


@pytest.mark.parametrize("name", sorted(MERGED))
def test_merged_open_failure_fails_as_released_and_without_its_fix_and_passes_with_all(name):
    finding, file = MERGED[name]
    entry = corpus.load(fixes("litdata").pins / file)
    assert "finding" not in entry and entry["expect"] == {"litdata": "fail", FIXED: "pass"}
    # with 2+ workers which worker delivers first is scheduling: each claim is tried up to 3 times
    assert corpus.replay_until(entry, "fail", 3).status == "fail"
    fixed = _with_every_fix()[file]
    assert fixed.status == "pass", fixed.message
    without = corpus.replay_until_with_fixes(entry, LITDATA, LITDATA.without(finding), "fail", 3)
    assert without.status == "fail", f"{name}'s example passes without {finding}: it is not {finding}'s"


# Failures the campaigns found in a version of the fixes (not in litdata): each passes as released and must
# pass with every fix (studies/litdata/report.md, L10).
FIX_REGRESSIONS = {
    # the campaign on L1-L13: L10's first count of a worker's place in the epoch (running total less the parts of
    # the epochs before) was wrong after an epoch broken off; the resumed epoch ended after 1 batch instead of 4
    "L10-after-break": ("stream_resume", StreamScenario(
        sources=(4, 4), mix="parallel", cycle_length=4, chunk_size=1, shuffle_buffer=1, checkpoints=(0, 1),
        restore_at_epoch_end=True, break_after=1)),
}


def test_o9_passes_as_released_and_with_every_diff():
    # under the fixed target's subclasses O9 needed L17 once the others were in; with the diffs it passes without
    # L17's too (2026-12-05): a guard that the fix set keeps passing what litdata passes
    entry = corpus.load(fixes("litdata").pins / "stream_resume-stream_litdata-litdata-3e21f2dc9f.json")
    assert "finding" not in entry and entry["expect"] == {"litdata": "pass", FIXED: "pass"}
    assert corpus.replay(entry).status == "pass"
    assert corpus.replay(entry, FIXED).status == "pass"


@pytest.mark.parametrize("name", sorted(FIX_REGRESSIONS))
def test_fixes_keep_passing_what_litdata_passes(name):
    prop, sc = FIX_REGRESSIONS[name]
    assert first_failure(prop, L.component(), sc) is None
    failure = failure_in_copy(LITDATA, None, prop, sc)
    assert failure is None, failure


def l16_epoch_zero_here() -> tuple[list, str | None]:
    """L16's example without its checkpoints, on the litdata this process imports: epoch 0's ids and the
    mixture's deviation from its weights (None: within bounds)."""
    from properties import stream_props as S

    sc = decode_stream_scenario(corpus.load(fixes("litdata").pinned()["L16"])["example"])
    plain = replace(sc, checkpoints=(), restore_at_epoch_end=False)
    component = L.component()
    ids = S.run_stream(component.make_loader, plain, ids_of=component.ids_of).epoch_ids(0)
    return ids, S.mixture_deviation(ids, sc.weights, sc.sources)


def test_L16_as_released_every_worker_draws_the_same_sources():
    # L16's example as released crashes in its resumed run (L9's ValueError) before the mixture is checked; the
    # uninterrupted run alone shows the deviation itself: each of the 3 workers drew source 0 for its first 9 draws
    # (one generator seed for all), ran out of its 7 or 6 samples of it first and stopped, so epoch 0 is the 20
    # samples of source 0 and none of source 1 (weights 0.5, 0.5). Independent draws per worker (L16) pass.
    ids, bad = l16_epoch_zero_here()
    assert bad is not None and sorted(ids) == list(range(20)), (ids, bad)
    ids, bad = LITDATA.call(None, f"{HERE}:l16_epoch_zero_here")
    assert bad is None, (ids, bad)


def test_ci_check_of_litdata_as_released_gives_every_stream_property_a_status(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))   # failures go to this test's own scratch directory
    code, doc = ci_check(capsys, "litdata", 1)
    rows = {r["property"]: r for r in doc["results"]}
    assert doc["target"] == "litdata" and set(rows) == set(STREAM_PROPERTIES)
    assert all(r["component"] == "stream:litdata" and r["status"] in ("pass", "fail") for r in rows.values())
    assert code == (1 if any(r["status"] == "fail" for r in rows.values()) else 0)


def test_ci_check_of_litdata_with_the_fixes_passes_every_stream_property(capfd, tmp_path, monkeypatch):
    # the command re-runs itself in a process with the patched copy: its output is that process's (capfd)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    code, doc = ci_check(capfd, FIXED, 2)
    rows = {r["property"]: r for r in doc["results"]}
    assert set(rows) == set(STREAM_PROPERTIES) and all(r["examples"] >= 1 for r in rows.values())
    assert all(r["status"] == "pass" for r in rows.values()), [r for r in rows.values() if r["status"] != "pass"]


def broken_off_replay_here(persistent: bool) -> dict[str, list]:
    """L4's example on the litdata this process imports: a loader restored after 2 batches iterates 1 batch and is
    broken off; its next ``iter()`` (litdata's documented replay: ``restore`` stays set) and the epoch after it."""
    sc = replace(decode_stream_scenario(corpus.load(fixes("litdata").pinned()["L4"])["example"]),
                 persistent_workers=persistent)
    first = L.make_loader(sc)
    try:
        it = iter(first.dl)
        for _ in range(2):
            next(it)
        state = first.dl.state_dict()
        del it
    finally:
        first.close()
    second = L.make_loader(sc)
    try:
        second.dl.load_state_dict(state)
        it = iter(second.dl)
        next(it)
        del it   # broken off: the next iter() replays from the checkpoint
        replay = [L.ids_of(b) for b in second.dl]
        after = [L.ids_of(b) for b in second.dl]
    finally:
        second.close()
    return {"replay": replay, "after": after}


def test_L4s_fix_keeps_the_replay_of_a_broken_off_resumed_epoch_for_a_persistent_worker():
    # the intent check on L4 (studies/litdata/intent.md): litdata replays a resumed epoch that was broken off from its
    # checkpoint (restore stays set, ed7409db), as a non-persistent worker does; the fix drops the restored counts only
    # once the loader starts another epoch (L8's shared epoch), so a persistent worker replays too, and the epoch
    # after the replay is a whole one (L4's own example: as released it starts from the checkpoint's counts again)
    released = {p: broken_off_replay_here(p) for p in (False, True)}
    fixed = {p: LITDATA.call(None, f"{HERE}:broken_off_replay_here", p) for p in (False, True)}
    assert released[True]["replay"] == released[False]["replay"] != [], released
    assert fixed[True]["replay"] == fixed[False]["replay"] == [list(b) for b in released[False]["replay"]], fixed
    assert len(fixed[True]["after"]) == 8 and fixed[True]["after"] == fixed[False]["after"], fixed
    assert len(released[True]["after"]) < 8, released   # L4: the persistent worker resumes the checkpoint again


def test_the_persistent_workers_property_catches_the_first_L4_diff(tmp_path):
    # a deliberately broken fix: L4's first diff (patches/alternatives/L4-first-iter.diff) dropped a persistent worker's
    # restored counts at its first __iter__; stream_persistent_workers found it in a campaign (the pin's found_with)
    # and the pinned example fails with it in L4.diff's place, passes with every diff as proposed
    import shutil

    from properties.targets.patched import PatchSet

    for diff in LITDATA.root.glob("*.diff"):
        shutil.copy(diff, tmp_path / diff.name)
    shutil.copy(LITDATA.root / "alternatives" / "L4-first-iter.diff", tmp_path / "L4.diff")
    alternative = PatchSet(target="l4-first-iter", released=LITDATA.released, library=LITDATA.library, root=tmp_path)
    entry = corpus.load(fixes("litdata").pins / "alternatives" / "stream_persistent_workers-L4-first-iter.json")
    failed = corpus.replay_with_fixes(entry, alternative, None)
    assert failed.status == "fail" and "persistent workers: batch 2 differs" in failed.message, failed
    assert corpus.replay_with_fixes(entry, LITDATA, None).status == "pass"
