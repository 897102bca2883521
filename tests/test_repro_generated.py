"""``python -m properties repro``: a saved stream or VeOmni loader failure as a standalone script (properties/repro.py).

Each stream finding pinned in a study (studies/<library>/pins/, its ``finding`` field names it) whose
property the generator writes is turned into a script, which is run from an empty folder with nothing of this
project importable, as on a maintainer's machine: it must exit 1 on the release, and the batches it prints for
its uninterrupted and its resumed run must be the harness's own runs of the same example (``stream_props``),
so a script that drifts from the loop it inlines fails here (with two or more workers, the uninterrupted run
only: which batches a restore finds in flight is timing). Where the harness's run crashes (a finding that
is a crash), the script must crash with the same exception. A finding that shows only when a worker loses a
race (``RACES``: its pin slows the workers, tests/test_hf_conformance.py) is left out: its script, like its replay,
fails only now and then, and says so.

The same holds for VeOmni's loader findings (``studies.veomni.PINNED``) of loader_resume and exactly_once whose
outcome cannot depend on timing (at most one worker): each script exits 1 on the release, imports only VeOmni, torch,
torchdata and the standard library, and prints the harness's own uninterrupted and resumed runs
(``loader_props.run_schedule``, with the epoch-end restores of ``with_boundary_restores`` for loader_resume).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from properties import cli, corpus, repro
from properties import loader_props as L
from properties.scenarios import decode_loader_scenario
from properties.stream_scenarios import decode_stream_scenario
from properties.targets import resolve
from studies.hf_datasets import adapter as hf_iterable
from studies.litdata import adapter as litdata_target
from studies.veomni import PINNED
from studies.veomni import loaders as veomni_loaders
from tests.repro_harness import harness_runs, loader_harness_runs
from tests.script_batch import run_scripts
from tests.test_hf_conformance import RACES

pytestmark = pytest.mark.studies   # the findings' evidence: a job of its own (docs/guide/tests.md)

STUDIES = Path(__file__).resolve().parent.parent / "studies"
#: the stream studies' pins (trainers/: under a trainer model) and VeOmni's
STREAMS = [STUDIES / "litdata" / "pins", STUDIES / "hf_datasets" / "pins"]
INSTALLED = {"litdata": litdata_target.available(), "hf-iterable": hf_iterable.available()}
REGRESSIONS = STUDIES / "veomni" / "pins"


def _pins() -> list[tuple[str, Path]]:
    """(finding, or finding-trainer for a pin under a trainer model, path)."""
    out = []
    for path in [p for d in STREAMS for p in sorted(d.glob("*.json")) + sorted((d / "trainers").glob("*.json"))]:
        entry = json.loads(path.read_text())
        if not entry.get("finding") or entry["property"] not in repro.PROPERTIES or entry["finding"] in RACES:
            continue
        named = [t for t in repro.SCHEDULE_TRAINERS[entry["property"]] if f"under trainer '{t}'" in entry["message"]]
        if entry["property"] == "stream_trainer_resume" and not named:
            continue   # under a trainer whose loop is not written (lightning's default): refused, below
        sc = entry["example"]["scenario"]
        if "lightning-steps" in named and (sc.get("weights") is not None or sc.get("break_after") is not None):
            continue   # unsized, or limit_train_batches: the lightning-steps loop is not written for those (below)
        out.append((entry["finding"] + "".join(f"-{t}" for t in named), path))
    return out


PINS = _pins()


def run_script(script: Path, cwd: Path, pythonpath: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def printed(stdout: str, label: str) -> list:
    line = next(ln for ln in stdout.splitlines() if ln.startswith(label + ":"))
    return ast.literal_eval(line.split(":", 1)[1].strip())


def test_every_stream_finding_pin_of_a_written_property_is_covered():
    found = {f for f, _ in PINS} | set(RACES)
    # the stream findings' ids whose pins are of stream_resume or stream_exactly_once (an independent list)
    assert {"H1", "H3", "H4", "H5", "H7", "H8", "H9", "L2", "L4", "L5", "L6", "L7", "L8", "L10", "L11",
            "L13", "L14", "L15", "L17", "H3-torchdata", "H5-torchdata", "H6", "L9", "L16"} <= found


def _of(target: str) -> list[tuple[str, Path]]:
    return [(finding, path) for finding, path in PINS if corpus.load(path)["target"] == target]


def _written(pins: list[tuple[str, Path]], tmp_path: Path) -> list[Path]:
    scripts = []
    for finding, path in pins:
        scripts.append(tmp_path / f"{finding}.py")
        scripts[-1].write_text(repro.write(corpus.load(path), path=str(path)))
    return scripts


@pytest.mark.parametrize("finding,path", _of("litdata"), ids=[f for f, _ in _of("litdata")])
def test_litdata_script_fails_on_the_release_and_prints_the_harness_runs(finding, path, tmp_path):
    # a process each: in one interpreter each loader's worker takes litdata's 5 s status check to stop
    if not INSTALLED["litdata"]:
        pytest.skip("litdata is not installed")
    check_stream_run(finding, corpus.load(path), run_script(_written([(finding, path)], tmp_path)[0], tmp_path))


def test_hf_scripts_fail_on_the_release_and_print_the_harness_runs(tmp_path):
    # all in one interpreter (tests/script_batch.py: datasets and torch imported once), each as python runs it
    if not INSTALLED["hf-iterable"]:
        pytest.skip("datasets is not installed")
    pins = _of("hf-iterable")
    for (finding, path), done in zip(pins, run_scripts(_written(pins, tmp_path), tmp_path)):
        check_stream_run(finding, corpus.load(path), done)


def check_stream_run(finding: str, entry: dict, done) -> None:
    """The script exited 1 on the release and printed the harness's own runs (where they cannot depend on timing), or
    crashed with the harness's exception."""
    assert done.returncode == 1, (finding, done.stdout + done.stderr[-2000:])
    harness = harness_runs(entry)
    if isinstance(harness, str):
        exception = harness.split(":")[0]
        assert exception in done.stderr, (finding, harness[:300], done.stderr[-2000:])
        return
    sc = decode_stream_scenario(entry["example"])
    # persistent workers abandoned by an early break run their prefetch when they run (H8): even the uninterrupted
    # run's next epoch is timing there
    if entry["property"] == "stream_epochs":   # "seed N: epoch 0 [...], epoch 1 [...]", the example's seed first
        line = re.search(rf"^seed {sc.seed}: epoch 0 (\[.*?\]), epoch 1 (\[.*?\])$", done.stdout, re.M)
        assert line, (finding, done.stdout)
        epochs = [ast.literal_eval(line.group(k)) for k in (1, 2)]
        assert epochs == [[i for e, b in harness[0] if e == k for i in b] for k in (0, 1)], (finding, done.stdout)
        return
    first = "trained" if entry["property"] == "stream_trainer_epochs" else "uninterrupted"
    if not (corpus.timing_may_matter(entry) and sc.persistent_workers and sc.break_after is not None):
        assert [tuple(s) for s in printed(done.stdout, first)] == harness[0], (finding, done.stdout)
    if harness[1] is None:
        return   # an uninterrupted run alone (stream_trainer_epochs)
    if entry["property"] == "stream_mixture" and "\nresumed:" not in done.stdout:
        return   # the mixture deviates without a checkpoint: the script runs the uninterrupted run alone
    if corpus.timing_may_matter(entry):
        # two or more workers: which batches a restore finds in flight is timing, so the resumed runs of the script
        # and of the harness may fail differently (H9's did, once in a fresh-clone suite); each must fail, which the
        # exit code above and the corpus pins say, and the uninterrupted run (no restore: round-robin order) agrees
        return
    second = "preempted" if entry["property"] == "stream_trainer_resume" else "resumed"
    assert [tuple(s) for s in printed(done.stdout, second)] == harness[1], (finding, done.stdout)


