"""Every failure classified: is it a bug a real trainer sees, or a gap in what the library promises?

A loader failure found on the adversarial schedule (every order the API allows) is re-run under
every trainer model the component declares (``LoaderComponent.trainers``), preempting each after
the example's checkpoint steps. The class:

* ``bug``: it reproduces under a real trainer model (``trainers`` lists which), or it fails with
  every restore taken out of the example, or the property is not about a trainer's loop at all (a packer's budget, a gate's rule, an epoch's order with no
  restore: a promise the component makes whatever drives it; ``trainers`` is empty then);
* ``contract gap``: it reproduces only under the adversarial schedule, in an order no modelled
  trainer uses: the library would have to document whether it supports that order. The loader
  state machine's failures (``loader_stateful``) are programs, not preemption schedules, and cannot
  be re-run under a trainer model: they are reported as gaps until one reproduces them.

Stream properties are classified the same way (``stream_resume``, ``stream_exactly_once`` re-run under
``StreamComponent.trainers``).

``latent`` (a requirement on another finding's fix) and ``deviation`` (documented behaviour) are
the reports' classes for findings studied by hand; a search result is never either.
"""

from __future__ import annotations

from dataclasses import replace

from . import loader_props as L
from . import loader_suite, stream_suite, suite
from . import stream_props as S
from .errors import Unsupported
from .runner import Result
from .scenarios import decode_loader_scenario
from .stream_scenarios import decode_stream_scenario
from .targets.base import LoaderComponent, Target
from .targets.stream import StreamComponent
from .trainers import TRAINERS, under_trainer

CLASSES = ("bug", "contract gap", "latent", "deviation")
#: the properties that run the adversarial schedule on a LoaderScenario, and so can be re-run under trainers
ADVERSARIAL_PROPERTIES = ("loader_resume", "exactly_once")
#: the same on a StreamScenario
STREAM_ADVERSARIAL = ("stream_resume", "stream_exactly_once")


def preemptions_of(component: LoaderComponent, prop: str, scenario):
    """The scenario with the restores ``prop`` made as its checkpoints: loader_resume in order also
    restores at every epoch boundary of the uninterrupted run (``check_exact_resume``)."""
    if prop != "loader_resume" or not loader_suite.promises_order(component, scenario.in_order):
        return scenario
    return L.with_boundary_restores(component.make_loader, scenario, ids_of=component.ids_of or L.default_ids_of,
                                    codec=component.state_codec)[1]


def reproducing_trainers(component: LoaderComponent, scenario) -> tuple[str, ...]:
    """The component's real trainer models under which preempting after the scenario's checkpoint
    steps changes what the trainer trains."""
    out = []
    ordered = loader_suite.promises_order(component, scenario.in_order)
    for trainer in component.trainers:
        if trainer == "adversarial":
            continue
        try:
            loader_suite.check_trainer_resume(component, scenario, trainer, ordered=ordered)
        except Unsupported:
            continue
        except Exception:  # noqa: BLE001 - a violation, or whatever the library raised under the trainer
            out.append(trainer)
    return tuple(out)


def _uninterrupted(component: StreamComponent, sc):
    """The stream scenario run with every restore taken out."""
    plain = replace(sc, checkpoints=(), restore_at_epoch_end=False, checkpoint_on_resume=False)
    return S.run_stream(component.make_loader, plain, ids_of=component.ids_of, codec=component.state_codec)


def stream_preemptions_of(component: StreamComponent, prop: str, sc):
    """The batches a stream property restored after, as the scenario's checkpoints: its drawn ones, every
    epoch end where it restored there, and (stream_resume) every epoch end and the next epoch's first batch."""
    try:
        plain = _uninterrupted(component, sc)
    except Exception:  # noqa: BLE001 - it fails without a restore too: the drawn restores are all there is
        return sc
    if prop == "stream_resume":
        sc = S.with_boundaries(sc, plain)
    if sc.restore_at_epoch_end:
        sc = replace(sc, checkpoints=tuple(sorted(set(sc.checkpoints) | set(plain.boundaries()[:-1]))))
    return sc


