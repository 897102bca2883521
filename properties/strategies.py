"""Hypothesis strategies, small ones composed into large ones.

Budgets are kept small (tens to hundreds of tokens) so that a few dozen samples
exercise every interesting regime: many samples per micro-batch, one sample per
micro-batch, samples longer than the budget, physical caps that bind first.
"""

from __future__ import annotations

from typing import Callable

from hypothesis import strategies as st

from dynbsz.config import PackerConfig

from .scenarios import LoaderScenario, Sample, SkewScenario


def budgets(min_value: int = 1, max_value: int = 256) -> st.SearchStrategy[int]:
    return st.integers(min_value, max_value)


#: Budgets under which micro-batches of several samples are common: at least 2 tokens, small ones
#: (exact fits, off-by-one sums) half the time, the rest spread up to 256.
PACKABLE_BUDGETS = st.integers(2, 16) | st.integers(0, 63).map(lambda k: 4 + 4 * k)
#: The stream mixes of a packable example: no all-long streams (one sample per micro-batch).
PACKABLE_MIXES = ("mixed", "short", "mixed")


@st.composite
def packer_configs(draw, *, physical_cap: bool | None = None, warmup: bool | None = None,
                   overlong=("emit_alone",), empty=("emit_alone",), max_budget: int = 256,
                   budget: st.SearchStrategy[int] | None = None) -> PackerConfig:
    """``budget`` overrides the default draw (e.g. the two budgets context_aware knows). By default
    half the budgets are at most 16 tokens: exact fits and off-by-one sums are common there."""
    default = st.one_of(budgets(1, min(16, max_budget)), budgets(1, max_budget))
    budget = draw(default if budget is None else budget)
    use_cap = draw(st.booleans()) if physical_cap is None else physical_cap
    # A cap below the budget binds first; one above it binds only on samples that are mostly padding.
    cap = draw(st.one_of(spread(1, budget), spread(1, 2 * budget))) if use_cap else None
    use_warmup = draw(st.booleans()) if warmup is None else warmup
    warmup_steps = draw(st.integers(1, 6)) if use_warmup else 0
    init = draw(st.integers(1, budget)) if use_warmup else 200
    return PackerConfig(budget=budget, physical_cap=cap, warmup_steps=warmup_steps, warmup_init_tokens=init,
                        micro_batches_per_step=draw(st.integers(1, 3)),
                        overlong=draw(st.sampled_from(overlong)), empty=draw(st.sampled_from(empty)))


