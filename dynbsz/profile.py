"""Profile a real map-style dataset: time every ``__getitem__`` in real worker processes.

``python -m dynbsz profile`` (docs/profile.md) and Python code share these functions:

    load_dataset(spec)          ``MODULE:FACTORY`` -> a map-style dataset, or one ConfigError line
    choose_indices(n, N, seed)  the first N indices, or a seeded random subset
    profile_dataset(...)        -> ProfileResult: the trace, the fitted CostModel, the first failure

What is timed is the user's ``dataset[i]`` and nothing else, inside the worker that runs it
(``time.perf_counter`` around the call). The worker sends back ``(index, tokens, seconds,
source)`` or ``(index, cause)``, never the sample: pickling the payload, the queue and any
collate are not charged to the sample. Results come back in the order the indices were given
(torch's ``in_order=True``), so the first failure in that order stops the run and every row
before it is complete.
"""

from __future__ import annotations

import math
import operator
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from torch.utils.data import Dataset, IterableDataset
from torchdata.stateful_dataloader import StatefulDataLoader

from .costs import ANY_SOURCE, CostModel
from .errors import ConfigError, check_int
from .factory import load_object, one_line
from .loader_base import default_source, default_tokens, identity, torchdata_quiet
from .workload import Trace

#: The source of a sample whose ``source_fn`` returns None.
DEFAULT_SOURCE = "default"
#: How many samples ``python -m dynbsz profile`` reads when ``--samples`` is not given (fewer if the dataset is smaller).
DEFAULT_SAMPLES = 1000


# ---- the dataset ------------------------------------------------------------------------------------

def load_dataset(spec: str) -> Any:
    """Import ``MODULE:FACTORY``, call it with no arguments, check it returned a map-style dataset.

    Every failure is a ``ConfigError`` of one line: the spec does not import, the factory raised
    (its exception as one line), or what it returned has no ``__len__``/``__getitem__``.
    """
    factory = load_object(spec, setting="--dataset", example="mypkg.data:make_dataset")
    if not callable(factory):
        raise ConfigError(f"--dataset {spec!r} names a {type(factory).__name__}, not a factory; name a function "
                          "that takes no arguments and returns a map-style dataset")
    try:
        dataset = factory()
    except Exception as e:  # noqa: BLE001 - the user's factory: its failure is theirs to read, in one line
        raise ConfigError(f"--dataset {spec!r}: the factory raised {one_line(e)}") from None
    check_map_style(dataset, f"--dataset {spec!r} returned")
    return dataset


