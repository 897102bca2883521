"""Micro-batch token budget as a function of the optimizer step.

VeOmni's ``TextBatchingStrategy.get_cur_token_micro_bsz`` ramps the budget
linearly from an initial value to the full budget over ``warmup_steps`` steps,
inclusive of step ``warmup_steps`` itself, using integer floor division. We
reproduce that formula exactly so packed micro-batches stay identical.
"""

from __future__ import annotations


def budget_at_step(budget: int, step: int, warmup_steps: int = 0, warmup_init_tokens: int = 0) -> int:
    if warmup_steps > 0 and step <= warmup_steps:
        return (budget - warmup_init_tokens) * step // warmup_steps + warmup_init_tokens
    return budget