def _resumed_mixture_only(component: StreamComponent, sc) -> bool:
    """stream_mixture fails only on its resumed run: the uninterrupted one keeps the weights (a draw that
    is wrong with no restore is wrong whatever drives the loader)."""
    try:
        plain = _uninterrupted(component, sc)
    except Exception:  # noqa: BLE001 - it crashes with no restore
        return False
    weights = component.mixture_weights(sc)
    return not any(S.mixture_deviation(plain.epoch_ids(e), weights, sc.sources)
                   for e in range(sc.epochs) if not (e == 0 and sc.break_after is not None))


def stream_reproducing_trainers(component: StreamComponent, sc) -> tuple[str, ...]:
    """The component's real trainer models under which preempting after the scenario's checkpoint batches
    changes what the trainer trains (a crash under the trainer counts: the trainer sees it too)."""
    out = []
    for trainer in component.trainers:
        if trainer == "adversarial":
            continue
        try:
            stream_suite.check_trainer_resume(component, sc, trainer)
        except Unsupported:
            continue
        except Exception:  # noqa: BLE001 - a violation, or whatever the library raised in its workers
            out.append(trainer)
    return tuple(out)


def _fails_without_restores(prop_name: str, component, sc) -> bool:
    """An exactly-once property fails on the scenario with every restore taken out: no trainer loop is
    involved (the resume properties restore at epoch boundaries themselves, so they are not asked)."""
    if prop_name not in ("exactly_once", "stream_exactly_once"):
        return False
    plain = replace(sc, checkpoints=(), restore_at_epoch_end=False,
                    **({"checkpoint_on_resume": False} if hasattr(sc, "checkpoint_on_resume") else {}))
    try:
        suite.get(prop_name).check(component, plain)
    except Unsupported:
        return False
    except Exception:  # noqa: BLE001 - a violation, or whatever the library raised
        return True
    return False


def classify(target: Target, result: Result) -> Result:
    """The result with ``verdict`` and ``trainers`` set (failures only; anything else is returned as is)."""
    if result.status != "fail":
        return result
    component = target.component(result.component)
    if result.property == "loader_stateful":
        return replace(result, verdict="contract gap", trainers=("adversarial",))
    if result.property in ("trainer_resume", "stream_trainer_resume", "stream_trainer_epochs", "no_hang",
                           "stream_no_hang"):
        # run under the trainers themselves (a no-hang of a component with a step budget runs under its trainer;
        # otherwise under no trainer loop at all): the trainers are the ones the message names
        trainers = tuple(t for t in TRAINERS if under_trainer(t) in result.message)
        return replace(result, verdict="bug", trainers=trainers)
    if (result.property == "stream_mixture" and isinstance(component, StreamComponent)
            and result.minimal_example is not None):
        sc = decode_stream_scenario(result.minimal_example)
        if not _resumed_mixture_only(component, sc):
            return replace(result, verdict="bug", trainers=())
        sc = stream_preemptions_of(component, "stream_resume", sc)
        real = stream_reproducing_trainers(component, sc)
        return replace(result, verdict="bug" if real else "contract gap", trainers=real + ("adversarial",))
    if (result.property in STREAM_ADVERSARIAL and isinstance(component, StreamComponent)
            and result.minimal_example is not None):
        if _fails_without_restores(result.property, component, decode_stream_scenario(result.minimal_example)):
            return replace(result, verdict="bug", trainers=())
        sc = stream_preemptions_of(component, result.property, decode_stream_scenario(result.minimal_example))
        real = stream_reproducing_trainers(component, sc)
        return replace(result, verdict="bug" if real else "contract gap", trainers=real + ("adversarial",))
    if (result.property not in ADVERSARIAL_PROPERTIES or not isinstance(component, LoaderComponent)
            or result.minimal_example is None):
        return replace(result, verdict="bug", trainers=())
    if _fails_without_restores(result.property, component, decode_loader_scenario(result.minimal_example)):
        return replace(result, verdict="bug", trainers=())
    scenario = preemptions_of(component, result.property, decode_loader_scenario(result.minimal_example))
    real = reproducing_trainers(component, scenario)
    return replace(result, verdict="bug" if real else "contract gap", trainers=real + ("adversarial",))


__all__ = ["ADVERSARIAL_PROPERTIES", "CLASSES", "STREAM_ADVERSARIAL", "classify", "reproducing_trainers",
           "stream_reproducing_trainers"]
