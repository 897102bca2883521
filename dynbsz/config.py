"""Packer configuration: one frozen dataclass, validated on construction."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from .errors import StateMismatchError, check_choice, check_int

#: Largest budget or sample length accepted (64 Gi tokens): keeps every running sum far from overflow.
MAX_TOKENS = 1 << 36

#: What to do with a sample the budget cannot hold (longer than the budget or the physical cap).
OVERLONG_POLICIES = ("emit_alone", "raise", "drop")
#: What to do with a sample of zero budgeted tokens.
EMPTY_POLICIES = ("emit_alone", "raise", "drop")


@dataclass(frozen=True)
class PackerConfig:
    """Everything that decides which samples end up in which micro-batch (besides the gate).

    budget               token budget of one micro-batch (VeOmni: ``token_micro_bsz``)
    physical_cap         optional hard cap on physical tokens per micro-batch
    warmup_steps         batch-size warm-up length in optimizer steps (0: off)
    warmup_init_tokens   budget at step 0 of the warm-up (VeOmni: ``bsz_warmup_init_mbtoken``)
    micro_batches_per_step  micro-batches per optimizer step; the warm-up counts steps, not cuts
    overlong / empty     policy for samples the budget cannot hold / with zero tokens:
                         ``emit_alone`` (a micro-batch of its own), ``raise``, or ``drop``
                         (counted in ``packer.dropped`` and warned about once)
    """

    budget: int
    physical_cap: int | None = None
    warmup_steps: int = 0
    warmup_init_tokens: int = 200
    micro_batches_per_step: int = 1
    overlong: str = "emit_alone"
    empty: str = "emit_alone"

    def __post_init__(self) -> None:
        check_int("budget", self.budget, minimum=1, maximum=MAX_TOKENS)
        if self.physical_cap is not None:
            check_int("physical_cap", self.physical_cap, minimum=1, maximum=MAX_TOKENS)
        check_int("warmup_steps", self.warmup_steps, minimum=0)
        if self.warmup_steps > 0:
            check_int("warmup_init_tokens", self.warmup_init_tokens, minimum=1, maximum=self.budget)
        check_int("micro_batches_per_step", self.micro_batches_per_step, minimum=1)
        check_choice("overlong", self.overlong, OVERLONG_POLICIES)
        check_choice("empty", self.empty, EMPTY_POLICIES)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def check_compatible(self, saved: dict[str, Any], what: str = "packer") -> None:
        """Raise if a checkpointed config differs from this one in any field."""
        mine = self.to_dict()
        unknown = sorted(set(saved) - set(mine))
        if unknown:
            raise StateMismatchError(f"{what} checkpoint has settings this version does not know: {unknown}")
        diffs = [f"{f.name}: checkpoint={saved.get(f.name)!r}, current={mine[f.name]!r}"
                 for f in fields(self) if saved.get(f.name, mine[f.name]) != mine[f.name]]
        if diffs:
            raise StateMismatchError(f"cannot load a {what} checkpoint made with different settings ("
                                     + "; ".join(diffs) + "); construct the packer with the checkpoint's settings")

