"""The loader fails closed, not only the bare gate function.

The seed's context_aware policy was measured for one setting (main-process dynamic batching,
total-token counting, text, micro_batch_size 1, 512K/1M budgets). Every branch that leaves that
setting must raise at ``build_loader``, from the loader's own configuration, whether the gate is
named or already built; a gate given with dynamic batching off, and an unknown gate name, raise
too. Constructing a loader starts no worker, so these tests are cheap.
"""

from __future__ import annotations

import pytest

from dynbsz import FixedGate, PackerConfig, context_aware
from dynbsz.errors import ConfigError
from dynbsz.gates import AUTO_TABLE, WarmupRampGate, auto_gate
from dynbsz.loader import build_loader
from dynbsz.loader_config import LoaderConfig

K = 1024
DATASET = [{"tokens": 100 * (i + 1)} for i in range(8)]


@pytest.mark.parametrize("gate", ["context_aware", "built"])
@pytest.mark.parametrize("setting,config,budget", [
    ("runtime='worker'", LoaderConfig(runtime="worker"), 512 * K),
    ("count='effective'", LoaderConfig(token_count="effective"), 512 * K),
    ("modality='multimodal'", LoaderConfig(modality="multimodal"), 1024 * K),
    ("modality='diffusion'", LoaderConfig(modality="diffusion"), 512 * K),
    ("micro_batch_size=2", LoaderConfig(micro_batch_size=2), 512 * K),
    ("budget=32768", LoaderConfig(), 32 * K),
])
def test_context_aware_outside_its_measurements_is_refused_by_the_loader(gate, setting, config, budget):
    # A gate built for the measured setting and then handed to a loader outside it is refused too.
    g = "context_aware" if gate == "context_aware" else context_aware(512 * K)
    with pytest.raises(ConfigError, match=setting.replace("(", r"\(")) as e:
        build_loader(DATASET, PackerConfig(budget=budget), g, config)
    assert "context_aware" in str(e.value)


@pytest.mark.parametrize("budget", [512 * K, 1024 * K])
def test_context_aware_in_its_measured_setting_is_the_24_sample_gate(budget):
    loader = build_loader(DATASET, PackerConfig(budget=budget), "context_aware", LoaderConfig())
    assert loader.gate == FixedGate(24, policy="context_aware")


def test_several_departures_are_named_together():
    with pytest.raises(ConfigError) as e:
        build_loader(DATASET, PackerConfig(budget=512 * K), "context_aware",
                     LoaderConfig(runtime="worker", modality="diffusion", token_count="effective"))
    for part in ("runtime='worker'", "modality='diffusion'", "count='effective'"):
        assert part in str(e.value)


@pytest.mark.parametrize("gate", ["bogus", "fixed", "context_aware", FixedGate(8)])
def test_a_gate_with_dynamic_batching_off_is_refused_naming_both_settings(gate):
    with pytest.raises(ConfigError, match="packer_config=None") as e:
        build_loader(DATASET, None, gate, LoaderConfig())
    assert "gate=" in str(e.value)


def test_an_unknown_gate_name_fails_at_build_time_with_the_allowed_names():
    with pytest.raises(ConfigError, match="'fixed', 'context_aware', 'token_aware'"):
        build_loader(DATASET, PackerConfig(budget=1000), "bogus", LoaderConfig())


def test_other_gates_run_anywhere():
    for config in (LoaderConfig(runtime="worker"), LoaderConfig(modality="diffusion", token_count="effective",
                                                                micro_batch_size=4)):
        assert build_loader(DATASET, PackerConfig(budget=1000), "token_aware", config).gate.spec()["kind"] == \
            "token_aware"


@pytest.mark.parametrize("field,value", [("token_count", "tokens"), ("modality", "audio"),
                                         ("micro_batch_size", 0), ("micro_batch_size", 1.0)])
def test_the_new_settings_are_validated(field, value):
    with pytest.raises(ConfigError, match=field):
        LoaderConfig(**{field: value})


@pytest.mark.parametrize("gate,named", [(WarmupRampGate(4, 200, 0, 10), "gate='warmup_ramp'"),
                                        ("warmup_ramp", "gate='warmup_ramp'")])
def test_a_gate_that_ramps_by_step_is_refused_by_the_worker_runtime(gate, named):
    # A worker's packer counts only its own stream's micro-batches, from 0 every epoch: not the step.
    with pytest.raises(ConfigError, match="runtime='main'") as e:
        build_loader(DATASET, PackerConfig(budget=1000), gate, LoaderConfig(runtime="worker"))
    assert named in str(e.value)
    assert build_loader(DATASET, PackerConfig(budget=1000), gate, LoaderConfig()).gate.spec()["kind"] == "warmup_ramp"


def test_auto_in_the_worker_runtime_is_refused_only_where_it_ramps():
    ramps = {b for b in AUTO_TABLE if auto_gate(b).start != auto_gate(b).full}
    flat = set(AUTO_TABLE) - ramps
    assert ramps, "the table has no ramping row: this test checks nothing"
    with pytest.raises(ConfigError, match="gate='auto' resolved to a warm-up ramp"):
        build_loader(DATASET, PackerConfig(budget=min(ramps)), "auto", LoaderConfig(runtime="worker"))
    for budget in flat:
        build_loader(DATASET, PackerConfig(budget=budget), "auto", LoaderConfig(runtime="worker"))
    build_loader(DATASET, PackerConfig(budget=1000), WarmupRampGate(8, 8), LoaderConfig(runtime="worker"))
