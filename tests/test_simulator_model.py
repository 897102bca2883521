"""The loader model: torch's documented behaviour on fixed cases, and the model's own properties on generated ones.

Fixed cases are the experiments of docs/internals/torch-dataloader-semantics.md §5
(observed on the real loader); properties are the issue's: no event before its
cause, every sample delivered once per epoch, makespan never below total cost over
workers, in_order=True order equal to sampler order.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynbsz.errors import ConfigError
from dynbsz.workload import Trace
from simulator import metrics
from simulator.config import LoaderModelConfig, StepTime
from simulator.engine import CausalityError, EventQueue
from simulator.loader_model import LoaderModel, physical_bound_s, simulate


def trace_of(costs, tokens=None, sources=None) -> Trace:
    n = len(costs)
    return Trace(np.arange(n, dtype=np.int64), np.asarray(tokens if tokens is not None else [1] * n, dtype=np.int64),
                 np.asarray(costs, dtype=np.float64), np.asarray(sources if sources is not None else [0] * n,
                                                                 dtype=np.int64), ("text", "video"))


# ---- the engine ---------------------------------------------------------------------------------

def test_event_queue_pops_in_time_order_and_refuses_the_past():
    q = EventQueue()
    for t, k in ((3.0, 1), (1.0, 2), (2.0, 0), (1.0, 1)):
        q.push(t, k)
    assert [q.pop() for _ in range(4)] == [(1.0, 1), (1.0, 2), (2.0, 0), (3.0, 1)]
    assert q.now == 3.0
    with pytest.raises(CausalityError):
        q.push(2.5, 9)
    q.advance(1.0)                     # a late-comer cannot move the clock back
    assert q.now == 3.0


def test_event_queue_remove_takes_one_event_out_of_order():
    q = EventQueue()
    for t, k in ((1.0, 0), (2.0, 1), (3.0, 2)):
        q.push(t, k)
    assert q.remove(1) == 2.0 and q.now == 2.0
    assert q.remove(1) is None and q.now == 2.0          # gone: nothing changes
    assert q.pop() == (1.0, 0) and q.now == 2.0          # a result that waited costs no time
    assert q.pop() == (3.0, 2) and len(q) == 0


def test_only_the_engine_moves_the_clock():
    # ``EventQueue.now`` is a plain attribute for speed; this is what keeps it the engine's alone.
    root = Path(__file__).resolve().parents[1]
    writers = []
    for package in ("simulator", "dynbsz", "properties", "ci"):
        for path in sorted((root / package).rglob("*.py")):
            if path == root / "simulator" / "engine.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
                writers += [f"{path.relative_to(root)}:{node.lineno}" for t in targets
                            if isinstance(t, ast.Attribute) and t.attr == "now"]
    assert writers == []


def test_consumer_cannot_ask_before_its_previous_batch():
    m = LoaderModel(np.full(4, 0.1), LoaderModelConfig(num_workers=1))
    m.start_epoch(0.0)
    r = m.next(0.0)
    with pytest.raises(CausalityError):
        m.next(m.handout_time(r) - 0.05)


# ---- documented torch behaviour (semantics doc §5) -------------------------------------------------

SEC52 = [.33, .02, .05, .02, .08, .02, .05, .02, .02, .05, .02, .02]


@pytest.mark.parametrize("in_order, expected", [
    (True, [(0, 0), (1, 1), (2, 2), (3, 0), (4, 1), (5, 2), (6, 0), (7, 1), (8, 2), (9, 0), (10, 1), (11, 2)]),
    (False, [(1, 1), (2, 2), (5, 2), (4, 1), (7, 2), (8, 2), (6, 1), (10, 2), (11, 2), (9, 1), (0, 0), (3, 0)]),
])
def test_section_5_2_delivery_order_observed_on_the_real_loader(in_order, expected):
    # 3 workers, prefetch 2, per-batch costs above; the consumer starts 0.2 s after iter().
    m = LoaderModel(np.array(SEC52), LoaderModelConfig(num_workers=3, in_order=in_order))
    m.start_epoch(0.0)
    t = 0.2
    while (r := m.next(t)) is not None:
        t = m.handout_time(r)
    run = m.result()
    assert list(zip(run.batch.tolist(), run.worker.tolist())) == expected


def test_section_5_3_uneven_iterable_shards_phantoms_and_exhaustion():
    run = simulate(trace_of([0.01] * 8), LoaderModelConfig(num_workers=2, dataset="iterable", shard_sizes=(2, 6)))
    assert list(zip(run.worker.tolist(), run.batch.tolist())) == [(0, 0), (1, 0), (0, 1), (1, 1), (1, 2), (1, 3),
                                                                  (1, 4), (1, 5)]
    # 13 tasks = 8 data + 2 StopIteration replies + 3 phantoms, as torch's counters showed.
    assert (run.n_tasks, run.n_stop, run.n_phantom) == (13, 2, 3)


def test_persistent_iterable_workers_replay_epoch_zero_order():
    tr = trace_of([0.001] * 12)
    orders = {}
    for persistent in (True, False):
        run = simulate(tr, LoaderModelConfig(num_workers=2, dataset="iterable", persistent_workers=persistent,
                                             shuffle_seed=5), epochs=3)
        orders[persistent] = [run.samples[np.repeat(run.epoch, run.batch_sizes()) == e].tolist() for e in range(3)]
    assert orders[True][0] == orders[True][1] == orders[True][2]          # set_epoch never reached the replica
    assert orders[False][0] == orders[True][0]
    assert len({tuple(o) for o in orders[False]}) == 3


def test_map_sampler_reshuffles_every_epoch_even_with_persistent_workers():
    run = simulate(trace_of([0.001] * 12), LoaderModelConfig(num_workers=2, persistent_workers=True, shuffle_seed=5),
                   epochs=2)
    per = np.repeat(run.epoch, run.batch_sizes())
    assert run.samples[per == 0].tolist() != run.samples[per == 1].tolist()


def test_startup_is_paid_every_epoch_unless_persistent():
    tr = trace_of([0.01] * 8)
    spans = {}
    for persistent in (False, True):
        run = simulate(tr, LoaderModelConfig(num_workers=2, persistent_workers=persistent, worker_startup_s=0.5),
                       epochs=3)
        first = [float(run.handout_s[run.epoch == e][0]) for e in range(3)]
        prev_end = [0.0] + [float(run.handout_s[run.epoch == e][-1]) for e in range(2)]
        spans[persistent] = [f - p for f, p in zip(first, prev_end)]
    assert all(s >= 0.5 for s in spans[False])
    assert spans[True][0] >= 0.5 and all(s < 0.5 for s in spans[True][1:])


def test_zero_workers_fetch_synchronously():
    costs = [0.1, 0.2, 0.3, 0.4]
    run = simulate(trace_of(costs), LoaderModelConfig(num_workers=0, batch_size=2), step=StepTime(0.05))
    assert run.handout_s.tolist() == pytest.approx([0.3, 0.3 + 0.05 + 0.7])
    assert run.worker.tolist() == [-1, -1]


def test_in_order_slow_task_blocks_dispatch_but_in_order_false_routes_around_it():
    costs = [1.0] + [0.01] * 11
    slow_first = {}
    for in_order in (True, False):
        run = simulate(trace_of(costs), LoaderModelConfig(num_workers=2, prefetch_factor=2, in_order=in_order))
        slow_first[in_order] = run
    # in_order=True: nothing is handed out before the slow head arrives (head-of-line blocking).
    assert slow_first[True].handout_s[0] >= 1.0
    # in_order=False: the cheap batches flow around it; worker 1 serves them all meanwhile.
    early = slow_first[False].handout_s < 1.0
    assert early.sum() >= 9 and set(slow_first[False].worker[early].tolist()) == {1}


@pytest.mark.parametrize("kwargs, setting", [
    ({"num_workers": 0, "prefetch_factor": 2}, "prefetch_factor"),
    ({"num_workers": 0, "persistent_workers": True}, "persistent_workers"),
    ({"num_workers": -1}, "num_workers"),
    ({"prefetch_factor": 0}, "prefetch_factor"),
    ({"batch_size": 0}, "batch_size"),
    ({"worker_startup_s": -1.0}, "worker_startup_s"),
    ({"result_latency_s": float("nan")}, "result_latency_s"),
    ({"dataset": "stream"}, "dataset"),
    ({"in_order": "yes"}, "in_order"),
    ({"shard_sizes": (1, 2)}, "shard_sizes"),
    ({"dataset": "iterable", "shard_sizes": (1,)}, "shard_sizes"),
])
def test_impossible_loader_configs_are_refused_with_the_setting(kwargs, setting):
    with pytest.raises(ConfigError, match=setting) as e:
        LoaderModelConfig(**kwargs)
    assert "must" in str(e.value) or "needs" in str(e.value) or "allowed" in str(e.value) \
        or "applies" in str(e.value)


def test_zero_workers_with_prefetch_error_says_how_to_fix_it():
    with pytest.raises(ConfigError, match="num_workers >= 1 or leave prefetch_factor unset"):
        LoaderModelConfig(num_workers=0, prefetch_factor=2)


def test_shard_sizes_must_cover_the_trace():
    with pytest.raises(ConfigError, match="cover it exactly"):
        simulate(trace_of([0.1] * 5), LoaderModelConfig(num_workers=2, dataset="iterable", shard_sizes=(2, 2)))


# ---- properties of the model --------------------------------------------------------------------

@st.composite
def scenarios(draw):
    n = draw(st.integers(1, 40))
    # Coarse costs make exact ties (the hard case for ordering) common; zero costs too.
    costs = draw(st.lists(st.sampled_from([0.0, 0.01, 0.02, 0.05, 0.3]) | st.floats(0.0, 0.2), min_size=n,
                          max_size=n))
    tokens = draw(st.lists(st.integers(1, 1000), min_size=n, max_size=n))
    nw = draw(st.integers(0, 4))
    dataset = draw(st.sampled_from(["map", "iterable"]))
    shard_sizes = None
    if dataset == "iterable" and nw and draw(st.booleans()):
        cuts = sorted(draw(st.lists(st.integers(0, n), min_size=nw - 1, max_size=nw - 1)))
        shard_sizes = tuple(b - a for a, b in zip([0] + cuts, cuts + [n]))
    cfg = LoaderModelConfig(
        num_workers=nw, prefetch_factor=draw(st.integers(1, 3)) if nw else None,
        batch_size=draw(st.integers(1, 3)), in_order=draw(st.booleans()),
        persistent_workers=draw(st.booleans()) if nw else False,
        worker_startup_s=draw(st.sampled_from([0.0, 0.05])), result_latency_s=draw(st.sampled_from([0.0, 0.001])),
        dataset=dataset, shuffle_seed=draw(st.none() | st.integers(0, 3)), shard_sizes=shard_sizes)
    step = StepTime(draw(st.sampled_from([0.0, 0.01, 0.1])), draw(st.sampled_from([0.0, 1e-4])))
    epochs = draw(st.integers(1, 3))
    return trace_of(costs, tokens), cfg, step, epochs


@given(scenarios())
def test_every_sample_is_delivered_exactly_once_per_epoch(sc):
    trace, cfg, step, epochs = sc
    run = simulate(trace, cfg, step=step, epochs=epochs)
    per_sample_epoch = np.repeat(run.epoch, run.batch_sizes())
    for e in range(epochs):
        got = np.sort(run.samples[per_sample_epoch == e])
        assert got.tolist() == list(range(len(trace)))
    assert run.n_dropped == 0 or cfg.dataset == "iterable"


@given(scenarios())
def test_no_event_happens_before_its_cause(sc):
    trace, cfg, step, epochs = sc
    run = simulate(trace, cfg, step=step, epochs=epochs)
    assert (run.start_s >= run.dispatch_s).all()
    assert (run.finish_s >= run.start_s).all()
    assert (run.handout_s >= run.arrival_s - 1e-12).all()
    assert (run.handout_s >= run.request_s).all()
    assert (np.diff(run.handout_s) >= 0).all()
    # the consumer asks for batch i+1 only after training on batch i
    toks = np.add.reduceat(trace.tokens[run.samples], run.offsets[:-1]) if len(run) else np.zeros(0)
    assert (run.request_s[1:] >= run.handout_s[:-1] + step.of(toks[:-1]) - 1e-9).all()
    # each worker is one FIFO server: its tasks never overlap
    for w in set(run.worker.tolist()) - {-1}:
        mine = np.argsort(run.start_s[run.worker == w], kind="stable")
        s, f = run.start_s[run.worker == w][mine], run.finish_s[run.worker == w][mine]
        assert (s[1:] >= f[:-1] - 1e-12).all()
    if cfg.dataset == "map" and cfg.num_workers:
        # Priming sends max_tasks tasks at iter(); after that, task k is sent exactly when the
        # (k - max_tasks)-th batch of the epoch is handed out: never on arrival, and the window
        # of tasks in flight or buffered stays prefetch_factor * num_workers.
        for e in range(epochs):
            sel = run.epoch == e
            dispatch = dict(zip(run.task[sel].tolist(), run.dispatch_s[sel].tolist()))
            handouts = run.handout_s[sel].tolist()
            for k in range(cfg.max_tasks, len(handouts)):
                assert dispatch[k] == handouts[k - cfg.max_tasks]
            first = min(cfg.max_tasks, len(handouts))
            assert len({dispatch[k] for k in range(first)}) <= 1


class _HeapModel(LoaderModel):
    """The model with every result ordered through the event queue, as in_order=False and iterable
    datasets are: the reference its map-style in-order shortcut (``LoaderModel._next_direct``) must match."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._direct = False