def test_a_script_passes_once_the_bug_is_fixed(tmp_path):
    # H1's and H3's diffs (studies/hf_datasets/patches) applied to a pristine copy of the installed datasets: the
    # scripts written for their pins (H3's under torchdata's documented loop too) exit 0 there (tests/test_repros.py does the same for the committed scripts)
    if not INSTALLED["hf-iterable"]:
        pytest.skip("datasets is not installed")
    from studies.hf_datasets.fixes import HF

    patched = HF.build(("H1", "H3"))
    for finding in ("H1", "H3", "H3-torchdata"):
        path = dict(PINS)[finding]
        script = tmp_path / f"{finding}.py"
        script.write_text(repro.write(corpus.load(path), path=str(path)))
        done = run_script(script, tmp_path, str(patched))
        assert done.returncode == 0, done.stdout + done.stderr[-2000:]


def test_a_script_whose_outcome_can_depend_on_timing_says_so():
    for path in [p for d in STREAMS for p in sorted(d.glob("*.json"))]:
        entry = corpus.load(path)
        if entry["property"] in ("stream_resume", "stream_exactly_once", "stream_mixture") and INSTALLED[entry["target"]]:
            text = repro.write(entry, path=str(path))
            workers = decode_stream_scenario(entry["example"]).num_workers
            assert ("can depend on timing" in " ".join(text.split())) == (workers >= 2), path.name


