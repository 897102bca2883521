"""Gate policies: the seed's context-aware table, the token-aware rule, resolution done once."""

from __future__ import annotations

import pytest

from dynbsz import (
    ConfigError,
    FixedGate,
    GreedyPacker,
    PackerConfig,
    TokenAwareGate,
    WarmupRampGate,
    context_aware,
    resolve_gate,
)

K = 1024


@pytest.mark.parametrize("budget", [512 * K, 1024 * K])
def test_context_aware_resolves_to_a_minimum_of_24(budget):
    gate = context_aware(budget)
    assert gate == FixedGate(24, policy="context_aware")


@pytest.mark.parametrize("kwargs, needle", [
    ({"budget": 128 * K}, "budget=131072"),
    ({"budget": 2048 * K}, "budget="),
    ({"budget": 512 * K, "runtime": "worker"}, "runtime='worker'"),
    ({"budget": 512 * K, "count": "effective"}, "count='effective'"),
    ({"budget": 512 * K, "modality": "multimodal"}, "modality='multimodal'"),
    ({"budget": 512 * K, "micro_batch_size": 2}, "micro_batch_size=2"),
    ({"budget": 512 * K, "dyn_bsz": False}, "dyn_bsz=True"),
    ({"budget": 512 * K, "runtime": "gpu"}, "allowed values"),
])
def test_context_aware_fails_closed(kwargs, needle):
    budget = kwargs.pop("budget")
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")) as e:
        context_aware(budget, **kwargs)
    assert any(hint in str(e.value) for hint in ("token_aware", "allowed values", "gate='fixed'"))


def test_resolve_gate_resolves_once():
    gate = resolve_gate("context_aware", budget=512 * K)
    # A resolved gate passes through untouched: a second resolution cannot re-run the table.
    assert resolve_gate(gate, budget=12345) is gate
    assert resolve_gate(gate.spec(), budget=512 * K) == gate


def test_resolve_gate_by_name_and_spec():
    assert resolve_gate("fixed") == FixedGate(200)
    assert resolve_gate("fixed", buffer_size=8) == FixedGate(8)
    assert resolve_gate("token_aware", margin=1.0, pool_cap=64) == TokenAwareGate(1.0, 64)
    assert resolve_gate(TokenAwareGate(0.25, 10).spec()) == TokenAwareGate(0.25, 10)
    with pytest.raises(ConfigError, match="allowed values"):
        resolve_gate("adaptive")
    with pytest.raises(ConfigError, match="does not take"):
        resolve_gate("fixed", margin=2)
    with pytest.raises(ConfigError, match="needs the token budget"):
        resolve_gate("context_aware")
    with pytest.raises(ConfigError, match="ready"):
        resolve_gate(object())


def test_token_aware_opens_on_margin_long_before_the_pool_cap():
    # Long samples: 4 of them cover budget * 1.5, far below a pool cap of 200.
    packer = GreedyPacker(PackerConfig(budget=1000), TokenAwareGate(margin=0.5, pool_cap=200))
    opened_at = None
    for i in range(10):
        packer.put(i, 400)
        if packer.ready():
            opened_at = i + 1
            break
    assert opened_at == 4  # 1600 >= 1500


def test_token_aware_pool_cap_bounds_the_wait_with_short_samples():
    packer = GreedyPacker(PackerConfig(budget=1000), TokenAwareGate(margin=3.0, pool_cap=50))
    n = 0
    while not packer.ready():
        packer.put(n, 30)
        n += 1
    assert n == 50  # 1500 tokens cover the budget; the 4000-token margin is cut short by the pool cap


def test_a_user_gate_is_a_plain_object():
    class EveryTwoThousand:
        def ready(self, view):
            return view.tokens >= 2 * view.budget

        def spec(self):
            return {"kind": "user", "name": "every-2x"}

    packer = GreedyPacker(PackerConfig(budget=100), resolve_gate(EveryTwoThousand()))
    for i in range(5):
        packer.put(i, 50)
    assert packer.ready()


class View:
    """A BufferView with the figures set by hand, to put a gate exactly on its boundaries."""

    def __init__(self, num_samples, tokens, budget=1000, physical_tokens=None, physical_cap=None):
        self.num_samples, self.tokens, self.budget = num_samples, tokens, budget
        self.current_budget = budget
        self.physical_tokens = tokens if physical_tokens is None else physical_tokens
        self.physical_cap = physical_cap
        self.step = 0


def test_fixed_gate_boundaries_are_inclusive():
    gate = FixedGate(5)
    assert gate.ready(View(5, 1000))            # exactly the minimum, exactly the budget
    assert not gate.ready(View(4, 1000))        # one sample short
    assert not gate.ready(View(5, 999))         # one token short
    assert gate.ready(View(5, 10, physical_tokens=800, physical_cap=800))      # the physical cap covers too
    assert not gate.ready(View(5, 10, physical_tokens=799, physical_cap=800))


def test_token_aware_gate_boundaries_are_inclusive():
    gate = TokenAwareGate(margin=0.5, pool_cap=10)
    assert gate.ready(View(2, 1500))            # exactly ceil(1.5 * budget)
    assert not gate.ready(View(2, 1499))
    assert gate.ready(View(10, 1000))           # exactly the pool cap, budget exactly covered
    assert not gate.ready(View(9, 1000))
    assert not gate.ready(View(10, 999))        # a full pool never opens an uncovered buffer
    odd = TokenAwareGate(margin=0.3, pool_cap=99)
    assert odd.ready(View(2, 1300, budget=1000)) and not odd.ready(View(2, 1299, budget=1000))
    assert odd.ready(View(2, 1302, budget=1001)) and not odd.ready(View(2, 1301, budget=1001))   # ceil(1301.3)
    capped = TokenAwareGate(margin=1.0, pool_cap=99)   # the margin on the physical cap: 2 x 800
    assert capped.ready(View(2, 10, physical_tokens=1600, physical_cap=800))
    assert not capped.ready(View(2, 10, physical_tokens=1599, physical_cap=800))


