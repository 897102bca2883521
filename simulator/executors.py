"""Where a study's independent simulations run: ``--executor serial | processes:N | dask://HOST:PORT``.

A study (``policy``, ``derive-auto``, ``cold-start`` and ``sweep``, ``advise``) is a list of points, each a
pure function of its arguments. ``run_points`` maps a module-level function over them on any
``concurrent.futures.Executor`` and returns the results in submission order, so a study's output is the
same whatever ran it (only its ``seconds`` / ``wall_s`` fields, wall clock, differ).

    serial             each call runs in this process when it is submitted: nothing is pickled
    processes:N        a ``ProcessPoolExecutor`` of N worker processes on this machine
    dask://HOST:PORT   the workers of a Dask ``distributed`` scheduler (the ``dask`` extra:
                       ``pip install '.[dask]'``); every worker needs this project installed
"""

from __future__ import annotations

import contextlib
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from dynbsz.errors import ConfigError, check_int
from dynbsz.factory import one_line

from . import machine

SETTING = "--executor"
FORMS = ("serial", "processes:N", "dask://HOST:PORT")
DASK_EXTRA = "pip install '.[dask]'"
KINDS = ("serial", "processes", "dask")


@dataclass(frozen=True)
class ExecutorSpec:
    """A parsed ``--executor``: ``kind`` is one of ``KINDS``; ``workers`` counts processes (``processes:N``);
    ``address`` is a Dask scheduler's ``HOST:PORT``."""

    kind: str
    workers: int = 1
    address: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"{SETTING}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        check_int(f"{SETTING} processes:N", self.workers, minimum=1)

    def __str__(self) -> str:
        if self.kind == "processes":
            return f"processes:{self.workers}"
        if self.kind == "dask":
            return f"dask://{self.address}"
        return "serial"


#: What a study process is sized for: the heaviest point of the default policy grid (seed_8w at 128K, DP 8)
#: peaks at 0.61 GB of resident memory (docs/simulator.md, ``/usr/bin/time -v``); a GiB leaves room for a
#: user's larger streams.
PROCESS_MEMORY_BYTES = 1 << 30
#: How the default is described where a CLI names it.
DEFAULT_PROCESSES = "processes:CPUs (one per usable CPU, at most one per GiB of memory and one per point)"


