"""Which samples a rank reads in an epoch, in which order, and which of them were delivered.

The epoch order is a pure function of (dataset size, seed, epoch): it never
depends on a generator's history, so it is the same whether workers are
persistent or not, fresh or resumed. DP ranks take interleaved, disjoint
slices of it (no padding: a sample is never read twice to even out ranks).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from .loader_config import LoaderConfig


def epoch_order(num_samples: int, seed: int, epoch: int, shuffle: bool = True) -> np.ndarray:
    """Dataset indices of one epoch, all ranks together."""
    if not shuffle:
        return np.arange(num_samples, dtype=np.int64)
    return np.random.default_rng([seed, epoch]).permutation(num_samples).astype(np.int64)


def rank_order(num_samples: int, seed: int, epoch: int, dp_rank: int, dp_size: int, shuffle: bool = True) -> np.ndarray:
    """The slice of the epoch order that DP rank ``dp_rank`` reads: positions rank, rank+dp, ..."""
    return epoch_order(num_samples, seed, epoch, shuffle)[dp_rank::dp_size]


def loader_order(num_samples: int, config: LoaderConfig, epoch: int, costs: np.ndarray | None = None, *,
                 lazy: bool = False) -> "np.ndarray | LazyOrder":
    """The dataset indices DP rank ``config.dp_rank`` reads in ``epoch``, in the order it reads them.

    The one function the loader and the simulator call for a loader's epoch order. With
    ``config.order == 'balanced'``, ``costs`` holds the estimated decode cost of every dataset
    index (known before the epoch), and the rank's sampler order is rearranged by
    ``balanced_order`` for the loader's workers, prefetch factor and fetch batch size; with
    ``lazy=True`` that rearrangement is a ``LazyOrder``, computed as far as it is read (the
    loader's choice: the same values, without a stall before the epoch).
    """
    order = rank_order(num_samples, config.seed, epoch, config.dp_rank, config.dp_size, config.shuffle)
    if config.order != "balanced":
        return order
    if costs is None or len(costs) != num_samples:
        raise ValueError(f"order='balanced' needs the estimated cost of every dataset index ({num_samples})")
    shape = dict(num_workers=config.num_workers, prefetch_factor=config.prefetch_factor or 2,
                 lookahead=resolve_lookahead(config, costs), batch_size=config.fetch_batch_size)
    ordered_costs = np.asarray(costs, dtype=np.float64)[order]
    if lazy:
        return LazyOrder(order, balanced_picks(ordered_costs, **shape))
    return balanced_order(order, ordered_costs, **shape)


#: ``auto_lookahead``'s constants (its docstring says why each). A sample is slow when its estimate is
#: over SLOW_OVER_MEAN times the mean; the window must hold SLOW_PER_WORKER slow samples per worker;
#: the result is clamped to [MIN_LOOKAHEAD, MAX_LOOKAHEAD].
SLOW_OVER_MEAN = 2.0
SLOW_PER_WORKER = 6
MIN_LOOKAHEAD = 16
MAX_LOOKAHEAD = 256


def auto_lookahead(costs: np.ndarray, num_workers: int) -> int:
    """``lookahead='auto'``: the lookahead the balanced order needs on these cost estimates with
    ``num_workers`` workers. A pure function of the estimates of every dataset index (not of an
    epoch's order: the value is the same in every epoch, on every DP rank, and after a restore) and
    the worker count; no clock, no randomness.

    Why this rule. The balanced order levels the workers by giving each round of ``num_workers``
    tasks its share of slow samples, and absorbs what the estimates miss with *runs* of slow rounds
    (``balanced_picks``): it can only place slow samples it can reach. With a fraction ``f`` of the
    samples slow, a window of L positions holds about ``f * L`` of them, so a run of R slow rounds
    over W workers needs ``L >= R * W / f``. The rule is ``L = SLOW_PER_WORKER * W / f``, R = 6,
    with ``f`` the share of estimates above ``SLOW_OVER_MEAN`` (2) times the mean estimate (the
    samples that can hold a worker up: on the bench mix, 20 ms video against a 5.6 ms mean; noise of
    sigma 0.3 on 2 ms text never crosses 11 ms). R was chosen in the simulator (``python -m
    simulator skew-sweep``'s model, 2,000 samples, 4 workers, seeds 0 and 1, five traces with slow
    shares 0.05-0.2, lookaheads 16-256): estimated costs reach 0.92x plain in_order=False at prefetch
    2 only from about 6 slow samples per worker in reach (R = 3, 32 on the bench mix, stops at
    0.90x), and exact costs are at 0.99x from R = 2. Prefetch 4 gains from the same lookahead as
    prefetch 2, so the rule does not shrink it there; the fetch batch size is not in it either (L
    counts samples, as ``f`` does). Confirmed on the real loader by ``python -m dynbsz bench-loader
    --suite`` (docs/explanation/balanced-order.md).

    Bounds: no slow samples (uniform costs) gives ``MIN_LOOKAHEAD`` (16); otherwise the value is
    clamped to ``[MIN_LOOKAHEAD, MAX_LOOKAHEAD]`` = [16, 256]: the upper bound caps how far a sample
    moves (and so the source-mix drift, at most ``2 * lookahead`` samples a window) and the per-slot
    work, which grows with the samples in reach. 256 is where slow samples are a twentieth with 4
    workers (480 uncapped; the simulator puts 256 at 0.91-0.93x there on estimates).
    """
    costs = np.asarray(costs, dtype=np.float64)
    workers = int(num_workers)
    if workers <= 0 or costs.size == 0:
        return 0
    mean = float(costs.mean())
    slow = int(np.count_nonzero(costs > SLOW_OVER_MEAN * mean)) if mean > 0 else 0
    if slow == 0:
        return MIN_LOOKAHEAD
    need = -(-SLOW_PER_WORKER * workers * costs.size // slow)   # ceil(R * W / f), f = slow / n
    return int(min(MAX_LOOKAHEAD, max(MIN_LOOKAHEAD, need)))


def resolve_lookahead(config: LoaderConfig, costs: np.ndarray | None) -> int:
    """The lookahead ``config`` runs with: its own, or with ``'auto'`` ``auto_lookahead`` of the cost
    estimates of every dataset index and the worker count. The one place 'auto' is resolved."""
    if config.lookahead != "auto":
        return config.lookahead
    if costs is None:
        raise ValueError("lookahead='auto' is resolved from the estimated cost of every dataset index; none given")
    return auto_lookahead(costs, config.num_workers)


class DeliveryLedger:
    """The positions of an epoch that were delivered, as a watermark plus the ones delivered ahead of it.

    With in_order=True deliveries come in position order and ``ahead`` stays
    empty; out of order, ``ahead`` holds at most about a prefetch window. The
    ledger is the checkpoint: resuming re-issues exactly the positions it does
    not hold, so nothing is lost and nothing is delivered twice.
    """

    __slots__ = ("watermark", "ahead")

    def __init__(self, watermark: int = 0, ahead: tuple | list = ()):
        self.watermark = watermark
        self.ahead: set[int] = set(ahead)

    def mark(self, position: int) -> None:
        if position < self.watermark or position in self.ahead:
            raise RuntimeError(f"position {position} delivered twice in one epoch (watermark {self.watermark}); "
                               "this is a bug in the loader")
        if position == self.watermark:
            w = position + 1
            ahead = self.ahead
            while w in ahead:
                ahead.discard(w)
                w += 1
            self.watermark = w
        else:
            self.ahead.add(position)

    def delivered(self, position: int) -> bool:
        return position < self.watermark or position in self.ahead

    def count(self) -> int:
        return self.watermark + len(self.ahead)

    def remaining(self, total: int):
        """Positions not yet delivered, ascending."""
        ahead = self.ahead
        return (p for p in range(self.watermark, total) if p not in ahead)

    def state_dict(self) -> dict:
        return {"watermark": self.watermark, "ahead": sorted(self.ahead)}

    def load_state_dict(self, state: dict) -> None:
        self.watermark = state["watermark"]
        self.ahead = set(state["ahead"])


#: How much a waiting sample's cost counts towards placing it now, at its full lookahead (linear in the
#: wait before that): 0.3 measured best of 0, 0.1, 0.3, 0.5, 0.6 on the skew traces the simulator compares (bench mix
#: seeds 0 and 1, the skew property's mix, a three-source mix, a per-token mix; docs/ordering.md). Without
#: it a costly sample waits until its deadline forces it into whatever slot comes, where it stalls the
#: hand-out; with it, it goes earlier where its worker has room.
URGENCY = 0.3
#: Weight of the distance between a slot's finish and the steady cadence (one task handed out every mean
#: task cost / workers after the previous one): a tie-break among slots that idle no worker, which keeps
#: finishes staggered and leaves room for the estimates' noise. 0.03 measured best of 0, 0.01, 0.02, 0.03,
#: 0.05, 0.1, 0.3 on the same traces: 0.01-0.1 all gain 0.3-0.5 points of plain in_order=False's
#: throughput on average, 0.3 loses.
CADENCE_WEIGHT = 0.03


def balanced_order(order: np.ndarray, costs: np.ndarray, *, num_workers: int, prefetch_factor: int, lookahead: int,
                   batch_size: int = 1) -> np.ndarray:
    """A permutation of ``order`` in which no element moves more than ``lookahead`` positions, arranged
    so that torch's in_order=True dispatch keeps its workers busy: ``order`` rearranged by
    ``balanced_picks`` (which says how), computed in full."""
    order = np.asarray(order)
    _check_costs(costs, len(order))
    picks = balanced_picks(costs, num_workers=num_workers, prefetch_factor=prefetch_factor, lookahead=lookahead,
                           batch_size=batch_size)
    return order[np.fromiter(picks, dtype=np.int64, count=len(order))] if len(order) else order.copy()


class LazyOrder:
    """An epoch order computed as it is read: ``order[picks[p]]`` at position ``p``, the picks drawn
    from ``balanced_picks`` only as far as the highest position read so far.

    Why: the balanced order costs 10-15 microseconds of main-process CPU a sample (docs/ordering.md).
    Computed in full before the epoch, that was a stall of 80-100 ms per 4,000 samples (20-30 s for a
    million-sample shard) in which no worker had anything to do; read lazily by torch's sampler, the
    first tasks go out after the first few slots and the rest is computed while the workers decode,
    a slot at a time. The values are exactly ``balanced_order``'s (tested).
    """

    __slots__ = ("_order", "_picks", "_done")

    def __init__(self, order: np.ndarray, picks: Iterator[int]):
        self._order = np.asarray(order).tolist()
        self._picks = picks
        self._done: list[int] = []

    def __len__(self) -> int:
        return len(self._order)

    def __getitem__(self, position: int) -> int:
        done = self._done
        if position.__class__ is int and 0 <= position < len(done):
            return done[position]
        # Positions only, read forward: what torch's sampler does. A negative index or a slice would
        # read the part not computed yet, so it is refused rather than answered from what is.
        if not isinstance(position, (int, np.integer)) or isinstance(position, bool) or \
                not 0 <= position < len(self._order):
            raise IndexError(f"LazyOrder takes a position 0 <= p < {len(self._order)}, got {position!r}")
        position = int(position)
        order, picks = self._order, self._picks
        done.extend(order[next(picks)] for _ in range(position + 1 - len(done)))
        return done[position]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        if len(self._order):
            self[len(self._order) - 1]
        return np.asarray(self._done, dtype=dtype)


def _check_costs(costs, m: int) -> None:
    shape = np.shape(costs)
    if shape != (m,):
        raise ValueError(f"costs must have one estimate per position ({m}), got shape {shape}")


def balanced_picks(costs: np.ndarray, *, num_workers: int, prefetch_factor: int, lookahead: int,
                   batch_size: int = 1) -> Iterator[int]:
    """Which position of the sampler's order goes to each slot of the balanced order, slot by slot (a
    lazy iterator over a permutation of ``range(len(costs))``, none more than ``lookahead`` from its
    slot). The inputs are checked now, the picks computed as they are drawn.

    ``costs[i]`` is the estimated decode cost of ``order[i]`` (known before the epoch: never a
    timing taken at run time, so the order stays a pure function of its inputs). Position p
    belongs to task ``p // batch_size``, and task j to worker ``j % num_workers`` (torch's strict
    round robin). The function replays torch's in-order schedule on the estimates: task j is
    dispatched when task ``j - prefetch_factor * num_workers`` is handed out, each worker runs
    its tasks one after another, and the main process hands tasks out in order, so a worker
    idles exactly when the next task it needs has not been dispatched because some task before
    it is still running. Each slot takes, from the samples in reach, the one whose finish
    causes the least idling on those estimates:

    * its own worker's: the task it will run after this one is dispatched only when task
      ``j - (prefetch_factor - 1) * num_workers`` has been handed out; finishing before that
      idles it (so after a round of slow samples the others get slow ones too);
    * the other workers': finishing this task late holds back the hand-out, and with it the
      dispatch of their next tasks; each of them has ``prefetch_factor`` tasks to run first,
      forecast at the cost of its latest task. The forecast is what makes slow samples come in
      runs of rounds: after a round of slow samples the others are forecast busy, so the next
      slot may take a slow sample too, and while a run lasts the lateness of one round's slow
      samples (estimates are never exact) is absorbed by the next round's work instead of
      idling the workers behind it. A median forecast places them one round at a time, and on
      noisy estimates falls 0.01-0.05 of plain in_order=False's throughput behind at lookahead
      32 (measured in the simulator, docs/ordering.md);

    minus a bonus for a sample that has waited (``URGENCY`` times its cost, in proportion to
    its wait over ``lookahead``), so a slow sample is placed where it fits before its deadline,
    plus ``CADENCE_WEIGHT`` times the distance of its finish from the steady cadence (the
    previous hand-out plus mean task cost / workers), a tie-break among slots that idle no one.
    A sample whose deadline comes (it would move more than ``lookahead`` places) is placed
    whatever the fit, which is what bounds the displacement. Ties go to the earlier position, so
    the result is deterministic.
    """
    costs = np.asarray(costs, dtype=np.float64)
    if costs.ndim != 1:
        raise ValueError(f"costs must be one estimate per position (a 1-d array), got shape {costs.shape}")
    m = len(costs)
    if lookahead <= 0 or num_workers <= 0 or m <= 1:
        return iter(range(m))
    return _picks(costs, num_workers, prefetch_factor, lookahead, batch_size)


def _picks(costs: np.ndarray, W: int, prefetch_factor: int, L: int, B: int) -> Iterator[int]:
    m = len(costs)
    cost = costs.tolist()
    typical = float(np.median(costs))              # a sample not chosen yet
    window = W * prefetch_factor                   # tasks dispatched ahead of hand-out
    latest = [B * typical] * W                     # each worker's latest task cost: its forecast
    urgency = URGENCY / L
    cadence = B * float(costs.mean()) / W          # one task handed out per cadence, in steady state
    free = [0.0] * W                               # when each worker is done with what it was given
    handout: list[float] = []                      # per task: when the in-order consumer receives it
    waiting: list[int] = []                        # positions in reach not placed yet, ascending
    reach = 0                                      # next position to come into reach
    task_start = task_cost = previous = ready = 0.0
    others: list[float] = []
    first_dry = float("inf")
    cadence_weight = CADENCE_WEIGHT
    size = B
    for p in range(m):
        j, i = divmod(p, B)
        if i == 0:   # a new task: when torch dispatches it, when its worker can start, what gates the others
            w = j % W
            dispatch = handout[j - window] if j >= window else 0.0
            task_start = max(dispatch, free[w])
            task_cost = 0.0
            size = min(B, m - j * B)
            previous = handout[-1] if handout else 0.0
            k = j + W - window                     # handing out task k dispatches task j + W, this worker's next
            ready = handout[k] if 0 <= k < j else (previous if k == j else 0.0)
            target = max(previous + cadence, task_start)
            # when each other worker runs dry if its next dispatch waits: prefetch_factor tasks on
            others = [free[(w + d) % W] + prefetch_factor * latest[(w + d) % W] for d in range(1, W)]
            first_dry = min(others) if others else float("inf")
        end = min(m, p + L + 1)
        while reach < end:
            waiting.append(reach)
            reach += 1
        front = waiting[0]                         # the oldest position not placed yet
        if front + L <= p:    # its deadline: moving it further would exceed the lookahead
            pick = front
        else:
            rest = task_start + task_cost + (size - i - 1) * typical   # the task's finish without this sample
            best, pick = float("inf"), -1
            # One slot per hand-out in the loader's main process (the order is computed lazily), so this
            # loop is on the hand-out path: locals only, a list of the waiting positions instead of a
            # scan past placed ones, and the others' idle summed only when some other worker can run
            # dry. Every sum is taken in the same order as a plain loop would, so the picks are too.
            for q in waiting:
                c = cost[q]
                finish = rest + c
                score = ready - finish if ready > finish else 0.0
                gate = previous if previous > finish else finish
                if gate > first_dry:
                    for e in others:
                        if gate > e:
                            score += gate - e
                if q < p:
                    score -= urgency * c * (p - q)
                score += cadence_weight * (finish - target if finish > target else target - finish)
                if score < best:
                    best, pick = score, q
        waiting.remove(pick)
        task_cost += cost[pick]
        if i == size - 1:   # the task is complete: its finish and hand-out on the estimates
            finish = task_start + task_cost
            free[w] = finish
            latest[w] = task_cost
            handout.append(max(previous, finish))
        yield pick
