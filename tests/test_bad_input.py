"""Bad input gets an error that names the setting and what it allows."""

from __future__ import annotations

import json

import pytest

from dynbsz import (
    ConfigError,
    EmptySampleError,
    FixedGate,
    GreedyPacker,
    OverlongSampleError,
    PackerConfig,
    SampleError,
    StateMismatchError,
    TokenAwareGate,
)


@pytest.mark.parametrize("kwargs, setting", [
    ({"budget": 0}, "budget"),
    ({"budget": -5}, "budget"),
    ({"budget": 1.5}, "budget"),
    ({"budget": True}, "budget"),
    ({"budget": 8, "physical_cap": 0}, "physical_cap"),
    ({"budget": 8, "warmup_steps": -1}, "warmup_steps"),
    ({"budget": 8, "warmup_steps": 3, "warmup_init_tokens": 0}, "warmup_init_tokens"),
    ({"budget": 8, "warmup_steps": 3, "warmup_init_tokens": 9}, "warmup_init_tokens"),
    ({"budget": 8, "micro_batches_per_step": 0}, "micro_batches_per_step"),
    ({"budget": 8, "overlong": "truncate"}, "overlong"),
    ({"budget": 8, "empty": "skip"}, "empty"),
])
def test_config_errors_name_the_setting(kwargs, setting):
    with pytest.raises(ConfigError, match=setting) as e:
        PackerConfig(**kwargs)
    assert "must be" in str(e.value) or "allowed values" in str(e.value)


@pytest.mark.parametrize("make, setting", [
    (lambda: FixedGate(0), "buffer_size"),
    (lambda: FixedGate(-3), "buffer_size"),
    (lambda: TokenAwareGate(margin=-0.1), "margin"),
    (lambda: TokenAwareGate(margin=float("nan")), "margin"),
    (lambda: TokenAwareGate(pool_cap=0), "pool_cap"),
])
def test_gate_errors_name_the_setting(make, setting):
    with pytest.raises(ConfigError, match=setting):
        make()


@pytest.mark.parametrize("tokens", [-1, 2.0, "12", None, True])
def test_lengths_must_be_positive_integers(tokens):
    packer = GreedyPacker(PackerConfig(budget=8))
    with pytest.raises(SampleError, match="tokens"):
        packer.put(0, tokens)
    assert len(packer) == 0


def test_physical_length_must_be_a_positive_integer():
    packer = GreedyPacker(PackerConfig(budget=8, physical_cap=10))
    with pytest.raises(SampleError, match="physical_tokens"):
        packer.put(0, 4, physical_tokens=0)


def test_numpy_integers_are_accepted():
    import numpy as np

    packer = GreedyPacker(PackerConfig(budget=8), FixedGate(1))
    assert packer.put(np.int64(3), np.int32(8))
    assert packer.cut().ids == (3,)


def test_sample_ids_must_be_checkpointable():
    packer = GreedyPacker(PackerConfig(budget=8))
    with pytest.raises(SampleError, match="sample_id"):
        packer.put((1, 2), 3)


def test_duplicate_id_is_rejected():
    packer = GreedyPacker(PackerConfig(budget=8))
    packer.put(7, 3)
    with pytest.raises(SampleError, match="already buffered"):
        packer.put(7, 2)


def test_overlong_policies():
    raise_ = GreedyPacker(PackerConfig(budget=8, overlong="raise"), FixedGate(1))
    with pytest.raises(OverlongSampleError, match="overlong='emit_alone'"):
        raise_.put(0, 9)

    drop = GreedyPacker(PackerConfig(budget=8, overlong="drop"), FixedGate(1))
    with pytest.warns(UserWarning, match="dropping overlong"):
        assert drop.put(0, 9) is False
    assert drop.put(1, 20) is False  # warned once, still counted
    assert drop.dropped["overlong"] == [0, 1] and len(drop) == 0

    alone = GreedyPacker(PackerConfig(budget=8), FixedGate(1))
    for sid, n in [(0, 2), (1, 9), (2, 3)]:
        alone.put(sid, n)
    assert [mb.ids for mb in alone.drain()] == [(0, 2), (1,)]


def test_physical_overlong_follows_the_same_policy():
    packer = GreedyPacker(PackerConfig(budget=8, physical_cap=10, overlong="raise"))
    with pytest.raises(OverlongSampleError, match="physical_cap"):
        packer.put(0, 4, physical_tokens=11)


