"""Plain-text tables and the labels in them, for every CLI of the project (dynbsz, simulator, properties).

Pure functions of their arguments, so a CLI's output is a function of its results and tests
can compare it as text.
"""

from __future__ import annotations

import math
from typing import Sequence

K = 1024


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], align: str | None = None, *,
          rule: bool = True) -> str:
    """Columns padded to their widest cell. ``align`` has one letter per column, ``l`` or ``r``
    (default: the first column left, the rest right, as numbers read best); ``rule`` draws a line
    of dashes under the header."""
    cells = [[str(c) for c in r] for r in rows]
    head = [str(h) for h in headers]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(head)]
    align = align or "l" + "r" * (len(head) - 1)
    if len(align) != len(head) or set(align) - {"l", "r"}:
        raise ValueError(f"align must have one letter per column ({len(head)}), each 'l' or 'r'; got {align!r}")

    def fmt(r: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(r, widths, align)).rstrip()

    lines = [fmt(head)]
    if rule:
        lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines + [fmt(r) for r in cells])


def _missing(x: object) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def pct(x: float | None, digits: int = 2) -> str:
    """A fraction as a percentage; ``-`` for a missing value (None or NaN)."""
    return "-" if _missing(x) else f"{100 * x:.{digits}f}%"


def secs(x: float | None, digits: int = 2) -> str:
    """Seconds with thousands separators; ``-`` for a missing value."""
    return "-" if _missing(x) else f"{x:,.{digits}f}"


def ratio(x: float | None, digits: int = 1) -> str:
    """A speed-up or share of a peer, as ``12.3x``; ``-`` for a missing value."""
    return "-" if _missing(x) else f"{x:.{digits}f}x"


def budget_label(tokens: int) -> str:
    """A token budget the way the field writes it: 512K, 1M, or the plain count."""
    if tokens % (K * K) == 0:
        return f"{tokens // (K * K)}M"
    return f"{tokens // K}K" if tokens % K == 0 else str(tokens)


def count_label(n: int) -> str:
    """A count of tokens for a header, in decimal units: 2.5B, 300M, 40K (a budget is ``budget_label``'s)."""
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return str(n)