def _consume(model, trace, step, epochs):
    t = 0.0
    for _ in range(epochs):
        model.start_epoch(t)
        while (r := model.next(t)) is not None:
            handed, rows = model.handout(r)
            t = handed + step.of(int(trace.tokens[rows].sum()))
            yield model.in_flight(), handed, rows
        t = max(t, model.q.now)


@given(scenarios())
def test_in_order_shortcut_is_the_event_queue_exactly(sc):
    trace, cfg, step, epochs = sc
    if cfg.dataset != "map" or not cfg.in_order or not cfg.num_workers:
        cfg = LoaderModelConfig(num_workers=cfg.num_workers or 2, prefetch_factor=cfg.prefetch_factor or 2,
                                batch_size=cfg.batch_size, in_order=True, persistent_workers=cfg.persistent_workers,
                                worker_startup_s=cfg.worker_startup_s, result_latency_s=cfg.result_latency_s,
                                shuffle_seed=cfg.shuffle_seed)
    fast = LoaderModel(trace.cost_s, cfg, tokens=trace.tokens)
    ref = _HeapModel(trace.cost_s, cfg, tokens=trace.tokens)
    assert fast._direct
    # the same hand-outs, and the same results in flight after each (what the fidelity replay reads) ...
    assert list(_consume(fast, trace, step, epochs)) == list(_consume(ref, trace, step, epochs))
    a, b = fast.result(), ref.result()
    # ... and the same record of every hand-out, to the last bit of every time
    for name in ("epoch", "task", "batch", "worker", "dispatch_s", "start_s", "finish_s", "request_s", "handout_s",
                 "offsets", "samples"):
        assert getattr(a, name).tolist() == getattr(b, name).tolist(), name
    assert (a.n_tasks, a.n_dropped, fast.q.now) == (b.n_tasks, b.n_dropped, ref.q.now)