def check_map_style(dataset: Any, what: str = "profile_dataset got") -> int:
    """The dataset's length, after checking it is map-style (``__len__`` and ``__getitem__``)."""
    if isinstance(dataset, IterableDataset) or not (hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__")):
        raise ConfigError(f"{what} an object of type {type(dataset).__name__}, not a map-style dataset (__len__ and __getitem__): "
                          "a profile reads samples by index")
    try:
        n = len(dataset)
    except Exception as e:  # noqa: BLE001 - user code
        raise ConfigError(f"{what} a dataset whose len() raised {one_line(e)}") from None
    return n


def choose_indices(num_samples: int, samples: int, seed: int | None = None) -> np.ndarray:
    """The indices to profile: the first ``samples`` of ``num_samples``, or with a ``seed`` a random
    subset without repeats (``numpy.random.default_rng(seed)``), in the order it is drawn."""
    check_int("--samples", samples, minimum=1)
    if samples > num_samples:
        raise ConfigError(f"--samples {samples} is more than the dataset's {num_samples} samples")
    if seed is None:
        return np.arange(samples, dtype=np.int64)
    check_int("--seed", seed, minimum=0)
    return np.random.default_rng(seed).choice(num_samples, size=samples, replace=False).astype(np.int64)


class FieldTokens:
    """``tokens_fn`` reading one field (``--tokens-field NAME``): a mapping's key or an attribute. An
    integer is the token length; anything with a length (a list or tensor of token ids) counts by
    its length. Module level, so it pickles under spawn."""

    def __init__(self, name: str):
        if not isinstance(name, str) or not name:
            raise ConfigError(f"--tokens-field must be a field name, got {name!r}")
        self.name = name

    def __call__(self, sample: Any) -> Any:
        if isinstance(sample, Mapping):
            if self.name not in sample:
                raise ConfigError(f"the sample has no field {self.name!r} (its fields: {_fields(sample)})")
            value = sample[self.name]
        elif hasattr(sample, self.name):
            value = getattr(sample, self.name)
        else:
            raise ConfigError(f"the sample ({type(sample).__name__}) has no field {self.name!r}")
        if _is_int(value):
            return value
        return len(value) if hasattr(value, "__len__") else value


def _fields(sample: Mapping) -> str:
    keys = [str(k) for k in list(sample)[:8]]
    return ", ".join(keys) + (", ..." if len(sample) > 8 else "") if keys else "none"


def _is_int(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


class TimedDataset(Dataset):
    """Wraps the user's dataset: ``self[i]`` times ``dataset[i]`` and returns ``(i, tokens, seconds,
    source)``, or ``(i, cause)`` when the sample cannot be profiled (it raised, has no token length,
    or a bad source). Never the sample itself. Module level, so it pickles under spawn."""

    def __init__(self, dataset: Any, tokens_fn: Callable[[Any], Any] = default_tokens,
                 source_fn: Callable[[Any], Any] = default_source):
        self.dataset = dataset
        self.tokens_fn = tokens_fn
        self.source_fn = source_fn

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int) -> tuple:
        t0 = time.perf_counter()
        try:
            sample = self.dataset[i]
        except Exception as e:  # noqa: BLE001 - user code: reported, with the sample's index, in one line
            return (i, f"__getitem__ raised {_line(e)}")
        seconds = time.perf_counter() - t0
        try:
            tokens = self.tokens_fn(sample)
        except Exception as e:  # noqa: BLE001 - user code
            return (i, f"no token length: {self._tokens_hint(sample, e)}")
        if not _is_int(tokens) or operator.index(tokens) < 0:
            return (i, f"the token length must be an integer >= 0, got {_short(tokens)} ({type(tokens).__name__})")
        try:
            source = self.source_fn(sample)
        except Exception as e:  # noqa: BLE001 - user code
            return (i, f"source_fn raised {_line(e)}")
        source = DEFAULT_SOURCE if source is None else str(source)
        if not source.strip() or source != source.strip() or any(c in source for c in ",\r\n") \
                or source == ANY_SOURCE:
            return (i, f"source {source!r} is not a usable source name (non-empty, no commas, line breaks or "
                       f"surrounding spaces, not {ANY_SOURCE!r}, which names the cost model's fallback)")
        return (i, operator.index(tokens), seconds, source)

    def _tokens_hint(self, sample: Any, e: Exception) -> str:
        if self.tokens_fn is default_tokens:
            what = f"a {type(sample).__name__}" + (f" with fields {_fields(sample)}" if isinstance(sample, Mapping)
                                                    else "")
            return (f"the sample ({what}) has no 'tokens' or 'input_ids' field; name the field with --tokens-field "
                    "NAME (tokens_fn=... from Python)")
        return _line(e)


def _line(e: BaseException) -> str:
    try:
        return one_line(e)
    except Exception:  # noqa: BLE001 - an exception whose str() raises still gets named
        return type(e).__name__


def _short(value: Any, limit: int = 60) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001
        text = f"<{type(value).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


# ---- the run ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SampleFailure:
    """Why profiling stopped: the sample (a dataset index) and the cause, as one line."""

    index: int
    cause: str

    def line(self) -> str:
        return f"profile: sample {self.index}: {self.cause}"


@dataclass(frozen=True)
class SourceStats:
    """One source's profiled samples and its fitted cost (``name == "*"``: all samples, the fallback)."""

    name: str
    samples: int
    mean_tokens: float
    mean_cost_s: float
    base_s: float
    per_token_s: float
    fit_error: float   # mean |fitted - measured| / mean measured, over the source's samples

    def to_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "mean_tokens": self.mean_tokens, "mean_cost_s": self.mean_cost_s,
                "base_s": self.base_s, "per_token_s": self.per_token_s, "fit_error": self.fit_error}


@dataclass(frozen=True)
class ProfileResult:
    """``trace``: one complete row per profiled sample (ids are dataset indices), in the order
    read. ``cost_model``: fitted on the trace, None when it is empty or the run failed.
    ``error``: the first sample that could not be profiled, or None. ``seconds``: wall time,
    worker start-up included."""

    trace: Trace
    cost_model: CostModel | None
    error: SampleFailure | None
    seconds: float
    requested: int
    workers: int
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    def stats(self) -> list[SourceStats]:
        """Per source, by name, then the fallback ``"*"`` over every sample (empty
        without a cost model)."""
        if self.cost_model is None or len(self.trace) == 0:
            return []
        t = self.trace
        by = self.cost_model.by_source
        out = []
        for name in [*sorted(t.source_names), ANY_SOURCE]:
            mask = np.ones(len(t), dtype=bool) if name == ANY_SOURCE else t.source == t.source_names.index(name)
            if not mask.any():
                continue
            tokens, cost, c = t.tokens[mask], t.cost_s[mask], by[name]
            fitted = c.base_s + c.per_token_s * tokens
            mean = float(cost.mean())
            err = float(np.abs(fitted - cost).mean() / mean) if mean > 0 else 0.0
            out.append(SourceStats(name, int(mask.sum()), float(tokens.mean()), mean, c.base_s, c.per_token_s, err))
        return out


