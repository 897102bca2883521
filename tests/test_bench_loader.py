"""bench-loader's rows: best of interleaved repeats, with the spread beside it."""

from __future__ import annotations

from dynbsz import bench_loader
from dynbsz.workload import SourceSpec, Workload


def test_rows_are_the_best_of_interleaved_repeats_with_their_spread():
    trace = Workload((SourceSpec("a", 0.7, median_tokens=100, cost_base_s=0.001),
                      SourceSpec("b", 0.3, median_tokens=900, cost_base_s=0.006))).sample(24, 3)
    rows = bench_loader.run(workers=2, repeat=2, trace=trace, cost_noise=0.0, lookahead=4, reorder_buffer=4)
    assert len(rows) == 7
    for r in rows:
        assert r.exactly_once and r.samples == 24
        assert r.worst_seconds is not None and r.worst_seconds >= r.seconds > 0
        assert r.samples_per_s == 24 / r.seconds
    table = bench_loader.format_table(rows)
    assert "spread" in table.splitlines()[0]
    assert all("worst_seconds" in d for d in bench_loader.rows_to_json(rows))
