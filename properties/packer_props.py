"""Properties of a packer and its gate, checked on recorded runs.

``drive`` feeds a stream through a packer the way a main-process loader does
(put one sample; if ready, cut one micro-batch; drain at end of stream) and
records what happened next to the harness's *own* model of the buffer, so no
check trusts the packer's bookkeeping. Each ``check_*`` function raises
``PropertyViolation`` with a message that says what broke and where.
"""

from __future__ import annotations

import bisect
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from dynbsz.config import PackerConfig

from .coverage import reached
from .errors import PropertyViolation
from .probes import KIND as PROBE_KIND
from .scenarios import Sample

#: The states a packer run can reach (``properties.coverage`` labels; ``run_events`` reports them).
GATE_OPENED = "gate opened"
MULTI_SAMPLE = "multi-sample micro-batch"
LEFT_BEHIND = "sample left behind by a cut"
KEPT_ACROSS_CUT = "samples kept across a cut"
WARMUP_CUT = "cut during the warm-up ramp"
RESTORE_BUFFERED = "restore with samples buffered"
RESTORE_IN_DRAIN = "restore mid-drain"
DROPPED = "sample dropped by policy"
FORCED = "overlong sample forced alone"


@dataclass
class Cut:
    ids: tuple
    tokens: tuple
    physical: tuple
    budget: int
    drained: bool
    buffer_before: list[Sample]   # the harness's model of the buffer just before the cut, oldest first
    after_put: int                # index of the last sample put before this cut (-1: none)


@dataclass
class Observation:
    """Readiness right after a put, next to the buffer as the harness models it."""

    put_index: int
    num_samples: int
    tokens: int
    physical: int
    ready: bool
    step: int = 0                 # the optimizer step the next cut belongs to (cuts so far // micro-batches per step)


@dataclass
class Run:
    config: PackerConfig
    stream: list[Sample]
    cuts: list[Cut] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    accepted: list[bool] = field(default_factory=list)
    restored_at: list[int] = field(default_factory=list)
    packer: Any = None            # the packer holding the end of the run (the last restored one)

    def batches(self) -> list[tuple]:
        return [c.ids for c in self.cuts]


PackerFactory = Callable[[], Any]


