"""What the litdata and Hugging Face fix sets share: checking a requested subset."""

from __future__ import annotations

from typing import Iterable


def check_fixes(fixes: Iterable[str], known: dict[str, str]) -> tuple[str, ...]:
    fixes = tuple(fixes)
    bad = [f for f in fixes if f not in known]
    if bad:
        raise ValueError(f"fixes={bad!r}: allowed values: {', '.join(known) or 'none'}")
    return fixes
