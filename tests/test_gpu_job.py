"""The GPU end-to-end job (ci/gpu_job.py) in its small CPU configuration, and its pieces.

The end-to-end tests run the job as CI does, in subprocesses (the job switches on deterministic
algorithms process-wide, which must not leak into other tests of this worker). The unit tests
check the pieces whose bugs would not crash: the packed collate, attention confined to each
sample, the plan/prediction, and the resume comparison catching a deliberately broken resume.
"""

from __future__ import annotations

import importlib.util
import json
import math
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from ci.gpujob.collate import IGNORE_INDEX, INPUT, LABEL, POSITION, PackedCollate, unpack
from ci.gpujob.config import SMALL, JobConfig
from ci.gpujob.model import build_model, packed_loss_sum
from ci.gpujob.plan import compare, model_prediction, model_probe_wait, plan_main, plan_streams, predict
from ci.gpujob.report import RESULTS_HEADER, append_results, compare_resume, results_markdown
from ci.gpujob.train import History
from dynbsz import ConfigError
from dynbsz.datasets import make_sample
from dynbsz.packer import MicroBatch
from dynbsz.workload import text_workload

ROOT = Path(__file__).resolve().parents[1]
JOB = [sys.executable, "-m", "ci.gpu_job"]


def run_job(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([*JOB, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def _finite(x) -> bool:
    return isinstance(x, float) and math.isfinite(x)


# ---- end to end ---------------------------------------------------------------------------------

def test_small_job_end_to_end_on_cpu(tmp_path):
    out, md = tmp_path / "report.json", tmp_path / "gpu-results.md"
    proc = run_job("--device", "cpu", "--config", "small", "--out", str(out), "--results-md", str(md))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(out.read_text())
    assert report["ok"] is True
    assert report["device"] == "cpu" and report["deterministic"] is True
    assert report["command"].startswith("python -m ci.gpu_job --device cpu")
    assert set(report["runtimes"]) == {"main", "worker"}
    for runtime, r in report["runtimes"].items():
        m, p, c, res = r["measured"], r["prediction"], r["comparison"], r["resume"]
        assert m["steps"] == SMALL.steps
        assert m["tokens_per_s"] > 0 and m["steady_tokens_per_s"] > 0
        # Predicted and measured, stall and cold start: present and finite (no tight agreement
        # is asserted: two shared cores).
        for key in ("stall_fraction", "first_micro_batch_s"):
            assert _finite(m[key]) and _finite(p[key]), (runtime, key)
        assert 0.0 <= m["stall_fraction"] <= 1.0 and 0.0 <= p["stall_fraction"] <= 1.0
        # the comparison is reported (pass/fail), not required: timing on a shared machine is noise
        assert c["repeats"] == 1 and c["stall_measured"] == m["stall_fraction"]
        assert c["stall_predicted"] == p["stall_fraction"] and isinstance(c["ok"], bool)
        assert 0 <= p["floor_s"] <= r["probe"]["floor_s"] and r["probe"]["pace_s"] == m["mean_step_compute_s"]
        assert r["probe"]["startup_s"] > 0 and set(r["probe"]["first_fetch_s"]) == {"0", "1"}
        assert m["first_micro_batch_s"] > 0 and p["first_micro_batch_s"] > 0
        assert 0.5 < m["fill_mean"] <= 1.0 and 0 < m["fill_min"] <= m["fill_mean"]
        assert m["pinned_fraction"] is None  # no pinned memory without CUDA
        # in_order=True: the simulator, driving dynbsz's real packer, names every step's samples
        assert r["order_matches_prediction"] is True, runtime
        # Resume: run C (a fresh process) equals run A exactly, losses and sample ids.
        assert res["ok"] and res["losses_equal"] and res["ids_equal"] and res["loader_steps_continue"], res
        assert res["resume_at"] == SMALL.resume_at and res["resumed_start_step"] == SMALL.resume_at
        assert res["resumed_steps"] == SMALL.steps - SMALL.resume_at
        losses = r["losses"]
        assert len(set(losses)) > 1, "constant losses would make the comparison vacuous"
        assert abs(losses[0] - math.log(SMALL.vocab_size)) < 0.5  # a sane init: about uniform
    # A CPU run never writes the GPU results page; the page it would write is well formed.
    assert not md.exists()
    page = results_markdown(report)
    assert report["date"] in page and report["device_name"] in page and report["command"] in page
    assert "| main |" in page and "| worker |" in page and "exact" in page
    assert "runtime" in proc.stdout and "exact" in proc.stdout


@pytest.mark.parametrize("runtime, broken, field, step", [
    ("main", "loader", "first_ids_mismatch_step", 5),      # a fresh loader replays epoch 0 from the start
    ("worker", "model", "first_loss_mismatch_step", 5),    # fresh weights: the very first resumed loss differs
    ("worker", "optimizer", "first_loss_mismatch_step", 6),  # fresh Adam moments: visible one update later
])
def test_a_deliberately_broken_resume_fails_the_job(tmp_path, runtime, broken, field, step):
    out = tmp_path / "report.json"
    proc = run_job("--device", "cpu", "--runtimes", runtime, "--steps", "12", "--resume-at", "5",
                   "--break-resume", broken, "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads(out.read_text())
    res = report["runtimes"][runtime]["resume"]
    assert report["ok"] is False and res["ok"] is False and res["broken_on_purpose"] == broken
    assert res[field] == step, res
    if broken != "loader":
        assert res["ids_equal"] is True  # the data was right; only the training state was not
    assert "MISMATCH" in proc.stdout


@pytest.mark.parametrize("args, message", [
    (["--runtimes", "gpu"], "--runtimes"),
    (["--steps", "100000"], "epoch 0 holds"),
    (["--steps", "10", "--resume-at", "10"], "resume_at"),
    (["--device", "tpu"], "--device"),
])
def test_bad_arguments_exit_2_naming_the_setting(args, message, capsys):
    job = _load_job_module()
    assert job.main(["--device", "cpu", *args] if "--device" not in args else args) == 2
    assert message in capsys.readouterr().err
    assert not torch.are_deterministic_algorithms_enabled()  # refused before touching global state


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_cuda_requested_without_cuda_is_refused(capsys):
    assert _load_job_module().main(["--device", "cuda"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err


def _load_job_module():
    spec = importlib.util.spec_from_file_location("gpu_job_cli", ROOT / "ci" / "gpu_job.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- the packed collate -------------------------------------------------------------------------

def _micro_batch(lengths, vocab=50, first_id=0):
    trace = text_workload(8, 0.5).sample(len(lengths), 0)
    payloads = []
    for i, n in enumerate(lengths):
        s = make_sample(trace, i, tensor=True)
        s["input_ids"] = s["input_ids"][:1].repeat(n) + torch.arange(n)  # distinct, known content
        payloads.append(s)
    ids = tuple(range(first_id, first_id + len(lengths)))
    return MicroBatch(ids, tuple(lengths), tuple(lengths), ("text",) * len(lengths), tuple(payloads), 0, 0, 64, False)


def test_collate_packs_samples_with_restarting_positions_and_in_sample_labels():
    lengths = [5, 1, 3, 7]
    mb = _micro_batch(lengths)
    out = PackedCollate(vocab_size=50)(mb)
    rows = out["rows"]
    assert rows.shape == (3, sum(lengths)) and rows.dtype == torch.long
    assert out["seq_lens"] == tuple(lengths) and out["sample_ids"] == mb.ids
    assert out["real_tokens"] == sum(lengths) and out["n_labels"] == sum(lengths) - len(lengths)
    assert out["budget"] == 64
    for piece, payload, n in zip(unpack(out), mb.payloads, lengths):
        ids = payload["input_ids"] % 50
        assert torch.equal(piece["input_ids"], ids)
        assert piece["position_ids"].tolist() == list(range(n))
        # next token within the sample; never the next sample's first token
        assert piece["labels"][:-1].tolist() == ids[1:].tolist() and piece["labels"][-1] == IGNORE_INDEX
    assert int((rows[LABEL] == IGNORE_INDEX).sum()) == len(lengths)
    assert rows[INPUT].max() < 50 and rows[POSITION].max() == max(lengths) - 1


def test_collate_is_picklable_and_refuses_inconsistent_micro_batches():
    collate = pickle.loads(pickle.dumps(PackedCollate(vocab_size=50)))  # runtime='worker' ships it to workers
    assert collate.vocab_size == 50 and collate.pin_output is False
    mb = _micro_batch([3, 4])
    wrong = MicroBatch(mb.ids, (3, 5), (3, 5), mb.sources, mb.payloads, 0, 0, 64, False)
    with pytest.raises(ValueError, match="differ from the packed token counts"):
        collate(wrong)
    # a restore that forgot to re-read a buffered sample fails by name (dynbsz's main runtime did)
    lost = MicroBatch(mb.ids, mb.tokens, mb.physical, mb.sources, (mb.payloads[0], None), 0, 0, 64, False)
    with pytest.raises(ValueError, match=r"samples \[1\] arrived without a payload"):
        collate(lost)
    with pytest.raises(ValueError, match="vocab_size"):
        PackedCollate(vocab_size=1)


# ---- attention confined to each sample ------------------------------------------------------------

def _model():
    return build_model(vocab_size=50, d_model=16, n_layers=2, n_heads=2, mlp_ratio=2, max_positions=64, seed=3,
                       device=torch.device("cpu")).eval()


def test_packed_forward_equals_each_sample_alone():
    model = _model()
    out = PackedCollate(vocab_size=50)(_micro_batch([6, 2, 9, 4]))
    rows = out["rows"]
    with torch.no_grad():
        packed = model(rows[INPUT], rows[POSITION], out["seq_lens"])
        alone = torch.cat([model(p["input_ids"], p["position_ids"], (len(p["input_ids"]),)) for p in unpack(out)])
        # Mutants: positions that run on across samples, and one causal span over the whole row
        # (attention leaking into earlier samples): both must change the logits.
        run_on = model(rows[INPUT], torch.arange(rows.shape[1]), out["seq_lens"])
        leaky = model(rows[INPUT], rows[POSITION], (rows.shape[1],))
    assert torch.allclose(packed, alone, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(packed, run_on, atol=1e-3)
    first = out["seq_lens"][0]
    assert torch.allclose(leaky[:first], packed[:first], atol=1e-5)   # the first sample has nothing to leak from
    assert not torch.allclose(leaky[first:], packed[first:], atol=1e-3)


def test_packed_loss_equals_cross_entropy_ignoring_sample_ends():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(12, 50, generator=g)
    labels = torch.randint(0, 50, (12,), generator=g)
    labels[[3, 7, 11]] = IGNORE_INDEX
    expected = torch.nn.functional.cross_entropy(logits, labels, ignore_index=IGNORE_INDEX, reduction="sum")
    assert torch.allclose(packed_loss_sum(logits, labels), expected, rtol=1e-6)


def test_model_init_is_seeded_and_leaves_the_global_rng_alone():
    before = torch.get_rng_state()
    a, b, c = _model(), _model(), build_model(50, 16, 2, 2, 2, 64, seed=4, device=torch.device("cpu"))
    assert torch.equal(torch.get_rng_state(), before)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["tok.weight"], sc["tok.weight"])


# ---- config, plan and prediction ------------------------------------------------------------------

def test_config_round_trips_and_refuses_bad_settings():
    assert JobConfig.from_dict(json.loads(json.dumps(SMALL.to_dict()))) == SMALL
    with pytest.raises(ConfigError, match="max_tokens must be set and <= budget"):
        JobConfig(**{**SMALL.__dict__, "budget": 256})
    with pytest.raises(ConfigError, match="d_model"):
        JobConfig(**{**SMALL.__dict__, "n_heads": 3})
    with pytest.raises(ConfigError, match="gate"):
        JobConfig(**{**SMALL.__dict__, "gate": "bogus"})
    with pytest.raises(ConfigError, match="unknown settings"):
        JobConfig.from_dict({**SMALL.to_dict(), "extra": 1})
    shorter = SMALL.with_run(steps=12)
    assert shorter.steps == 12 and 1 <= shorter.resume_at < 12


def test_prediction_names_the_plans_micro_batches_in_hand_out_order():
    steps = 20
    main = predict(SMALL, "main", steps, step_s=0.01, startup_s=0.05, overhead_s=5e-4, floor_s=0.002)
    assert main.ids == [list(it.ids) for it in plan_main(SMALL)[:steps]]
    streams = plan_streams(SMALL)
    round_robin = [list(streams[i % len(streams)][i // len(streams)].ids) for i in range(steps)]
    worker = predict(SMALL, "worker", steps, step_s=0.01, startup_s=0.05, overhead_s=5e-4)
    assert worker.ids == round_robin
    for p in (main, worker):
        assert p.first_micro_batch_s >= 0.05 and 0 <= p.stall_fraction <= 1
    assert main.stall_fraction_plus_floor > main.stall_fraction  # the floor only adds waiting
    # Every sample of epoch 0 is planned exactly once, in either runtime.
    for plan in (plan_main(SMALL), [it for s in streams for it in s]):
        ids = sorted(i for it in plan for i in it.ids)
        assert ids == list(range(SMALL.n_samples))


def test_stall_with_floor_puts_the_floor_in_every_wait_and_in_the_cadence():
    from simulator.metrics import stall_fraction
    from simulator.training import stall_with_floor

    # by hand: requests at 0.5, 1.5, 2.0 (previous hand-out + 0.4 + 0.1); waits 0.5+0.1, 0+0.1, 1.0+0.1
    assert stall_with_floor([0.0, 1.0, 1.5, 3.0], 0.4, 0.1) == pytest.approx(1.8 / 3.0)
    hand = np.array([0.0, 0.3, 0.9, 1.0, 1.7])
    assert stall_with_floor(hand, 0.25, 0.0) == pytest.approx(stall_fraction(np.r_[0.0, hand[:-1] + 0.25], hand))
    assert stall_with_floor([2.0], 0.1, 0.1) == 0.0
    with pytest.raises(ConfigError, match="floor_s"):
        stall_with_floor(hand, 0.1, -1.0)


def test_model_prediction_without_a_floor_is_the_loader_model_and_compare_has_tolerances():
    pure = predict(SMALL, "main", 20, step_s=0.01, startup_s=0.05, overhead_s=5e-4)
    zero = predict(SMALL, "main", 1, step_s=0.01, startup_s=0.05, overhead_s=5e-4, zero_cost_first_step_s=0.0)
    # a probe that measured no floor and exactly the model's own zero-cost first step changes nothing
    model_zero = zero.first_micro_batch_s - zero.first_micro_batch_plus_floor_s
    probed = {"floor_s": 0.0, "startup_s": 0.05, "first_step_s": model_zero}
    _, one = model_prediction(SMALL, "main", 20, 0.01, probed, 5e-4)
    assert one["stall_fraction"] == pytest.approx(pure.stall_fraction)
    assert one["first_micro_batch_s"] == pytest.approx(pure.first_micro_batch_s)
    # main runtime: the main process's start-up (measured, not modelled) overlaps the decodes: the later wins
    _, later = model_prediction(SMALL, "main", 20, 0.01, {**probed, "first_step_s": pure.first_micro_batch_s + 0.03}, 5e-4)
    assert later["first_micro_batch_s"] == pytest.approx(pure.first_micro_batch_s + 0.03)
    _, sooner = model_prediction(SMALL, "main", 20, 0.01, {**probed, "first_step_s": model_zero + 1e-4}, 5e-4)
    assert pure.first_micro_batch_s > model_zero + 1e-4
    assert sooner["first_micro_batch_s"] == pytest.approx(pure.first_micro_batch_s)
    # worker runtime: the start-up the model does not know runs before the worker's decodes: it adds
    wpure = predict(SMALL, "worker", 20, step_s=0.01, startup_s=0.05, overhead_s=5e-4)
    wzero = predict(SMALL, "worker", 1, step_s=0.01, startup_s=0.05, overhead_s=5e-4, zero_cost_first_step_s=0.0)
    wmodel_zero = wzero.first_micro_batch_s - wzero.first_micro_batch_plus_floor_s
    _, wlater = model_prediction(SMALL, "worker", 20, 0.01, {**probed, "first_step_s": wmodel_zero + 0.03}, 5e-4)
    assert wlater["first_micro_batch_s"] == pytest.approx(wpure.first_micro_batch_s + 0.03)
    _, floored = model_prediction(SMALL, "worker", 20, 0.01, {**probed, "floor_s": 0.002}, 5e-4)
    # the floor is the probe's wait less what the model predicts for the probe itself, never below 0
    explained = model_probe_wait(SMALL, "worker", {**probed, "floor_s": 0.002}, 5e-4)
    assert floored["floor_s"] == pytest.approx(max(0.0, 0.002 - explained))
    f = floored["floor_s"]
    assert floored["stall_fraction"] >= f / (0.01 + f) - 1e-9    # every wait holds at least the floor
    # paced slowly enough, zero-cost workers are always ahead: the model explains no wait at all
    assert model_probe_wait(SMALL, "worker", {**probed, "pace_s": 0.5}, 5e-4) == 0.0
    c = compare(0.20, 0.100, 0.25, 0.115)
    assert c["stall_ok"] and c["first_step_ok"] and c["ok"] and c["stall_error_points"] == pytest.approx(0.05)
    c = compare(0.20, 0.100, 0.2501, 0.0849)
    assert not c["stall_ok"] and not c["first_step_ok"] and not c["ok"]


# ---- the resume comparison and the results page -------------------------------------------------

def _history(losses, ids, start=0, index=None):
    return History(runtime="main", start_step=start, losses=list(losses), ids=[list(x) for x in ids],
                   loader_index=list(range(start, start + len(losses))) if index is None else index)


def test_compare_resume_is_exact_and_points_at_the_first_divergence():
    ref = _history([3.0, 2.5, 2.25, 2.125], [[0], [1], [2], [3]])
    good = compare_resume(ref, _history([3.0, 2.5], [[0], [1]]), _history([2.25, 2.125], [[2], [3]], 2), 2)
    assert good["ok"] and good["losses_equal"] and good["ids_equal"]
    # one ulp is a divergence: the comparison is not a tolerance
    off = compare_resume(ref, _history([3.0, 2.5], [[0], [1]]),
                         _history([2.25, math.nextafter(2.125, 3)], [[2], [3]], 2), 2)
    assert not off["ok"] and off["first_loss_mismatch_step"] == 3 and off["ids_equal"]
    short = compare_resume(ref, _history([3.0, 2.5], [[0], [1]]), _history([2.25], [[2]], 2), 2)
    assert not short["ok"] and short["first_loss_mismatch_step"] == 3
    wrong_start = compare_resume(ref, _history([3.0, 2.5], [[0], [1]]), _history([2.25, 2.125], [[2], [3]], 0), 2)
    assert not wrong_start["ok"]
    # same data and losses, but the loader's step counter restarted: a resume that is not one
    restarted = compare_resume(ref, _history([3.0, 2.5], [[0], [1]]),
                               _history([2.25, 2.125], [[2], [3]], 2, index=[0, 1]), 2)
    assert not restarted["ok"] and not restarted["loader_steps_continue"]


def test_results_page_appends_dated_sections(tmp_path):
    m = {"tokens_per_s": 1e5, "steady_tokens_per_s": 1.1e5, "stall_fraction": 0.1, "first_micro_batch_s": 1.5,
         "fill_mean": 0.97, "mean_step_compute_s": 0.05, "pinned_fraction": 1.0}
    p = {"stall_fraction": 0.11, "first_micro_batch_s": 1.45, "floor_s": 0.002}
    c = compare(0.1, 1.5, 0.11, 1.45) | {"repeats": 3}
    res = {"ok": True, "first_loss_mismatch_step": None, "first_ids_mismatch_step": None}
    report = {"date": "2026-11-29 12:00 UTC", "device_name": "NVIDIA H200", "command": "bash ci/gpu_job.sh",
              "torch": "2.13.0", "cublas_workspace_config": ":4096:8", "config": SMALL.to_dict() | {"name": "large"},
              "runtimes": {"main": {"measured": m, "prediction": p, "comparison": c, "resume": res}}}
    page = tmp_path / "docs" / "gpu-results.md"
    append_results(page, report)
    append_results(page, {**report, "date": "2026-11-30 08:00 UTC"})
    text = page.read_text()
    assert text.startswith(RESULTS_HEADER.splitlines()[0]) and text.count(RESULTS_HEADER.splitlines()[0]) == 1
    assert "## 2026-11-29 12:00 UTC · NVIDIA H200 · config `large`" in text and "2026-11-30 08:00 UTC" in text
    assert "`bash ci/gpu_job.sh`" in text and "| main | 100,000 |" in text and "100.0%" in text

