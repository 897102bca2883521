"""``simulator advise``: the search, its JSON, and one-line errors for bad traces."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from dynbsz import FixedGate, PackerConfig
from dynbsz.errors import ConfigError
from dynbsz.loader_config import LoaderConfig
from simulator.advise import Candidate, advise, rank
from simulator.cli import main
from simulator.config import LoaderModelConfig
from simulator.dynbatch import RankFeed
from simulator.training import STEP_PRESETS, TEXT_VIDEO_LONG
from simulator.workloads import Stream


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("advise") / "trace.csv"
    Stream(TEXT_VIDEO_LONG, 5).take(1500).to_csv(path)
    return path


@pytest.fixture(scope="module")
def rb_trace_file(tmp_path_factory):
    """Seed 6: the model predicts 8 workers, prefetch 4, reorder_buffer=256 ahead of every in-order loader by 2%
    at 2 h, and 0.990x in_order=False's tokens (just outside the 0.5% tie band)."""
    path = tmp_path_factory.mktemp("advise_rb") / "trace.csv"
    Stream(TEXT_VIDEO_LONG, 6).take(1500).to_csv(path)
    return path


def test_advise_json_has_recommended_runner_up_and_default(trace_file, capsys):
    assert main(["advise", "--trace", str(trace_file), "--budget", "512K", "--dp", "1", "--hours", "1,2",
                 "--json", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"recommended", "runner_up", "default", "configs_searched", "seconds"} <= set(out)
    rec = out["recommended"]
    assert {"loader", "gate", "predicted"} <= set(rec)
    assert {"num_workers", "prefetch_factor", "in_order", "order", "reorder_buffer"} <= set(rec["loader"])
    assert rec["gate"]["kind"] in ("fixed", "warmup_ramp")
    p = rec["predicted"]
    assert {"first_step_s", "tokens_by_hour", "stall_fraction", "peak_buffer_tokens"} <= set(p)
    assert p["tokens_by_hour"]["2"] >= out["default"]["predicted"]["tokens_by_hour"]["2"]
    assert out["configs_searched"] > 20
    rows = out["loaders_searched"]
    assert all("reorder_buffer" in lo for lo in rows)
    kinds = {(lo["order"], lo["in_order"], lo["reorder_buffer"] > 0) for lo in rows}
    assert kinds == {("sampler", True, False), ("sampler", False, False), ("balanced", True, False),
                     ("sampler", True, True)}    # the order and the reorder buffer are searched too
    # one reorder buffer of 8x the tasks in flight per workers x prefetch, none with one worker
    assert sorted((lo["num_workers"], lo["prefetch_factor"], lo["reorder_buffer"]) for lo in rows
                  if lo["reorder_buffer"]) == [(w, pf, 8 * w * pf) for w in (2, 4, 8) for pf in (2, 4)]
    assert out["reorder_buffers"] == [8] and out["tie_fraction"] == 0.005
    # the balanced order at each default lookahead, per workers x prefetch
    assert out["lookaheads"] == [32, 64, 96]
    assert sorted((lo["num_workers"], lo["prefetch_factor"], lo["lookahead"]) for lo in rows
                  if lo["order"] == "balanced") == [(w, pf, la) for w in (1, 2, 4, 8) for pf in (2, 4) for la in (32, 64, 96)]
    best = max(lo["projected_tokens"] for lo in rows)
    match = [lo for lo in rows if all(lo.get(k) == rec["loader"].get(k) for k in (
        "num_workers", "prefetch_factor", "order", "in_order", "reorder_buffer", "lookahead"))]
    assert len(match) == 1 and match[0]["projected_tokens"] >= best * (1 - out["tie_fraction"])   # in the tie band
    assert all(lo["trace_ended_h"] is None and lo["projected_tokens"] == lo["tokens"] for lo in rows)
    assert "LoaderConfig(" in rec["code"]
    LoaderConfig(**rec["loader"])   # the loader JSON is LoaderConfig's own keywords
    alt = out["deterministic_alternative"]
    if rec["loader"]["in_order"]:
        assert alt is None
    else:   # in_order=False won by more than the tie band: the best deterministic loader is named
        assert alt["loader"]["in_order"] and alt["ratio"] < 1 - out["tie_fraction"]
        assert alt["tokens"] == max(lo["tokens"] for lo in rows if lo["in_order"])
        assert f"{alt['ratio']:.3f}" == f"{alt['tokens'] / match[0]['tokens']:.3f}"


def test_advise_deterministic_recommends_the_reorder_buffer(rb_trace_file, monkeypatch, capsys, tmp_path):
    assert main(["advise", "--trace", str(rb_trace_file), "--budget", "512K", "--hours", "1,2", "--deterministic",
                 "--json", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["loaders_searched"]
    assert all(lo["in_order"] for lo in rows) and out["deterministic"]   # no in_order=False searched
    rb_best = max(lo["tokens"] for lo in rows if lo["reorder_buffer"])
    others = max(lo["tokens"] for lo in rows if not lo["reorder_buffer"])   # in order, sampler or balanced
    assert rb_best > others / (1 - out["tie_fraction"])   # the trace is what the test is about
    lo = out["recommended"]["loader"]
    assert lo["reorder_buffer"] == 8 * lo["num_workers"] * lo["prefetch_factor"] and lo["in_order"]
    assert out["deterministic_alternative"] is None
    code = out["recommended"]["code"]
    assert f"reorder_buffer={lo['reorder_buffer']}" in code
    ns: dict = {}
    exec(code, ns)    # the printed code builds what dynbsz accepts
    assert ns["loader"] == LoaderConfig(**lo, dp_size=1)
    assert ns["loader"].reorder_buffer == lo["reorder_buffer"]

    # the table prints it, and the flags reach advise (answered with the run above, not searched again)
    import simulator.advise

    seen: dict = {}

    def fake(trace, budget, dp, step, **kw):
        seen.clear()
        seen.update(kw)
        return out

    monkeypatch.setattr(simulator.advise, "advise", fake)
    path = tmp_path / "t.csv"
    Stream(TEXT_VIDEO_LONG, 6).take(20).to_csv(path)
    for flags, multiples, lookaheads, deterministic in [
            ([], (8,), (32, 64, 96), False), (["--reorder-buffers", "none", "--lookaheads", "16"], (), (16,), False),
            (["--reorder-buffers", "4,16", "--deterministic", "--lookaheads", "none"], (4, 16), (), True)]:
        assert main(["advise", "--trace", str(path), "--budget", "512K", "--no-progress", *flags]) == 0
        assert seen["reorder_buffers"] == multiples and seen["deterministic"] is deterministic
        assert seen["lookaheads"] == lookaheads
        text = capsys.readouterr().out
        assert f"{lo['num_workers']} / {lo['prefetch_factor']} / reorder buffer {lo['reorder_buffer']}" in text
        assert f"reorder_buffer={lo['reorder_buffer']}, dp_size=1)" in text
    # the notes under the table: loaders that used up the trace, a cap nothing met, the deterministic alternative
    alt = {"loader": dict(lo), "delivery": out["recommended"]["delivery"], "tokens": 1, "ratio": 0.9876}
    out.update(trace_ended_loaders=3, memory_cap_met=False, memory_cap_tokens=1000, deterministic_alternative=alt)
    assert main(["advise", "--trace", str(path), "--budget", "512K", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert f"3 of {len(rows)} loaders used up the trace before 2 h" in text
    assert "within --memory-cap-tokens 1000" in text
    assert f"{lo['num_workers']} / {lo['prefetch_factor']} / reorder buffer {lo['reorder_buffer']}, trains 0.988x" in text


def test_in_order_false_does_not_win_a_tie_against_a_reorder_buffer(rb_trace_file):
    from dynbsz.workload import Trace

    trace = Trace.read_csv(rb_trace_file)
    out = advise(trace, 512 * 1024, 1, STEP_PRESETS["1b-h100"], hours=(2.0,), tie_fraction=0.02)
    lo = out["recommended"]["loader"]
    best = max(r["tokens"] for r in out["loaders_searched"])
    assert any(not r["in_order"] and r["tokens"] == best for r in out["loaders_searched"])   # any order trains most
    assert lo["in_order"] and lo["reorder_buffer"] > 0    # but the reorder buffer is within 2% of it


@dataclass
class _Run:
    tokens: int
    ended_s: float | None = None     # the trace ran out then

    @property
    def stream_ended(self) -> bool:
        return self.ended_s is not None

    steps = 1

    @property
    def step_end_s(self):
        return [self.ended_s]

    def tokens_by(self, t_s: float) -> int:
        return self.tokens


def _cand(tokens: int, **loader) -> Candidate:
    return Candidate(LoaderConfig(shuffle=False, **loader), "fixed:24", _Run(tokens))


def _labels(cands, tie=0.005):
    return [(c.loader.num_workers, c.loader.in_order, c.loader.order, c.loader.reorder_buffer)
            for c in rank(cands, 1.0, tie)]


def test_rank_prefers_deterministic_then_simple_within_the_tie_band():
    any8 = _cand(1000, num_workers=8, prefetch_factor=2, in_order=False)
    rb8 = _cand(996, num_workers=8, prefetch_factor=2, reorder_buffer=128)
    plain8 = _cand(990, num_workers=8, prefetch_factor=2)
    # any order trains 0.4% more: a tie, and the reorder buffer is deterministic
    assert _labels([any8, rb8, plain8]) == [(8, True, "sampler", 128), (8, False, "sampler", 0),
                                            (8, True, "sampler", 0)]
    # at equal tokens plain in order (no buffer) beats the reorder buffer, fewer workers beat more
    plain4 = _cand(996, num_workers=4, prefetch_factor=4)
    assert _labels([any8, rb8, plain4])[0] == (4, True, "sampler", 0)
    assert _labels([any8, rb8, _cand(996, num_workers=8, prefetch_factor=2)])[:2] == \
        [(8, True, "sampler", 0), (8, True, "sampler", 128)]
    # the reorder buffer (smaller first) before balanced, which needs a cost model
    from dynbsz.costs import CostModel

    bal = Candidate(LoaderConfig(num_workers=8, prefetch_factor=2, shuffle=False, order="balanced", lookahead=32,
                                 cost_model=CostModel.fit(Stream(TEXT_VIDEO_LONG, 5).take(50))), "fixed:24", _Run(996))
    rb8_64 = _cand(996, num_workers=8, prefetch_factor=2, reorder_buffer=64)
    assert _labels([bal, rb8, rb8_64, any8]) == [(8, True, "sampler", 64), (8, True, "sampler", 128),
                                                 (8, True, "balanced", 0), (8, False, "sampler", 0)]
    # at equal tokens the shorter lookahead: it keeps samples closer to the sampler's order
    import dataclasses

    far = Candidate(dataclasses.replace(bal.loader, lookahead=64), "fixed:24", _Run(996))
    near = Candidate(dataclasses.replace(bal.loader, lookahead=16), "fixed:24", _Run(995))
    assert [c.loader.lookahead for c in rank([far, bal, near], 1.0, 0.005)] == [16, 32, 64]
    assert [c.loader.lookahead for c in rank([far, bal, near], 1.0, 0.0)] == [32, 64, 16]
    # out of the band tokens decide: any order 1% ahead wins; with no band the exact count does
    assert _labels([any8, _cand(990, num_workers=8, prefetch_factor=2, reorder_buffer=128)])[0][1] is False
    assert _labels([any8, rb8], tie=0.0)[0][1] is False
    assert rank([], 1.0) == []


def test_a_loader_that_uses_up_the_trace_is_ranked_at_its_rate():
    from simulator.advise import projected_tokens
    from simulator.training import HOUR

    fast = _cand(1000, num_workers=8, prefetch_factor=2, in_order=False)
    fast.run.ended_s = 12 * HOUR                 # the whole trace by 12 h of 24: 2000 at its rate
    slow = _cand(1000, num_workers=4, prefetch_factor=4)
    slow.run.ended_s = 23 * HOUR
    steady = _cand(1500, num_workers=2, prefetch_factor=2)
    assert projected_tokens(fast.run, 24 * HOUR) == 2000 and projected_tokens(steady.run, 24 * HOUR) == 1500
    assert [c.loader.num_workers for c in rank([slow, steady, fast], 24 * HOUR)] == [8, 2, 4]
    # without the projection the three would be 1000, 1500, 1000: the finished ones look worst


def test_gates_are_judged_only_while_the_trace_lasts(trace_file, capsys):
    from simulator.advise import judged_hours

    assert judged_hours((1.0, 6.0, 24.0), None) == (1.0, 6.0, 24.0)
    assert judged_hours((1.0, 6.0, 24.0), 18.2) == (1.0, 6.0, 16.38)    # 24 h is past the trace's end
    assert judged_hours((24.0,), 2.0) == (1.8,)
    # 1,500 samples last the default loader 5.3 h, the fastest under 3 h: asked for 4 h, the gate is chosen
    # before the recommended loader's end
    assert main(["advise", "--trace", str(trace_file), "--budget", "512K", "--dp", "1", "--hours", "1,4",
                 "--json", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    rec = out["recommended"]["loader"]
    row = next(lo for lo in out["loaders_searched"] if all(lo[k] == rec[k] for k in ("num_workers", "prefetch_factor",
                                                                                     "order", "in_order",
                                                                                     "reorder_buffer")))
    assert row["trace_ended_h"] is not None
    assert out["gate_hours"] == list(judged_hours((1.0, 4.0), row["trace_ended_h"])) and out["gate_hours"][-1] < 4


def test_peak_buffer_counts_what_the_reorder_buffer_holds():
    """The memory cap sees the reorder buffer: the rank's peak held includes the sequencer's samples."""
    trace = Stream(TEXT_VIDEO_LONG, 6).take(600)
    feed = RankFeed(trace, PackerConfig(budget=512 * 1024), FixedGate(24),
                    LoaderModelConfig(num_workers=8, prefetch_factor=4, reorder_buffer=256), track_memory=True)
    while (s := feed.next_step()) is not None:
        feed.finish_step(s.ready_s + 0.5)
    held = feed.model.result().reorder_peak
    assert held > 0 and feed.peak_held()[0] >= held


def test_advise_memory_cap_is_respected(trace_file, capsys):
    assert main(["advise", "--trace", str(trace_file), "--budget", "512K", "--hours", "1",
                 "--memory-cap-tokens", "3000000", "--json", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["recommended"]["predicted"]["peak_buffer_tokens"] <= 3_000_000
    assert out["memory_cap_met"]


@pytest.mark.parametrize("kwargs, message", [
    ({"reorder_buffers": (0,)}, "reorder_buffers"),
    ({"reorder_buffers": (8, 2.5)}, "reorder_buffers"),
    ({"lookaheads": (32, 0)}, "lookaheads"),
    ({"lookaheads": (1.5,)}, "lookaheads"),
    ({"tie_fraction": 1.5}, "tie_fraction"),
    ({"tie_fraction": -0.1}, "tie_fraction"),
    ({"deterministic": "yes"}, "deterministic"),
])
def test_advise_bad_setting_is_a_config_error_naming_it(kwargs, message):
    trace = Stream(TEXT_VIDEO_LONG, 5).take(50)
    with pytest.raises(ConfigError, match=message):
        advise(trace, 512 * 1024, 1, STEP_PRESETS["1b-h100"], hours=(1.0,), **kwargs)


@pytest.mark.parametrize("flag, value, message", [
    ("--reorder-buffers", "0", "reorder_buffers"), ("--reorder-buffers", "x", "--reorder-buffers"),
    ("--reorder-buffers", "8,-1", "reorder_buffers"), ("--lookaheads", "0", "lookaheads"),
    ("--lookaheads", "32,y", "--lookaheads")])
def test_advise_bad_list_flag_is_one_line(trace_file, flag, value, message, capsys):
    assert main(["advise", "--trace", str(trace_file), "--budget", "512K", flag, value, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


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


def test_stage1_searches_the_balanced_order_at_each_lookahead():
    from dynbsz.costs import CostModel
    from simulator.advise import describe, stage1_loaders

    model = CostModel.fit(Stream(TEXT_VIDEO_LONG, 5).take(50))
    balanced = [lc for lc in stage1_loaders(model, workers=(2,), prefetch=(2,), lookaheads=(16, 48))
                if lc.order == "balanced"]
    assert [lc.lookahead for lc in balanced] == [16, 48] and all(lc.cost_model == model for lc in balanced)
    assert [describe(lc) for lc in balanced] == ["balanced, lookahead 16", "balanced, lookahead 48"]
    assert not any(lc.order == "balanced" for lc in stage1_loaders(model, lookaheads=()))