def test_a_stream_epochs_failure_other_than_a_replayed_epoch_is_refused_naming_replay():
    if not INSTALLED["hf-iterable"]:
        pytest.skip("datasets is not installed")
    path = STUDIES / "hf_datasets" / "pins" / "stream_epochs-stream_hf-iterable-hf-iterable-97ddb1d6e4.json"
    entry = corpus.load(path)
    assert "for each of 7 seeds" in repro.write(entry, path=str(path))
    persistent = {**entry, "message": "epochs: epoch 1 differs between persistent and non-persistent workers: [..]"}
    with pytest.raises(repro.ReproError, match="written for an epoch that replays the one before.*replay"):
        repro.write(persistent, path=str(path))


def test_unsupported_entries_are_refused_naming_what_is_supported(capsys, tmp_path):
    epochs = corpus.load(STUDIES / "litdata" / "pins" / "trainers" / "stream_trainer_epochs-L18.json")
    shards = tmp_path / "shards.json"   # a stream property no script is written for
    shards.write_text(json.dumps({**epochs, "property": "stream_dp_shards"}))
    assert cli.main(["repro", str(shards)]) == 2
    err = capsys.readouterr().err
    assert "property 'stream_dp_shards'" in err and "stream_resume, stream_exactly_once" in err and "replay" in err
    packer = next(p for p in sorted(REGRESSIONS.glob("conservation-packer-*.json")))   # a packer property not written
    assert cli.main(["repro", str(packer)]) == 2
    assert "stream_resume" in capsys.readouterr().err
    assert cli.main(["repro", "no-such-file.json"]) == 2
    assert "no such regression file" in capsys.readouterr().err


def test_trainer_outside_the_written_loops_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["repro", str(PINS[0][1]), "--trainer", "nope"])
    assert e.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err
    with pytest.raises(repro.ReproError, match="allowed values: adversarial, torchdata, lightning-steps, torchtitan, "
                                               "lightning, veomni"):
        repro.write(corpus.load(PINS[0][1]), trainer="nope")
    # a stream_resume pin asked for under a trainer loop is refused naming the one written for its property
    with pytest.raises(repro.ReproError, match="trainer 'torchdata'.*allowed values: adversarial.*replay"):
        repro.write(corpus.load(PINS[0][1]), path=str(PINS[0][1]), trainer="torchdata")


def test_lightning_steps_loop_refuses_what_it_does_not_model_naming_replay():
    # a weighted mixture has no len() (Lightning's fetcher then prefetches, which the written loop does not model)
    path = STUDIES / "litdata" / "pins" / "trainers" / "stream_trainer_resume-L4.json"
    if not INSTALLED["litdata"]:
        pytest.skip("litdata is not installed")
    entry = corpus.load(path)
    assert entry["example"]["scenario"]["mix"] == "combined"
    for change, refusal in (({"weights": [0.5, 0.5]}, "weighted mixture has no len\\(\\).*replay"),
                            ({"break_after": 2}, "without limit_train_batches.*replay")):
        scenario = {**entry["example"]["scenario"], **change}
        with pytest.raises(repro.ReproError, match=refusal):
            repro.write({**entry, "example": {**entry["example"], "scenario": scenario}}, path=str(path))


def test_cli_prints_the_script_or_writes_it_only_where_asked(capsys, tmp_path):
    path = PINS[0][1]
    if not INSTALLED[corpus.load(path)["target"]]:
        pytest.skip("its library is not installed")
    assert cli.main(["repro", str(path)]) == 0
    text = capsys.readouterr().out
    ast.parse(text)
    for own in ("dynbsz", "properties", "simulator"):
        assert f"import {own}" not in text and f"from {own}" not in text
    out = tmp_path / "r.py"
    assert cli.main(["repro", str(path), "--out", str(out)]) == 0
    assert out.read_text() == text


def test_replay_offers_the_repro_command(capsys):
    finding, path = next((f, p) for f, p in PINS if f == "L2")
    if not INSTALLED["litdata"]:
        pytest.skip("litdata is not installed")
    assert cli.main(["replay", str(path)]) == 1
    assert f"as a standalone script: {repro.command(str(path))}" in capsys.readouterr().out


# ---- VeOmni's loader findings (map-style pipelines: loader:main, loader:worker, loader:multisource) ----

