"""Workloads are seeded and pure; trace files are validated with line numbers."""

from __future__ import annotations

import numpy as np
import pytest

from dynbsz import ConfigError, SourceSpec, Trace, Workload
from dynbsz.workload import TraceError


def test_sampling_is_a_pure_function_of_the_seed():
    w = Workload((SourceSpec("text", 0.8, 1000, cost_base_s=0.001), SourceSpec("video", 0.2, 20000, 0.5,
                                                                              cost_per_token_s=1e-5)))
    a, b, c = w.sample(500, 3), w.sample(500, 3), w.sample(500, 4)
    assert np.array_equal(a.tokens, b.tokens) and np.array_equal(a.cost_s, b.cost_s)
    assert not np.array_equal(a.tokens, c.tokens)
    share = (a.source == 1).mean()
    assert 0.12 < share < 0.28
    assert a.cost_s[a.source == 1].mean() > 10 * a.cost_s[a.source == 0].mean()


def test_trace_csv_roundtrip(tmp_path):
    t = Workload((SourceSpec("text"), SourceSpec("video", 0.5))).sample(40, 0)
    path = tmp_path / "t.csv"
    t.to_csv(path)
    r = Trace.read_csv(path)
    assert r.ids.tolist() == t.ids.tolist() and r.tokens.tolist() == t.tokens.tolist()
    assert r.cost_s.tolist() == t.cost_s.tolist() and r.sources() == t.sources()


@pytest.mark.parametrize("body, needle", [
    ("id,tokens,source\n1,2,text\n", "line 1: missing column(s) cost_s"),
    ("id,tokens,cost_s,source\n0,5,0.1,text\n1,5,-0.2,text\n", "line 3: cost_s must be a finite number >= 0"),
    ("id,tokens,cost_s,source\n0,5.5,0.1,text\n", "line 2: tokens must be a non-negative integer"),
    ("id,tokens,cost_s,source\n0,5,abc,text\n", "line 2: cost_s must be a number"),
    ("id,tokens,cost_s,source\n0,5,0.1,text\n0,6,0.1,text\n", "line 3: duplicate id 0"),
    ("id,tokens,cost_s,source\n0,5,0.1\n", "line 2: 3 fields"),
    ("", "line 1: empty file"),
    ("id,tokens,cost_s,source\n", "no samples"),
])
def test_malformed_trace_names_the_line(tmp_path, body, needle):
    path = tmp_path / "bad.csv"
    path.write_text(body)
    with pytest.raises(TraceError) as e:
        Trace.read_csv(path)
    assert needle in str(e.value)


@pytest.mark.parametrize("kwargs, setting", [
    ({"name": ""}, "source name"),
    ({"name": "a,b"}, "source name"),
    ({"name": "t", "weight": -1}, "weight"),
    ({"name": "t", "median_tokens": 0}, "median_tokens"),
    ({"name": "t", "min_tokens": 0}, "min_tokens"),
    ({"name": "t", "cost_noise": float("inf")}, "cost_noise"),
])
def test_source_spec_errors(kwargs, setting):
    with pytest.raises(ConfigError, match=setting):
        SourceSpec(**kwargs)


def test_workload_errors():
    with pytest.raises(ConfigError, match="unique"):
        Workload((SourceSpec("a"), SourceSpec("a")))
    with pytest.raises(ConfigError, match="weight > 0"):
        Workload((SourceSpec("a", weight=0),))