def test_warmup_ramp_minimum_holds_ramps_in_small_steps_and_ends_full():
    gate = WarmupRampGate(start=24, full=200, hold_steps=3, ramp_steps=10)
    mins = [gate.minimum(s) for s in range(20)]
    assert mins[:3] == [24, 24, 24]
    assert mins[13:] == [200] * 7
    ramp = mins[2:14]
    assert all(b >= a for a, b in zip(ramp, ramp[1:]))                 # never shrinks
    assert max(b - a for a, b in zip(ramp, ramp[1:])) <= -(-176 // 11)  # no single 176-candidate wait
    assert WarmupRampGate(8, 8, 0, 0).minimum(0) == 8 and WarmupRampGate(1, 9, 0, 0).minimum(0) == 9


def test_warmup_ramp_reads_the_step_and_is_a_minimum():
    gate = WarmupRampGate(start=2, full=6, hold_steps=1, ramp_steps=0)
    view = View(2, 1000)
    view.step = 0
    assert gate.ready(view)
    view.step = 1
    assert not gate.ready(view)                      # full minimum from step 1
    full = View(6, 1000)
    full.step = 1
    assert gate.ready(full) and not gate.ready(View(6, 999))   # the budget must still be covered


def test_packer_view_carries_the_step_through_a_restore():
    cfg = PackerConfig(budget=100, micro_batches_per_step=2)
    packer = GreedyPacker(cfg, WarmupRampGate(start=1, full=5, hold_steps=2, ramp_steps=0))
    steps_seen = []
    for i in range(40):
        packer.put(i, 60)
        if packer.ready():
            steps_seen.append(packer.step)
            packer.cut()
    assert steps_seen[:4] == [0, 0, 1, 1] and packer.step == packer.cuts // 2
    restored = GreedyPacker(cfg, WarmupRampGate(start=1, full=5, hold_steps=2, ramp_steps=0))
    restored.load_state_dict(packer.state_dict())
    assert restored.step == packer.step
    packer.start_new_step()
    assert packer.step == -(-restored.cuts // 2)


def test_warmup_ramp_resolves_by_name_and_spec():
    gate = resolve_gate("warmup_ramp", start=8, full=64, hold_steps=5, ramp_steps=20)
    assert gate == WarmupRampGate(8, 64, 5, 20) and resolve_gate(gate.spec()) == gate
    with pytest.raises(ConfigError, match="full"):
        WarmupRampGate(start=30, full=20)


# ---- gate='auto' ------------------------------------------------------------------------------

def test_auto_resolves_to_its_table_row_and_round_trips():
    from dynbsz.gates import AUTO_TABLE, auto_row

    for budget, row in AUTO_TABLE.items():
        gate = resolve_gate("auto", budget=budget)
        assert isinstance(gate, WarmupRampGate) and gate.policy == "auto"
        assert (gate.start, gate.full, gate.hold_steps, gate.ramp_steps) == row
        assert gate.spec()["policy"] == "auto" and resolve_gate(gate.spec()) == gate
    # the nearest row on a log scale: sqrt(128K * 256K) = 185363.8, so 185363 is 128K's, 185364 256K's
    assert auto_row(185_363) == 128 * K and auto_row(185_364) == 256 * K
    assert auto_row(1) == 128 * K and auto_row(1 << 40) == max(AUTO_TABLE)


def test_auto_checkpoint_keeps_the_schedule_it_resolved_to():
    # a spec written by another version's table: resume rebuilds that schedule, not today's row
    old = {"kind": "warmup_ramp", "start": 3, "full": 9, "hold_steps": 1, "ramp_steps": 7, "policy": "auto"}
    gate = resolve_gate(old, budget=512 * K)
    assert gate == WarmupRampGate(3, 9, 1, 7, policy="auto") and gate.spec() == old
    cfg = PackerConfig(budget=100)
    packer = GreedyPacker(cfg, resolve_gate("auto", budget=100))
    for i in range(7):
        packer.put(i, 30)
    restored = GreedyPacker(cfg, resolve_gate(packer.state_dict()["gate"], budget=100))
    restored.load_state_dict(packer.state_dict())
    assert restored.num_samples == 7
    # a plain warmup_ramp spec is unchanged by the policy field (older checkpoints still load)
    assert "policy" not in WarmupRampGate().spec()


def test_auto_is_a_minimum_and_refuses_what_it_cannot_use():
    for budget in (1000, 512 * K):
        gate = resolve_gate("auto", budget=budget)
        for step in (0, 10, 10_000):
            short = View(10_000, budget - 1, budget=budget)
            short.step = step
            assert not gate.ready(short)              # never a capacity, at any step
            enough = View(gate.minimum(step), budget, budget=budget)
            enough.step = step
            assert gate.ready(enough)
    with pytest.raises(ConfigError, match="budget"):
        resolve_gate("auto")
    with pytest.raises(ConfigError, match="takes no options"):
        resolve_gate("auto", budget=512 * K, start=2)
    with pytest.raises(ConfigError, match="policy"):
        WarmupRampGate(policy="adaptive")
