"""``fuzz --workers N``: one campaign in N processes on one machine.

The (property, component) pairs are dealt out by position (``fuzz(shard=(i, N))``), each process resolves the
target by name and fuzzes its share until the same deadline, and all of them write one Hypothesis example
database (a directory, which Hypothesis keeps safe for concurrent writers), so a failure one process found is
replayed first by every later run. A pair runs with the seeds it would have in a single process: only the time
it gets changes. The reports merge into one, with each worker's examples and rate.
"""

from __future__ import annotations

import functools
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable

from . import trainers
from .fuzz import FuzzReport, fuzz
from .targets import resolve


def _prefixed(progress: Callable[[str], None], index: int, line: str) -> None:
    progress(f"[worker {index}] {line}")


def _shard(target: str, index: int, count: int, chosen_trainers: tuple[str, ...] | None,
           progress: Callable[[str], None], kw: dict[str, Any]) -> FuzzReport:
    with trainers.only(chosen_trainers):
        return fuzz(resolve(target), shard=(index, count), progress=functools.partial(_prefixed, progress, index),
                    **kw)


def merge(reports: list[FuzzReport]) -> FuzzReport:
    """One report of a campaign run in shards: every shard's pairs and saved files, the skips of shard 0."""
    first = reports[0]
    merged = FuzzReport(first.target, first.seed, first.minutes, rounds=max(r.rounds for r in reports))
    for i, r in enumerate(reports):
        merged.pairs += r.pairs
        merged.saved += r.saved
        merged.skipped += r.skipped
        examples, seconds = sum(p.examples for p in r.pairs), sum(p.seconds for p in r.pairs)
        merged.workers.append({"worker": i, "pairs": len(r.pairs), "examples": examples, "rounds": r.rounds,
                               "seconds": round(seconds, 3),
                               "examples_per_s": round(examples / seconds, 3) if seconds > 0 else 0.0})
    return merged


def _quiet(line: str) -> None:
    pass


def _adopt_start_method(method: str) -> None:
    # a function of this module, not multiprocessing.set_start_method itself: that is a bound method of the
    # default context, and unpickling it in the child would set the start method of a copy
    multiprocessing.set_start_method(method, force=True)


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """The processes a campaign runs in. Spawned: a fresh interpreter each, so no lock or thread of this process
    is inherited mid-state (the loader properties start DataLoader workers of their own inside each). Each then
    takes this process's default start method: a spawned process makes spawn its own default, so a scenario's
    ``start_method=None`` (the platform default) would start every DataLoader worker as a fresh interpreter
    importing torch, a configuration one process never tests, and four to eight times the cost per loader
    example (the 0.23x of docs/data/bench-fuzz-2026-12-04.json)."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_adopt_start_method, initargs=(multiprocessing.get_start_method(),))


def fuzz_in_workers(target: str, workers: int, *, chosen_trainers: tuple[str, ...] | None = None,
                    progress: Callable[[str], None] = _quiet, **kw: Any) -> FuzzReport:
    """``fuzz`` over ``workers`` processes (``kw``: ``fuzz``'s keywords but the target and shard). ``progress`` is
    called in each worker with its lines, prefixed ``[worker i]``: a module-level function (it is pickled)."""
    if workers < 1:
        raise ValueError(f"workers={workers}: at least 1")
    with worker_pool(workers) as pool:
        futures = [pool.submit(_shard, target, i, workers, chosen_trainers, progress, kw) for i in range(workers)]
        return merge([f.result() for f in futures])
