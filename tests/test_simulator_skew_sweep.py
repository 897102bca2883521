"""python -m simulator skew-sweep: the model's side-by-side ordering comparison docs/ordering.md quotes."""

from __future__ import annotations

import json

from simulator import cli, skew_sweep


def test_one_row_ranks_the_orders_as_the_benchmark_does():
    row = skew_sweep.sweep_one("bench_mix/0", 2, 32)
    assert row.in_order_true < 0.65 < 0.9 < row.in_order_false          # the trade the issue describes
    assert row.vs_false("reorder_buffer") > 0.99                          # no estimates, exact order, full speed
    assert row.vs_false("balanced_exact") > 0.97 and row.vs_true("balanced_exact") > 1.4
    assert row.in_order_true < row.balanced_estimated < row.balanced_exact


def test_the_sweep_is_deterministic_and_prints_every_row(capsys, monkeypatch):
    rows = skew_sweep.sweep(traces=("three_source",), prefetch_factors=(2,), lookaheads=(16, 32))
    assert rows == skew_sweep.sweep(traces=("three_source",), prefetch_factors=(2,), lookaheads=(16, 32))
    text = skew_sweep.format_rows(rows)
    assert "three_source | 2 | 16 |" in text and "three_source | 2 | 32 |" in text and len(text.splitlines()) == 4
    monkeypatch.setattr(skew_sweep, "sweep", lambda: rows)       # the command's output, not the 5 s full sweep
    assert cli.main(["skew-sweep", "--json"]) == 0
    assert [r["lookahead"] for r in json.loads(capsys.readouterr().out)] == [16, 32]
