"""VeOmni 0.1.12 conformance pins (studies/veomni/report.md).

Each finding of the report is a regression file in tests/regressions/ and three checks here:

* a strict expected failure on the ``veomni`` target as shipped, counted only when the replay ran
  and failed (``expect_veomni_bug``: a replay that skips fails the test): when an upstream release
  fixes the bug, the replay passes, the test fails as a strict XPASS, and the pin must be updated;
* its root cause: the example fails on VeOmni with every proposed diff applied except the
  finding's own, and passes with all of them (the fix is necessary, and the fixes together
  are sufficient); VeOmni with diffs runs in a process of its own (studies.veomni.fixes.VEOMNI);
* dynbsz passes the same example (tests/test_properties_regressions.py replays every file on
  dynbsz where dynbsz has the component).

The documented deviations are checked to be rejected (or not promised), not reported as bugs, and
their losses are counted on small workloads (the report's figures come from ``python -m
studies.veomni deviations``).
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

import pytest

from properties import corpus
from studies.veomni import loaders as veomni_loaders
from studies.veomni.fixes import VEOMNI

# studies: the findings' evidence, a job of its own (docs/guide/tests.md)
pytestmark = [pytest.mark.studies, pytest.mark.skipif(not veomni_loaders.available(), reason=veomni_loaders.MISSING)]

CORPUS = Path(__file__).resolve().parent.parent / "studies" / "veomni" / "pins"

#: Replays of an example with two or more workers depend on timing (which batches are in flight at a
#: checkpoint, when a worker's stream ends): V8's example passed without V8's fix in 1 of 6 idle runs and in
#: up to 3 of 8 with three replays side by side. "It fails" is then an existential claim: replayed up to
#: TRIES times, stopping at the first failure, it misses at a worst measured per-run rate of 3/8 with
#: probability (3/8)**10 < 6e-5. "It passes" must hold on every one of PASS_RUNS runs.
TRIES = 10
PASS_RUNS = 2


def _vc():
    import studies.veomni as veomni_conformance

    return veomni_conformance


def _pins() -> list[tuple[str, str]]:
    from studies.veomni import PINNED

    return sorted(PINNED.items(), key=lambda kv: int(kv[0][1:]))


def expect_veomni_bug(name: str, result) -> None:
    """A strict expected failure that counts only when the replay ran and failed: a replay that
    skips (a knob or deviation refused, VeOmni's classes changed) or errors is a plain failure of
    this test, never absorbed as "the VeOmni bug is still there"; a pass is the strict XPASS (the
    bug is fixed upstream: update the pin)."""
    if result.status == "skip":
        pytest.fail(f"{name}: the replay did not run ({result.message}); a skip is no evidence of the bug")
    if result.status == "pass":
        pytest.fail(f"[XPASS(strict)] {name} passes on VeOmni as shipped: fixed upstream? update the pin")
    assert result.status == "fail", result
    pytest.xfail(f"a VeOmni 0.1.12 bug (studies/veomni/report.md): {name}: {result.message}")


DOCUMENTED = "studies.veomni:documented"


@pytest.mark.parametrize("fix,file", _pins(), ids=[k for k, _ in _pins()])
def test_finding_still_fails_on_veomni_as_shipped(fix, file):
    # held to its docs (D1-D6), in this process: a pin's failure as shipped is then never a documented deviation's
    # (V15's example fails on the plain target only by D6's dropped step)
    vc = _vc()
    entry = corpus.load(CORPUS / file)
    shipped = corpus.replay_until(entry, "fail", TRIES, lambda: corpus.replay(entry, DOCUMENTED))
    if fix in vc.LATENT:
        assert shipped.status == "pass", f"{fix} is latent ({vc.LATENT[fix]}) but fails as shipped: {shipped.message}"
        unmasked = _fails_with(entry, [vc.UNMASKED_BY[fix]])
        assert unmasked.status == "fail", f"{fix}: passes with {vc.UNMASKED_BY[fix]}'s diff alone"
        return
    expect_veomni_bug(fix, shipped)


def _unfixed() -> list[tuple[str, str]]:
    from studies.veomni import UNFIXED

    return [(k, file) for k, (_, file) in sorted(UNFIXED.items())]


@pytest.mark.parametrize("finding,file", _unfixed(), ids=[k for k, _ in _unfixed()])
def test_finding_without_a_fix_still_fails_on_veomni_as_shipped(finding, file):
    # V14: DP ranks of the worker runtime stop at different steps under the trainer's loop. No patch is
    # proposed (the bound belongs in the trainer, across epochs); dynbsz holds the example (max_steps).
    entry = corpus.load(CORPUS / file)
    assert entry["target"] == "veomni" and entry["expect"] == {"veomni": "fail", "dynbsz": "pass"}
    assert corpus.replay(entry, "dynbsz").status == "pass"
    # not one of V1-V13's: it fails with every proposed fix applied too
    assert _fails_with(entry, _vc().ALL_FIXES).status == "fail"
    expect_veomni_bug(finding, corpus.replay_until(entry, "fail", TRIES))


def _fails_with(entry, fixes):
    """The example fails with these fixes in at least one of TRIES runs (once, where timing cannot matter), replayed
    in one process whose VeOmni carries exactly ``fixes``."""
    return corpus.replay_until_with_fixes(entry, VEOMNI, fixes, "fail", TRIES)


def _passes_with(entry, fixes):
    """The example passes with these fixes on every one of PASS_RUNS runs (once, where timing cannot matter): the
    first failure, else the last pass."""
    return corpus.replay_until_with_fixes(entry, VEOMNI, fixes, "fail", PASS_RUNS)


@functools.lru_cache(maxsize=None)
def _with_every_fix() -> dict[str, object]:
    """``_passes_with(entry, every fix)`` of every pin at once, in one process (a process per pin would start
    and import VeOmni a dozen times more): file path -> Result."""
    from studies.veomni import PINNED

    paths = [CORPUS / f for f in PINNED.values()] + [TRAINER_PINS / f for f, _ in TRAINER_SEEN.values()]
    results = corpus.replay_many_until_with_fixes([corpus.load(p) for p in paths], VEOMNI, None, "fail", PASS_RUNS)
    return {str(p): r for p, r in zip(paths, results)}


def test_only_a_replay_that_ran_and_failed_counts_as_the_pinned_bug():
    from properties.runner import Result

    row = Result(target="veomni", property="exactly_once", component="loader:main", status="skip",
                 message="in_order=False is not supported")
    with pytest.raises(pytest.fail.Exception, match="did not run"):
        expect_veomni_bug("V0", row)
    with pytest.raises(pytest.fail.Exception, match="XPASS"):
        expect_veomni_bug("V0", replace(row, status="pass"))
    with pytest.raises(pytest.xfail.Exception, match="V0: lost"):
        expect_veomni_bug("V0", replace(row, status="fail", message="lost [3]"))


@pytest.mark.parametrize("fix,file", _pins(), ids=[k for k, _ in _pins()])
def test_finding_is_explained_by_its_fix(fix, file):
    vc = _vc()
    entry = corpus.load(CORPUS / file)
    assert entry["target"] == "veomni" and entry["expect"]["veomni"] == "fail"
    assert file.startswith("trainers/") or entry["component"] in vc.FIX_COMPONENTS[fix], (fix, entry["component"])
    without = _fails_with(entry, VEOMNI.without(fix))
    assert without.status == "fail", (f"{file} passes without {fix} in every one of up to {TRIES} runs: the fix is "
                                      f"not what it needs ({without.message})")
    with_all = _with_every_fix()[str(CORPUS / file)]
    assert with_all.status == "pass", f"{file} still fails with every fix: {with_all.message}"


def test_a_restored_mixture_state_of_another_epoch_is_discarded_by_v7():
    # Found by a campaign on the fixed target with V13 as first proposed (monkeypatches): a persistent worker
    # restored with a state of another epoch reported it, relabelled with this epoch, until its first draw; a second
    # restore continued it and the mixture lost that worker's share of the epoch. The monkeypatch V13 grew a clause
    # for it; with the diffs, V7's (a mixture state names its epoch, and __iter__ discards another epoch's) and V15's
    # cover it, and V13's is not needed (2026-12-04).
    entry = corpus.load(CORPUS / "loader_resume-loader_multisource-veomni-f5be5c71cf.json")
    assert entry["expect"] == {"veomni": "fail"}
    assert _fails_with(entry, VEOMNI.without("V7")).status == "fail"   # V15's diff is needed too (2026-12-04)
    assert _passes_with(entry, VEOMNI.without("V13")).status == "pass"


def test_every_proposed_fix_is_pinned_and_every_pin_is_in_the_corpus():
    vc = _vc()
    # every diff under studies/veomni/patches/ is a fix; B1's pin is the builders report's
    assert set(vc.FIXES) == set(VEOMNI.fixes()) and set(vc.PINNED) == set(vc.FIXES) - {"B1"}
    assert set(vc.FIX_COMPONENTS) == set(vc.PINNED)
    for fix, file in vc.PINNED.items():
        entry = corpus.load(CORPUS / file)
        assert set(vc.FIX_COMPONENTS[fix]) >= {entry["component"]}, (fix, entry["component"])
    assert not set(vc.DEVIATION_PINS) & set(vc.FIXES), "a deviation has no fix"


@pytest.mark.parametrize("finding", ["V5", "V6"])
def test_a_deviation_fails_as_shipped_and_is_not_a_failure_of_the_documented_target(finding):
    vc = _vc()
    deviation, file = vc.DEVIATION_PINS[finding]
    entry = corpus.load(CORPUS / file)
    held = corpus.replay(entry, "studies.veomni:documented")
    if deviation == "D5":   # the main runtime's design: the per-epoch property is not promised there
        assert held.status == "skip" and "documented deviation D5" in held.message, held
    else:                   # D6: drop_last=False, VeOmni's documented setting, keeps the last partial step
        assert held.status == "pass", held
    expect_veomni_bug(f"{finding} ({deviation})", corpus.replay_until(entry, "fail", TRIES))


def test_the_fixed_target_runs_only_where_veomni_is_the_patched_copy():
    from properties.targets import resolve

    here = resolve("studies.veomni:fixed")
    assert here.unavailable and "python -m properties" in here.unavailable
    assert VEOMNI.call(None, "tests.test_veomni_conformance:_fixed_here") == list(VEOMNI.check(None))
    with pytest.raises(ValueError, match="allowed values: B1, V1"):
        VEOMNI.check(["V5"])


def _fixed_here():
    from properties.targets import resolve

    target = resolve("studies.veomni:fixed")
    assert not target.unavailable, target.unavailable
    return list(VEOMNI.applied())


# ---- documented deviations: rejected as such, and counted ---------------------------------------

def test_a_one_token_sample_is_a_documented_deviation_not_a_finding():
    vc = _vc()
    entry = corpus.load(CORPUS / "conservation-packer-veomni-5dd25cc8b9.json")
    assert corpus.replay(entry).status == "fail"          # VeOmni drops it ...
    held = vc.replay_with(entry)
    assert held.status == "skip" and "documented deviation D1" in held.message   # ... as documented


def test_loader_deviations_name_what_the_scenario_hits():
    from properties.scenarios import LoaderScenario

    vc = _vc()
    base = LoaderScenario(num_samples=12, data_seed=0, shuffle_seed=0, num_workers=2, prefetch_factor=1,
                          persistent_workers=False, in_order=True, runtime="worker", fetch_batch_size=1, budget=128,
                          buffer_size=1, micro_batches_per_step=1, warmup_steps=0, epochs=2, dp_rank=0, dp_size=1,
                          checkpoints=(), restore_at_epoch_end=False)
    import dataclasses

    assert vc.loader_deviation("loader:worker", "worker", base) is None
    overlong = dataclasses.replace(base, budget=1)
    assert "D2" in str(vc.loader_deviation("loader:worker", "worker", overlong))
    assert vc.loader_deviation("loader:main", "main", dataclasses.replace(overlong, runtime="main")) is None
    assert "D3" in str(vc.loader_deviation("loader:worker", "worker", dataclasses.replace(base, dp_size=5)))
    ooo = dataclasses.replace(base, in_order=False, checkpoints=(3,))
    assert "D4" in str(vc.loader_deviation("loader:worker", "worker", ooo))


def test_deviation_counts_agree_with_the_lengths():
    vc = _vc()
    n, budget = 2_000, 8_192
    lengths = vc.lengths_of("bench_text", n, 0)
    d2 = vc.count_overlong("bench_text", n, budget, 0)
    assert d2["dropped_samples"] == int((lengths > budget).sum()) > 0
    assert d2["dropped_tokens"] == int(lengths[lengths > budget].sum())
    d1 = vc.count_one_token("short_text", n, budget, 0)
    assert d1["dropped_samples"] == d1["one_token_samples"] == int((vc.lengths_of("short_text", n, 0) <= 1).sum()) > 0
    assert vc.count_padding(10, 3)["duplicated_per_epoch"] == 2


def test_main_runtime_epochs_miss_and_repeat_samples():
    # V5 on a lognormal workload: an epoch of train_steps steps is not one pass over the data.
    rows = _vc().count_main_epochs("bench_text", 400, 32 * 1024, 24, 0, epochs=2)["epochs"]
    assert any(r["missed"] or r["repeated"] for r in rows)
    assert all(r["delivered"] == r["distinct"] + r["repeated"] for r in rows)


TRAINER_PINS = CORPUS / "trainers"


#: trainer_resume examples (VeOmni's BaseTrainer model) that fail as shipped and without the finding's fix, and
#: pass with every fix: a bug a VeOmni run sees. V3's runs VeOmni's defaults (main runtime, num_workers=2), V4's a
#: checkpoint at epoch 0's end (save_epochs, or save_steps dividing train_steps); each passes with its own fix alone,
#: so the release's failure is that finding's.
TRAINER_SEEN = {"V3": ("trainer_resume-loader_main-veomni-V3.json", [5]),
                "V4": ("trainer_resume-loader_main-veomni-V4.json", [4]),
                "V13": ("trainer_resume-loader_worker-veomni-V13.json", [1, 3, 4, 5])}
ALONE = ("V3", "V4")


@pytest.mark.parametrize("finding", sorted(TRAINER_SEEN))
def test_finding_is_seen_by_veomnis_own_trainer(finding):
    vc = _vc()
    file, preempted = TRAINER_SEEN[finding]
    entry = corpus.load(TRAINER_PINS / file)
    assert entry["property"] == "trainer_resume" and entry["finding"] == finding
    expect_fail = _fails_with(entry, [f for f in vc.ALL_FIXES if f != finding])
    assert expect_fail.status == "fail" and f"under trainer 'veomni', preempted after global steps {preempted}" \
        in expect_fail.message, expect_fail.message
    assert _with_every_fix()[str(TRAINER_PINS / file)].status == "pass"
    if finding in ALONE:
        assert _passes_with(entry, [finding]).status == "pass", f"{finding}'s fix alone should make the release pass"
    expect_veomni_bug(f"{finding} (under VeOmni's trainer)", corpus.replay_until(entry, "fail", TRIES))


def test_v16_veomnis_resume_arithmetic_names_the_wrong_step_after_a_short_epoch():
    # no workers, so deterministic: epoch 0 packs into 2 steps under train_steps=4 and its StopIteration
    # spends global step 3; a kill after global step 4 (epoch 1's first) restarts at 4 // 4 = epoch 1,
    # step 4 % 4 = 0, whose eager iter() uses up the restored mid-epoch position. Every proposed fix
    # applied, it still fails: the fault is the trainer's step accounting, not a loader's
    from properties import loader_suite, trainers
    from properties.scenarios import decode_loader_scenario

    vc = _vc()
    entry = corpus.load(TRAINER_PINS / "trainer_resume-loader_multisource-veomni-V16.json")
    assert _fails_with(entry, vc.ALL_FIXES).status == "fail"
    sc = decode_loader_scenario(entry["example"])
    log = []

    class Spy:
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            attr = getattr(self.inner, name)
            if name in ("set_epoch", "load_state_dict"):
                log.append(name)
            return attr

        def __iter__(self):
            log.append("iter")
            return iter(self.inner)

    component = _vc().documented().component("loader:multisource")
    kw = loader_suite.trainer_kw(component, "veomni", sc)
    assert kw["steps_per_epoch"] == 4
    t = trainers.VEOMNI.run(lambda s: Spy(component.make_loader(s)), sc, preempt_after=(1, 3), **kw)
    restart = len(log) - 1 - log[::-1].index("load_state_dict")
    assert log[restart:restart + 4] == ["load_state_dict", "iter", "set_epoch", "iter"]   # the eager iter() at step 0
    assert [e for e, _ in t.steps].count(0) == 2
    expect_veomni_bug("V16", corpus.replay_until(entry, "fail", TRIES))
