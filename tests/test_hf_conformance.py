"""Hugging Face datasets' IterableDataset under torchdata's StatefulDataLoader: conformance pins
(studies/hf_datasets/report.md).

As for litdata (tests/test_litdata_conformance.py): each finding's minimal example is a file of the
study's pins (studies/hf_datasets/pins/, its ``finding`` field names it); it fails as released
(counted only when the replay ran and failed), passes with every proposed fix
(``studies.hf_datasets:fixed``: the diffs of studies/hf_datasets/patches/ applied to a copy of datasets and torchdata,
in a process of its own) and fails with every diff but its own (H4's and H9's are to torchdata's
StatefulDataLoader, the others to datasets). A check that needs a copy with some of the diffs runs its
function there (``HF.call``): the functions ending in ``_here`` below are those, run on the released adapter
whose library is the copy. H9's trainer (a checkpoint written between a
restore and the next epoch) is the scenarios' ``checkpoint_on_resume``; its hand-written trainer test stays
as a second pin. Skips when datasets is absent.
"""

from __future__ import annotations

import pytest

from properties import corpus, suite
from properties import stream_suite as SS
from properties.errors import Unsupported
from properties.runner import replay_example
from properties.stream_scenarios import StreamScenario, decode_stream_scenario
from properties.targets import resolve
from studies.hf_datasets import adapter as H
from studies.hf_datasets.fixes import HF
from tests.stream_pins import STREAM_PROPERTIES, ci_check, failure_in_copy, fixes

# studies: the findings' evidence, a job of its own (docs/guide/tests.md)
pytestmark = [pytest.mark.studies, pytest.mark.skipif(not H.available(), reason=H.MISSING)]

FIXED = "studies.hf_datasets:fixed"
#: this module as a patched copy's process imports it (pytest may import it under another name)
HERE = "tests.test_hf_conformance"
#: findings without a fix patch (pinned as failing as released only)
UNPATCHED: tuple[str, ...] = ()
#: findings that show only when a DataLoader worker loses a race (its corpus replay fails as released only
#: then): pinned by their own test, which slows the workers so that they always lose it
RACES = ("H8",)


def _pins() -> list[tuple[str, str]]:
    return [(k, str(v)) for k, v in fixes("hf").pinned().items()] if H.available() else []


def _deterministic() -> list[tuple[str, str]]:
    return [(k, v) for k, v in _pins() if k not in RACES]


def _patched() -> list[tuple[str, str]]:
    return [(k, v) for k, v in _deterministic() if k in fixes("hf").summaries()] if H.available() else []


def expect_hf_bug(name: str, result) -> None:
    if result.status == "skip":
        pytest.fail(f"{name}: the replay did not run ({result.message}); a skip is no evidence of the bug")
    if result.status == "pass":
        pytest.fail(f"[XPASS(strict)] {name} passes on datasets {H.version()} as released: fixed upstream?")
    assert result.status == "fail", result
    pytest.xfail(f"a datasets {H.version()} / torchdata bug (studies/hf_datasets/report.md): {name}: "
                 f"{result.message}")


def test_target_resolves_with_one_stream_component():
    t = resolve("hf-iterable")
    assert t.unavailable is None and [c.kind for c in t.components] == ["stream"]


def test_unshuffled_resume_with_workers_passes():
    SS.stream_resume(H.component(), StreamScenario(sources=(4,), chunk_size=1, num_workers=2, checkpoints=(1,)))


def test_shuffle_buffer_resume_is_not_promised():
    with pytest.raises(Unsupported, match="shuffle buffers are lost"):
        SS.stream_resume(H.component(), StreamScenario(sources=(8,), shuffle=True, shuffle_buffer=4, checkpoints=(1,)))


def test_every_finding_is_pinned_by_a_corpus_entry():
    # H2's across seeds: stream_epochs asks epoch 1 to differ for one of 7 seeds where 4 shards have 24 orders
    pins = dict(_pins())
    assert sorted(pins) == sorted(list(fixes("hf").summaries()) + list(UNPATCHED))
    for finding, path in pins.items():
        entry = corpus.load(path)
        expected = {"hf-iterable": "fail"} if finding in UNPATCHED else {"hf-iterable": "fail", FIXED: "pass"}
        assert entry["expect"] == expected, finding
        assert decode_stream_scenario(entry["example"]).to_json() == entry["example"]["scenario"]


@pytest.mark.parametrize("finding,path", _deterministic(), ids=[k for k, _ in _deterministic()])
def test_finding_fails_on_datasets_as_released(finding, path):
    expect_hf_bug(finding, corpus.replay(corpus.load(path)))


@pytest.mark.parametrize("finding,path", _patched(), ids=[k for k, _ in _patched()])
def test_finding_passes_with_every_fix_and_fails_without_its_own(finding, path):
    entry = corpus.load(path)
    prop = suite.get(entry["property"])
    assert prop.name == entry["property"]
    fixed = corpus.replay(entry, FIXED)
    assert fixed.status == "pass", fixed.message
    without = corpus.replay_with_fixes(entry, HF, HF.without(finding))
    assert without.status == "fail", f"{finding}'s example passes without its fix: the pin proves nothing"


