"""The policy study: tokens by hour per gate, the fixed-size oracle, the advised gate on a held-out stream."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from dynbsz.errors import ConfigError
from dynbsz.gates import WarmupRampGate, auto_gate
from simulator.cli import main
from simulator.executors import SerialExecutor
from simulator.gatespec import gate_label, parse_gate
from simulator.policy import ADVICE_SEED_OFFSET, PolicyConfig, PolicyStudy, advise_gate, best_by_hour, worst_ratio
from simulator.training import TRAINING_WORKLOADS, Trainer, TrainingConfig, time_to_mean_tokens

K = 1024
TINY = PolicyConfig(budgets=(512 * K,), dp_sizes=(1,), workloads=("seed",), hours=(1.0, 3.0),
                    fixed_search=(4, 8, 24, 200), gates=("fixed:200", "context_aware", "warmup_ramp:8:24:0:10"),
                    streams=1)


def test_point_rows_and_best_entry_have_the_documented_fields():
    rows, entry = PolicyStudy(TINY).point(512 * K, 1, "seed")
    gates = [r["gate"] for r in rows]
    assert {"fixed:4", "fixed:8", "fixed:24", "fixed:200", "context_aware", "warmup_ramp:8:24:0:10"} <= set(gates)
    advised = [r for r in rows if r["kind"] == "advised"]
    assert len(advised) == 1 and advised[0]["gate"] == "advised=" + entry["advised_gate"]
    for r in rows:
        assert {"budget", "dp", "workload", "gate", "first_step_s", "tokens_by_hour", "stall_fraction",
                "straggle_fraction", "steady_fill", "peak_buffer_tokens", "peak_buffer_samples"} <= set(r)
        assert set(r["tokens_by_hour"]) == {"1", "3"}
    assert {"budget", "dp", "workload", "best_fixed_gate", "advised_gate", "advised_ratio"} <= set(entry)
    # the oracle is the best fixed size at every hour, so no fixed size beats it
    fixed = {r["gate"]: r["tokens_by_hour"] for r in rows if r["gate"].startswith("fixed:")}
    for h, lab in entry["best_fixed_by_hour"].items():
        assert fixed[lab][h] == max(t[h] for t in fixed.values())
    assert entry["fixed_200_ratio"]["1"] == 0.0        # 200 candidates take longer than an hour at 512K
    assert entry["goal_met"] == all(v >= 0.99 for v in entry["advised_ratio"].values())
    assert entry["goal_met"] or entry["miss"]


def test_advice_is_chosen_on_another_stream():
    advice_trainer = Trainer(TrainingConfig(workload=TRAINING_WORKLOADS["seed"], seed=22 + ADVICE_SEED_OFFSET,
                                            horizon_s=3 * 3600.0))
    advice = advise_gate(advice_trainer, 512 * K, 1, (1.0, 3.0), (4, 8, 24, 200))
    assert advice.score == pytest.approx(worst_ratio(advice.candidates[advice.label], advice.best_fixed))
    assert advice.score <= 1.0 + 1e-12 or advice.label.startswith("warmup_ramp")
    best = best_by_hour({k: v for k, v in advice.candidates.items() if k.startswith("fixed:")}, (1.0, 3.0))
    assert best == advice.best_fixed
    _, entry = PolicyStudy(TINY).point(512 * K, 1, "seed")
    assert entry["advised_gate"] == advice.label       # the same stream gives the same advice: deterministic


def test_with_several_streams_every_figure_is_the_mean_and_advice_uses_the_advice_streams_only():
    cfg = PolicyConfig(budgets=(512 * K,), dp_sizes=(1,), workloads=("seed",), hours=(1.0, 3.0),
                       fixed_search=(4, 8, 24), gates=("fixed:200",), streams=2)
    assert cfg.scored_seeds == (22, 23) and cfg.advice_seeds == (22 + ADVICE_SEED_OFFSET, 23 + ADVICE_SEED_OFFSET)
    rows, entry = PolicyStudy(cfg).point(512 * K, 1, "seed")

    def trainer(seed):
        return Trainer(TrainingConfig(workload=TRAINING_WORKLOADS["seed"], seed=seed, horizon_s=3 * 3600.0))

    # the scored figures, recomputed run by run from the two scored streams
    row = next(r for r in rows if r["gate"] == "fixed:8")
    per = [trainer(s).run(512 * K, "fixed:8", 1) for s in (22, 23)]
    assert row["tokens_by_hour_per_stream"] == [r.tokens_by_hour((1.0, 3.0)) for r in per]
    for h in ("1", "3"):
        assert row["tokens_by_hour"][h] == pytest.approx(sum(r.tokens_by_hour((1.0, 3.0))[h] for r in per) / 2)
    assert row["first_step_s"] == pytest.approx((per[0].first_step_s + per[1].first_step_s) / 2)
    assert row["peak_buffer_tokens"] == max(r.peak_buffer_tokens for r in per)
    # the advice: chosen on the two advice streams, the same as advise_gate over them
    advice = advise_gate([trainer(s) for s in cfg.advice_seeds], 512 * K, 1, (1.0, 3.0), (4, 8, 24))
    assert entry["advised_gate"] == advice.label
    single = advise_gate(trainer(cfg.advice_seeds[0]), 512 * K, 1, (1.0, 3.0), (4, 8, 24))
    lab = "fixed:4"
    both = [advise_gate(trainer(s), 512 * K, 1, (1.0, 3.0), (4, 8, 24)).candidates[lab] for s in cfg.advice_seeds]
    assert advice.candidates[lab] == {h: pytest.approx((both[0][h] + both[1][h]) / 2) for h in ("1", "3")}
    assert single.candidates[lab] == both[0]
    with pytest.raises(ConfigError, match="streams"):
        PolicyConfig(streams=0)


def test_policy_cli_json_and_table(capsys):
    argv = ["policy", "--budgets", "512K", "--dp", "1", "--workloads", "seed", "--hours", "1,2",
            "--gates", "fixed:200,warmup_ramp", "--jobs", "1", "--streams", "1", "--no-progress"]
    assert main(argv + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"rows", "best", "config"}
    assert set(out["best"][0]["advised_ratio"]) == {"1", "2"}
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "advised" in text and "best fixed" in text


@pytest.mark.parametrize("argv, message", [
    (["policy", "--hours", "0"], "hours"),
    (["policy", "--workloads", "nope"], "workload"),
    (["policy", "--step-time", "fast"], "step time"),
    (["policy", "--gates", "warmup_ramp:1:2"], "warmup_ramp"),
])
def test_policy_bad_input_names_the_setting(argv, message, capsys):
    with pytest.raises(SystemExit) if argv[1] == "--hours" else _nothing():
        code = main(argv + ["--no-progress"])
        assert code == 2
    assert message in capsys.readouterr().err


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_warmup_ramp_and_auto_gate_specs(tmp_path):
    g = parse_gate("warmup_ramp:8:24:2:10").gate_for(512 * K)
    assert isinstance(g, WarmupRampGate) and (g.start, g.full, g.hold_steps, g.ramp_steps) == (8, 24, 2, 10)
    assert gate_label(g.spec()) == "warmup_ramp:8:24:2:10"
    auto = parse_gate("auto").gate_for(512 * K)
    assert auto == auto_gate(512 * K) and auto.spec()["policy"] == "auto"     # dynbsz's gate='auto', not a copy
    advice = tmp_path / "advice.json"
    advice.write_text(json.dumps({"recommended": {"gate": {"kind": "fixed", "buffer_size": 12}}}))
    assert parse_gate(f"auto:{advice}").gate_for(512 * K).spec()["buffer_size"] == 12
    advice.write_text("{}")
    with pytest.raises(ConfigError, match="not an advice file"):
        parse_gate(f"auto:{advice}")
    with pytest.raises(ConfigError, match="no such file"):
        parse_gate(f"auto:{tmp_path / 'missing.json'}")


def test_derive_auto_takes_the_maximin_candidate_over_the_budgets_points():
    from simulator.policy import derive_auto

    cfg = PolicyConfig(budgets=(512 * K,), dp_sizes=(1, 2), workloads=("seed",), hours=(1.0, 3.0),
                       fixed_search=(4, 8, 24), gates=(), streams=1)
    out = derive_auto(cfg)
    assert len(out["points"]) == 2 and all(p["budget"] == 512 * K for p in out["points"])
    worst = {lab: min(p["ratios"][lab] for p in out["points"]) for lab in out["candidates"]}
    row = out["table"][512 * K]
    assert row["min_ratio"] == max(worst.values()) == worst[row["label"]]
    assert row["label"] == "warmup_ramp:{}:{}:{}:{}".format(*row["row"])
    # a fixed size is a ramp that starts full: only the searched ones are candidates
    assert {c for c in out["candidates"] if c.split(":")[1] == c.split(":")[2]} == {
        "warmup_ramp:4:4:0:0", "warmup_ramp:8:8:0:0"}


# ---- token parity: --tokens N ---------------------------------------------------------------------

N_EARLY = 7_500_000     # the tiny point: some gates reach it by hour 1, the rest (fixed:200 too) by hour 3
N_MID = 15_000_000      # ... most gates reach it between hour 1 and hour 3, fixed:200 (11.5M by 3 h) not


def _hand_run(ends, tokens):
    import numpy as np

    from simulator.training import TrainingRun

    return TrainingRun(512 * K, 1, "hand", np.array(ends, dtype=float), np.array(tokens, dtype=np.int64),
                       0.0, 0.0, 0.0, 0.0, 1.0, 0, 0)


def test_time_to_mean_tokens_is_when_the_streams_mean_reaches_n():

    a = _hand_run([10, 20, 30], [5, 5, 5])          # cumulative 5, 10, 15
    b = _hand_run([15, 25], [2, 20])                # cumulative 2, 22
    # the mean of the two cumulative curves: t=10: 2.5, 15: 3.5, 20: 6, 25: 16, 30: 18.5
    assert time_to_mean_tokens([a, b], 3) == 15.0
    assert time_to_mean_tokens([a, b], 6) == 20.0
    assert time_to_mean_tokens([a, b], 16) == 25.0
    assert time_to_mean_tokens([a, b], 19) is None   # beyond both runs (the horizon): not reached
    assert time_to_mean_tokens([a], 10) == 20.0 == a.time_to_tokens(10)
    assert time_to_mean_tokens([a], 16) is None
    assert time_to_mean_tokens([_hand_run([], [])], 1) is None


@pytest.mark.parametrize("n", [N_EARLY, N_MID])
def test_token_parity_time_to_n_agrees_with_the_hour_figures_and_names_an_oracle(n):
    cfg = PolicyConfig(budgets=(512 * K,), dp_sizes=(1,), workloads=("seed",), hours=(1.0, 3.0),
                       fixed_search=(4, 8, 24, 200), gates=("fixed:200", "context_aware"), streams=1,
                       max_tokens=n)
    rows, entry = PolicyStudy(cfg).point(512 * K, 1, "seed")
    plain_rows, plain_entry = PolicyStudy(replace(cfg, max_tokens=None)).point(512 * K, 1, "seed")
    # only keys are added: the hour figures are those of the same study without --tokens
    assert [{k: v for k, v in r.items() if k != "time_to_tokens_s"} for r in rows] == plain_rows
    assert {k: v for k, v in entry.items() if k in plain_entry} == plain_entry
    reach = {r["gate"]: r["time_to_tokens_s"] for r in rows}
    for r in rows:
        t = r["time_to_tokens_s"]
        for h, tokens in r["tokens_by_hour"].items():
            # monotone with the hour figures: N trained by hour h exactly when N was reached by then
            assert (tokens >= n) == (t is not None and t <= float(h) * 3600)
    for a in rows:
        for b in rows:
            for h in ("1", "3"):
                if a["tokens_by_hour"][h] >= n > b["tokens_by_hour"][h]:
                    assert b["time_to_tokens_s"] is None or a["time_to_tokens_s"] < b["time_to_tokens_s"]
    one = Trainer(TrainingConfig(workload=TRAINING_WORKLOADS["seed"], seed=22, horizon_s=3 * 3600.0))
    assert reach["fixed:8"] == one.run(512 * K, "fixed:8", 1).time_to_tokens(n)
    if n == N_MID:
        assert reach["fixed:200"] is None and entry["tokens_not_reached"] == ["fixed:200"]
    else:    # every gate gets there, some by hour 1 and some after: the pairwise check above is not vacuous
        assert entry["tokens_not_reached"] == [] and None not in reach.values()
        assert any(t <= 3600 for t in reach.values()) and any(t > 3600 for t in reach.values())
    fixed = {g: t for g, t in reach.items() if g.startswith("fixed:") and t is not None}
    assert entry["best_fixed_gate_to_tokens"] == min(fixed, key=fixed.get)
    assert entry["best_fixed_time_to_tokens_s"] == min(fixed.values())
    adv = reach["advised=" + entry["advised_gate"]]
    assert entry["advised_time_to_tokens_s"] == adv
    assert entry["advised_ratio_to_tokens"] == pytest.approx(min(fixed.values()) / adv)


def test_token_parity_beyond_the_horizon_is_reported_as_not_reached(capsys):
    argv = ["policy", "--budgets", "512K", "--dp", "1", "--workloads", "seed", "--hours", "1,2",
            "--gates", "fixed:200,context_aware", "--jobs", "1", "--streams", "1", "--no-progress"]
    assert main(argv + ["--tokens", str(10 ** 12), "--json"]) == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out)                      # valid JSON: no Infinity
    assert out["config"]["max_tokens"] == 10 ** 12
    assert all(r["time_to_tokens_s"] is None for r in out["rows"] if not r.get("error"))
    e = out["best"][0]
    assert e["best_fixed_gate_to_tokens"] is None and e["best_fixed_time_to_tokens_s"] is None
    assert e["advised_time_to_tokens_s"] is None and e["advised_ratio_to_tokens"] is None
    assert "fixed:200" in e["tokens_not_reached"]
    assert cap.err.startswith("warning: ") and "did not reach 1T tokens" in cap.err and "no oracle" in cap.err
    assert main(argv + ["--tokens", str(10 ** 12)]) == 0
    text = capsys.readouterr().out
    assert "time to 1T tokens" in text and "not reached" in text and "advised / best to 1T" in text
    assert "\nwarning: " in text and "none reached" in text
    # N within reach: the column has hours, and no warning when every run reached it
    assert main(argv + ["--tokens", "1000", "--gates", "context_aware"]) == 0
    text = capsys.readouterr().out
    assert "time to 1K tokens" in text and "warning" not in text and "not reached" not in text


def test_beats_note_covers_the_advised_warmup_and_auto_gates():
    from simulator.cli import beats_note

    entry = {"advised_ratio": {"1": 1.02, "6": 1.01}, "auto_ratio": {"1": 1.005, "6": 0.99},
             "warmup_ramp_ratio": {"warmup_ramp:24:200:0:100": {"1": 1.03, "6": 1.004},
                                   "warmup_ramp:8:24:0:10": None}}
    assert beats_note(entry) == ("advised beats every fixed size by 1.0%+; "
                                 "warmup_ramp:24:200:0:100 beats every fixed size by 0.4%+")
    entry["auto_ratio"] = {"1": 1.05, "6": 1.02}
    entry["advised_ratio"] = {"1": 1.0, "6": 0.98}
    assert beats_note(entry) == ("warmup_ramp:24:200:0:100 beats every fixed size by 0.4%+; "
                                 "auto beats every fixed size by 2.0%+")
    assert beats_note({"advised_ratio": {"1": 1.0}, "auto_ratio": None, "warmup_ramp_ratio": {}}) == ""


def test_policy_gates_help_lists_the_actual_defaults():
    from simulator.cli import build_parser
    from simulator.policy import DEFAULT_GATES

    pol = build_parser()._subparsers._group_actions[0].choices["policy"]
    gates = next(a for a in pol._actions if "--gates" in a.option_strings)
    assert gates.default == DEFAULT_GATES and ",".join(DEFAULT_GATES) in gates.help


def test_a_point_runs_each_gate_once_per_scored_stream(monkeypatch):
    # the advised gate is most often a searched size or one of the gates: its runs are those runs, not new ones
    calls: list = []
    real = Trainer.run

    def counted(self, budget, gate, dp, **kw):
        calls.append((self.config.seed, str(gate)))
        return real(self, budget, gate, dp, **kw)

    monkeypatch.setattr(Trainer, "run", counted)
    cfg = replace(TINY, gates=("fixed:200", "auto"))
    rows, entry = PolicyStudy(cfg).point(512 * K, 1, "seed")
    # this point's advice is a searched size (fixed:8): the case where a second run would repeat the first
    assert entry["advised_gate"] in {f"fixed:{n}" for n in cfg.fixed_search} | {"auto"}
    scored = [c for c in calls if c[0] in cfg.scored_seeds]
    assert len(scored) == len(set(scored))
    ran = {g for _, g in scored}
    assert ran == {f"fixed:{n}" for n in cfg.fixed_search} | {"auto", entry["advised_gate"]}
    advised = next(r for r in rows if r["kind"] == "advised")
    same = next(r for r in rows if r["gate"] == entry["advised_gate"])
    assert advised["tokens_by_hour"] == same["tokens_by_hour"] and advised["steps"] == same["steps"]


@pytest.mark.parametrize("workload, budget, dp", [("seed", 512 * K, 1), ("mix", 128 * K, 2), ("seed_8w", 1024 * K, 1)])
def test_pruned_advice_is_the_full_search_advice(workload, budget, dp):
    hours = (0.5, 1.0, 3.0)

    def trainers():
        return [Trainer(TrainingConfig(workload=TRAINING_WORKLOADS[workload], seed=s, horizon_s=3 * 3600.0))
                for s in (1022, 1023)]

    full = advise_gate(trainers(), budget, dp, hours, (2, 4, 8, 24, 200))
    fast = advise_gate(trainers(), budget, dp, hours, (2, 4, 8, 24, 200), prune=True)
    assert (fast.label, fast.score, fast.best_fixed) == (full.label, full.score, full.best_fixed)
    assert set(fast.candidates) | set(fast.pruned) == set(full.candidates)
    assert not set(fast.candidates) & set(fast.pruned)
    to_beat = max(worst_ratio(full.candidates[f"fixed:{n}"], full.best_fixed) for n in (2, 4, 8, 24, 200))
    for lab, hour in fast.pruned.items():
        # dropped at an hour where it already could not beat the best fixed size; and it could not have
        assert hour in ("0.5", "1")
        assert full.candidates[lab][hour] / full.best_fixed[hour][1] <= to_beat
        assert worst_ratio(full.candidates[lab], full.best_fixed) <= to_beat
    for lab in fast.candidates:
        assert fast.candidates[lab] == full.candidates[lab]


def test_some_advice_is_pruned_and_prune_refuses_an_executor():
    trainer = Trainer(TrainingConfig(workload=TRAINING_WORKLOADS["mix"], seed=1022, horizon_s=3 * 3600.0))
    fast = advise_gate(trainer, 128 * K, 2, (0.5, 1.0, 3.0), (2, 4, 8, 24, 200), prune=True)
    assert fast.pruned      # else the tests above compare nothing that pruning changed
    with pytest.raises(ConfigError, match="prune=True"):
        advise_gate(trainer, 128 * K, 2, (1.0, 3.0), (4, 8), SerialExecutor(), prune=True)


def test_a_run_advanced_in_pieces_is_the_run_in_one_go():
    trainer = Trainer(TrainingConfig(workload=TRAINING_WORKLOADS["mix"], seed=5, horizon_s=2 * 3600.0))
    whole = trainer.run(256 * K, "fixed:8", 2)
    started = trainer.start(256 * K, "fixed:8", 2)
    for t in (0.0, 600.0, 601.0, 3600.0):
        started.advance(t)
        assert not started.done and started.result().step_end_s[-1] > t
        assert started.tokens_at_rate_by(t) == whole.tokens_at_rate_by(t)
    pieces = started.advance().result()
    assert started.done
    assert pieces.summary((1.0, 2.0)) == whole.summary((1.0, 2.0))
    assert pieces.step_end_s.tolist() == whole.step_end_s.tolist()
    assert pieces.step_tokens.tolist() == whole.step_tokens.tolist()