#: generated scripts over 60 lines, and why: the main runtime's pipeline (six import lines, six of construction) and
#: the loop of a schedule that checkpoints on every resume and at every epoch end (24 lines) leave no room
OVER_60 = {"V2": 64, "V4-veomni": 75, "V16-veomni": 75}
#: and under VeOmni's loop (V4-veomni, V16-veomni): the trainer's loop, its checkpoints and its resume arithmetic
#: (31 lines) beside the runtime's pipeline


def _veomni_pins() -> list[tuple[str, Path]]:
    """(finding, path) of each VeOmni pin of a property the generator writes whose outcome cannot depend on timing."""
    out = []
    for finding, name in sorted(PINNED.items(), key=lambda kv: int(kv[0][1:]) if kv[0][1:].isdigit() else 0):
        path = REGRESSIONS / name
        entry = json.loads(path.read_text())
        if entry["property"] in repro.LOADER_PROPERTIES and not corpus.timing_may_matter(entry):
            out.append((finding, path))
    for path in TRAINER_PINS:   # under VeOmni's loop (trainers/)
        entry = json.loads(path.read_text())
        if not corpus.timing_may_matter(entry):
            out.append((f"{entry['finding']}-veomni", path))
    return out


TRAINER_PINS = sorted((REGRESSIONS / "trainers").glob("trainer_resume-*.json"))
#: a loader mutant's pin (the suite's own corpus)
MUTANT_LOADER_PIN = (Path(__file__).parent / "regressions" /
                     "loader_resume-loader_worker-mutant_rotation-not-restored-36753ea738.json")
VEOMNI_PINS = _veomni_pins()
STDLIB = set(sys.stdlib_module_names)
LIBRARY = {"veomni", "torch", "torchdata"}


def imported_roots(text: str) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots.add((node.module or "").split(".")[0] if not node.level else ".")
    return roots


def test_every_deterministic_veomni_pin_of_a_written_property_is_covered():
    # an independent list: the PINNED findings of loader_resume / exactly_once / epoch_reshuffle and the trainer pins
    # with at most one worker (V3, V10 and V13 run two workers: their scripts are written, and say the outcome can
    # depend on timing)
    assert {f for f, _ in VEOMNI_PINS} == {"V1", "V2", "V4", "V7", "V8", "V9", "V12", "V15", "V17",
                                           "V4-veomni", "V16-veomni"}


def test_veomni_scripts_fail_on_the_release_and_print_the_harness_runs(tmp_path):
    # one interpreter for all (tests/script_batch.py: VeOmni's import, 3.5 s, once), each script as python runs it
    if not veomni_loaders.available():
        pytest.skip(veomni_loaders.MISSING)
    scripts = [write_loader_script(finding, path, tmp_path) for finding, path in VEOMNI_PINS]
    for (finding, path), ran in zip(VEOMNI_PINS, run_scripts(scripts, tmp_path)):
        check_loader_run(finding, corpus.load(path), ran)


#: the suite's own pins of the plain torchdata loader (properties.targets.builtin.torchdata_target)
TORCHDATA_PINS = sorted((Path(__file__).parent / "regressions").glob("*-torchdata-*.json"))


@pytest.mark.parametrize("path", TORCHDATA_PINS, ids=[p.name.split("-")[0] for p in TORCHDATA_PINS])
def test_torchdata_script_fails_on_the_release_and_prints_the_harness_runs(path, tmp_path):
    assert {corpus.load(p)["property"] for p in TORCHDATA_PINS} == {"loader_resume", "epoch_reshuffle"}
    check_loader_run(path.stem, corpus.load(path), run_script(write_loader_script(path.stem, path, tmp_path), tmp_path))


def write_loader_script(finding: str, path: Path, tmp_path: Path) -> Path:
    """The pin's script, which imports only its library, torch and the standard library, within its line budget."""
    text = repro.write(corpus.load(path), path=str(path))
    assert imported_roots(text) <= STDLIB | LIBRARY, imported_roots(text) - STDLIB
    for own in ("dynbsz", "properties", "simulator", "tests"):
        assert f"import {own}" not in text and f"from {own}" not in text
    assert len(text.splitlines()) <= OVER_60.get(finding, 60), f"{finding}: {len(text.splitlines())} lines"
    script = tmp_path / f"{finding}.py"
    script.write_text(text)
    return script