def test_h4_delivers_each_sample_once_as_released_and_the_fixed_target_is_held_to_batch_for_batch():
    sc = decode_stream_scenario(corpus.load(dict(_pins())["H4"])["example"])
    SS.stream_exactly_once(H.component(), sc)
    assert H.resume_promise(sc) == ("exact", "")


def _slow_workers(setattr) -> None:
    """Each DataLoader worker's iteration starts 0.3 s late (workers are forked: they inherit the patch)."""
    import time

    import datasets.iterable_dataset as I
    import torch.utils.data

    prepare = I.IterableDataset._prepare_ex_iterable_for_iteration

    def late(self, *args, **kwargs):
        if torch.utils.data.get_worker_info() is not None:
            time.sleep(0.3)
        return prepare(self, *args, **kwargs)

    setattr(I.IterableDataset, "_prepare_ex_iterable_for_iteration", late)


@pytest.fixture
def slow_workers(monkeypatch):
    _slow_workers(monkeypatch.setattr)


def h8_with_slow_workers_here() -> str:
    """H8's pinned example replayed with slow workers (in a copy's process: the patch stays in it)."""
    _slow_workers(setattr)
    entry = corpus.load(dict(_pins())["H8"])
    return replay_example(resolve("hf-iterable"), suite.get(entry["property"]), entry["component"],
                          entry["example"]).status


def test_h8_a_persistent_workers_state_between_iterations_is_where_abandoned_tasks_left_it(slow_workers):
    # Restored at the step where epoch 0's loop breaks, the new loader's iterator has sent its prefetch tasks
    # when the trainer moves on to set_epoch(1); workers that run them after that (here always: they start
    # late) produce epoch 1's first samples for nothing, and report that position when torchdata asks for the
    # next iteration's initial state. A checkpoint before such a worker yields resumes it further on.
    entry = corpus.load(dict(_pins())["H8"])
    prop = suite.get(entry["property"])
    expect_hf_bug("H8", replay_example(resolve("hf-iterable"), prop, entry["component"], entry["example"]))


def test_h8_passes_with_every_fix_and_fails_without_its_own():
    assert HF.call(None, f"{HERE}:h8_with_slow_workers_here") == "pass"
    assert HF.call(HF.without("H8"), f"{HERE}:h8_with_slow_workers_here") == "fail", \
        "H8's example passes without its fix: the pin proves nothing"


def test_h9_corpus_entry_writes_a_checkpoint_on_resume():
    # H9's example is H4's trainer with a checkpoint written right after every restore; as released it also
    # fails on H4's order, and without H9's fix that order comes back (the loader built from the stale state)
    sc = decode_stream_scenario(corpus.load(dict(_pins())["H9"])["example"])
    assert sc.checkpoint_on_resume and sc.break_after is not None and sc.restore_at_epoch_end


def test_h9_a_checkpoint_on_resume_at_the_next_epochs_first_batch_does_not_start_the_epoch_over():
    # H9's second case: restored after epoch 1's first batch into a fresh loader (its dataset at epoch 0 until the
    # trainer's set_epoch(1)), the checkpoint on resume built the iterator at epoch 0; datasets discarded the
    # epoch-1 state and epoch 1 started over. H9's first fix (drop an iterator built from another epoch's state)
    # missed it: with H1-H8 it fails every time; as released it depends on when the workers run their prefetch.
    sc = StreamScenario(sources=(4,), chunk_size=1, num_workers=1, checkpoints=(5,), checkpoint_on_resume=True)
    assert failure_in_copy(HF, None, "stream_resume", sc) is None
    assert "resume: batch 5 differs" in (failure_in_copy(HF, HF.without("H9"), "stream_resume", sc) or "")


def epoch_one_after_a_checkpoint_of_a_resume_here() -> tuple[list, list]:
    """H9's trainer written by hand (its corpus entry is the same through ``checkpoint_on_resume``): 4 samples
    in 4 shards, 2 workers, epoch 0's loop breaks after 1 batch; its state is restored into a new loader that
    writes a checkpoint at once (state_dict() before iterating, as H3's does) and then runs epoch 1. Epoch 1
    uninterrupted, and so."""
    import pickle

    component = H.component()
    sc = StreamScenario(sources=(4,), chunk_size=1, num_workers=2)

    def epoch_one(loader) -> list:
        loader.set_epoch(1)
        return [sid for batch in loader for sid in component.ids_of(batch)]

    def broken_off():
        loader = component.make_loader(sc)
        loader.set_epoch(0)
        it = iter(loader)
        next(it)
        return loader

    plain = broken_off()
    try:
        state = pickle.loads(pickle.dumps(plain.state_dict()))   # at the break, as the trainer saves it
        uninterrupted = epoch_one(plain)
    finally:
        plain.close()
    resumed = component.make_loader(sc)
    try:
        resumed.load_state_dict(state)
        resumed.state_dict()
        return uninterrupted, epoch_one(resumed)
    finally:
        resumed.close()


