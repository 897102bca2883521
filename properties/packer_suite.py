"""The packer and gate properties: each check below is declared with ``@prop`` (``packer_prop``).

Each property draws a ``PackerExample`` (config, gate spec, stream, restore points)
for a component and runs ``packer_props.drive`` on packers the component makes. The
example is plain data, so a failure is saved as a few lines of JSON and replayed
exactly, on the target that failed or on any other with the same component.
"""

from __future__ import annotations

import functools
from typing import Any

from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from . import packer_props as P
from .errors import PropertyViolation
from .registry import prop
from .scenarios import PackerExample, decode_packer_example, encode_packer_example
from .strategies import (
    PACKABLE_BUDGETS,
    PACKABLE_MIXES,
    gate_threshold,
    packer_configs,
    restore_points,
    sample_streams,
    stream_sizes,
)
from .targets.base import PackerComponent
from .targets.builtin import probe_specs

PACKING = frozenset({"packer"})
PACKER_AND_GATE = frozenset({"packer", "gate"})
GATE = frozenset({"gate"})


def examples(component: PackerComponent, *, restores: bool = False, warmup: bool | None = None,
             gate_specs=None, packable: bool = False):
    """``gate_specs`` overrides the component's gates (the gate_state property draws only the probe).
    ``packable`` draws what micro-batches of several samples need (budgets of 2 tokens or more,
    no all-long streams) unless the component fixes its budgets. Streams are long enough to pass
    the gate's count threshold in most examples (``stream_sizes``)."""
    specs = component.gate_specs if gate_specs is None else gate_specs
    budgets = component.budgets if component.budgets is not None or not packable else PACKABLE_BUDGETS
    mixes = PACKABLE_MIXES if packable else ("mixed", "short", "mixed", "long")

    @st.composite
    def draw_example(draw) -> PackerExample:
        config = draw(packer_configs(overlong=component.overlong, empty=component.empty,
                                     budget=budgets, warmup=warmup))
        gate = draw(specs(config))
        # At least one sample: the empty stream is Hypothesis's first guess and proves nothing twice.
        stream = draw(sample_streams(config.budget, min_size=1, physical=config.physical_cap is not None,
                                     allow_empty=component.allow_empty, size=stream_sizes(gate_threshold(gate)),
                                     mixes=mixes))
        points = draw(restore_points(len(stream))) if restores else []
        return PackerExample(config, gate, tuple(stream), tuple(points))

    return draw_example()


def _drive(component: PackerComponent, ex: PackerExample, *, observe: bool = True, **kw) -> P.Run:
    """One run; ``observe`` reports it to Hypothesis's target phase (once per example: a property
    that drives twice observes only its first run)."""
    run = P.drive(lambda: component.make_packer(ex.config, ex.gate), ex.config, ex.stream,
                  json_roundtrip=component.json_state, **kw)
    if observe:
        P.run_events(run)
    if observe and currently_in_test_context():
        # Guidance for the fuzz profile's target phase: longer runs with fuller buffers
        # reach the states (many cuts, warm-up crossings, drains) where bugs hide.
        from hypothesis import target

        target(float(len(run.cuts)), label="micro-batches")
        target(float(max((o.num_samples for o in run.observations), default=0)), label="peak buffer")
    return run


def packer_prop(name: str, *, kinds: frozenset[str], doc: str, interesting: str, not_for=None, **draw: Any):
    """``@prop`` for a packer or gate property: its examples are ``PackerExample``s drawn by
    ``examples(component, **draw)``; ``interesting`` is the ``packer_props`` label it is about."""
    return prop(name, kinds=kinds, doc=doc, examples=functools.partial(examples, **draw),
                encode=encode_packer_example, decode=decode_packer_example, not_for=not_for, interesting=interesting)


# ---- which components a property applies to --------------------------------------------------

def _needs_rule(component: Any) -> str | None:
    if not getattr(component, "documented_rule", False):
        return "no documented opening rule for this gate (built-in rules: fixed, token_aware, warmup_ramp)"
    return None


def _needs_gate_objects(component: Any) -> str | None:
    if not getattr(component, "accepts_gates", False):
        return "the packer takes no gate objects, so it cannot be given a stateful one"
    return None


# ---- the properties: (component, example) -> None, raising PropertyViolation -----------------

@packer_prop("conservation", kinds=PACKING, interesting=P.KEPT_ACROSS_CUT, packable=True,
             doc="every sample put is emitted exactly once, or rejected at put() and reported in dropped; "
                 "drain() empties")
def conservation(component: PackerComponent, ex: PackerExample) -> None:
    run = _drive(component, ex)
    P.check_conservation(run, getattr(run.packer, "dropped", None))


