"""Every failure classified: is it a bug a real trainer sees, or a gap in what the library promises?

A loader failure found on the adversarial schedule (every order the API allows) is re-run under
every trainer model the component declares (``LoaderComponent.trainers``), preempting each after
the example's checkpoint steps. The class:

* ``bug``: it reproduces under a real trainer model (``trainers`` lists which), or the property
  is not about a trainer's loop at all (a packer's budget, a gate's rule, an epoch's order with no
  restore: a promise the component makes whatever drives it; ``trainers`` is empty then);
* ``contract gap``: it reproduces only under the adversarial schedule, in an order no modelled
  trainer uses: the library would have to document whether it supports that order. The loader
  state machine's failures (``loader_stateful``) are programs, not preemption schedules, and cannot
  be re-run under a trainer model: they are reported as gaps until one reproduces them.

``latent`` (a requirement on another finding's fix) and ``deviation`` (documented behaviour) are
the reports' classes for findings studied by hand; a search result is never either.
"""

from __future__ import annotations

from dataclasses import replace

from . import loader_props as L
from . import loader_suite
from .errors import PropertyViolation, Unsupported
from .runner import Result
from .scenarios import decode_loader_scenario
from .targets.base import LoaderComponent, Target
from .trainers import TRAINERS

CLASSES = ("bug", "contract gap", "latent", "deviation")
#: the properties that run the adversarial schedule on a LoaderScenario, and so can be re-run under trainers
ADVERSARIAL_PROPERTIES = ("loader_resume", "exactly_once")


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
        except PropertyViolation:
            out.append(trainer)
        except Unsupported:
            continue
    return tuple(out)


def classify(target: Target, result: Result) -> Result:
    """The result with ``verdict`` and ``trainers`` set (failures only; anything else is returned as is)."""
    if result.status != "fail":
        return result
    component = target.component(result.component)
    if result.property == "loader_stateful":
        return replace(result, verdict="contract gap", trainers=("adversarial",))
    if result.property in ("trainer_resume", "stream_trainer_resume"):
        trainers = tuple(t for t in TRAINERS if f"under trainer {t!r}" in result.message)
        return replace(result, verdict="bug", trainers=trainers)
    if (result.property not in ADVERSARIAL_PROPERTIES or not isinstance(component, LoaderComponent)
            or result.minimal_example is None):
        return replace(result, verdict="bug", trainers=())
    scenario = preemptions_of(component, result.property, decode_loader_scenario(result.minimal_example))
    real = reproducing_trainers(component, scenario)
    return replace(result, verdict="bug" if real else "contract gap", trainers=real + ("adversarial",))


__all__ = ["ADVERSARIAL_PROPERTIES", "CLASSES", "classify", "reproducing_trainers"]
