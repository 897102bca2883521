"""``simulator advise``: the search, its JSON, and one-line errors for bad traces."""

from __future__ import annotations

import json

import pytest

from simulator.cli import main
from simulator.training import TEXT_VIDEO_LONG
from simulator.workloads import Stream


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("advise") / "trace.csv"
    Stream(TEXT_VIDEO_LONG, 5).take(1500).to_csv(path)
    return path


def test_advise_json_has_recommended_runner_up_and_default(trace_file, capsys):
    assert main(["advise", "--trace", str(trace_file), "--budget", "512K", "--dp", "1", "--hours", "1,2",
                 "--json", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"recommended", "runner_up", "default", "configs_searched", "seconds"} <= set(out)
    rec = out["recommended"]
    assert {"loader", "gate", "predicted"} <= set(rec)
    assert {"num_workers", "prefetch_factor", "in_order", "order"} <= set(rec["loader"])
    assert rec["gate"]["kind"] in ("fixed", "warmup_ramp")
    p = rec["predicted"]
    assert {"first_step_s", "tokens_by_hour", "stall_fraction", "peak_buffer_tokens"} <= set(p)
    assert p["tokens_by_hour"]["2"] >= out["default"]["predicted"]["tokens_by_hour"]["2"]
    assert out["configs_searched"] > 20
    orders = {(lo["order"], lo["in_order"]) for lo in out["loaders_searched"]}
    assert orders == {("sampler", True), ("sampler", False), ("balanced", True)}    # the order is searched too
    best = max(lo["tokens"] for lo in out["loaders_searched"])
    assert any(lo["tokens"] == best and all(lo[k] == rec["loader"][k] for k in ("num_workers", "order", "in_order"))
               for lo in out["loaders_searched"])
    assert "LoaderConfig(" in rec["code"]


def test_advise_memory_cap_is_respected(trace_file, capsys):
    assert main(["advise", "--trace", str(trace_file), "--budget", "512K", "--hours", "1",
                 "--memory-cap-tokens", "3000000", "--json", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["recommended"]["predicted"]["peak_buffer_tokens"] <= 3_000_000


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("id,tokens,cost_s\n1,2,0.1\n", "missing column"),
    ("id,tokens,cost_s,source\n1,x,0.1,text\n", "tokens must be"),
])
def test_advise_bad_trace_is_one_line(tmp_path, content, message, capsys):
    path = tmp_path / "t.csv"
    if content is not None:
        path.write_text(content)
    assert main(["advise", "--trace", str(path), "--budget", "512K", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_advise_trace_too_short_for_the_horizon(tmp_path, capsys):
    path = tmp_path / "short.csv"
    Stream(TEXT_VIDEO_LONG, 5).take(60).to_csv(path)
    assert main(["advise", "--trace", str(path), "--budget", "512K", "--hours", "24", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "before the requested horizon of 24 h" in err and "\n" not in err