def spread(lo: int, hi: int) -> st.SearchStrategy[int]:
    """An integer in [lo, hi]: Hypothesis's own draw half the time (it favours small values and the
    ends of the range: exact fits, off-by-one sums), else one of 65 evenly spaced points across the
    range, so a 512K budget meets lengths of its own scale and not only a few dozen tokens."""
    return st.integers(lo, hi) | st.integers(0, 64).map(lambda k: lo + (hi - lo) * k // 64)


def gate_threshold(spec: dict) -> int:
    """The sample count below which a gate spec never opens (1 for gates without a count)."""
    kind = spec.get("kind")
    if kind == "fixed":
        return int(spec["buffer_size"])
    if kind == "warmup_ramp":
        return int(spec["full"])
    return 1


def stream_sizes(threshold: int, max_size: int = 60) -> st.SearchStrategy[int]:
    """A stream's length: any (from 1) a quarter of the time, otherwise long enough to pass the gate's
    count threshold even after a drop policy has taken some samples, with room to cover the budget
    (at least 12 samples), so the gate opens before the end of the stream in most examples rather
    than only in the drain."""
    floor = min(max(threshold + threshold // 2 + 4, 12), max_size)
    return st.sampled_from([1, floor, floor, floor]).flatmap(lambda lo: st.integers(lo, max_size))


@st.composite
def sample_streams(draw, budget: int, *, min_size: int = 0, max_size: int = 60, physical: bool = False,
                   allow_empty: bool = False, sources=("text", "video"),
                   size: st.SearchStrategy[int] | None = None,
                   mixes: tuple[str, ...] = ("mixed", "short", "mixed", "long")) -> list[Sample]:
    """Samples with unique ids; lengths mostly below the budget, some at it, some beyond it.
    ``size`` draws the length of the stream (default: ``min_size`` to ``max_size``); ``mixes`` the
    mixes a stream may draw (see below).

    Each stream first draws a *mix*: all short (many per micro-batch: where a gate used as a
    capacity shows), all long (one or two per micro-batch: forced heads, overlong policies), or
    mixed. Drawing the mix once per stream keeps a few dozen examples diverse; drawing the
    regime per sample alone makes nearly every stream "mixed".
    """
    low = 1                                                       # empty samples: a regime of their own
    short = spread(low, max(low, budget // 4))                    # many per micro-batch
    fits = spread(low, budget)                                    # anything that fits
    beyond = spread(budget, 2 * budget + 1)                       # at or beyond the budget
    # Within a mix, samples the budget cannot hold (and, below, empty ones) are one draw in four or
    # more: enough for forced heads and drop policies in most streams, few enough that a drop
    # policy leaves the gate something to open on.
    half = spread(max(low, budget // 2), budget)
    regimes_of = {"short": [short], "long": [half, half, beyond], "mixed": [short, short, fits, beyond]}
    # By default mixed streams come twice as often: a cut that leaves an older sample behind (the
    # greedy walk's jump, where loss and reordering bugs live) needs lengths that do and do not fit
    # side by side.
    regimes = list(regimes_of[draw(st.sampled_from(mixes))])
    if allow_empty:
        # Zero-token samples (effective-token counting with every label ignored) get a regime of
        # their own: runs of them at the head of the buffer are where forced-head rules go wrong.
        regimes.append(st.just(0))
        regimes += regimes[:-1]   # ... one in seven or fewer
    length = st.one_of(*regimes)
    n = draw(st.integers(min_size, max_size) if size is None else size)
    out = []
    for i in range(n):
        tokens = draw(length)
        phys = draw(st.integers(max(tokens, 1), tokens + budget)) if physical and draw(st.booleans()) else None
        out.append(Sample(i, tokens, phys, draw(st.sampled_from(sources))))
    return out


def restore_points(stream_length: int, *, min_size: int = 1, max_size: int = 4,
                   drain_slack: int = 3) -> st.SearchStrategy[list[int]]:
    """Where to checkpoint and restore into a fresh packer, as positions in ``drive``'s timeline:
    -1 is before the first put (a checkpoint at step 0), i < len(stream) is right after put i,
    len(stream) + k is after the k-th micro-batch of the end-of-stream drain.

    A third of the points are drawn inside the drain: drawn uniformly over the timeline they land
    there a few times in a hundred, and a packer that cuts its whole drain up front is only
    caught by a checkpoint taken half-way through it. Another third fall in the second half of
    the stream, where a restore finds samples buffered."""
    point = st.one_of(st.integers(-1, stream_length + drain_slack),
                      st.integers(stream_length, stream_length + drain_slack),
                      # and a third in the second half of the stream, where the buffer holds samples
                      st.integers(stream_length // 2, max(stream_length // 2, stream_length - 1)))
    return st.lists(point, min_size=min_size, max_size=max_size, unique=True).map(sorted)


# ---- loaders ---------------------------------------------------------------------------------

#: Reorder-buffer sizes drawn when a component has the knob: off half the time (torch keeps the
#: order), else a buffer small enough to fill (1, 2) or one that rarely does (4).
REORDER_BUFFERS = (0, 0, 1, 2, 4)


def start_methods(component, *, spawn: bool = True) -> st.SearchStrategy[str | None]:
    """The workers' start method, from those the component declares (``start_methods``): spawn one
    draw in ten where ``spawn`` allows it (every spawned worker is a fresh interpreter that imports
    torch: about 3 s per worker start on two cores, where fork costs milliseconds), the others evenly
    otherwise. Shrinks away from spawn, towards the first declared method. One declared method is no
    draw at all, so the examples of a component without the knob are drawn exactly as before it existed."""
    methods = tuple(component.start_methods)
    quick = [m for m in methods if m != "spawn"]
    if len(methods) == 1:
        return st.just(methods[0])
    if not quick or len(quick) == len(methods):
        return st.sampled_from(methods)
    # one value in ten of 0-99 (not one end of a small range: Hypothesis favours the ends and 0)
    return st.integers(0, 99).flatmap(lambda k: st.just("spawn") if spawn and k % 10 == 7 else st.sampled_from(quick))


def spawn_is_cheap(workers: int, persistent: bool, dp_size: int, *, max_workers: int = 1) -> bool:
    """Where a scenario may spawn its workers: where they start once per loader (persistent), at most
    ``max_workers`` of them, in one rank (DP ranks are simulated in one process, each with its own
    workers). Elsewhere a spawned scenario costs a minute or more (workers restarted every epoch and
    at every restore), and the few a ci run draws more than double the loader suite's time."""
    return persistent and 1 <= workers <= max_workers and dp_size == 1


@st.composite
def loader_scenarios(draw, component, *, in_order: bool | None = None, min_workers: int = 0,
                     checkpoints: bool = True, dp: bool = False, max_checkpoints: int = 4,
                     order: str | None = None, reorder: bool | None = None, bounded: bool = False,
                     many_workers: bool = False):
    """A ``LoaderScenario`` the loader ``component`` supports (its knobs: runtime, workers, in_order,
    persistence, fetch batch, micro-batches per step, warm-up, DP, epoch order, reorder buffer).

    Datasets are small (12-40 samples, each a real sleep in the dataset) and epochs two, so an
    example costs a few tenths of a second with worker processes. A checkpoint schedule holds two
    to ``max_checkpoints`` restores at global step counts, most of them within the run's first
    epoch-and-a-bit (a dataset of n samples packs into about n/3 steps an epoch), so nearly every
    schedule restores mid-epoch; step 0 in about half the schedules, and a restore at every epoch
    end in about half (the property that needs exact boundaries adds the step counts where epochs
    end itself: it knows them from its uninterrupted run). Slow samples cost 4 or 20 ms against
    0.5 ms for fast ones; in_order=False scenarios get two workers or more and 20 ms, so
    deliveries are out of order at most checkpoints, which is where count-based resumes go wrong.

    With workers, a component with ``order='balanced'`` draws it half the time (lookahead 1-6, on
    exact or fitted cost estimates), and one with a reorder buffer draws one with in_order=True
    (``REORDER_BUFFERS``); ``order`` and ``reorder`` force them (``reorder=True``: a buffer of 1-4
    with two workers or more and 20 ms slow samples, so arrivals really are out of order).
    ``many_workers`` draws two workers or more in most examples. ``bounded`` draws ``max_steps`` (1-16, mostly 8 or more: a rank's epoch here is 2-7 steps).
    With workers, the start method is drawn last (``start_methods``: spawn one time in ten where the
    component declares it and ``spawn_is_cheap``), so the draws before it stay as they were; None (the
    platform's default) is written as before, so every saved example decodes to the same scenario.
    After it, with a checkpoint schedule, a checkpoint written at once after every restore
    (``checkpoint_on_resume``) in a quarter by the draw.
    """
    if reorder:
        in_order = True
        min_workers = max(min_workers, 2)
    if order == "balanced":
        min_workers = max(min_workers, 1)
    in_order = draw(st.sampled_from(component.in_order)) if in_order is None else in_order
    lowest = min(min_workers, component.max_workers)
    if not in_order:
        # Out of order needs two workers to be out of order at all (one worker is a FIFO), and a
        # slow sample outstanding at a checkpoint to show what the checkpoint does with samples
        # delivered ahead of it: 20 ms against 0.5 ms gives tens of fast ones in that window.
        lowest = max(lowest, min(2, component.max_workers))
    counts = list(range(lowest, component.max_workers + 1))
    if many_workers:   # two or more workers in most examples: replicas that can disagree
        workers = draw(st.sampled_from(counts + [w for w in counts if w >= 2]))
    else:
        workers = draw(st.integers(lowest, component.max_workers))
    slow_s = 0.02 if not in_order or reorder else draw(st.sampled_from([0.004, 0.02]))
    dp_size = draw(st.integers(2, 3)) if dp else 1
    if dp:   # shards of unequal size two times in three: where padding and off-by-one shard bugs show
        rest = draw(st.sampled_from([1, 0, dp_size - 1]))
        n = dp_size * draw(st.integers(12 // dp_size, (40 - rest) // dp_size)) + rest
    else:
        n = draw(st.integers(12, 40))
    points: tuple[int, ...] = ()
    at_epoch_end = False
    if checkpoints:
        within = st.integers(1, max(2, n // 3))
        drawn = draw(st.lists(within | within | st.integers(1, 2 * n // 3), min_size=2, max_size=max_checkpoints))
        points = tuple(sorted(drawn + ([0] if draw(st.booleans()) else [])))
        at_epoch_end = draw(st.booleans())
    if workers and order is None:
        order = draw(st.sampled_from(component.orders))
    order = order or "sampler"
    balanced = order == "balanced"
    reorder_buffer = 0
    if component.reorder_buffer and in_order and workers:
        reorder_buffer = draw(st.sampled_from([1, 2, 4] if reorder else REORDER_BUFFERS)) if reorder is not False else 0
    fields = dict(
        num_samples=n, data_seed=draw(st.integers(0, 2**16)), shuffle_seed=draw(st.integers(0, 2**16)),
        num_workers=workers, prefetch_factor=draw(st.integers(1, 3)) if workers else None,
        persistent_workers=draw(st.sampled_from(component.persistent)) if workers else False,
        in_order=in_order,
        runtime=component.runtime, fetch_batch_size=draw(st.sampled_from(component.fetch_batch_sizes)),
        budget=draw(st.sampled_from([128, 512, 2048])), buffer_size=draw(st.integers(1, 6)),
        micro_batches_per_step=draw(st.sampled_from(component.micro_batches_per_step)),
        warmup_steps=draw(st.integers(0, 4)) if component.warmup else 0, epochs=2, dp_size=dp_size,
        checkpoints=points, restore_at_epoch_end=at_epoch_end, slow_s=slow_s, order=order,
        lookahead=draw(st.integers(1, 6)) if balanced else LoaderScenario.lookahead,
        cost_estimates=draw(st.sampled_from(["exact", "fitted"])) if balanced else "exact",
        reorder_buffer=reorder_buffer,
        # a rank's epoch is 2-7 steps here: mostly bounds that cross one or two epoch ends
        max_steps=draw(st.integers(8, 16) | st.integers(8, 16) | st.integers(1, 16)) if bounded else None)
    # drawn last, so the draws before it (and the examples other scenarios shrank to) stay as they were
    cheap = spawn_is_cheap(workers, fields["persistent_workers"], dp_size)
    start_method = draw(start_methods(component, spawn=cheap)) if workers else None
    # after the start method, for the same reason: a quarter by the draw (more as Hypothesis favours 0)
    on_resume = bool(points or at_epoch_end) and draw(st.integers(0, 3)) == 0
    # last of all, for the same reason: order='balanced' with lookahead='auto' a third of the time
    if balanced and draw(st.integers(0, 2)) == 0:
        fields["lookahead"] = "auto"
    return LoaderScenario(**fields, start_method=start_method, checkpoint_on_resume=on_resume)


@st.composite
def skew_scenarios(draw, *, in_order: bool | None = None):
    """One epoch of 160 fast-text/slow-video samples (``skew_props.SKEW_WORKLOAD``), batch 1."""
    return SkewScenario(data_seed=draw(st.integers(0, 63)), shuffle_seed=draw(st.integers(0, 63)),
                        num_workers=draw(st.sampled_from([2, 3])),
                        # out of order two times in three: where the skew is, and what the model predicts
                        in_order=draw(st.sampled_from([False, True, False])) if in_order is None else in_order)


def dp_half_the_time(scenarios: Callable[..., st.SearchStrategy], component) -> st.SearchStrategy:
    """``scenarios(component, checkpoints=False)``, drawn with DP ranks in one example of two where the
    component reads DP shards (so a rank that waits for its peers forever shows)."""
    plain = scenarios(component, checkpoints=False)
    if not component.dp:
        return plain
    return st.booleans().flatmap(lambda dp: scenarios(component, checkpoints=False, dp=True) if dp else plain)