def test_empty_policies():
    with pytest.raises(EmptySampleError, match="empty="):
        GreedyPacker(PackerConfig(budget=8, empty="raise")).put(0, 0)
    drop = GreedyPacker(PackerConfig(budget=8, empty="drop"))
    with pytest.warns(UserWarning, match="dropping empty"):
        assert drop.put(0, 0) is False
    assert drop.dropped["empty"] == [0]
    alone = GreedyPacker(PackerConfig(budget=8), FixedGate(1))
    for sid, n in [(0, 2), (1, 0), (2, 3)]:
        alone.put(sid, n)
    # The empty sample travels alone, in its arrival turn, and is never co-packed for free.
    assert [mb.ids for mb in alone.drain()] == [(0, 2), (1,)]


def test_cut_on_empty_packer_is_an_error():
    with pytest.raises(RuntimeError, match="empty packer"):
        GreedyPacker(PackerConfig(budget=8)).cut()


def _checkpoint(config, gate):
    p = GreedyPacker(config, gate)
    p.put(0, 3)
    return json.loads(json.dumps(p.state_dict()))


@pytest.mark.parametrize("other_config, other_gate, needle", [
    (PackerConfig(budget=16), FixedGate(4), "budget: checkpoint=8, current=16"),
    (PackerConfig(budget=8, physical_cap=9), FixedGate(4), "physical_cap"),
    (PackerConfig(budget=8, overlong="drop"), FixedGate(4), "overlong"),
    (PackerConfig(budget=8), FixedGate(5), "gate"),
    (PackerConfig(budget=8), TokenAwareGate(), "token_aware"),
])
def test_state_from_another_configuration_is_rejected(other_config, other_gate, needle):
    state = _checkpoint(PackerConfig(budget=8), FixedGate(4))
    fresh = GreedyPacker(other_config, other_gate)
    with pytest.raises(StateMismatchError, match=needle):
        fresh.load_state_dict(state)
    assert len(fresh) == 0  # nothing half-loaded


def test_not_a_checkpoint_is_rejected():
    with pytest.raises(StateMismatchError, match="not a dynbsz packer checkpoint"):
        GreedyPacker(PackerConfig(budget=8)).load_state_dict({"buffer": []})


@pytest.mark.parametrize("kwargs, setting", [
    ({"order": "shuffled"}, "order"),
    ({"order": None}, "order"),
    ({"order": "balanced", "lookahead": -1}, "lookahead"),
    ({"order": "balanced", "lookahead": True}, "lookahead"),
    ({"order": "balanced", "lookahead": 2.5}, "lookahead"),
    ({"order": "balanced", "cost_model": 3.0}, "cost_model"),
    ({"order": "balanced", "cost_model": "model.json"}, "cost_model"),
])
def test_loader_config_errors_name_the_setting(kwargs, setting):
    from dynbsz.loader_config import LoaderConfig

    with pytest.raises(ConfigError, match=setting) as e:
        LoaderConfig(num_workers=1, **kwargs)
    assert "must be" in str(e.value) or "allowed values" in str(e.value)


def _tiny_trace_dataset():
    from dynbsz.datasets import TraceMapDataset
    from dynbsz.workload import SourceSpec, Workload

    return TraceMapDataset(Workload((SourceSpec("a", 1.0, median_tokens=10, cost_base_s=0.0),)).sample(8, 0))


@pytest.mark.parametrize("runtime, order, kwargs, setting, allowed", [
    ("main", "balanced", {"meta_fn": 1.5, "cost_fn": len}, "meta_fn", "callable index -> dict"),
    ("main", "balanced", {"meta_fn": [{"tokens": 1}], "cost_fn": len}, "meta_fn", "callable index -> dict"),
    ("main", "balanced", {"meta_fn": dict, "cost_fn": 0.25}, "cost_fn", "callable metadata dict -> seconds"),
    # Not callable and not read either: the callable check speaks first, naming what is wrong with it.
    ("main", "sampler", {"meta_fn": 1.5}, "meta_fn", "callable"),
    ("worker", "sampler", {"cost_fn": 0.25}, "cost_fn", "callable"),
])
def test_a_non_callable_cost_source_is_refused_when_the_loader_is_built(runtime, order, kwargs, setting, allowed):
    from dynbsz.loader import build_loader
    from dynbsz.loader_config import LoaderConfig

    config = LoaderConfig(runtime=runtime, num_workers=1, order=order)
    with pytest.raises(ConfigError, match=setting) as e:
        build_loader(_tiny_trace_dataset(), PackerConfig(budget=1000), None, config, **kwargs)
    assert allowed in str(e.value) and "got" in str(e.value)
