"""Decode-cost estimates known before an epoch starts: a cost model fitted from a trace.

A balanced epoch order (``dynbsz.order.balanced_order``) needs every sample's decode cost
*before* the epoch, from metadata the main process reads cheaply (token count, source, byte
size) through ``meta_fn(index) -> dict``. Never from timings taken at run time: the order
would then depend on timing, and exact resume would break.

``CostModel`` is the fitted form: per source, ``base_s + per_token_s * tokens`` seconds. It is
plain JSON data (``to_dict`` / ``from_dict``), so ``LoaderConfig(cost_model=...)`` keeps it in a
frozen, fingerprinted config; ``python -m dynbsz profile`` writes it from a real dataset.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from .errors import ConfigError
from .factory import one_line
from .workload import Trace

FORMAT = "dynbsz.cost_model/1"
#: The source a model falls back to for a sample whose source it was not fitted on.
ANY_SOURCE = "*"


@dataclass(frozen=True)
class SourceCost:
    """Seconds to decode one sample of a source: ``base_s + per_token_s * tokens``."""

    base_s: float
    per_token_s: float

    def __post_init__(self) -> None:
        for name in ("base_s", "per_token_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ConfigError(f"cost model {name} must be a finite number of seconds >= 0, got {v!r}")


@dataclass(frozen=True)
class CostModel:
    """Per-source linear decode costs, fitted by least squares (non-negative) on a profiled trace.

    ``sources`` maps a source name to its ``SourceCost``; ``ANY_SOURCE`` (``"*"``), fitted on
    every sample together, covers a source the trace did not hold.
    """

    sources: tuple[tuple[str, SourceCost], ...]

    def __post_init__(self) -> None:
        names = [name for name, _ in self.sources]
        if not names:
            raise ConfigError("a cost model needs at least one source")
        if len(set(names)) != len(names):
            raise ConfigError(f"cost model sources must be distinct, got {names}")

    @property
    def by_source(self) -> dict[str, SourceCost]:
        return dict(self.sources)

    def estimate(self, meta: Mapping[str, Any]) -> float:
        """Seconds for one sample from its metadata: ``tokens`` (required) and ``source`` (optional)."""
        tokens = meta.get("tokens") if isinstance(meta, Mapping) else None
        if isinstance(tokens, bool) or not isinstance(tokens, (int, np.integer)) or tokens < 0:
            raise ConfigError(f"the cost model needs meta['tokens'] (an integer >= 0) for every sample, got "
                              f"{meta!r}; return it from meta_fn")
        by = self.by_source
        c = by.get(str(meta.get("source")), by.get(ANY_SOURCE))
        if c is None:
            raise ConfigError(f"the cost model has no source {meta.get('source')!r} and no fallback "
                              f"{ANY_SOURCE!r}; its sources: {', '.join(by)}")
        return c.base_s + c.per_token_s * int(tokens)

    @classmethod
    def fit(cls, trace: Trace) -> "CostModel":
        """Fit each source's base and per-token cost on its rows, and a fallback on all of them."""
        if len(trace) == 0:
            raise ConfigError("cannot fit a cost model on an empty trace")
        names = trace.source_names
        fitted = [(names[s], _fit(trace.tokens[trace.source == s], trace.cost_s[trace.source == s]))
                  for s in sorted(set(trace.source.tolist()))]
        fitted.append((ANY_SOURCE, _fit(trace.tokens, trace.cost_s)))
        return cls(tuple(fitted))

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "sources": {name: {"base_s": c.base_s, "per_token_s": c.per_token_s}
                                              for name, c in self.sources}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CostModel":
        if not isinstance(d, Mapping) or d.get("format") != FORMAT:
            got = d.get("format") if isinstance(d, Mapping) else type(d).__name__
            raise ConfigError(f"cost_model must be a dict of format {FORMAT!r} (python -m dynbsz profile writes "
                              f"one), got {got!r}")
        sources = d.get("sources")
        if not isinstance(sources, Mapping):
            raise ConfigError("cost_model['sources'] must map source names to {'base_s': ..., 'per_token_s': ...}")
        out = []
        for name, c in sources.items():
            if not isinstance(c, Mapping) or set(c) != {"base_s", "per_token_s"}:
                raise ConfigError(f"cost_model source {name!r} must be {{'base_s': ..., 'per_token_s': ...}}, "
                                  f"got {c!r}")
            out.append((str(name), SourceCost(float(c["base_s"]), float(c["per_token_s"]))))
        return cls(tuple(out))