def check_loader_run(finding: str, entry: dict, done) -> None:
    """The script exited 1 on the release and printed the harness's own runs of the example."""
    assert done.returncode == 1, (finding, done.stdout + done.stderr[-2000:])
    assert "first difference: " in done.stdout, (finding, done.stdout)
    first, second = {"epoch_reshuffle": ("persistent", "non-persistent"),
                     "trainer_resume": ("uninterrupted", "preempted")}.get(entry["property"], ("uninterrupted", "resumed"))
    plain, resumed = loader_harness_runs(entry)
    assert printed(done.stdout, first) == plain, (finding, done.stdout)
    assert printed(done.stdout, second) == resumed, (finding, done.stdout)


V14 = "dp_step_counts-loader_worker-veomni-1ff2675553.json"


def test_dp_step_count_script_fails_on_the_release_and_prints_each_ranks_steps(tmp_path):
    # V14 (no fix proposed): each DP rank's loader under VeOmni's train_steps bound, counted per epoch
    if not veomni_loaders.available():
        pytest.skip(veomni_loaders.MISSING)
    entry = corpus.load(REGRESSIONS / V14)
    text = repro.write(entry, path=str(REGRESSIONS / V14))
    assert imported_roots(text) <= STDLIB | LIBRARY and len(text.splitlines()) <= 60
    script = tmp_path / "V14.py"
    script.write_text(text)
    done = run_script(script, tmp_path)
    assert done.returncode == 1 and "first difference: epoch 0" in done.stdout, done.stdout + done.stderr[-2000:]
    sc = decode_loader_scenario(entry["example"])
    component = resolve(entry["target"]).component(entry["component"])
    harness = [L.run_bounded(component.make_loader, replace(sc, dp_rank=r), "steps_per_epoch",
                             steps_per_epoch=component.steps_per_epoch(sc), ids_of=component.ids_of,
                             codec=component.state_codec) for r in range(sc.dp_size)]
    assert printed(done.stdout, "steps per epoch, by rank") == harness, done.stdout


def test_veomni_scripts_name_their_finding_and_its_fix():
    if not veomni_loaders.available():
        pytest.skip(veomni_loaders.MISSING)
    finding, path = VEOMNI_PINS[0]
    text = repro.write(corpus.load(path), path=str(path))
    assert text.startswith(f'"""VeOmni 0.1.12, {finding}: ') and f"studies/veomni/patches/{finding}.diff" in text
    for timed in (REGRESSIONS / PINNED["V13"], *[p for p in TRAINER_PINS if "-V3" in p.name]):   # two workers
        assert "can depend on timing" in " ".join(repro.write(corpus.load(timed), path=str(timed)).split())


def test_loader_entries_without_a_standalone_loader_are_refused(tmp_path):
    # a loader property the generator does not write, and a component that renders no standalone loader
    hang = {**corpus.load(REGRESSIONS / V14), "property": "no_hang"}
    with pytest.raises(repro.ReproError, match="property 'no_hang'.*loader_resume, exactly_once.*replay"):
        repro.write(hang, path="x.json")
    # a mutant's loader is the suite's own class: no script renders it
    entry = corpus.load(MUTANT_LOADER_PIN)
    with pytest.raises(repro.ReproError, match="renders no standalone loader.*loader:main, loader:worker"):
        repro.write(entry, path="x.json")
    assert not repro.supports(entry)
    # a component whose make_loader wraps another construction (the documented target's worker: drop_last=False)
    worker = corpus.load(REGRESSIONS / PINNED["V8"])
    if veomni_loaders.available():
        with pytest.raises(repro.ReproError, match="not the construction its repro_setup renders"):
            repro.write({**worker, "target": "studies.veomni:documented"}, path="x.json")


def test_the_rendered_construction_is_found_through_wrappers_and_partials():
    # a refusing wrapper (studies/veomni/deviations.py) names what it wraps; builders' components are partials
    import functools

    from properties.repro_loader import _home

    def refusing(sc):
        return None

    refusing.__wrapped__ = functools.partial(functools.partial(json.dumps, indent=1), sort_keys=True)
    assert _home(refusing) == "json" and _home(functools.partial(json.loads)) == "json"
    assert _home(lambda sc: None) == __name__


def test_a_veomni_script_passes_once_the_bug_is_fixed(tmp_path):
    # every diff of studies/veomni/patches/ applied to a copy of the installed VeOmni (and torchdata): one script
    # per component exits 0 there (V15's pin does not: on the release its worker runtime keeps drop_last=True, and the
    # example also loses an epoch's last incomplete step, deviation D6, as the harness's replay on veomni reports)
    if not veomni_loaders.available():
        pytest.skip(veomni_loaders.MISSING)
    from studies.veomni.fixes import VEOMNI

    patched = VEOMNI.build()
    # loader:main, loader:worker, loader:multisource; epoch_reshuffle; trainer_resume under VeOmni's loop
    findings = ("V1", "V8", "V9", "V7", "V4-veomni")
    scripts = [write_loader_script(f, dict(VEOMNI_PINS)[f], tmp_path) for f in findings]
    for finding, done in zip(findings, run_scripts(scripts, tmp_path, str(patched))):
        assert done.returncode == 0, (finding, done.stdout + done.stderr[-2000:])


