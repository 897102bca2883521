"""``python -m dynbsz profile`` and ``dynbsz.profile``: real worker processes time every ``__getitem__``
of datasets whose samples sleep known costs (tests/profile_fixtures.py), write the trace and the
fitted cost model, and stop at the first bad sample with one line naming it, keeping the rows
before it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dynbsz.__main__ import main
from dynbsz.costs import ANY_SOURCE, CostModel
from dynbsz.errors import ConfigError
from dynbsz.loader_config import LoaderConfig
from dynbsz.profile import (
    DEFAULT_SOURCE,
    FieldTokens,
    TimedDataset,
    choose_indices,
    cost_model_path,
    format_text,
    load_dataset,
    profile_dataset,
    to_json,
)
from dynbsz.workload import Trace
from tests import profile_fixtures as fx

ROOT = Path(__file__).resolve().parent.parent
SPEC = "tests.profile_fixtures:"


def check_rows(trace: Trace, ids: list[int]) -> None:
    """One row per sample, in the order read, with the dataset's ids, tokens and sources, and a cost at
    least the slept time (plus scheduling noise, never absurdly more)."""
    assert trace.ids.tolist() == ids
    assert trace.tokens.tolist() == [fx.tokens_of(i) for i in ids]
    assert trace.sources() == [fx.source_of(i) for i in ids]
    slept = np.array([fx.cost_of(i) for i in ids])
    assert (trace.cost_s >= slept - 1e-4).all(), trace.cost_s - slept
    assert (trace.cost_s < slept + 0.5).all(), trace.cost_s - slept
    assert np.median(trace.cost_s - slept) < 0.02


def test_workers_time_every_sample_and_the_fit_recovers_the_costs():
    result = profile_dataset(fx.make_dataset(), range(40), workers=2)
    assert result.ok and result.error is None and result.requested == 40 and result.workers == 2
    check_rows(result.trace, list(range(40)))
    model = result.cost_model
    assert [name for name, _ in model.sources] == ["text", "video", ANY_SOURCE]
    for i in range(40):   # the fitted model predicts each sample's true cost
        truth = fx.cost_of(i)
        est = model.estimate({"tokens": fx.tokens_of(i), "source": fx.source_of(i)})
        assert abs(est - truth) <= 0.001 + 0.25 * truth, (i, est, truth)
    video = model.by_source["video"]
    # truth 2e-6 and 4 ms: a loaded machine oversleeps a few ms on some of the 10 video samples, which flattens the
    # slope (0.75e-6 and 7.4 ms once, in a full suite beside a fuzz campaign); a fit blind to tokens gives about 0
    assert 0.5e-6 <= video.per_token_s <= 4e-6 and video.base_s <= 0.009
    stats = {s.name: s for s in result.stats()}
    assert stats["text"].samples == 30 and stats["video"].samples == 10 and stats[ANY_SOURCE].samples == 40
    assert stats["video"].mean_tokens == np.mean([fx.tokens_of(i) for i in range(3, 40, 4)])
    assert stats["text"].fit_error < 0.5 and stats["video"].fit_error < 0.5
    assert CostModel.from_dict(json.loads(json.dumps(model.to_dict()))) == model


def test_in_process_seeded_subset_and_progress():
    calls = []
    idx = choose_indices(40, 10, seed=7)
    result = profile_dataset(fx.make_dataset(), idx, workers=0, on_progress=lambda *a: calls.append(a))
    check_rows(result.trace, idx.tolist())
    assert [c[:2] for c in calls] == [(k, 10) for k in range(1, 11)] and calls[-1][2] == f"sample {idx[-1]}"


def test_choose_indices():
    assert choose_indices(100, 5).tolist() == [0, 1, 2, 3, 4]
    a = choose_indices(100, 30, seed=3)
    assert a.tolist() == choose_indices(100, 30, seed=3).tolist() != choose_indices(100, 30, seed=4).tolist()
    assert len(set(a.tolist())) == 30 and 0 <= a.min() and a.max() < 100 and a.tolist() != sorted(a.tolist())
    assert sorted(choose_indices(8, 8, seed=1).tolist()) == list(range(8))
    with pytest.raises(ConfigError, match="--samples 9 is more than the dataset's 8 samples"):
        choose_indices(8, 9)
    with pytest.raises(ConfigError, match="--samples"):
        choose_indices(8, 0)


def test_the_worker_returns_timings_never_the_sample():
    timed = TimedDataset(fx.make_small())
    record = timed[3]
    assert len(record) == 4 and record[0] == 3 and record[1] == fx.tokens_of(3) and record[3] == "video"
    assert record[2] >= fx.cost_of(3) - 1e-4 and not any(isinstance(x, (bytes, dict)) for x in record)
    assert TimedDataset([{"input_ids": [1, 2, 3]}])[0][1::2] == (3, DEFAULT_SOURCE)
    assert TimedDataset([{"n": np.int64(5), "source": 2}], tokens_fn=FieldTokens("n"))[0][1::2] == (5, "2")
    assert TimedDataset([{"n": [7, 8]}], tokens_fn=FieldTokens("n"))[0][1] == 2
    for sample, cause in [({"tokens": 1, "source": "*"}, "fallback"), ({"tokens": 1, "source": "a,b"}, "commas"),
                          ({"tokens": 1, "source": ""}, "not a usable source"), ({"tokens": -1}, "integer >= 0"),
                          ({"tokens": 2.5}, "integer >= 0"), ({"tokens": True}, "integer >= 0"),
                          ({"text": "hi"}, "--tokens-field"), ("a string", "--tokens-field")]:
        index, message = TimedDataset([sample])[0]
        assert index == 0 and cause in message and "\n" not in message


# ---- the command line -------------------------------------------------------------------------------

def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["profile", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_writes_the_trace_and_a_cost_model_the_simulator_and_loader_read(tmp_path, capsys):
    out = tmp_path / "trace.csv"
    code, stdout, err = run_main(capsys, "--dataset", SPEC + "make_small", "--workers", "2", "--out", str(out),
                                 "--json", "--no-progress")
    assert code == 0 and err == ""
    doc = json.loads(stdout)
    assert doc["samples"] == doc["requested"] == 12 and doc["workers"] == 2 and doc["error"] is None
    assert doc["written"] == {"trace": str(out), "cost_model": str(tmp_path / "trace.cost.json")}
    assert set(doc["sources"]) == {"text", "video", ANY_SOURCE} and doc["sources"]["text"]["samples"] == 9
    trace = Trace.read_csv(out)
    check_rows(trace, list(range(12)))
    assert doc["decode_seconds"] == pytest.approx(trace.total_cost_s())
    model = CostModel.from_dict(json.loads((tmp_path / "trace.cost.json").read_text()))
    assert model.to_dict() == doc["cost_model"] == CostModel.fit(trace).to_dict()
    config = LoaderConfig(num_workers=2, order="balanced", cost_model=json.loads(cost_model_path(out).read_text()))
    assert config.cost_model == model

    from simulator.cli import main as simulate

    assert simulate(["run", "--trace", str(out), "--workers", "2", "--json", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["samples"] == 12


def test_cli_text_report_progress_bar_and_nothing_written_by_default(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, stdout, err = run_main(capsys, "--dataset", SPEC + "make_dataset", "--samples", "16", "--seed", "1",
                                 "--workers", "2", "--progress")
    assert code == 0 and list(tmp_path.iterdir()) == []
    lines = stdout.splitlines()
    assert lines[0].startswith(f"profiled 16 of 16 samples of {SPEC}make_dataset in ")
    assert lines[1].split() == ["source", "samples", "mean", "tokens", "mean", "ms", "base", "ms", "ms", "per", "1K",
                                "tokens", "fit", "error"]
    assert [ln.split()[0] for ln in lines[3:6]] == ["text", "video", "*"] and "nothing written" in lines[-1]
    assert "profiling [" in err and "16/16" in err and err.endswith("\n")


def test_cli_cost_model_path(tmp_path, capsys):
    assert cost_model_path("runs/trace.csv") == Path("runs/trace.cost.json")
    assert cost_model_path("trace") == Path("trace.cost.json")
    model = tmp_path / "model.json"
    code, stdout, _ = run_main(capsys, "--dataset", SPEC + "make_small", "--workers", "0", "--cost-model", str(model))
    assert code == 0 and stdout.splitlines()[-1] == f"cost model: {model}" and list(tmp_path.iterdir()) == [model]
    CostModel.from_dict(json.loads(model.read_text()))


def test_cli_tokens_field(tmp_path, capsys):
    code, _, err = run_main(capsys, "--dataset", SPEC + "make_renamed", "--workers", "0")
    assert code == 1 and err.startswith("profile: sample 0: no token length: ") and "--tokens-field" in err
    code, stdout, err = run_main(capsys, "--dataset", SPEC + "make_renamed", "--workers", "0", "--tokens-field",
                                 "n_tokens", "--json")
    assert code == 0 and json.loads(stdout)["samples"] == 12


@pytest.mark.parametrize("factory, index, cause", [
    ("make_failing", 9, "__getitem__ raised ValueError: corrupt frame in sample 9 (second line of the message)"),
    ("make_tokenless", 5, "no token length: the sample (a dict with fields source, payload) has no 'tokens' or "
                          "'input_ids' field; name the field with --tokens-field NAME"),
    ("make_dying", 5, "the loader failed at or after this sample: RuntimeError: DataLoader worker"),
])
def test_a_bad_sample_stops_with_one_line_and_the_rows_before_it_are_kept(tmp_path, capsys, factory, index, cause):
    out = tmp_path / "trace.csv"
    code, stdout, err = run_main(capsys, "--dataset", SPEC + factory, "--workers", "2", "--out", str(out))
    assert code == 1 and stdout == ""
    named = int(re.match(r"profile: sample (\d+): ", err).group(1))
    if factory == "make_dying":
        # A dead worker is noticed when torch looks, which may be before the samples ahead of the one
        # it died on have arrived from the other worker: the line names the first sample not profiled,
        # never one after the death ("at or after this sample").
        assert named <= index
    else:
        assert named == index
    assert err.count("\n") == 1 and err.startswith(f"profile: sample {named}: {cause}")
    assert err.rstrip().endswith(f"(the {named} samples profiled before it are in {out})")
    check_rows(Trace.read_csv(out), list(range(named)))
    assert not cost_model_path(out).exists()   # no model fitted on a partial run


def test_a_bad_sample_in_json_mode(capsys):
    code, stdout, err = run_main(capsys, "--dataset", SPEC + "make_failing", "--workers", "0", "--json")
    doc = json.loads(stdout)
    assert code == 1 and doc["samples"] == 9 and doc["cost_model"] is None and doc["error"]["index"] == 9
    assert doc["written"] == {"trace": None, "cost_model": None}
    assert err.startswith("profile: sample 9: ") and "pass --out FILE to keep them" in err


def test_ctrl_c_keeps_what_was_profiled(tmp_path, capsys):
    out = tmp_path / "t.csv"
    code, _, err = run_main(capsys, "--dataset", SPEC + "make_interrupted", "--workers", "0", "--out", str(out))
    assert code == 130 and err.startswith("profile: sample 4: interrupted")
    assert Trace.read_csv(out).ids.tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("argv, message", [
    (["--dataset", SPEC + "make_broken"], f"profile: --dataset '{SPEC}make_broken': the factory raised "
                                          "RuntimeError: bucket s3://nowhere is not reachable"),
    (["--dataset", SPEC + "make_not_a_dataset"], f"profile: --dataset '{SPEC}make_not_a_dataset' returned an "
                                                 "object of type int, not a map-style dataset"),
    (["--dataset", "no_such_module_xyz:make"], "profile: --dataset 'no_such_module_xyz:make': cannot import module"),
    (["--dataset", SPEC + "nope"], f"profile: --dataset '{SPEC}nope': module 'tests.profile_fixtures' has no "
                                   "attribute 'nope'"),
    (["--dataset", "tests.profile_fixtures"], "is not of the form MODULE:ATTR (e.g. mypkg.data:make_dataset)"),
    (["--dataset", SPEC + "COSTS"], "names a dict, not a factory"),
    (["--dataset", SPEC + "make_small", "--samples", "13"], "profile: --samples 13 is more than the dataset's 12"),
    (["--dataset", SPEC + "make_small", "--samples", "0"], "profile: --samples must be an integer >= 1, got 0"),
    (["--dataset", SPEC + "make_small", "--workers", "-1"], "profile: --workers must be >= 0, got -1"),
    (["--dataset", SPEC + "make_small", "--workers", "0", "--timeout", "5"], "--workers 0 has none"),
    (["--dataset", SPEC + "make_small", "--out", "/nonexistent-dir/t.csv"], "the directory /nonexistent-dir does "
                                                                            "not exist"),
])
def test_bad_arguments_and_factories_exit_2_with_one_line(capsys, argv, message):
    code, stdout, err = run_main(capsys, *argv)
    assert code == 2 and stdout == "" and err.count("\n") == 1 and message in err and err.startswith("profile: ")


def test_load_dataset_and_python_api_errors():
    assert len(load_dataset(SPEC + "make_small")) == 12
    with pytest.raises(ConfigError, match="the factory raised RuntimeError"):
        load_dataset(SPEC + "make_broken")
    with pytest.raises(ConfigError, match="not a map-style dataset"):
        profile_dataset(iter([1, 2]), [0])
    with pytest.raises(ConfigError, match="workers=0 has none"):
        profile_dataset([{"tokens": 1}], [0], timeout_s=1.0)
    result = profile_dataset([{"tokens": 4, "source": "a"}, {"tokens": 8}], [1, 0])
    assert result.trace.ids.tolist() == [1, 0] and result.trace.sources() == [DEFAULT_SOURCE, "a"]
    assert to_json(result)["sources"].keys() == {DEFAULT_SOURCE, "a", ANY_SOURCE}
    assert "profiled 2 of 2 samples of the dataset" in format_text(result)


def test_python_m_dynbsz_profile_end_to_end(tmp_path):
    """The real command in a fresh interpreter, run outside the checkout: it writes only what --out names."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "dynbsz", "profile", "--dataset", SPEC + "make_small", "--workers",
                           "2", "--out", "t.csv"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""   # no progress bar when stderr is not a terminal
    assert proc.stdout.splitlines()[-2:] == ["trace: t.csv", "cost model: t.cost.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.cost.json", "t.csv"]
    check_rows(Trace.read_csv(tmp_path / "t.csv"), list(range(12)))