def _fit(tokens: np.ndarray, cost_s: np.ndarray) -> SourceCost:
    """Least squares of cost on (1, tokens) with both coefficients kept >= 0 (a negative base or
    slope would give some sample a negative cost)."""
    x = np.asarray(tokens, dtype=np.float64)
    y = np.asarray(cost_s, dtype=np.float64)
    if len(x) == 1 or np.ptp(x) == 0:
        return SourceCost(float(max(y.mean(), 0.0)), 0.0)
    slope, base = np.polyfit(x, y, 1)
    if slope < 0:
        return SourceCost(float(max(y.mean(), 0.0)), 0.0)
    if base < 0:   # through the origin: the best non-negative slope alone
        return SourceCost(0.0, float(max((x @ y) / (x @ x), 0.0)))
    return SourceCost(float(base), float(slope))


def estimate_costs(num_samples: int, meta_fn: Callable[[int], Mapping[str, Any]],
                   estimate: Callable[[Mapping[str, Any]], float]) -> np.ndarray:
    """``estimate(meta_fn(i))`` for every dataset index, checked: a failure names the index."""
    out = np.empty(num_samples, dtype=np.float64)
    for i in range(num_samples):
        try:
            c = estimate(meta_fn(i))
        except Exception as e:  # noqa: BLE001 - user code: name the index and the cause in one line
            raise ConfigError(f"estimating the decode cost of sample {i} failed: {one_line(e)}") from e
        if isinstance(c, bool) or not isinstance(c, (int, float, np.floating, np.integer)) or not math.isfinite(c) \
                or c < 0:
            raise ConfigError(f"the estimated decode cost of sample {i} must be a finite number of seconds >= 0, "
                              f"got {c!r}")
        out[i] = c
    return out


def costs_digest(costs: np.ndarray) -> str:
    """A short fingerprint of a cost vector: a checkpoint made on other estimates orders epochs differently."""
    return hashlib.sha256(np.ascontiguousarray(costs, dtype=np.float64).tobytes()).hexdigest()[:16]


class TraceMeta:
    """``meta_fn`` over a trace: what a main process knows of row ``i`` before decoding it (tokens, source;
    with ``cost_s``, also its true cost, for ``exact_cost``). The same metadata feeds the real loader
    (``build_loader(meta_fn=...)``) and ``trace_estimates``. Picklable."""

    def __init__(self, trace: Trace, cost_s: np.ndarray | None = None):
        self.tokens = trace.tokens.tolist()
        names = trace.source_names
        self.sources = [names[s] for s in trace.source.tolist()]
        self.cost_s = None if cost_s is None else np.asarray(cost_s, dtype=np.float64).tolist()
        if self.cost_s is not None and len(self.cost_s) != len(self.tokens):
            raise ConfigError(f"cost_s must hold one cost per trace row ({len(self.tokens)}), got {len(self.cost_s)}")

    def __call__(self, index: int) -> dict:
        meta = {"tokens": self.tokens[index], "source": self.sources[index]}
        if self.cost_s is not None:
            meta["cost_s"] = self.cost_s[index]
        return meta


def exact_cost(meta: Mapping) -> float:
    """``cost_fn`` of the exact-cost case: the true cost ``TraceMeta(trace, cost_s=...)`` carries."""
    return meta["cost_s"]
