"""The loader properties (kind ``loader``): each check below is declared with ``@prop`` (``loader_prop``).

Each property draws a ``LoaderScenario`` (or, for in_order skew, a ``SkewScenario``) that the
component supports and runs ``loader_props`` / ``skew_props`` on loaders the component makes.
Scenarios are frozen dataclasses of plain fields, so a failure is saved as one line of JSON
and replays exactly, on the target that failed or on any other with a component of the same
name (a knob that component lacks makes the replay a skip that names it, never a failure).

Every example starts real worker processes over a dataset that really sleeps, so a property
runs a fraction of the profile's examples (``Property.cost``; ci: 15, or 10 for the properties
whose examples run several loaders: DP, balanced order, reorder buffer, skew 5).
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any, Callable

from hypothesis import strategies as st

from . import loader_machine
from . import loader_props as L
from . import trainers as T
from .errors import Unsupported
from .registry import prop
from .scenarios import (
    LoaderProgram,
    LoaderScenario,
    SkewScenario,
    decode_loader_program,
    decode_loader_scenario,
    decode_skew_scenario,
    encode_loader_program,
    encode_loader_scenario,
    encode_skew_scenario,
)
from .skew_props import SKEW_DISPLACED, check_in_order_skew
from .strategies import dp_half_the_time, loader_scenarios, skew_scenarios
from .targets.base import LoaderComponent

LOADER = frozenset({"loader"})
#: The state machine's runs (``loader_machine``) cost this many packer examples each: ci runs 60 // 4 = 15
#: sequences of 25 rules per loader component (enough to catch the planted ledger bug at every seed
#: tried: tests/test_loader_stateful.py).
STATEFUL_COST = 4


# ---- helpers ---------------------------------------------------------------------------------

def _supported(component: LoaderComponent, sc: LoaderScenario) -> None:
    reason = component.unsupported(sc)
    if reason:
        raise Unsupported(reason)


def _adversarial(component: Any) -> str | None:
    """The properties that drive the loader through every order its API allows run as the
    ``adversarial`` trainer model: only where it is selected (``--trainer``)."""
    return _loader(component) or T.adversarial_skip(component)


def trainer_kw(component: LoaderComponent, trainer: str, sc: LoaderScenario) -> dict[str, Any]:
    """What ``trainer`` needs to drive this component on ``sc``: ids, codec, and its epoch bound."""
    bound = component.steps_per_epoch(sc) if T.needs_epoch_bound(trainer) else None
    return {**_kw(component), "steps_per_epoch": bound}


def check_trainer_resume(component: LoaderComponent, sc: LoaderScenario, trainer: str, *, ordered: bool) -> None:
    """Preempt ``trainer`` after the scenario's checkpoint steps (as global steps): what survives must be
    its uninterrupted run (``ordered``: step for step; else each sample once per epoch)."""
    kills = tuple(sorted({k for k in sc.checkpoints if k > 0}))
    kw = trainer_kw(component, trainer, sc)
    if ordered and component.signature is not None:
        kw["ids_of"] = component.signature   # step ids and budgets compared too, as loader_resume compares them
    T.check_under(T.get(trainer), component.make_loader, sc, kills, ordered=ordered, **kw)


def _ids_of(component: LoaderComponent):
    return component.ids_of or L.default_ids_of


def _kw(component: LoaderComponent) -> dict[str, Any]:
    return {"ids_of": _ids_of(component), "codec": component.state_codec}


def promises_order(component: LoaderComponent, in_order: bool) -> bool:
    return component.promises_order if in_order else component.promises_order_under_out_of_order


@functools.lru_cache(maxsize=1)
def task_overhead_s() -> float:
    """The simulator's one machine-dependent input, measured once per process on a near-zero-cost
    trace through the real loader (about a second), never fitted to the case under test."""
    from simulator.fidelity import measure_overhead

    return measure_overhead()


# ---- which components a property applies to --------------------------------------------------

def _loader(component: Any) -> str | None:
    if not isinstance(component, LoaderComponent):
        return ("a loader property needs a properties.targets.LoaderComponent (make_loader(scenario) and "
                f"its knobs); {getattr(component, 'name', '?')} is a plain Component")
    return None


def _epochs(component: Any) -> str | None:
    if _loader(component):
        return _loader(component)
    if component.max_workers < 1 or True not in component.in_order:
        return "compares epochs of an in_order=True loader with workers, which the component does not support"
    if set(component.persistent) != {True, False}:
        return "compares persistent with non-persistent workers; the component supports only one of them"
    return None


def _skew(component: Any) -> str | None:
    if _loader(component):
        return _loader(component)
    if component.skew_runner is None:
        return "the component has no plain-mode runner (skew_runner) to measure delivery order with"
    if component.max_workers < 2:
        return "skew needs at least 2 workers"
    return None


def _dp(component: Any) -> str | None:
    if _loader(component):
        return _loader(component)
    if not component.dp:
        return component.knob_notes.get("dp_size", "the component reads no DP shards (dp_size > 1 unsupported)")
    return None


def _balanced(component: Any) -> str | None:
    if _loader(component):
        return _loader(component)
    if "balanced" not in component.orders or component.max_workers < 1:
        return component.knob_notes.get("order", "the component has no order='balanced' (orders: "
                                                 f"{', '.join(component.orders)})")
    return None


def _reorder(component: Any) -> str | None:
    if _loader(component):
        return _loader(component)
    if not component.reorder_buffer or True not in component.in_order or component.max_workers < 2:
        return component.knob_notes.get("reorder_buffer", "the component has no reorder buffer (reorder_buffer > 0 "
                                                          "with in_order=True and two workers or more)")
    return None


def loader_prop(name: str, *, doc: str, examples: Callable[[LoaderComponent], st.SearchStrategy], interesting: str,
                not_for: Callable[[Any], str | None] = _loader, cost: int = 4):
    """``@prop`` for a loader property whose examples are ``LoaderScenario``s; ``interesting`` is the
    ``loader_props`` label of the state it is about."""
    return prop(name, kinds=LOADER, doc=doc, examples=examples, encode=encode_loader_scenario,
                decode=decode_loader_scenario, not_for=not_for, cost=cost, interesting=interesting)


# ---- the properties: (component, example) -> None, raising PropertyViolation -----------------

@loader_prop("loader_resume", examples=loader_scenarios, interesting=L.RESTORE_MID_EPOCH, not_for=_adversarial,
             doc="resuming reproduces the uninterrupted stream step for step where the loader promises order "
                 "(in_order=True), and delivers each sample exactly once otherwise")
def loader_resume(component: LoaderComponent, sc: LoaderScenario) -> None:
    _supported(component, sc)
    if promises_order(component, sc.in_order):
        L.check_exact_resume(component.make_loader, sc, ids_of=component.signature or _ids_of(component),
                             codec=component.state_codec)
    else:
        # No order is promised (arrival order is timing): what a resume must still keep is the set.
        L.check_exactly_once(component.make_loader, sc, expected=L.expected_epoch_ids(sc), **_kw(component))


@loader_prop("exactly_once", examples=loader_scenarios, interesting=L.RESTORE_MID_EPOCH, not_for=_adversarial,
             doc="every epoch delivers each sample exactly once, over checkpoint schedules (restores into a fresh "
                 "loader at step 0, mid-epoch, at epoch ends)")
def exactly_once(component: LoaderComponent, sc: LoaderScenario) -> None:
    _supported(component, sc)
    L.check_exactly_once(component.make_loader, sc, expected=L.expected_epoch_ids(sc), **_kw(component))


def _has_real_trainer(component: Any) -> str | None:
    return _loader(component) or T.no_real_trainer(component)


@loader_prop("no_hang", examples=lambda c: dp_half_the_time(loader_scenarios, c), interesting=L.MULTI_WORKER,
             doc="every rank's epochs end: one pass yields at most two steps per sample plus two, and every iter() "
                 "and next() returns within the wall-time bound (--step-timeout); a loader that never ends an "
                 "epoch, a rank that waits for its peers forever or a worker that stops delivering fails with "
                 "the schedule and where it stopped (properties.watchdog) instead of hanging the run")
def no_hang(component: LoaderComponent, sc: LoaderScenario) -> None:
    _supported(component, sc)
    for rank in range(sc.dp_size):
        L.run_schedule(component.make_loader, replace(sc, dp_rank=rank), **_kw(component))


@loader_prop("trainer_resume", examples=loader_scenarios, interesting=L.RESTORE_MID_EPOCH, not_for=_has_real_trainer,
             doc="under every trainer model the loader declares (properties.trainers), preempting the job after the "
                 "drawn steps and restarting it as that trainer restarts leaves what it trains unchanged: step for "
                 "step where the loader promises order, each sample once per epoch otherwise")
def trainer_resume(component: LoaderComponent, sc: LoaderScenario) -> None:
    _supported(component, replace(sc, checkpoint_on_resume=False))
    for trainer in T.real_trainers(component):
        check_trainer_resume(component, sc, trainer, ordered=promises_order(component, sc.in_order))


@loader_prop("epoch_reshuffle", not_for=_epochs, interesting=L.MULTI_WORKER,
             examples=lambda c: loader_scenarios(c, in_order=True, min_workers=1, checkpoints=False, many_workers=True),
             doc="epoch e's order is the same with persistent and non-persistent workers and after a fresh "
                 "set_epoch(e); consecutive epochs differ")
def epoch_reshuffle(component: LoaderComponent, sc: LoaderScenario) -> None:
    for persistent in (True, False):
        _supported(component, replace(sc, persistent_workers=persistent))
    L.check_epoch_reshuffle(component.make_loader, sc, **_kw(component))


@loader_prop("dp_shards", not_for=_dp, cost=6, interesting=L.UNEVEN_SHARDS,
             examples=lambda c: loader_scenarios(c, checkpoints=False, dp=True),
             doc="DP ranks read disjoint shards whose union is the dataset, every epoch")
def dp_shards(component: LoaderComponent, sc: LoaderScenario) -> None:
    _supported(component, sc)
    L.check_dp_shards(component.make_loader, sc, **_kw(component))


@loader_prop("dp_step_counts", not_for=_dp, cost=6, interesting=L.RANKS_DIFFER,
             examples=lambda c: loader_scenarios(c, dp=True, bounded="max_steps" in c.stopping, max_checkpoints=2),
             doc="DP ranks (built with their dp_rank, in one process) stop at the same step under every stopping rule "
                 "the loader offers: with max_steps each yields exactly max_steps steps, over epochs and restores")
def dp_step_counts(component: LoaderComponent, sc: LoaderScenario) -> None:
    _supported(component, sc if "max_steps" in component.stopping else replace(sc, max_steps=None))
    L.check_dp_step_counts(component.make_loader, sc, component.stopping, steps_per_epoch=component.steps_per_epoch,
                           **_kw(component))


@loader_prop("balanced_order", not_for=_balanced, cost=6, interesting=L.MOVED_FULL_LOOKAHEAD,
             examples=lambda c: loader_scenarios(c, order="balanced", in_order=True, checkpoints=False),
             doc="order='balanced' delivers each epoch as a rearrangement of the sampler order in which no sample "
                 "moves more than lookahead places (so no window's source mix drifts by more than 2 x lookahead)")
def balanced_order(component: LoaderComponent, sc: LoaderScenario) -> None:
    _supported(component, sc)
    L.check_balanced_order(component.make_loader, sc, **_kw(component))


@loader_prop("reorder_exact", not_for=_reorder, cost=6, interesting=L.HELD_FOR_ORDER,
             examples=lambda c: loader_scenarios(c, reorder=True),
             doc="in_order=True with a reorder buffer delivers, and resumes to, exactly what in_order=True without "
                 "one delivers, whatever the decode costs")
def reorder_exact(component: LoaderComponent, sc: LoaderScenario) -> None:
    _supported(component, sc)
    L.check_reorder_exact(component.make_loader, sc, ids_of=component.signature or _ids_of(component),
                          codec=component.state_codec)


@prop("loader_stateful", kinds=LOADER, not_for=_adversarial, cost=STATEFUL_COST, machine=loader_machine.machine_for,
      encode=encode_loader_program, decode=decode_loader_program, interesting=L.RESTORE_MID_EPOCH,
      doc="any sequence of steps, checkpoint-and-restore into a fresh loader, dropped iterators and epoch changes "
          "(a Hypothesis state machine) delivers what the uninterrupted run does: step for step in order, each "
          "sample once per epoch otherwise")
def loader_stateful(component: LoaderComponent, program: LoaderProgram) -> None:
    loader_machine.replay(component, program)


@prop("in_order_skew", kinds=LOADER, not_for=_skew, cost=12, encode=encode_skew_scenario,
      decode=decode_skew_scenario, interesting=SKEW_DISPLACED,
      examples=lambda c: skew_scenarios(in_order=None if len(c.in_order) == 2 else c.in_order[0]),
      doc="in_order=True delivers sampler order whatever the costs; with in_order=False the measured skew "
          "agrees with the simulator's prediction for the same trace")
def in_order_skew(component: LoaderComponent, sc: SkewScenario) -> None:
    if sc.in_order not in component.in_order:
        raise Unsupported(f"in_order={sc.in_order} is not supported by {component.name}")
    overhead = 0.0 if sc.in_order else task_overhead_s()
    check_in_order_skew(component.skew_runner, sc, task_overhead_s=overhead)