def profile_dataset(dataset: Any, indices: Sequence[int] | np.ndarray, *, workers: int = 0,
                    tokens_fn: Callable[[Any], Any] = default_tokens,
                    source_fn: Callable[[Any], Any] = default_source,
                    on_progress: Callable[[int, int, str], None] | None = None, timeout_s: float = 0.0,
                    prefetch_factor: int = 2, start_method: str | None = None) -> ProfileResult:
    """Read ``dataset[i]`` for each of ``indices`` through a ``StatefulDataLoader`` with ``workers``
    worker processes (0: in this process), timing each call where it runs.

    Stops at the first sample (in the order of ``indices``) that raises, has no token length or
    a bad source, or at a loader failure (a worker that died, ``timeout_s`` exceeded, Ctrl-C); the
    result keeps every sample read before it. ``on_progress(done, total, what)`` is called after
    each sample.
    """
    check_map_style(dataset)
    check_int("workers", workers, minimum=0)
    idx = [operator.index(i) for i in np.asarray(indices).tolist()]
    if not math.isfinite(timeout_s) or timeout_s < 0:
        raise ConfigError(f"timeout_s must be a finite number of seconds >= 0, got {timeout_s!r}")
    if timeout_s and not workers:
        raise ConfigError("timeout_s applies to worker processes; workers=0 has none")
    kw: dict[str, Any] = dict(batch_size=1, sampler=idx, num_workers=workers, collate_fn=identity,
                              timeout=timeout_s, in_order=True)
    if workers:
        kw.update(prefetch_factor=prefetch_factor, multiprocessing_context=start_method)
    rows: list[tuple[int, int, float, str]] = []
    error: SampleFailure | None = None
    interrupted = False
    t0 = time.perf_counter()
    with torchdata_quiet():
        loader = StatefulDataLoader(TimedDataset(dataset, tokens_fn, source_fn), **kw)
    try:
        it = iter(loader)
    except Exception as e:  # noqa: BLE001 - e.g. a dataset that does not pickle under spawn
        return ProfileResult(Trace.from_rows([]), None, SampleFailure(idx[0] if idx else 0, f"the loader could not "
                             f"start: {_line(e)}"), time.perf_counter() - t0, len(idx), workers)
    try:
        while len(rows) < len(idx):
            try:
                (record,) = next(it)
            except StopIteration:
                error = SampleFailure(idx[len(rows)], "the loader ended before this sample")
                break
            except KeyboardInterrupt:
                interrupted = True
                error = SampleFailure(idx[len(rows)], "interrupted (KeyboardInterrupt) before this sample finished")
                break
            except Exception as e:  # noqa: BLE001 - the loader itself failed: name where it stood
                error = SampleFailure(idx[len(rows)], f"the loader failed at or after this sample: {_line(e)}")
                break
            if len(record) == 2:
                error = SampleFailure(record[0], record[1])
                break
            rows.append(record)
            if on_progress is not None:
                on_progress(len(rows), len(idx), f"sample {record[0]}")
    finally:
        del it   # shuts the workers down now, not at the next garbage collection
    seconds = time.perf_counter() - t0
    trace = Trace.from_rows(rows)
    model = CostModel.fit(trace) if rows and error is None else None
    return ProfileResult(trace, model, error, seconds, len(idx), workers, interrupted)


# ---- output -------------------------------------------------------------------------------------------

def cost_model_path(out: str | Path) -> Path:
    """Where the cost model goes by default: beside the trace, ``trace.csv`` -> ``trace.cost.json``."""
    return Path(out).with_suffix(".cost.json")


def format_text(result: ProfileResult, dataset: str = "the dataset") -> str:
    """The human-readable report: what was read, then per source its samples, mean tokens and cost,
    the fitted base and per-1K-token cost and the fit's relative error."""
    from .tables import pct, table

    t = result.trace
    head = (f"profiled {len(t)} of {result.requested} samples of {dataset} in {result.seconds:.2f} s "
            f"({result.workers} worker{'s' if result.workers != 1 else ''}; decode time "
            f"{t.total_cost_s():.2f} s in all)")
    stats = result.stats()
    if not stats:
        return head
    rows = [(s.name if s.name != ANY_SOURCE else "* (all)", s.samples, f"{s.mean_tokens:,.1f}",
             f"{1e3 * s.mean_cost_s:.3f}", f"{1e3 * s.base_s:.3f}", f"{1e6 * s.per_token_s:.3f}", pct(s.fit_error, 1))
            for s in stats]
    return head + "\n" + table(("source", "samples", "mean tokens", "mean ms", "base ms", "ms per 1K tokens",
                                "fit error"), rows)


def to_json(result: ProfileResult, *, dataset: str | None = None, trace_path: str | None = None,
            cost_model_path: str | None = None) -> dict[str, Any]:
    """The ``--json`` document: samples, seconds, per-source stats, the cost model's dict, the paths
    written, the error (or null)."""
    return {
        "dataset": dataset, "samples": len(result.trace), "requested": result.requested, "workers": result.workers,
        "seconds": result.seconds, "decode_seconds": result.trace.total_cost_s(),
        "sources": {s.name: s.to_dict() for s in result.stats()},
        "cost_model": result.cost_model.to_dict() if result.cost_model is not None else None,
        "written": {"trace": trace_path, "cost_model": cost_model_path},
        "error": None if result.error is None else {"index": result.error.index, "cause": result.error.cause},
    }
