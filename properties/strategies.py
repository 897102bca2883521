"""Hypothesis strategies, small ones composed into large ones.

Budgets are kept small (tens to hundreds of tokens) so that a few dozen samples
exercise every interesting regime: many samples per micro-batch, one sample per
micro-batch, samples longer than the budget, physical caps that bind first.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from dynbsz.config import PackerConfig
from dynbsz.gates import FixedGate, TokenAwareGate


@dataclass(frozen=True)
class Sample:
    id: int
    tokens: int
    physical: int | None = None
    source: str = "text"


def budgets(min_value: int = 1, max_value: int = 256) -> st.SearchStrategy[int]:
    return st.integers(min_value, max_value)


@st.composite
def packer_configs(draw, *, physical_cap: bool | None = None, warmup: bool | None = None,
                   overlong=("emit_alone",), empty=("emit_alone",), max_budget: int = 256) -> PackerConfig:
    budget = draw(budgets(1, max_budget))
    use_cap = draw(st.booleans()) if physical_cap is None else physical_cap
    cap = draw(st.integers(1, 2 * budget)) if use_cap else None
    use_warmup = draw(st.booleans()) if warmup is None else warmup
    warmup_steps = draw(st.integers(1, 6)) if use_warmup else 0
    init = draw(st.integers(1, budget)) if use_warmup else 200
    return PackerConfig(budget=budget, physical_cap=cap, warmup_steps=warmup_steps, warmup_init_tokens=init,
                        micro_batches_per_step=draw(st.integers(1, 3)),
                        overlong=draw(st.sampled_from(overlong)), empty=draw(st.sampled_from(empty)))


def fixed_gates(max_buffer: int = 40) -> st.SearchStrategy[FixedGate]:
    return st.builds(FixedGate, st.integers(1, max_buffer))


def token_aware_gates(max_pool: int = 40) -> st.SearchStrategy[TokenAwareGate]:
    return st.builds(TokenAwareGate, st.floats(0.0, 3.0, allow_nan=False), st.integers(1, max_pool))


def gates() -> st.SearchStrategy:
    return st.one_of(fixed_gates(), token_aware_gates())


@st.composite
def sample_streams(draw, budget: int, *, min_size: int = 0, max_size: int = 60, physical: bool = False,
                   allow_empty: bool = False, sources=("text", "video")) -> list[Sample]:
    """Samples with unique ids; lengths mostly below the budget, some at it, some beyond it."""
    n = draw(st.integers(min_size, max_size))
    low = 0 if allow_empty else 1
    length = st.one_of(
        st.integers(low, max(low, budget // 4)),   # many per micro-batch
        st.integers(low, budget),                  # anything that fits
        st.integers(budget, 2 * budget + 1),       # at or beyond the budget
    )
    out = []
    for i in range(n):
        tokens = draw(length)
        phys = draw(st.integers(max(tokens, 1), tokens + budget)) if physical and draw(st.booleans()) else None
        out.append(Sample(i, tokens, phys, draw(st.sampled_from(sources))))
    return out
