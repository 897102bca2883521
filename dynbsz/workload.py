"""Workloads: who the samples are (token length, decode cost, source), seeded or from a trace file.

One description feeds the synthetic datasets the loader tests and benchmarks
read, the simulator, and the GPU job, so they all talk about the same samples.

A ``Workload`` is a mixture of ``SourceSpec``s. Each source draws token lengths
from a (clipped) lognormal and spends ``cost_base_s + cost_per_token_s *
tokens`` seconds to decode a sample, times lognormal noise. ``Workload.sample``
turns it into a ``Trace``: plain columns, one row per sample. Traces also read
from and write to CSV with the header ``id,tokens,cost_s,source``.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from functools import cached_property
from itertools import repeat
from pathlib import Path
from typing import Iterable

import numpy as np

from .errors import ConfigError, check_int

TRACE_COLUMNS = ("id", "tokens", "cost_s", "source")


class TraceError(ConfigError):
    """A trace file is malformed; the message names the line."""


@dataclass(frozen=True)
class SourceSpec:
    name: str
    weight: float = 1.0
    median_tokens: float = 2048.0
    sigma: float = 1.0
    min_tokens: int = 2
    max_tokens: int | None = None
    cost_base_s: float = 0.0
    cost_per_token_s: float = 0.0
    cost_noise: float = 0.0

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str) or "," in self.name:
            raise ConfigError(f"source name must be a non-empty string without commas, got {self.name!r}")
        for setting in ("weight", "median_tokens", "sigma", "cost_base_s", "cost_per_token_s", "cost_noise"):
            value = getattr(self, setting)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"{self.name}: {setting} must be a finite number >= 0, got {value!r}")
        if self.median_tokens <= 0:
            raise ConfigError(f"{self.name}: median_tokens must be > 0, got {self.median_tokens!r}")
        check_int(f"{self.name}: min_tokens", self.min_tokens, minimum=1)
        if self.max_tokens is not None:
            check_int(f"{self.name}: max_tokens", self.max_tokens, minimum=self.min_tokens)


@dataclass(frozen=True)
class Trace:
    """Columns of equal length; row i is sample ``ids[i]`` in sampler order."""

    ids: np.ndarray          # int64
    tokens: np.ndarray       # int64, >= 0
    cost_s: np.ndarray       # float64, >= 0
    source: np.ndarray       # int index into source_names
    source_names: tuple[str, ...] = field(default=("text",))

    def __post_init__(self) -> None:
        n = len(self.ids)
        if not (len(self.tokens) == len(self.cost_s) == len(self.source) == n):
            raise ConfigError("trace columns must have equal lengths")

    def __len__(self) -> int:
        return len(self.ids)

    def sources(self) -> list[str]:
        names = self.source_names
        return [names[i] for i in self.source.tolist()]

    @cached_property
    def put_rows(self) -> list[tuple]:
        """Row i as ``dynbsz.packing.pack`` puts it: ``(sample_id, tokens, None, source name)`` (no physical
        length). Built once per trace, on first use: a study packs one trace under dozens of gates."""
        return list(zip(self.ids.tolist(), self.tokens.tolist(), repeat(None), self.sources()))

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("put_rows", None)     # a cache: rebuilt where it is needed, not shipped to other processes
        return state

    def total_cost_s(self) -> float:
        return float(self.cost_s.sum())

    def subset(self, index: np.ndarray | slice) -> "Trace":
        return Trace(self.ids[index], self.tokens[index], self.cost_s[index], self.source[index], self.source_names)

    def to_csv(self, path: str | Path) -> None:
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(TRACE_COLUMNS)
            for i, t, c, s in zip(self.ids.tolist(), self.tokens.tolist(), self.cost_s.tolist(), self.sources()):
                w.writerow((i, t, repr(c), s))

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[int, int, float, str]]) -> "Trace":
        ids, toks, costs, srcs = [], [], [], []
        for i, t, c, s in rows:
            ids.append(i), toks.append(t), costs.append(c), srcs.append(s)
        names = tuple(dict.fromkeys(srcs)) or ("text",)
        index = {n: k for k, n in enumerate(names)}
        return cls(np.array(ids, dtype=np.int64), np.array(toks, dtype=np.int64), np.array(costs, dtype=np.float64),
                   np.array([index[s] for s in srcs], dtype=np.int64), names)

    @classmethod
    def read_csv(cls, path: str | Path) -> "Trace":
        """Read a trace; every malformed row is reported with its line number."""
        with open(path, newline="") as f:
            reader = csv.reader(f)
            try:
                header = [h.strip() for h in next(reader)]
            except StopIteration:
                raise TraceError(f"{path}: line 1: empty file; expected the header {','.join(TRACE_COLUMNS)}") from None
            missing = [c for c in TRACE_COLUMNS if c not in header]
            if missing:
                raise TraceError(f"{path}: line 1: missing column(s) {', '.join(missing)}; "
                                 f"the header must name {','.join(TRACE_COLUMNS)}")
            col = {c: header.index(c) for c in TRACE_COLUMNS}
            rows, seen = [], set()
            for line, row in enumerate(reader, start=2):
                if not row or all(not x.strip() for x in row):
                    continue
                if len(row) != len(header):
                    raise TraceError(f"{path}: line {line}: {len(row)} fields, the header has {len(header)}")
                sid = _parse_int(path, line, "id", row[col["id"]], minimum=0)
                if sid in seen:
                    raise TraceError(f"{path}: line {line}: duplicate id {sid}")
                seen.add(sid)
                tokens = _parse_int(path, line, "tokens", row[col["tokens"]], minimum=0)
                try:
                    cost = float(row[col["cost_s"]])
                except ValueError:
                    raise TraceError(f"{path}: line {line}: cost_s must be a number of seconds, "
                                     f"got {row[col['cost_s']]!r}") from None
                if not math.isfinite(cost) or cost < 0:
                    raise TraceError(f"{path}: line {line}: cost_s must be a finite number >= 0, got {cost!r}")
                source = row[col["source"]].strip()
                if not source:
                    raise TraceError(f"{path}: line {line}: source is empty")
                rows.append((sid, tokens, cost, source))
        if not rows:
            raise TraceError(f"{path}: no samples after the header")
        return cls.from_rows(rows)


def _parse_int(path, line: int, column: str, text: str, minimum: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise TraceError(f"{path}: line {line}: {column} must be a non-negative integer, got {text!r}") from None
    if value < minimum:
        raise TraceError(f"{path}: line {line}: {column} must be a non-negative integer, got {value}")
    return value


@dataclass(frozen=True)
class Workload:
    """A seeded mixture of sources. ``sample(n, seed)`` is a pure function of its arguments."""

    sources: tuple[SourceSpec, ...] = (SourceSpec("text"),)

    def __post_init__(self) -> None:
        if not self.sources:
            raise ConfigError("a workload needs at least one source")
        names = [s.name for s in self.sources]
        if len(set(names)) != len(names):
            raise ConfigError(f"source names must be unique, got {names}")
        if sum(s.weight for s in self.sources) <= 0:
            raise ConfigError("at least one source must have weight > 0")

    @property
    def source_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.sources)

    def sample(self, n: int, seed: int | np.random.Generator) -> Trace:
        check_int("n", n, minimum=0)
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        weights = np.array([s.weight for s in self.sources], dtype=np.float64)
        which = rng.choice(len(self.sources), size=n, p=weights / weights.sum())
        tokens = np.empty(n, dtype=np.int64)
        cost = np.empty(n, dtype=np.float64)
        for k, spec in enumerate(self.sources):
            mask = which == k
            m = int(mask.sum())
            lengths = rng.lognormal(math.log(spec.median_tokens), spec.sigma, m) if spec.sigma > 0 else \
                np.full(m, spec.median_tokens)
            lengths = np.maximum(spec.min_tokens, np.rint(lengths)).astype(np.int64)
            if spec.max_tokens is not None:
                lengths = np.minimum(lengths, spec.max_tokens)
            noise = rng.lognormal(0.0, spec.cost_noise, m) if spec.cost_noise > 0 else 1.0
            tokens[mask] = lengths
            cost[mask] = (spec.cost_base_s + spec.cost_per_token_s * lengths) * noise
        return Trace(np.arange(n, dtype=np.int64), tokens, cost, which.astype(np.int64), self.source_names)


def with_cost_noise(trace: Trace, sigma: float, seed: int) -> Trace:
    """The trace with each sample's cost times a seeded lognormal factor: the true costs a run sees,
    which a cost model fitted on ``trace`` can only estimate (bench-loader's and the skew study's draw)."""
    if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not math.isfinite(sigma) or sigma < 0:
        raise ConfigError(f"cost noise sigma must be a finite number >= 0, got {sigma!r}")
    if sigma == 0:
        return trace
    factor = np.random.default_rng([seed, 1]).lognormal(0.0, sigma, len(trace))
    return Trace(trace.ids, trace.tokens, trace.cost_s * factor, trace.source, trace.source_names)


#: The loader benchmark's mix: 80% text at 2 ms a sample, 20% video at 20 ms (the in_order=False use case).
LOADER_BENCH_MIX = Workload((SourceSpec("text", 0.8, median_tokens=1000, sigma=0.5, cost_base_s=0.002),
                             SourceSpec("video", 0.2, median_tokens=8000, sigma=0.3, cost_base_s=0.020)))


#: Rarer slow samples, where a fixed lookahead of 32 falls short: a tenth of video at 40 ms behind
#: images and text (``three_source``), and a tenth of the bench mix's video (``sparse_video``).
THREE_SOURCE = Workload((SourceSpec("text", 0.7, median_tokens=1000, sigma=0.5, cost_base_s=0.002),
                         SourceSpec("image", 0.2, median_tokens=3000, sigma=0.3, cost_base_s=0.008),
                         SourceSpec("video", 0.1, median_tokens=8000, sigma=0.3, cost_base_s=0.040)))
SPARSE_VIDEO = Workload((SourceSpec("text", 0.9, median_tokens=1000, sigma=0.5, cost_base_s=0.002),
                         SourceSpec("video", 0.1, median_tokens=8000, sigma=0.3, cost_base_s=0.020)))


def text_workload(median_tokens: float = 2048.0, sigma: float = 1.0) -> Workload:
    """Single-source text with lognormal lengths: the packer benchmark's stream."""
    return Workload((SourceSpec("text", median_tokens=median_tokens, sigma=sigma),))