def default_processes(points: int | None = None, *, cpus: int | None = None, memory_bytes: int | None = None) -> int:
    """How many processes a study runs on by default: one per usable CPU (``simulator.machine``: the affinity
    mask within a container's CPU quota), at most one per ``PROCESS_MEMORY_BYTES`` of the memory this process
    may use (the machine's, within a container's limit) and one per point (a process with no point only costs its
    start), at least one. The results are the same on any count; only the wall time changes."""
    if cpus is None or memory_bytes is None:
        found_cpus, found_memory = machine.available()
        cpus = found_cpus if cpus is None else cpus
        memory_bytes = found_memory if memory_bytes is None else memory_bytes
    n = cpus
    if memory_bytes is not None:
        n = min(n, memory_bytes // PROCESS_MEMORY_BYTES)
    if points is not None:
        n = min(n, points)
    return max(1, n)


def _bad(text: object, why: str = "") -> ConfigError:
    return ConfigError(f"{SETTING} {text!r}{': ' + why if why else ''} (expected one of {', '.join(FORMS)}: "
                       "serial, N >= 1 worker processes, or a Dask scheduler such as dask://10.0.0.5:8786)")


def parse_executor(text: str | ExecutorSpec) -> ExecutorSpec:
    """``serial``, ``processes:N`` (N >= 1) or ``dask://HOST:PORT``; anything else is a one-line ConfigError
    naming ``--executor`` and the forms it allows."""
    if isinstance(text, ExecutorSpec):
        return text
    if not isinstance(text, str):
        raise _bad(text, f"a spec is text, got {type(text).__name__}")
    t = text.strip()
    if t == "serial":
        return ExecutorSpec("serial")
    if t.startswith("processes:"):
        n = t.partition(":")[2]
        if not n.isdigit() or int(n) < 1:
            raise _bad(text, "N must be an integer >= 1")
        return ExecutorSpec("processes", workers=int(n))
    if t.startswith("dask://"):
        address = t[len("dask://"):]
        host, _, port = address.rpartition(":")
        if not host or "/" in address or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise _bad(text, "the scheduler's address is HOST:PORT, PORT in 1-65535")
        return ExecutorSpec("dask", address=address)
    raise _bad(text)


class SerialExecutor(Executor):
    """Runs each call in this process as it is submitted: no pickling, no other process, and an exception
    raised where it happened (KeyboardInterrupt is not caught into the future)."""

    def submit(self, fn: Callable, /, *args: Any, **kwargs: Any) -> Future:
        fut: Future = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except Exception as e:  # noqa: BLE001 - the future carries it to whoever reads the result
            fut.set_exception(e)
        return fut


@contextlib.contextmanager
def open_executor(executor: str | ExecutorSpec | Executor = "serial") -> Iterator[Executor]:
    """The executor a spec names, shut down on exit (pending calls cancelled when leaving on an error); an
    ``Executor`` given as it is stays the caller's to shut down."""
    if isinstance(executor, Executor):
        yield executor
        return
    spec = parse_executor(executor)
    if spec.kind == "serial":
        yield SerialExecutor()
        return
    if spec.kind == "processes":
        pool = ProcessPoolExecutor(max_workers=spec.workers)
        try:
            yield pool
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return
    client = _dask_client(spec)
    try:
        # pure=False: every call runs (a pure one is keyed by a hash of its arguments, trace included)
        cf = client.get_executor(pure=False)
        try:
            yield cf
        except BaseException:
            cf.shutdown(wait=False)      # ClientExecutor cancels its futures on wait=False
            raise
        cf.shutdown(wait=True)
    finally:
        client.close()


def _dask_client(spec: ExecutorSpec):
    try:
        import distributed
    except ImportError as e:
        raise ConfigError(f"{SETTING} {spec}: needs Dask's distributed, which does not import here ({one_line(e)}); "
                          f"install the dask extra: {DASK_EXTRA}") from None
    try:
        return distributed.Client(f"tcp://{spec.address}")
    except OSError as e:     # refused, unreachable, timed out (TimeoutError is an OSError)
        raise ConfigError(f"{SETTING} {spec}: cannot reach a Dask scheduler at {spec.address} ({one_line(e)}); "
                          f"start one with `dask scheduler` and workers with `dask worker {spec.address}`") from None


def run_points(fn: Callable, points: Sequence[tuple], executor: Executor,
               progress: Callable[[int, int, str], None] | None = None,
               labels: Sequence[str] | None = None, weights: Sequence[float] | None = None) -> list:
    """``[fn(*p) for p in points]`` on ``executor``, in the order of ``points`` whatever order they finish in;
    ``progress(done, len(points), labels[i])`` as point ``i`` finishes. ``fn`` must be a module-level function
    and the points picklable (a process or a Dask worker gets them by pickle). The first exception raised by
    a point is raised here, and the points not started are cancelled.

    ``weights``: a rough cost per point; the points are submitted heaviest first (ties in their own order), so
    the heaviest do not start last and leave the other processes idle at the end. Only the wall time changes."""
    n = len(points)
    results: list = [None] * n
    if weights is not None and len(weights) != n:
        raise ValueError(f"run_points: {len(weights)} weights for {n} points")
    order = range(n) if weights is None else sorted(range(n), key=lambda i: -weights[i])
    todo = deque((i, points[i]) for i in order)
    pending: dict[Future, int] = {}
    done = 0
    try:
        while todo or pending:
            while todo:
                i, args = todo.popleft()
                fut = executor.submit(fn, *args)
                pending[fut] = i
                if fut.done():   # an executor that runs calls as they are submitted: report before the next
                    break
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in sorted(finished, key=pending.__getitem__):
                i = pending.pop(fut)
                results[i] = fut.result()
                done += 1
                if progress:
                    progress(done, n, labels[i] if labels is not None else "")
    except BaseException:
        for fut in pending:
            fut.cancel()
        raise
    return results


__all__ = ["ExecutorSpec", "FORMS", "SerialExecutor", "default_processes", "open_executor", "parse_executor", "run_points"]
