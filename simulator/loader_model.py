"""torch's DataLoader dispatch and hand-out rules, as a discrete-event model.

Every rule here is a line of ``docs/internals/torch-dataloader-semantics.md``
(torch 2.13 ``_MultiProcessingDataLoaderIter``, torchdata 0.11
``_StatefulMultiProcessingDataLoaderIter``); the section numbers below point
there. In one paragraph:

* ``prefetch_factor * num_workers`` tasks are dispatched when an epoch's
  iterator is created (priming, §1.2); after that a task is dispatched only when
  a batch is *handed out* to the caller, or when an iterable worker reports it
  ran dry (§1.3). Never when a batch merely arrives.
* Dispatch (§1.4): the next worker in a cycle that every probe advances.
  ``in_order=True``: the next active worker, whatever its load.
  ``in_order=False``: the next active worker holding fewer than
  ``max_tasks // active_workers`` tasks (handed-out tasks only count down).
  No eligible worker: the index is dropped.
* Workers are FIFO single servers; a task's result arrives ``result_latency_s``
  after it finishes. Results share one queue, so the main process sees them in
  arrival order.
* Hand-out (§1.5): ``in_order=True`` hands out in send order, holding early
  arrivals in a reorder buffer (they keep their slot, so a slow task stalls
  dispatch too); ``in_order=False`` hands out whatever arrives first.
* Iterable datasets (§2.1): each worker iterates its own shard; a worker whose
  fetch finds nothing answers with a StopIteration message (it consumes a task
  slot and marks the worker inactive) and silently ignores every task queued
  behind it (phantoms: their slots are skipped, no reply ever comes).
* Epochs (§3): non-persistent workers are started at every ``iter()`` and pay
  ``worker_startup_s`` each time; persistent ones once. Nothing is prefetched
  across an epoch boundary. An iterable replica in a persistent worker keeps the
  epoch it was forked with.
* ``num_workers=0`` (§1.6): each ``next()`` fetches synchronously in the caller.
* dynbsz's reorder buffer (``reorder_buffer=N``, ``dynbsz.loader`` and ``dynbsz.sequencer``):
  torch runs as with ``in_order=False``, and the main process releases batches in send order,
  holding early arrivals. torch refills (dispatches) before the wrapper sees the batch it
  handed out, and while ``N`` samples or more are held the sampler gives a pause (a
  ``pause_s`` sleep in a worker, no sample) instead of the next batch; none once it is
  exhausted. The epoch ends when the last batch is released and every pause has returned.

The model is pull-based: the consumer calls ``next(t)`` at the time it asks for
a batch and gets back the record of the hand-out (with its time). All times are
seconds from the start of the simulation.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from dynbsz.errors import ConfigError
from dynbsz.order import epoch_order
from dynbsz.sequencer import Sequencer
from dynbsz.workload import Trace

from .config import LoaderModelConfig, StepTime
from .engine import CausalityError, EventQueue

# Task slot states (the model's view of torch's ``_task_info``).
INFLIGHT, BUFFERED, DONE = 0, 1, 2
# What a worker answers to a task (PAUSE: a reorder buffer's pause, no sample).
DATA, STOP, PHANTOM, PAUSE = 0, 1, 2, 3


@dataclass(frozen=True)
class LoaderRun:
    """What the consumer saw, one row per handed-out batch, in delivery order.

    ``samples[offsets[i]:offsets[i+1]]`` are the trace rows of hand-out ``i``.
    ``task`` is the send index within its epoch; ``batch`` the sampler's batch
    index (map-style) or the worker's own batch counter (iterable).
    """

    config: LoaderModelConfig
    epoch: np.ndarray
    task: np.ndarray
    batch: np.ndarray
    worker: np.ndarray          # -1 with num_workers=0 (fetched in the caller)
    dispatch_s: np.ndarray
    start_s: np.ndarray
    finish_s: np.ndarray
    request_s: np.ndarray       # when the consumer asked for this batch
    handout_s: np.ndarray       # when it got it
    offsets: np.ndarray
    samples: np.ndarray
    n_tasks: int                # every task dispatched, StopIteration replies and phantoms included
    n_stop: int
    n_phantom: int
    n_dropped: int              # indices taken from the sampler with no eligible worker
    n_pause: int = 0            # reorder buffer: pauses dispatched instead of batches
    reorder_peak: int = 0       # reorder buffer: most samples held at once (the last epoch's)

    def __len__(self) -> int:
        return len(self.handout_s)

    @property
    def makespan_s(self) -> float:
        return float(self.handout_s[-1]) if len(self.handout_s) else 0.0

    @property
    def arrival_s(self) -> np.ndarray:
        """When each batch reached the main process (no IPC without workers)."""
        return self.finish_s + (self.config.result_latency_s if self.config.num_workers else 0.0)

    def batch_sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    def batch_samples(self, i: int) -> np.ndarray:
        return self.samples[self.offsets[i]:self.offsets[i + 1]]


#: ``order_fn(epoch) -> trace rows``: the rows a loader reads in an epoch, in the order its sampler gives them.
OrderFn = Callable[[int], np.ndarray]


class LoaderModel:
    """One DataLoader (one DP rank) over per-sample decode costs.

    ``cost_s[i]`` is the worker time to fetch trace row ``i`` (the true cost: what the model's
    clock spends); ``tokens[i]`` is only used to report per-batch token sums (for consumers
    whose step depends on them).

    ``order_fn`` (map-style only) is the sampler: ``order_fn(epoch)`` gives the distinct trace
    rows read in that epoch, in order (all of them, or a DP rank's share). It replaces the
    config's own sampler, so ``shuffle_seed`` must then be None. A dynbsz loader's order,
    ``order='balanced'`` included, is ``simulator.bridge.LoaderOrder``: it calls
    ``dynbsz.order.loader_order`` and is computed from cost *estimates*, never from ``cost_s``.
    """

    def __init__(self, cost_s: np.ndarray, config: LoaderModelConfig, *, tokens: np.ndarray | None = None,
                 start: float = 0.0, order_fn: OrderFn | None = None):
        if not isinstance(config, LoaderModelConfig):
            raise TypeError(f"config must be a LoaderModelConfig, got {type(config).__name__}")
        if order_fn is not None:
            if not callable(order_fn):
                raise ConfigError(f"order_fn must be a callable epoch -> trace rows, got {type(order_fn).__name__}")
            if config.dataset != "map":
                raise ConfigError("order_fn is the sampler of a map-style dataset; an iterable dataset's workers "
                                  "read their own shards (dataset='iterable'): drop order_fn or use dataset='map'")
            if config.shuffle_seed is not None:
                raise ConfigError(f"order_fn gives the epoch order, and shuffle_seed={config.shuffle_seed} would be "
                                  "a second one: set shuffle_seed=None (LoaderModelConfig.for_loader(config, "
                                  "sampler=False) does)")
        self.order_fn = order_fn
        self.cfg = config
        self.costs = np.asarray(cost_s, dtype=np.float64)
        if self.costs.ndim != 1:
            raise ConfigError("cost_s must be a 1-d array of per-sample seconds")
        if len(self.costs) and (not np.isfinite(self.costs).all() or self.costs.min() < 0):
            raise ConfigError("cost_s must hold finite numbers of seconds >= 0")
        self.tokens = None if tokens is None else np.asarray(tokens, dtype=np.int64)
        if self.tokens is not None and self.tokens.shape != self.costs.shape:
            raise ConfigError("tokens and cost_s must have the same length")
        self.n = len(self.costs)
        if config.shard_sizes is not None and sum(config.shard_sizes) != self.n:
            raise ConfigError(f"shard_sizes {config.shard_sizes} sum to {sum(config.shard_sizes)}, but the trace "
                              f"has {self.n} samples; the shards must cover it exactly")
        self.q = EventQueue(start)
        nw = config.num_workers
        self.nw = nw
        self.max_tasks = config.max_tasks
        self.rb = config.reorder_buffer
        self._rb_seq = Sequencer(())   # the epoch's, once start_epoch builds it (peak 0 before)
        self.in_order = config.in_order and not self.rb   # torch's own mode: out of order behind a reorder buffer
        self.iterable = config.dataset == "iterable"
        # map-style in order: hand-outs are timed off the task records, without the heap (_next_direct)
        self._direct = self.in_order and not self.iterable and nw > 0
        self.latency = config.result_latency_s
        self.free = [start] * nw          # when each worker finishes what it was given
        self.epoch = -1
        self.in_epoch = False
        # Per task, numbered globally across epochs (task k of epoch e is k - base).
        self._tw: list[int] = []          # worker
        self._tb: list[int] = []          # batch index
        self._tlo: list[int] = []         # rows [lo, hi) of the flat delivery sequence
        self._thi: list[int] = []
        self._ttok: list[int] = []
        self._tkind: list[int] = []
        self._tstate: list[int] = []
        self._tdisp: list[float] = []
        self._tstart: list[float] = []
        self._tfin: list[float] = []
        # Per hand-out (data batches only).
        self._hk: list[int] = []
        self._hreq: list[float] = []
        self._ht: list[float] = []
        self._hepoch: list[int] = []
        self._seqs: list[np.ndarray] = []
        self._seq_lists: list = []   # the same rows as Python ints (a list, or a range), for handout()
        self._seq_base = 0
        self._epoch_base: list[int] = []   # global number of each epoch's first task
        self.dropped = 0

    # ---- epochs ---------------------------------------------------------------------------

    def _order(self, epoch_seen: int) -> np.ndarray:
        if self.order_fn is not None:
            return self._checked_order(self.order_fn(epoch_seen), epoch_seen)
        seed = self.cfg.shuffle_seed
        return epoch_order(self.n, seed, epoch_seen, shuffle=seed is not None)

    def _checked_order(self, rows, epoch: int) -> np.ndarray:
        rows = np.asarray(rows)
        where = f"order_fn({epoch})"
        if rows.ndim != 1 or (len(rows) and not np.issubdtype(rows.dtype, np.integer)):
            raise ConfigError(f"{where} must return a 1-d array of integer trace rows, got {rows.dtype} "
                              f"with shape {rows.shape}")
        rows = rows.astype(np.int64, copy=False)
        if len(rows) and (rows.min() < 0 or rows.max() >= self.n):
            raise ConfigError(f"{where} returned a row outside the trace's {self.n} rows "
                              f"(range {rows.min()}..{rows.max()})")
        if len(rows) and np.bincount(rows, minlength=self.n).max() > 1:
            raise ConfigError(f"{where} returned a row twice; an epoch reads each sample at most once")
        return rows

    def _batches(self, rows: np.ndarray, base: int) -> tuple:
        """Split ``rows`` (positions base..base+len) into batch_size chunks: lo, hi, cost, tokens.

        The positions are ranges where they can be (every batch full): a run builds these for its whole
        epoch, of which a training run reads a part, and a study holds many runs at once."""
        m = len(rows)
        B = self.cfg.batch_size
        nb = m // B if self.cfg.drop_last else -(-m // B)
        if nb == 0:
            return [], [], [], []
        starts = np.arange(nb, dtype=np.int64) * B
        costs = np.add.reduceat(self.costs[rows], starts)[:nb] if m else np.zeros(0)
        if self.cfg.task_overhead_s:
            costs = costs + self.cfg.task_overhead_s
        toks = np.add.reduceat(self.tokens[rows], starts)[:nb] if self.tokens is not None else np.zeros(nb, np.int64)
        lo = range(base, base + nb * B, B)
        hi = range(base + B, base + (nb + 1) * B, B) if nb * B <= m else (np.minimum(starts + B, m) + base).tolist()
        return lo, hi, costs.tolist(), toks.tolist()

    def start_epoch(self, t: float | None = None) -> None:
        """``iter(loader)`` at time ``t`` (default: now): start or reset workers and prime."""
        if self.in_epoch:
            raise RuntimeError("start_epoch() while an epoch is still being delivered; call next() until it "
                               "returns None first")
        q = self.q
        if t is not None:
            q.move_to(t, "start_epoch")
        self.epoch += 1
        self.in_epoch = True
        cfg, nw, now = self.cfg, self.nw, q.now
        if nw and (self.epoch == 0 or not cfg.persistent_workers):
            # Fresh processes: each is ready startup seconds after iter() (torchdata additionally
            # waits for all of them before priming, which moves no work earlier).
            self.free = [now + cfg.worker_startup_s] * nw
        else:
            self.free = [max(f, now) for f in self.free]
        # The iterable replica in a persistent worker was forked in epoch 0 and never sees set_epoch.
        epoch_seen = 0 if (self.iterable and cfg.persistent_workers) else self.epoch
        order = self._order(epoch_seen)
        base = self._seq_base
        self._base = len(self._tw)
        self._epoch_base.append(self._base)
        self._send = self._rcvd = self._base
        self._cyc = 0
        self._active = [True] * nw
        self._n_active = nw
        self._ntask = [0] * nw
        if self.iterable and nw:
            if cfg.shard_sizes is None:
                shards = [order[w::nw] for w in range(nw)]
            else:
                bounds = np.cumsum((0,) + cfg.shard_sizes)
                shards = [order[bounds[w]:bounds[w + 1]] for w in range(nw)]
            seq = np.concatenate(shards) if shards else order
            self._wb = []  # per worker: (lo, hi, cost, tokens) lists of its batches
            off = base
            for s in shards:
                self._wb.append(self._batches(s, off))
                off += len(s)
            self._wj = [0] * nw
            self._ended = [False] * nw
        else:
            seq = order
            self._blo, self._bhi, self._bcost, self._btok = self._batches(order, base)
            self._nb = len(self._blo)
            self._next_b = 0
        if self.rb:
            # dynbsz's own sequencer releases the batches (keys: batch numbers, items: tasks); the model
            # only times the arrivals it is fed
            self._rb_seq = Sequencer(range(self._nb))
            self._rb_ready: deque[int] = deque()     # released tasks the consumer has not taken yet
        self._seqs.append(seq)
        # the sampler's own order (no shuffle, no order_fn) is every row in turn: a range, not a list of them
        self._seq_lists.append(range(len(seq)) if np.array_equal(seq, np.arange(len(seq))) else seq.tolist())
        self._seq_base = base + len(seq)
        for _ in range(self.max_tasks):
            self._put(now)

    def _end_epoch(self) -> None:
        if len(self.q):
            raise CausalityError(f"epoch {self.epoch} ended with {len(self.q)} results still in flight")
        self.in_epoch = False

    # ---- dispatch: _try_put_index (§1.4) ----------------------------------------------------

    def _put(self, now: float) -> None:
        # ``now``, the clock, from the caller (which has read it already): this runs once per task
        pause = False
        if not self.iterable:
            b = self._next_b
            if b >= self._nb:
                return                      # sampler exhausted: nothing dispatched
            pause = self.rb and self._rb_seq.held >= self.rb   # buffer full: a pause, the batch stays next
            if not pause:
                self._next_b = b + 1
        nw, active, ntask = self.nw, self._active, self._ntask
        cyc = self._cyc
        in_order = self.in_order
        cap = self.max_tasks // self._n_active if self._n_active else 0
        for _ in range(nw):
            w = cyc
            cyc += 1
            if cyc == nw:
                cyc = 0
            if active[w] and (in_order or ntask[w] < cap):
                break
        else:
            self._cyc = cyc
            if not pause:
                self.dropped += 1           # the index was taken from the sampler and is lost
            return
        self._cyc = cyc
        k = self._send
        self._send = k + 1
        ntask[w] += 1
        if self.iterable:
            if self._ended[w]:
                # Queued behind this worker's StopIteration: ignored, never answered (a phantom).
                self._record_task(w, -1, 0, 0, 0, PHANTOM, now, now, now)
                return
            j = self._wj[w]
            lo_l, hi_l, cost_l, tok_l = self._wb[w]
            if j < len(lo_l):
                self._wj[w] = j + 1
                kind, b, lo, hi, cost, tok = DATA, j, lo_l[j], hi_l[j], cost_l[j], tok_l[j]
            else:
                self._ended[w] = True
                kind, b, lo, hi, cost, tok = STOP, -1, 0, 0, self.cfg.task_overhead_s, 0
        elif pause:
            kind, b, lo, hi, cost, tok = PAUSE, -1, 0, 0, self.cfg.pause_s + self.cfg.task_overhead_s, 0
        else:
            kind, lo, hi, cost, tok = DATA, self._blo[b], self._bhi[b], self._bcost[b], self._btok[b]
        free = self.free
        start = free[w] if free[w] > now else now
        fin = start + cost
        free[w] = fin
        self._record_task(w, b, lo, hi, tok, kind, now, start, fin)
        if not self._direct:
            self.q.push(fin + self.latency, k)

    def _record_task(self, w, b, lo, hi, tok, kind, disp, start, fin) -> None:
        self._tw.append(w)
        self._tb.append(b)
        self._tlo.append(lo)
        self._thi.append(hi)
        self._ttok.append(tok)
        self._tkind.append(kind)
        self._tstate.append(INFLIGHT)
        self._tdisp.append(disp)
        self._tstart.append(start)
        self._tfin.append(fin)

    # ---- hand-out: _next_data (§1.5) ---------------------------------------------------------

    def next(self, t: float) -> int | None:
        """The consumer asks for a batch at time ``t``; returns the hand-out record index, or None at epoch end.

        At epoch end, ``self.q.now`` is when ``StopIteration`` was raised (the end can become
        known only after the last batch, when a worker's final StopIteration reply arrives).
        """
        if not self.in_epoch:
            raise RuntimeError("next() outside an epoch: call start_epoch() first")
        self.q.move_to(t, "the consumer asked for a batch")
        if self.nw == 0:
            return self._next_sync(t)
        if self._direct:
            return self._next_direct(t)
        if self.rb:
            return self._next_reordered(t)
        state, tw, kind, active = self._tstate, self._tw, self._tkind, self._active
        in_order = self.in_order
        rcvd = self._rcvd
        while True:
            # (a) skip slots already handed out, and those of exhausted workers (phantoms)
            send = self._send
            while rcvd < send:
                st = state[rcvd]
                if st == BUFFERED or (st == INFLIGHT and active[tw[rcvd]]):
                    break
                rcvd += 1
            else:
                self._rcvd = rcvd
                self._end_epoch()
                return None
            # (b) already arrived and buffered (in_order only)
            if st == BUFFERED:
                state[rcvd] = DONE
                k = rcvd
                rcvd += 1
                if kind[k] == STOP:
                    continue
                self._rcvd = rcvd
                return self._process(k, t)
            # (c) block on the shared result queue: arrival order
            k = self.q.pop()[1]
            if kind[k] == STOP:
                self._active[tw[k]] = False
                self._n_active -= 1
                self._rcvd = rcvd
                self._put(self.q.now)
                if k != rcvd:
                    state[k] = BUFFERED if in_order else DONE
                else:
                    state[k] = DONE
                    rcvd += 1
                continue
            if k != rcvd:
                if not in_order:
                    state[k] = DONE
                    self._rcvd = rcvd
                    return self._process(k, t)
                state[k] = BUFFERED         # early arrival waits in the reorder buffer, no refill
                continue
            state[k] = DONE
            self._rcvd = rcvd + 1
            return self._process(k, t)

    def _next_direct(self, t: float) -> int | None:
        """``next()`` of a map-style dataset in order (§1.5): the next hand-out is always the oldest task in
        flight, at the later of the request (the clock is there already) and its arrival, and every worker
        stays active; so no event needs ordering, and the arrival is read off the task's record instead of
        a heap (the same float: the hand-out's time is one of the two, as the heap's clock would make it)."""
        k = self._rcvd
        if k == self._send:                 # the sampler is exhausted and every task handed out
            self._end_epoch()
            return None
        self._rcvd = k + 1
        self._tstate[k] = DONE
        self.q.advance(self._tfin[k] + self.latency)
        return self._process(k, t)

    def _next_reordered(self, t: float) -> int | None:
        """``next()`` behind a reorder buffer: torch hands out in arrival order, the sequencer releases in
        send order. A consumer's call takes one released batch, pulling arrivals from torch until one is."""
        ready, seq, state, kind, tb = self._rb_ready, self._rb_seq, self._tstate, self._tkind, self._tb
        while not ready:
            if not len(seq):                # every batch released
                while len(self.q):          # pauses still out: torch waits for them before StopIteration
                    k = self.q.pop()[1]
                    state[k] = DONE
                    self._ntask[self._tw[k]] -= 1
                self._end_epoch()
                return None
            k = self.q.pop()[1]
            state[k] = DONE
            self._ntask[self._tw[k]] -= 1
            self._put(self.q.now)           # torch refills before the wrapper sees the batch
            if kind[k] == PAUSE:
                continue
            ready.extend(seq.arrive(tb[k], k, self._thi[k] - self._tlo[k]))
        k = ready.popleft()
        self._hk.append(k)
        self._hreq.append(t)
        self._ht.append(self.q.now)
        self._hepoch.append(self.epoch)
        return len(self._hk) - 1

    def _process(self, k: int, t_request: float) -> int:
        """``_process_data``: count the hand-out against its worker, refill, hand out."""
        self._ntask[self._tw[k]] -= 1
        now = self.q.now
        self._put(now)
        self._hk.append(k)
        self._hreq.append(t_request)
        self._ht.append(now)
        self._hepoch.append(self.epoch)
        return len(self._hk) - 1

    def _next_sync(self, t: float) -> int | None:
        b = self._next_b
        if b >= self._nb:
            self.in_epoch = False
            return None
        self._next_b = b + 1
        k = self._send
        self._send = k + 1
        fin = t + self._bcost[b]
        self._record_task(-1, b, self._blo[b], self._bhi[b], self._btok[b], DATA, t, t, fin)
        self._tstate[k] = DONE
        self.q.move_to(fin)
        self._hk.append(k)
        self._hreq.append(t)
        self._ht.append(fin)
        self._hepoch.append(self.epoch)
        return len(self._hk) - 1

    # ---- reading results ---------------------------------------------------------------------

    def in_flight(self) -> list[tuple[float, int]]:
        """Results not yet taken by the main process: (arrival time, epoch-relative task), earliest first."""
        base = self._base
        if self._direct:
            # the queue would hold the tasks after the latest it gave up, in (arrival, send) order: the
            # latest of those handed out (an earlier arrival of a later task was taken into the reorder buffer)
            lat, fin = self.latency, self._tfin
            taken = max(((fin[k] + lat, k) for k in range(base, self._rcvd)), default=(-1.0, -1))
            return sorted((fin[k] + lat, k - base) for k in range(self._rcvd, self._send) if (fin[k] + lat, k) > taken)
        return [(t, k - base) for t, k in self.q.pending()]

    def handout_time(self, r: int) -> float:
        return self._ht[r]

    def handout(self, r: int) -> tuple[float, Sequence[int]]:
        """When hand-out ``r`` happened and its trace rows. One call, and the rows a list (a range in the
        sampler's own order), because the fetch loop asks once per hand-out: a million times in a large study."""
        k = self._hk[r]
        lo = self._tlo[k]
        base = self._seq_base
        for rows in reversed(self._seq_lists):
            base -= len(rows)
            if lo >= base:
                return self._ht[r], rows[lo - base:self._thi[k] - base]
        raise IndexError(lo)

    def result(self) -> LoaderRun:
        hk = np.asarray(self._hk, dtype=np.int64)

        def col(values, dtype):
            return np.asarray(values, dtype=dtype)[hk] if len(hk) else np.zeros(0, dtype)

        lo, hi = col(self._tlo, np.int64), col(self._thi, np.int64)
        sizes = hi - lo
        offsets = np.zeros(len(hk) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        flat = np.concatenate(self._seqs) if self._seqs else np.zeros(0, np.int64)
        idx = np.repeat(lo - offsets[:-1], sizes) + np.arange(offsets[-1], dtype=np.int64)
        kinds = np.asarray(self._tkind, dtype=np.int8)
        epoch = np.asarray(self._hepoch, dtype=np.int64)
        task_base = np.asarray(self._epoch_base, dtype=np.int64)[epoch] if len(hk) else np.zeros(0, np.int64)
        return LoaderRun(
            config=self.cfg, epoch=epoch, task=hk - task_base, batch=col(self._tb, np.int64),
            worker=col(self._tw, np.int64), dispatch_s=col(self._tdisp, np.float64),
            start_s=col(self._tstart, np.float64), finish_s=col(self._tfin, np.float64),
            request_s=np.asarray(self._hreq, dtype=np.float64), handout_s=np.asarray(self._ht, dtype=np.float64),
            offsets=offsets, samples=flat[idx], n_tasks=len(self._tw), n_stop=int((kinds == STOP).sum()),
            n_phantom=int((kinds == PHANTOM).sum()), n_dropped=self.dropped, n_pause=int((kinds == PAUSE).sum()),
            reorder_peak=self._rb_seq.peak)


def simulate(trace: Trace, config: LoaderModelConfig, *, step: StepTime = StepTime(), epochs: int = 1,
             start: float = 0.0, progress=None, order_fn: OrderFn | None = None) -> LoaderRun:
    """Run ``epochs`` epochs of the loader over ``trace`` with a consumer taking ``step`` per batch.

    ``trace.cost_s`` are the durations; ``order_fn`` (see ``LoaderModel``) the sampler, if not the config's.

    The consumer asks for the first batch of an epoch right when the previous one is done
    (plus its step), like ``for epoch in ...: for batch in loader: train(batch)``.
    ``progress(done, total)`` is called every 65,536 hand-outs if given.
    """
    from dynbsz.errors import check_int

    check_int("epochs", epochs, minimum=1)
    model = LoaderModel(trace.cost_s, config, tokens=trace.tokens, start=start, order_fn=order_fn)
    ht, hk, ttok = model._ht, model._hk, model._ttok
    base, per_tok = step.base_s, step.per_token_s
    nxt = model.next
    total = epochs * -(-len(trace) // config.batch_size)   # progress only (a DP rank's order_fn reads fewer)
    t = start
    for _ in range(epochs):
        model.start_epoch(t)
        # The hot loop: one hand-out per turn; the step is a function of the batch's tokens only.
        while (r := nxt(t)) is not None:
            t = ht[r] + base + per_tok * ttok[hk[r]] if per_tok else ht[r] + base
            if progress is not None and not r & 0xFFFF:
                progress(r, total)
        # The last next() raised StopIteration only when the end was known: for an iterable
        # dataset, when the final StopIteration reply arrived, possibly after the last batch.
        t = max(t, model.q.now)
    if progress is not None:
        progress(total, total)
    return model.result()


def physical_bound_s(trace: Trace, config: LoaderModelConfig, epochs: int = 1) -> float:
    """Total decode cost over the number of servers: no schedule can deliver everything faster."""
    return epochs * trace.total_cost_s() / max(1, config.num_workers)