def drive(make_packer: PackerFactory, config: PackerConfig, stream: Sequence[Sample], *,
          restore_after: Sequence[int] = (), json_roundtrip: bool = True, ready_calls: int = 1) -> Run:
    """Run ``stream`` through a packer; at each position in ``restore_after`` checkpoint, make a
    fresh packer, restore it, and carry on with that one.

    Positions: -1 is before the first put (a checkpoint of a fresh packer), ``i`` in
    ``[0, len(stream))`` is right after put ``i`` (and the cut it may have allowed), and
    ``len(stream) + k`` is after the k-th micro-batch of the end-of-stream drain (a drain must
    be resumable half-way: the loader checkpoints between any two steps).

    ``ready_calls`` asks ``ready()`` that many times after each put: a gate's answer must not
    depend on how often a loader polls it.
    """
    packer = make_packer()
    run = Run(config, list(stream))
    buffer: list[Sample] = []
    restore_after = set(restore_after)
    last_put = -1

    def restore(at: int):
        if buffer:
            reached(RESTORE_BUFFERED)
            if at >= len(run.stream):
                reached(RESTORE_IN_DRAIN)
        state = packer.state_dict()
        if json_roundtrip:
            try:
                state = json.loads(json.dumps(state))
            except (TypeError, ValueError) as e:
                raise PropertyViolation(f"resume: state_dict() at position {at} is not JSON-serializable: {e}") from None
        fresh = make_packer()
        fresh.load_state_dict(state)
        run.restored_at.append(at)
        return fresh

    if -1 in restore_after:
        packer = restore(-1)
    for i, s in enumerate(stream):
        ok = packer.put(s.id, s.tokens, s.physical, s.source)
        run.accepted.append(bool(ok))
        if ok:
            buffer.append(s)
        last_put = i
        ready = packer.ready()
        for _ in range(ready_calls - 1):
            again = packer.ready()
            if again != ready:
                raise PropertyViolation(f"gate idempotence: after sample {i}, ready() answered {ready} and then "
                                        f"{again} with nothing put or cut in between")
        run.observations.append(Observation(i, len(buffer), sum(x.tokens for x in buffer),
                                            sum(_phys(x) for x in buffer), ready,
                                            len(run.cuts) // config.micro_batches_per_step))
        if ready:
            _record(run, buffer, packer.cut(), False, last_put)
        if i in restore_after:
            packer = restore(i)
    # The drain, one micro-batch at a time (a restore swaps in the fresh packer's drain).
    drained = iter(packer.drain())
    position = len(run.stream)
    limit = 2 * len(run.stream) + 2  # a drain emits at most one micro-batch per sample
    while (mb := next(drained, None)) is not None:
        _record(run, buffer, mb, True, last_put)
        if position in restore_after:
            packer = restore(position)
            drained = iter(packer.drain())
        position += 1
        if position - len(run.stream) > limit:
            raise PropertyViolation(f"drain: {limit} micro-batches from {len(run.stream)} samples; drain() does not end")
    if len(packer) != 0:
        raise PropertyViolation(f"drain() left {len(packer)} samples in the packer")
    run.packer = packer
    return run


def run_events(run: Run) -> None:
    """Report what a run reached (``properties.coverage``): the gate opening before the end of the
    stream, micro-batches of several samples, cuts that leave an older sample behind, warm-up cuts,
    drops and forced overlong samples."""
    if any(o.ready for o in run.observations):
        reached(GATE_OPENED)
    if any(len(c.ids) >= 2 for c in run.cuts):
        reached(MULTI_SAMPLE)
    if any(not c.drained and len(c.buffer_before) > len(c.ids) for c in run.cuts):
        reached(KEPT_ACROSS_CUT)
    for c in run.cuts:
        taken = set(c.ids)
        newest = max((i for i, s in enumerate(c.buffer_before) if s.id in taken), default=-1)
        if any(s.id not in taken for s in c.buffer_before[:newest]):
            reached(LEFT_BEHIND)
            break
    if any(c.budget < run.config.budget for c in run.cuts):
        reached(WARMUP_CUT)
    if not all(run.accepted):
        reached(DROPPED)
    if any(len(c.ids) == 1 and c.tokens[0] > c.budget for c in run.cuts):
        reached(FORCED)


def _phys(s: Sample) -> int:
    return s.tokens if s.physical is None else s.physical


def _record(run: Run, buffer: list[Sample], mb, drained: bool, last_put: int) -> None:
    before = list(buffer)
    by_id = {s.id: s for s in buffer}
    for sid in mb.ids:
        if sid not in by_id:
            raise PropertyViolation(f"conservation: micro-batch {len(run.cuts)} emitted sample {sid!r}, "
                                    "which is not buffered (never put, or already emitted)")
        del by_id[sid]
    if len(set(mb.ids)) != len(mb.ids):
        raise PropertyViolation(f"conservation: micro-batch {len(run.cuts)} holds a sample twice: {mb.ids}")
    taken = set(mb.ids)
    buffer[:] = [s for s in buffer if s.id not in taken]
    run.cuts.append(Cut(tuple(mb.ids), tuple(mb.tokens), tuple(mb.physical), mb.budget, drained or mb.drained,
                        before, last_put))


# ---- the properties -------------------------------------------------------------------------

def check_conservation(run: Run, dropped: dict[str, list] | None = None) -> None:
    """Every sample put is emitted exactly once, or rejected at put() and reported as dropped."""
    emitted = [sid for c in run.cuts for sid in c.ids]
    if len(emitted) != len(set(emitted)):
        dup = sorted({x for x in emitted if emitted.count(x) > 1})
        raise PropertyViolation(f"conservation: samples emitted more than once: {dup[:10]}")
    accepted = [s.id for s, ok in zip(run.stream, run.accepted) if ok]
    rejected = [s.id for s, ok in zip(run.stream, run.accepted) if not ok]
    missing = set(accepted) - set(emitted)
    if missing:
        raise PropertyViolation(f"conservation: accepted samples never emitted: {sorted(missing)[:10]}")
    if dropped is not None:
        reported = [sid for ids in dropped.values() for sid in ids]
        if sorted(reported) != sorted(rejected):
            raise PropertyViolation(f"conservation: samples rejected at put() {sorted(rejected)[:10]} differ from "
                                    f"those reported as dropped {sorted(reported)[:10]}")
    elif rejected:
        raise PropertyViolation(f"conservation: samples silently dropped: {rejected[:10]}")


def check_budget(run: Run) -> None:
    """A micro-batch fits its budget (and the physical cap), unless it is a single forced sample."""
    cap = run.config.physical_cap
    for k, c in enumerate(run.cuts):
        if len(c.ids) == 0:
            raise PropertyViolation(f"budget: micro-batch {k} is empty")
        if len(c.ids) == 1:
            continue
        if sum(c.tokens) > c.budget:
            raise PropertyViolation(f"budget: micro-batch {k} holds {sum(c.tokens)} tokens > budget {c.budget} "
                                    f"with {len(c.ids)} samples")
        if cap is not None and sum(c.physical) > cap:
            raise PropertyViolation(f"budget: micro-batch {k} holds {sum(c.physical)} physical tokens > "
                                    f"physical_cap {cap}")


def warmup_budget(config: PackerConfig, step: int) -> int:
    """VeOmni's ``get_cur_token_micro_bsz``, restated here (not imported from dynbsz): a linear ramp
    from ``warmup_init_tokens`` to the budget over steps 0..warmup_steps inclusive, floor division."""
    c = config
    if c.warmup_steps > 0 and step <= c.warmup_steps:
        return (c.budget - c.warmup_init_tokens) * step // c.warmup_steps + c.warmup_init_tokens
    return c.budget


def check_warmup(run: Run) -> None:
    """Each micro-batch is cut against the warm-up budget of its optimizer step."""
    c = run.config
    for k, cut in enumerate(run.cuts):
        want = warmup_budget(c, k // c.micro_batches_per_step)
        if cut.budget != want:
            raise PropertyViolation(f"warm-up: micro-batch {k} (step {k // c.micro_batches_per_step}) was cut "
                                    f"against budget {cut.budget}, expected {want}")


def covered(config: PackerConfig, tokens: int, physical: int) -> bool:
    return tokens >= config.budget or (config.physical_cap is not None and physical >= config.physical_cap)


def check_minimum_gate(run: Run) -> None:
    """The gate is a minimum, not a capacity: never ready while the buffer cannot fill one
    micro-batch, so no micro-batch is cut below the budget except at end of stream."""
    for o in run.observations:
        if o.ready and not covered(run.config, o.tokens, o.physical):
            raise PropertyViolation(
                f"minimum gate: ready() after sample {o.put_index} with only {o.tokens} buffered tokens "
                f"({o.num_samples} samples) < budget {run.config.budget}: the gate was used as a capacity")
    for k, c in enumerate(run.cuts):
        if not c.drained:
            toks = sum(s.tokens for s in c.buffer_before)
            phys = sum(_phys(s) for s in c.buffer_before)
            if not covered(run.config, toks, phys):
                raise PropertyViolation(f"minimum gate: micro-batch {k} cut before end of stream from a buffer of "
                                        f"{toks} tokens < budget {run.config.budget}")


def check_gate_opens(run: Run, gate_should_open: Callable[[int, int, int, int], bool]) -> None:
    """The gate opens exactly when its documented rule says so: it neither stalls nor opens early.
    The rule is asked with (samples, tokens, physical tokens, optimizer step) of the harness's model."""
    for o in run.observations:
        want = gate_should_open(o.num_samples, o.tokens, o.physical, o.step)
        if o.ready != want:
            raise PropertyViolation(f"gate rule: after sample {o.put_index} with {o.num_samples} samples and "
                                    f"{o.tokens} tokens at step {o.step}, ready()={o.ready}, the gate's rule says "
                                    f"{want}")


def greedy_walk(buffer: Sequence[Sample], budget: int, cap: int | None, empties_alone: bool = True) -> list:
    """The ids VeOmni's ordered greedy rule takes from ``buffer`` (oldest first), restated here from
    its documentation and never imported from the packer under test (dynbsz.selection holds both
    the fast walk and a literal one: a slip shared by the two would pass an oracle taken from it).

    The rule (docs/guide/packer.md, "Selection"; VeOmni's ``DynBszBuffer.get_samples``): walk the buffer oldest
    first and take every sample that still fits the remaining budget and, with a physical-token cap,
    the remaining cap; the oldest sample is always taken, whatever its size (so an overlong sample
    under ``overlong='emit_alone'`` is a micro-batch of its own when it reaches the head, and is
    never taken behind it). The walk ends once the micro-batch is full (nothing of the budget left).
    Empty samples under dynbsz's ``empty='emit_alone'`` (``empties_alone``) travel alone: taken
    only as the head, and then alone; a packer without that policy (VeOmni's) packs them like any
    other. Samples a ``drop`` policy rejects never reach the buffer.
    """
    if not buffer:
        return []
    head = buffer[0]
    taken = [head.id]
    if empties_alone and head.tokens == 0:
        return taken
    room = budget - head.tokens
    room_p = None if cap is None else cap - _phys(head)
    for s in buffer[1:]:
        if room <= 0:
            break                      # full: the walk ends
        if empties_alone and s.tokens == 0:
            continue                   # an empty sample is never co-packed
        if s.tokens <= room and (room_p is None or _phys(s) <= room_p):
            taken.append(s.id)
            room -= s.tokens
            if room_p is not None:
                room_p -= _phys(s)
    return taken


def check_ordered_greedy(run: Run) -> None:
    """Each micro-batch is what VeOmni's ordered greedy walk (``greedy_walk``) takes from the
    buffer, and the samples left behind keep their arrival order."""
    cap = run.config.physical_cap
    # dynbsz's empty policy sends a zero-token sample alone; a packer without one (VeOmni's) packs it.
    alone = bool(getattr(run.packer, "empties_alone", True))
    for k, c in enumerate(run.cuts):
        buf = c.buffer_before
        want = greedy_walk(buf, c.budget, cap, alone)
        if list(c.ids) != want:
            raise PropertyViolation(f"ordered greedy: micro-batch {k} (budget {c.budget}) is {list(c.ids)}, "
                                    f"the greedy walk over the buffer {[(s.id, s.tokens) for s in buf]} takes {want}")


def check_resume_equivalence(uninterrupted: Run, resumed: Run) -> None:
    """Checkpoint and restore into a fresh packer at any point: the micro-batches are unchanged,
    and the restored packer still accounts for every sample (drops included)."""
    a, b = uninterrupted.cuts, resumed.cuts
    for k, (x, y) in enumerate(zip(a, b)):
        if (x.ids, x.budget, x.drained) != (y.ids, y.budget, y.drained):
            how = {True: ", drained", False: ""}   # a cut moved into (or out of) the drain changes only this
            raise PropertyViolation(f"resume: restoring at positions {resumed.restored_at} changed micro-batch {k}: "
                                    f"{x.ids} (budget {x.budget}{how[x.drained]}) uninterrupted vs {y.ids} "
                                    f"(budget {y.budget}{how[y.drained]})")
    if len(a) != len(b):
        raise PropertyViolation(f"resume: restoring at positions {resumed.restored_at} changed the number of "
                                f"micro-batches: {len(a)} uninterrupted vs {len(b)}")
    try:
        check_conservation(resumed, getattr(resumed.packer, "dropped", None))
    except PropertyViolation as e:
        raise PropertyViolation(f"resume: after restoring at positions {resumed.restored_at}: {e}") from None


def check_same_cuts(reference: Run, other: Run, what: str) -> None:
    """Two runs of one stream cut identical micro-batches (``what`` names the difference between them)."""
    a = [(c.ids, c.budget, c.drained) for c in reference.cuts]
    b = [(c.ids, c.budget, c.drained) for c in other.cuts]
    if a != b:
        k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        raise PropertyViolation(f"{what}: micro-batch {k} differs: {a[k] if k < len(a) else 'none'} vs "
                                f"{b[k] if k < len(b) else 'none'}")


def ramp_minimum(spec: dict[str, Any], step: int) -> int:
    """The warm-up-scoped gate's sample minimum at an optimizer step, restated from its documentation
    (docs/guide/packer.md / ``WarmupRampGate``): ``start`` for the first ``hold_steps`` steps, then a linear rise
    to ``full`` over ``ramp_steps`` steps (rounded up), then ``full``."""
    start, full, hold, ramp = spec["start"], spec["full"], spec["hold_steps"], spec["ramp_steps"]
    if step < hold:
        return start
    k = step - hold
    if k >= ramp:
        return full
    return math.ceil(start + (full - start) * (k + 1) / (ramp + 1))


#: ``gate='auto'``'s documented schedule per budget (start, full, hold_steps, ramp_steps), restated from
#: docs/simulator.md ("The auto gate"), not read from dynbsz: a table changed in one place only fails here.
AUTO_DOCUMENTED = {
    128 * 1024: (4, 4, 0, 0),        # = fixed:4
    256 * 1024: (2, 16, 0, 100),
    512 * 1024: (8, 32, 0, 100),
    1024 * 1024: (8, 16, 0, 10),
    2048 * 1024: (16, 64, 0, 10),
}


def auto_schedule(budget: int) -> dict[str, int]:
    """The documented row for a budget: the nearest table budget on a log scale, ties to the smaller."""
    row = min(AUTO_DOCUMENTED, key=lambda b: (abs(math.log(budget) - math.log(b)), b))
    return dict(zip(("start", "full", "hold_steps", "ramp_steps"), AUTO_DOCUMENTED[row]))


def gate_rule(config: PackerConfig, spec: dict[str, Any]) -> Callable[[int, int, int, int], bool] | None:
    """The documented opening rule of a built-in gate, restated from its spec (not its code), as a
    function of (samples, tokens, physical tokens, optimizer step). None for gates this suite has
    no rule for (user gates): only the minimum-gate property applies."""
    cap = config.physical_cap

    def covers(tokens: int, phys: int) -> bool:
        return tokens >= config.budget or (cap is not None and phys >= cap)

    if spec.get("kind") == "fixed":
        size = spec["buffer_size"]
        return lambda n, tokens, phys, step: n > 0 and n >= size and covers(tokens, phys)
    if spec.get("kind") == "token_aware":
        margin, pool = spec["margin"], spec["pool_cap"]
        target = math.ceil((1 + margin) * config.budget)
        ptarget = math.ceil((1 + margin) * cap) if cap is not None else None
        return lambda n, tokens, phys, step: n > 0 and covers(tokens, phys) and (
            n >= pool or tokens >= target or (ptarget is not None and phys >= ptarget))
    if spec.get("kind") == "warmup_ramp" and spec.get("policy") == "auto":
        # the documented schedule for this budget, whatever the spec says it resolved to
        documented = auto_schedule(config.budget)
        return lambda n, tokens, phys, step: n > 0 and n >= ramp_minimum(documented, step) and covers(tokens, phys)
    if spec.get("kind") == "warmup_ramp":
        ramp_minimum(spec, 0)  # a spec without the schedule's fields fails here, not mid-run
        return lambda n, tokens, phys, step: n > 0 and n >= ramp_minimum(spec, step) and covers(tokens, phys)
    return None


# ---- progress and bounded memory: the dual of "a minimum, not a capacity" -------------------

#: The count minimum a cut is due at when a packer's gate has no documented rule and the target declares
#: no bound: the largest count minimum the suite draws for a built-in gate (``fixed_specs``' 40).
DEFAULT_PROGRESS_SAMPLES = 40


@dataclass(frozen=True)
class ProgressBound:
    """What a packer promises about progress and memory when it does not follow its gate's documented
    rule (a packer with its own readiness, or a user gate of an unknown kind).

    min_samples   a micro-batch is due once the buffer covers the budget and holds this many samples
    within_puts   ... and is cut within this many further puts (0: at the put that made it due)
    max_wait      the most cuts a sample may stay buffered (None: the ordered walk's forced head, so a
                  sample with p samples ahead of it is cut within p + 1 cuts)
    """

    min_samples: int = DEFAULT_PROGRESS_SAMPLES
    within_puts: int = 0
    max_wait: int | None = None

    def __post_init__(self) -> None:
        for name, least in (("min_samples", 1), ("within_puts", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"ProgressBound.{name}={value!r}: must be an int >= {least}")
        if self.max_wait is not None and (not isinstance(self.max_wait, int) or self.max_wait < 1):
            raise ValueError(f"ProgressBound.max_wait={self.max_wait!r}: must be None (forced head) or an int >= 1")


def _count_minimum(config: PackerConfig, spec: dict[str, Any], bound: ProgressBound | None) -> int | None:
    """The largest sample count a gate's rule may wait for with the budget covered (None: it waits for a
    token level instead, or has no count): restated from each kind's documentation."""
    if bound is not None:
        return bound.min_samples
    kind = spec.get("kind")
    if kind == "fixed":
        return int(spec["buffer_size"])
    if kind == "token_aware":
        return int(spec["pool_cap"])
    if kind == "warmup_ramp":
        row = auto_schedule(config.budget) if spec.get("policy") == "auto" else spec
        return max(int(row["start"]), int(row["full"]))
    if kind == PROBE_KIND:
        return None          # it waits for its own high-water mark, which the buffer sets
    return DEFAULT_PROGRESS_SAMPLES


def opening_rule(config: PackerConfig, spec: dict[str, Any], bound: ProgressBound | None = None):
    """When a micro-batch is due: the gate's documented rule, the probe's (restated from
    ``properties.probes``: covered, and at least ``fraction`` of the largest buffer seen, a mark the
    rule keeps as it is asked in put order), or for a declared or unknown rule, covered and
    ``min_samples`` buffered. A function of (samples, tokens, physical tokens, step), asked once per put."""
    if bound is None and spec.get("kind") == PROBE_KIND:
        mark = [0]

        def probe(n: int, tokens: int, phys: int, step: int) -> bool:
            mark[0] = max(mark[0], n)
            return covered(config, tokens, phys) and n >= math.ceil(float(spec["fraction"]) * mark[0])
        return probe
    documented = gate_rule(config, spec) if bound is None else None
    if documented is not None:
        return documented
    minimum = _count_minimum(config, spec, bound)
    return lambda n, tokens, phys, step: n > 0 and n >= minimum and covered(config, tokens, phys)


def check_progress(run: Run, spec: dict[str, Any], bound: ProgressBound | None = None) -> None:
    """Once the buffer can fill a micro-batch under its gate's own rule, a cut follows within
    ``bound.within_puts`` further puts: a packer that holds a due micro-batch is a trainer waiting."""
    rule = opening_rule(run.config, spec, bound)
    slack = bound.within_puts if bound is not None else 0
    due_since = None
    for o in run.observations:
        due = rule(o.num_samples, o.tokens, o.physical, o.step)
        if o.ready:
            due_since = None
            continue
        if due and due_since is None:
            due_since = o
        if due_since is not None and o.put_index - due_since.put_index >= slack:
            restored = f" (restored at positions {run.restored_at})" if run.restored_at else ""
            raise PropertyViolation(
                f"progress: after sample {due_since.put_index} the buffer held {due_since.num_samples} samples and "
                f"{due_since.tokens} tokens (budget {run.config.budget}), which gate {spec} says fill a micro-batch, "
                f"and no micro-batch was cut by sample {o.put_index}{restored}: a trainer would wait here, "
                f"{len(run.stream) - 1 - o.put_index} samples before the end of the stream")


def _smallest_fitting(sizes: Sequence[int], room: int) -> int:
    """How many of ``sizes`` (non-empty samples) fit together in ``room`` tokens, smallest first."""
    n = total = 0
    for s in sorted(sizes):
        if total + s > room:
            break
        total, n = total + s, n + 1
    return n


def buffer_limit(run: Run, spec: dict[str, Any], bound: ProgressBound | None = None) -> tuple[int, int]:
    """The most samples and tokens a packer that keeps ``check_progress`` may hold right after a put.

    A buffer the rule keeps closed either misses the count minimum (at most minimum - 1 samples) or
    does not cover the budget (at most budget - 1 tokens: the non-empty samples of the stream that fit
    there smallest first, and every empty one). An open buffer is cut at every put, and a cut takes at
    least one sample, so it never grows: the peak is a closed buffer's plus one put, plus ``within_puts``
    puts a declared bound allows. Tokens: the largest that many samples of the stream."""
    kept = [s for s, ok in zip(run.stream, run.accepted) if ok]
    sizes = [s.tokens for s in kept if s.tokens > 0]
    uncovered = _smallest_fitting(sizes, run.config.budget - 1) + sum(1 for s in kept if s.tokens == 0)
    minimum = _count_minimum(run.config, spec, bound)
    closed = max(uncovered, (minimum or 1) - 1)
    samples = closed + 1 + (bound.within_puts if bound is not None else 0)
    return samples, sum(sorted((s.tokens for s in kept), reverse=True)[:samples])


def check_bounded_buffer(run: Run, spec: dict[str, Any], bound: ProgressBound | None = None) -> None:
    """Peak buffered samples and tokens never exceed ``buffer_limit``: a packer holding far more than a
    micro-batch is memory a long stream runs out of."""
    samples, tokens = buffer_limit(run, spec, bound)
    for o in run.observations:
        if o.num_samples > samples or o.tokens > tokens:
            raise PropertyViolation(
                f"bounded buffer: after sample {o.put_index} the packer held {o.num_samples} samples and {o.tokens} "
                f"tokens; gate {spec} with budget {run.config.budget} bounds a buffer to {samples} samples and "
                f"{tokens} tokens")


def check_bounded_wait(run: Run, bound: ProgressBound | None = None) -> None:
    """No sample stays buffered for more cuts than the bound: with the ordered walk's forced head (the
    default), a sample with p samples ahead of it when it arrived is cut within p + 1 cuts."""
    cut_of = {sid: k for k, c in enumerate(run.cuts) for sid in c.ids}
    after_put = [c.after_put for c in run.cuts]   # non-decreasing: cuts follow puts
    for i, (s, o) in enumerate(zip(run.stream, run.observations)):
        if not run.accepted[i] or s.id not in cut_of:
            continue
        waited = cut_of[s.id] - bisect.bisect_left(after_put, i) + 1
        limit = bound.max_wait if bound is not None and bound.max_wait is not None else o.num_samples
        if waited > limit:
            why = "its declared bound" if bound is not None and bound.max_wait is not None else (
                f"{o.num_samples - 1} samples were ahead of it and every cut takes the oldest")
            raise PropertyViolation(f"bounded wait: sample {s.id!r} (put {i}) was cut only at micro-batch "
                                    f"{cut_of[s.id]}, {waited} cuts after it arrived; at most {limit} ({why})")