# ---- torchtitan's findings under its own loop (trainers._torchtitan_run), in torchtitan's overlay ----

TORCHTITAN_PINS = {"T1": STUDIES / "torchtitan" / "pins" / "t1-minimal-map.json",   # one worker
                   "T4": STUDIES / "torchtitan" / "pins" / "t4-minimal-map-finite.json",   # a finite loader
                   "T5": STUDIES / "torchtitan" / "pins" / "t5-hang-streaming.json",   # a hang (stream_no_hang)
                   "T2": STUDIES / "torchtitan" / "pins" / "t2-map-finite-workers.json"}   # one pass (no fix)
#: run in a library's overlay (torchtitan needs datasets < 4.8, VeOmni's builders 2.21): each pin's script as
#: written and the harness's own runs (None: a run with no second to compare; a string: the run raised this)
_IN_OVERLAY = """
import json, sys
from properties import corpus, repro
from tests.repro_harness import harness_runs, loader_harness_runs
out = {}
for finding, path in json.loads(sys.argv[1]).items():
    entry = corpus.load(path)
    runs = {"stream_trainer_resume": harness_runs, "stream_trainer_epochs": harness_runs,
            "trainer_resume": loader_harness_runs}.get(entry["property"])
    try:
        runs = runs and runs(entry)
    except RuntimeError as e:
        runs = repr(e)
    out[finding] = {"text": repro.write(entry, path=path), "runs": runs}
print(json.dumps(out))
"""