@packer_prop("budget", kinds=PACKING, interesting=P.MULTI_SAMPLE, packable=True,
             doc="a micro-batch fits its budget and the physical cap unless it is a single forced sample; "
                 "none is empty")
def budget(component: PackerComponent, ex: PackerExample) -> None:
    P.check_budget(_drive(component, ex))


@packer_prop("warmup", kinds=PACKING, warmup=True, interesting=P.WARMUP_CUT,
             doc="each micro-batch is cut against the warm-up budget of its optimizer step")
def warmup(component: PackerComponent, ex: PackerExample) -> None:
    P.check_warmup(_drive(component, ex))


@packer_prop("minimum_gate", kinds=PACKER_AND_GATE, interesting=P.GATE_OPENED,
             doc="the gate is a minimum, not a capacity: never ready while the buffer cannot fill one micro-batch")
def minimum_gate(component: PackerComponent, ex: PackerExample) -> None:
    P.check_minimum_gate(_drive(component, ex))


@packer_prop("gate_rule", kinds=GATE, not_for=_needs_rule, interesting=P.GATE_OPENED,
             doc="the gate opens exactly when its documented rule says so")
def gate_rule(component: PackerComponent, ex: PackerExample) -> None:
    rule = P.gate_rule(ex.config, ex.gate)
    if rule is None:
        raise PropertyViolation(f"gate rule: no documented rule for gate spec {ex.gate}")
    P.check_gate_opens(_drive(component, ex), rule)


@packer_prop("ordered_greedy", kinds=PACKING, interesting=P.MULTI_SAMPLE, packable=True,
             doc="each micro-batch is VeOmni's ordered greedy walk over the buffer; the rest keep arrival order")
def ordered_greedy(component: PackerComponent, ex: PackerExample) -> None:
    P.check_ordered_greedy(_drive(component, ex))


@packer_prop("resume", kinds=PACKER_AND_GATE, restores=True, interesting=P.RESTORE_BUFFERED,
             doc="checkpoint (JSON) and restore into a fresh object anywhere, at step 0 and mid-drain: "
                 "nothing changes")
def resume(component: PackerComponent, ex: PackerExample) -> None:
    plain = _drive(component, ex)
    P.check_resume_equivalence(plain, _drive(component, ex, observe=False, restore_after=ex.restore_after))


@packer_prop("gate_state", kinds=PACKING, not_for=_needs_gate_objects, restores=True, gate_specs=probe_specs,
             interesting=P.RESTORE_BUFFERED,
             doc="a gate's own state (state_dict) is checkpointed with the packer: resume with a stateful "
                 "probe gate")
def gate_state(component: PackerComponent, ex: PackerExample) -> None:
    try:
        resume(component, ex)
    except PropertyViolation as e:
        raise PropertyViolation(f"gate state (stateful probe gate {ex.gate}): {e}") from None


@packer_prop("ready_idempotent", kinds=PACKER_AND_GATE, interesting=P.GATE_OPENED,
             doc="asking ready() more often changes nothing: a gate's answer depends on the buffer, not the polling")
def ready_idempotent(component: PackerComponent, ex: PackerExample) -> None:
    P.check_same_cuts(_drive(component, ex), _drive(component, ex, observe=False, ready_calls=2),
                      "ready() idempotence: asking ready() twice per sample changed the micro-batches")


# ---- progress and bounded memory: the gate must open once its minimum is met and the budget covered --

@packer_prop("progress", kinds=PACKER_AND_GATE, restores=True, interesting=P.GATE_OPENED,
             doc="once the buffer fills a micro-batch under its gate's rule (or the target's ProgressBound), a cut "
                 "follows within the bound, restores included: no packer holds a due micro-batch back")
def progress(component: PackerComponent, ex: PackerExample) -> None:
    P.check_progress(_drive(component, ex, restore_after=ex.restore_after), ex.gate, component.progress)


@packer_prop("bounded_buffer", kinds=PACKER_AND_GATE, interesting=P.KEPT_ACROSS_CUT, packable=True,
             doc="peak buffered samples and tokens stay within the limit the gate and the budget imply "
                 "(packer_props.buffer_limit)")
def bounded_buffer(component: PackerComponent, ex: PackerExample) -> None:
    P.check_bounded_buffer(_drive(component, ex), ex.gate, component.progress)


@packer_prop("bounded_wait", kinds=PACKING, interesting=P.LEFT_BEHIND, packable=True,
             doc="no sample waits more cuts than the samples ahead of it when it arrived, plus one (the forced "
                 "head), or the target's declared max_wait")
def bounded_wait(component: PackerComponent, ex: PackerExample) -> None:
    P.check_bounded_wait(_drive(component, ex), component.progress)