@given(scenarios())
def test_handout_rows_are_the_recorded_deliveries(sc):
    """``handout`` (what the fetch loop puts: a list, or a range in the sampler's own order) names the same rows,
    hand-out by hand-out, as the run's records (``result().samples``, built from numpy arrays)."""
    trace, cfg, step, epochs = sc
    model = LoaderModel(trace.cost_s, cfg, tokens=trace.tokens)
    handed = [list(rows) for _, _, rows in _consume(model, trace, step, epochs)]
    run = model.result()
    assert handed == [run.samples[a:b].tolist() for a, b in zip(run.offsets[:-1], run.offsets[1:])]


@given(scenarios())
def test_makespan_never_beats_the_physical_bound(sc):
    trace, cfg, step, epochs = sc
    run = simulate(trace, cfg, step=step, epochs=epochs)
    assert run.makespan_s >= physical_bound_s(trace, cfg, epochs) * (1 - 1e-9)


@given(scenarios())
def test_in_order_true_delivers_sampler_order(sc):
    trace, cfg, step, epochs = sc
    if not cfg.in_order or cfg.dataset != "map":
        cfg = LoaderModelConfig(num_workers=cfg.num_workers, prefetch_factor=cfg.prefetch_factor,
                                batch_size=cfg.batch_size, in_order=True, persistent_workers=cfg.persistent_workers,
                                worker_startup_s=cfg.worker_startup_s, shuffle_seed=cfg.shuffle_seed)
    run = simulate(trace, cfg, step=step, epochs=epochs)
    per_sample_epoch = np.repeat(run.epoch, run.batch_sizes())
    for e in range(epochs):
        order = (np.arange(len(trace)) if cfg.shuffle_seed is None
                 else np.random.default_rng([cfg.shuffle_seed, e]).permutation(len(trace)))
        assert run.samples[per_sample_epoch == e].tolist() == order.tolist()
        batches = run.batch[run.epoch == e]
        assert batches.tolist() == list(range(len(batches)))
        if cfg.num_workers:
            assert (run.worker[run.epoch == e] == batches % cfg.num_workers).all()


# ---- metrics are pure functions ---------------------------------------------------------------------

def test_metrics_on_hand_made_inputs():
    assert metrics.stall_fraction(np.array([0.0, 1.0, 3.0]), np.array([1.0, 2.0, 3.0])) == pytest.approx(0.5)
    assert metrics.steady_throughput(np.array([1.0, 2.0, 3.0]), np.array([5, 2, 2]), skip=1) == pytest.approx(2.0)
    shares = metrics.source_shares(np.array([0, 1, 0, 0]), np.array([0, 0, 1, 1]), 1, 2)
    assert shares.tolist() == [[0.5, 0.5], [1.0, 0.0]]
    assert metrics.share_skew(shares, np.array([0.75, 0.25])) == pytest.approx(0.25)
    assert metrics.displacement(np.array([2, 0, 1])).tolist() == [-2, 1, 1]
    assert metrics.global_fill(np.array([[10, 8], [6, 8]]), 10).tolist() == [0.8, 0.8]
    with pytest.raises(ValueError):
        metrics.global_fill(np.array([1, 2]), 10)
