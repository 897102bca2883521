"""bench-loader's rows: best of interleaved repeats, with the spread beside it."""

from __future__ import annotations

import pytest

from dynbsz import bench_loader
from dynbsz.__main__ import main
from dynbsz.workload import SourceSpec, Workload


def test_rows_are_the_best_of_interleaved_repeats_with_their_spread():
    trace = Workload((SourceSpec("a", 0.7, median_tokens=100, cost_base_s=0.001),
                      SourceSpec("b", 0.3, median_tokens=900, cost_base_s=0.006))).sample(24, 3)
    rows = bench_loader.run(workers=2, repeat=2, trace=trace, cost_noise=0.0, lookahead=4, reorder_buffer=4)
    assert len(rows) == 8
    for r in rows:
        assert r.exactly_once and r.samples == 24
        assert r.worst_seconds is not None and r.worst_seconds >= r.seconds > 0
        assert r.samples_per_s == 24 / r.seconds
    table = bench_loader.format_table(rows)
    assert "spread" in table.splitlines()[0]
    assert all("worst_seconds" in d for d in bench_loader.rows_to_json(rows))


def test_every_row_is_exactly_once_on_a_trace_whose_ids_are_not_row_numbers():
    # What `python -m dynbsz profile --seed` writes: ids are the profiled dataset indices, not 0..n-1.
    import dataclasses

    trace = Workload((SourceSpec("a", 0.5, median_tokens=100, cost_base_s=0.0005),
                      SourceSpec("b", 0.5, median_tokens=900, cost_base_s=0.002))).sample(24, 5)
    trace = dataclasses.replace(trace, ids=trace.ids + 100)
    rows = bench_loader.run(workers=2, repeat=1, trace=trace, cost_noise=0.0, lookahead=4, reorder_buffer=4)
    assert len(rows) == 8
    for r in rows:
        assert r.exactly_once, r.mode
        assert r.samples == 24
        assert (r.max_displacement is None) == ("balanced" not in r.mode)
        assert r.max_displacement is None or 0 <= r.max_displacement <= 4


@pytest.mark.parametrize("flag, value, allowed", [
    ("--samples", "0", "an integer >= 1"),
    ("--workers", "0", "an integer >= 1"),
    ("--prefetch-factor", "-2", "an integer >= 1"),
    ("--repeat", "0", "an integer >= 1"),
    ("--lookahead", "-1", "an integer >= 0"),
    ("--reorder-buffer", "0", "an integer >= 1"),
    ("--cost-noise", "-0.5", "a finite number >= 0"),
    ("--cost-noise", "nan", "a finite number >= 0"),
    ("--cost-noise", "inf", "a finite number >= 0"),
])
def test_each_bad_flag_gets_its_own_error(flag, value, allowed, capsys):
    with pytest.raises(SystemExit) as e:
        main(["bench-loader", flag, value])
    out = capsys.readouterr()
    assert e.value.code == 2 and out.out == ""
    error = out.err.strip().splitlines()[-1]
    assert error.endswith(f"error: {flag} must be {allowed}, got {value}")