def _written_in_overlay(overlay, pins: dict[str, Path]) -> dict:
    done = subprocess.run([sys.executable, "-c", _IN_OVERLAY, json.dumps({k: str(p) for k, p in pins.items()})],
                          env=overlay.env_for_subprocess(), cwd=STUDIES.parent, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_torchtitan_scripts_fail_on_the_release_print_the_harness_runs_and_pass_with_the_diffs(tmp_path):
    # T1 and T4 under torchtitan's loop, preempted; T5 uninterrupted with a bound on each batch; T2 one pass
    from properties.targets.overlay import TORCHTITAN
    from studies.torchtitan import PATCH_SETS

    if not TORCHTITAN.installed():
        pytest.skip(f"torchtitan's overlay is not installed ({TORCHTITAN.install})")
    written = _written_in_overlay(TORCHTITAN, TORCHTITAN_PINS)
    patch_set = PATCH_SETS[0]
    fixed = os.pathsep.join(patch_set.import_path(patch_set.build()))
    for finding, got in written.items():
        text = got["text"]
        assert imported_roots(text) <= STDLIB | {"torchtitan", "datasets"}, imported_roots(text) - STDLIB
        script = tmp_path / f"{finding}.py"
        if finding == "T2":   # no diff: the release's one pass trains a sample twice, as the harness's run does
            assert "fix proposed" not in " ".join(text.split()) and len(text.splitlines()) <= 60
            script.write_text(text)
            released = run_script(script, tmp_path, TORCHTITAN.dir())
            assert released.returncode == 1, released.stdout + released.stderr[-2000:]
            assert [tuple(s) for s in printed(released.stdout, "trained")] == [(e, tuple(ids))
                                                                               for e, ids in got["runs"][0]]
            assert "epoch 0 delivered [0, 1, 2] twice" in released.stdout, released.stdout
            continue
        assert f"studies/torchtitan/patches/{finding}.diff" in " ".join(text.split())
        # T5 hangs on the release: the bound on a batch shortened from its 10 s (a batch here takes well under one)
        script.write_text(text.replace(f"HANG_S = {repro.HANG_S} ", "HANG_S = 5 ", 1))
        released = run_script(script, tmp_path, TORCHTITAN.dir())
        assert released.returncode == 1, released.stdout + released.stderr[-2000:]
        if got["runs"] is None:   # T5: no batch within the bound, and with T5's diff the run ends
            assert "a batch did not come within 5 s" in released.stdout, released.stdout
            script.write_text(text)   # the script as written (10 s a batch): a loaded machine never times out a fix
            assert run_script(script, tmp_path, fixed).returncode == 0
            continue
        plain, preempted = ([(e, tuple(ids)) for e, ids in run] for run in got["runs"])   # JSON made them lists
        assert plain != preempted   # the pin still fails on the release, in the harness
        assert [tuple(s) for s in printed(released.stdout, "uninterrupted")] == plain, released.stdout
        assert [tuple(s) for s in printed(released.stdout, "preempted")] == preempted, released.stdout
        if finding == "T4":   # no workers: the diffs' copy, first on the path, trains what the uninterrupted job does
            patched = run_script(script, tmp_path, fixed)
            assert patched.returncode == 0, patched.stdout + patched.stderr[-2000:]


def test_torchtitan_t3_script_is_written_from_its_pin_on_the_diffs_copy(tmp_path):
    # two workers re-looping a streaming dataset on the copy with T1, T4 and T5's diffs (T1's fix unmasks T3): the
    # CLI re-runs itself in that copy's process; the script's outcome is timing (4 of 5 runs failed), not run here
    from properties.targets.overlay import TORCHTITAN

    if not TORCHTITAN.installed():
        pytest.skip(f"torchtitan's overlay is not installed ({TORCHTITAN.install})")
    out = tmp_path / "T3.py"
    done = subprocess.run([sys.executable, "-m", "properties", "repro", str(STUDIES / "torchtitan" / "pins" /
                           "t3-fixed-streaming.json"), "--out", str(out)], cwd=STUDIES.parent, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    text = out.read_text()
    assert imported_roots(text) <= STDLIB | {"torchtitan", "datasets"}, imported_roots(text) - STDLIB
    flat = " ".join(text.split())
    assert flat.startswith('"""torchtitan 0.3.0, T3: ') and "can depend on timing" in flat
    assert "fix proposed" not in flat and "preempted after global steps [2]" in flat


# ---- VeOmni's builders (veomni-builders: BaseTrainer's build path), in VeOmni's overlay (datasets 2.21) ----

BUILDERS_PINS = {"V1": STUDIES / "veomni" / "data" / "builders" /   # the mapping dataset, warm-up steps
                 "trainer_resume-builders_main-veomni-builders-55937710a9.json",
                 "B1": STUDIES / "veomni" / "data" / "builders" /
                 "trainer_resume-builders_multisource-main-veomni-builders-42a5d2ea19.json",   # a crash
                 "B2": STUDIES / "veomni" / "data" / "builders" /
                 "trainer_resume-builders_multisource-worker-veomni-builders-b61dc9ee53.json"}


def test_builders_scripts_fail_on_the_release_as_the_harness_does(tmp_path):
    # BaseTrainer's build path rendered: VeOmniArguments, build_dataset, build_dataloader over JSON-lines files
    from studies.veomni.builders import OVERLAY

    if not OVERLAY.installed():
        pytest.skip(f"VeOmni's datasets overlay is not installed ({OVERLAY.install})")
    written = _written_in_overlay(OVERLAY, BUILDERS_PINS)
    scripts = []
    for finding, got in written.items():
        text = got["text"]
        assert imported_roots(text) <= STDLIB | {"torch", "veomni"}, imported_roots(text) - STDLIB
        assert text.startswith(f'"""VeOmni 0.1.12 (datasets 2.21.0), {finding}: ')
        scripts.append(tmp_path / f"{finding}.py")
        scripts[-1].write_text(text)
    # a process each, as a maintainer runs them (each starts its own gloo group, once a process)
    for (finding, got), script in zip(written.items(), scripts):
        ran = run_script(script, tmp_path, OVERLAY.dir())
        assert ran.returncode == 1, (finding, ran.stdout + ran.stderr[-2000:])
        if isinstance(got["runs"], str):   # B1: the resumed job's next() raises as the harness's did
            assert "RuntimeError('generator raised StopIteration')" == got["runs"]
            assert "RuntimeError: generator raised StopIteration" in ran.stderr, ran.stderr[-2000:]
            continue
        plain, preempted = ([(e, tuple(tuple(mb) for mb in ids)) for e, ids in run] for run in got["runs"])
        assert plain != preempted
        assert printed(ran.stdout, "uninterrupted") == plain, ran.stdout
        assert printed(ran.stdout, "preempted") == preempted, ran.stdout


# ---- VeOmni's packer (TextBatchingStrategy) under the budget property ----

def test_packer_script_fails_on_the_release_prints_the_harness_cuts_and_passes_with_the_diffs(tmp_path):
    from properties import packer_props as P
    from properties.scenarios import decode_packer_example
    from studies.veomni.fixes import VEOMNI

    if not veomni_loaders.available():
        pytest.skip(veomni_loaders.MISSING)
    path = REGRESSIONS / PINNED["V11"]
    entry = corpus.load(path)
    text = repro.write(entry, path=str(path))
    assert imported_roots(text) <= STDLIB | {"veomni"} and len(text.splitlines()) <= 60
    script = tmp_path / "V11.py"
    script.write_text(text)
    released = run_script(script, tmp_path)
    assert released.returncode == 1, released.stdout + released.stderr[-2000:]
    ex = decode_packer_example(entry["example"])
    component = resolve(entry["target"]).component(entry["component"])
    run = P.drive(lambda: component.make_packer(ex.config, ex.gate), ex.config, ex.stream, json_roundtrip=False)
    assert [tuple(ids) for ids in printed(released.stdout, "micro-batches")] == run.batches(), released.stdout
    fixed = run_script(script, tmp_path, str(VEOMNI.build(("V11",))))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr[-2000:]


def test_packer_entries_the_script_does_not_model_are_refused():
    entry = corpus.load(REGRESSIONS / PINNED["V11"])
    with_restores = {**entry, "example": {**entry["example"], "restore_after": [0]}}
    with pytest.raises(repro.ReproError, match="without restores so far"):
        repro.write(with_restores, path="x.json")
    with pytest.raises(repro.ReproError, match="renders no standalone packer"):
        repro.write({**entry, "target": "mutant:physical-cap-ignored"}, path="x.json")
    with pytest.raises(repro.ReproError, match="built by the suite"):
        repro.write({**entry, "target": "dynbsz", "example": {**entry["example"], "gate": {"kind": "probe_high_water",
                                                                                             "fraction": 1.0}}},
                    path="x.json")


def test_a_dynbsz_loader_script_passes_where_dynbsz_holds_and_prints_the_harness_runs(tmp_path):
    # a mutant's loader_resume pin written for dynbsz's own loader (the mutant renders none: the suite's class):
    # dynbsz resumes it exactly, so the script exits 0, printing the harness's runs step signature for step signature
    entry = {**corpus.load(MUTANT_LOADER_PIN), "target": "dynbsz"}
    text = repro.write(entry, path="x.json")
    assert imported_roots(text) <= STDLIB | {"dynbsz"} and len(text.splitlines()) <= 60, text
    script = tmp_path / "script.py"
    script.write_text(text)
    done = run_script(script, tmp_path, str(STUDIES.parent))   # dynbsz is the library under test here
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    sc = decode_loader_scenario(entry["example"])
    component = resolve("dynbsz").component(entry["component"])
    kw = dict(ids_of=component.signature, codec=component.state_codec)
    plain, with_ends = L.with_boundary_restores(component.make_loader, sc, **kw)
    assert printed(done.stdout, "uninterrupted") == plain.steps == L.run_schedule(component.make_loader, with_ends,
                                                                                  **kw).steps
    assert printed(done.stdout, "resumed") == plain.steps


USER_PACKER = """
import dataclasses

from dynbsz.packer import GreedyPacker


def make_packer(config, gate):
    return GreedyPacker(config, gate)


def forgets_the_cap(config, gate):   # a user's packer with a bug: the physical cap is never passed on
    return GreedyPacker(dataclasses.replace(config, physical_cap=None), gate)
"""


def test_packer_scripts_for_dynbsz_and_a_users_factory_import_the_packer_and_judge_it(tmp_path, monkeypatch):
    # two samples of 1 budgeted and 3 physical tokens, budget and cap 4: dynbsz's GreedyPacker and a user's
    # MODULE:FACTORY packer built the same way cut them apart (exit 0); a user's factory that drops the physical cap
    # packs them together, 6 physical tokens (exit 1); each script imports that packer
    (tmp_path / "userpack.py").write_text(USER_PACKER)
    monkeypatch.syspath_prepend(str(tmp_path))
    v11 = corpus.load(REGRESSIONS / PINNED["V11"])
    example = {**v11["example"], "config": {**v11["example"]["config"], "budget": 4, "physical_cap": 4},
               "stream": [[0, 1, 3, "text"], [1, 1, 3, "text"]]}
    entry = {**v11, "example": example, "finding": None}
    for target, code in (("dynbsz", 0), ("userpack:make_packer", 0), ("userpack:forgets_the_cap", 1)):
        text = repro.write({**entry, "target": target}, path="x.json")
        assert ("from userpack import" in text) == target.startswith("userpack"), text
        script = tmp_path / "s.py"
        script.write_text(text)
        done = run_script(script, tmp_path, str(tmp_path))
        assert done.returncode == code, (target, done.stdout + done.stderr[-2000:])