def test_h9_a_checkpoint_of_a_resume_at_a_broken_off_epochs_end_sets_the_next_epoch():
    # Without the fix epoch 1 is the rest of epoch 0 ([1, 2, 3]) when the prebuilt iterator's workers ran
    # their prefetch before set_epoch(1), or H4's order otherwise ([1, 0, 3, 2]): wrong either way.
    here = f"{HERE}:epoch_one_after_a_checkpoint_of_a_resume_here"
    uninterrupted, resumed = HF.call(None, here)
    assert resumed == uninterrupted == [0, 1, 2, 3]
    without = HF.call(HF.without("H9"), here)
    assert without[1] != without[0], "H9's example passes without its fix: the pin proves nothing"
    uninterrupted, resumed = epoch_one_after_a_checkpoint_of_a_resume_here()
    if resumed == uninterrupted:
        pytest.fail("[XPASS(strict)] H9: epoch 1 after a checkpoint of a resume is right on torchdata as released")
    pytest.xfail(f"a torchdata bug (studies/hf_datasets/report.md): H9: epoch 1 uninterrupted {uninterrupted}, "
                 f"after a checkpoint of a resume at the broken-off epoch 0's end {resumed}")


def test_a_shuffle_buffer_of_one_over_few_shards_is_not_held_to_differ():
    must, reason = H.reshuffles(StreamScenario(sources=(12,), chunk_size=3, shuffle=True, shuffle_buffer=1))
    assert not must and "4 shards" in reason
    assert H.reshuffles(StreamScenario(sources=(16,), chunk_size=2, shuffle=True, shuffle_buffer=1))[0]
    assert H.reshuffles(StreamScenario(sources=(12,), chunk_size=3, shuffle=True, shuffle_buffer=4))[0]


def test_ci_check_of_hf_iterable_as_released_gives_every_stream_property_a_status(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))   # failures go to this test's own scratch directory
    code, doc = ci_check(capsys, "hf-iterable", 1)
    rows = {r["property"]: r for r in doc["results"]}
    assert doc["target"] == "hf-iterable" and set(rows) == set(STREAM_PROPERTIES)
    assert all(r["component"] == "stream:hf-iterable" and r["status"] in ("pass", "fail") for r in rows.values())
    assert code == (1 if any(r["status"] == "fail" for r in rows.values()) else 0)


def test_ci_check_of_hf_iterable_with_the_fixes_passes(capfd, tmp_path, monkeypatch):
    # the command re-runs itself in a process with the patched copy: its output is that process's (capfd)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    code, doc = ci_check(capfd, FIXED, 2)
    rows = {r["property"]: r for r in doc["results"]}
    assert set(rows) == set(STREAM_PROPERTIES)
    assert code == 0 and all(r["status"] == "pass" and r["examples"] >= 1 for r in rows.values()), rows


def alternating_runs_here(shards: int) -> int:
    """The longest run of one source in an alternating two-source mixture under shuffle(buffer_size=1)."""
    from datasets import Dataset, interleave_datasets

    parts = [Dataset.from_dict({"id": [1000 * k + i for i in range(shards)]}).to_iterable_dataset(num_shards=shards)
             for k in range(2)]
    ids = [x["id"] // 1000 for x in interleave_datasets(parts).shuffle(seed=0, buffer_size=1)]
    longest = run = 1
    for a, b in zip(ids, ids[1:]):
        run = run + 1 if a == b else 1
        longest = max(longest, run)
    return longest


def test_h6_alternative_per_copy_generators_fixes_the_weighted_pin_but_not_an_alternating_mixture(tmp_path):
    # studies/hf_datasets/patches/alternatives/H6-per-copy-generators.diff in H6.diff's place: it keeps shuffle()'s multi-shard
    # buffer (the maintainers' #8194) and shifts each per-shard copy's generators; an alternating mixture has none
    import shutil

    from properties.targets.patched import PatchSet

    for diff in HF.root.glob("*.diff"):
        shutil.copy(diff, tmp_path / diff.name)
    shutil.copy(HF.root / "alternatives" / "H6-per-copy-generators.diff", tmp_path / "H6.diff")
    alternative = PatchSet(target="h6-alternative", released=HF.released, library=HF.library, root=tmp_path)
    entry = corpus.load(dict(_pins())["H6"])
    assert corpus.replay_with_fixes(entry, alternative, None).status == "pass"
    assert alternating_runs_here(8) == 8, "as released: one source's 8 samples, then the epoch stops"
    assert alternative.call(None, f"{HERE}:alternating_runs_here", 8) == 8
    assert HF.call(None, f"{HERE}:alternating_runs_here", 8) == 1
