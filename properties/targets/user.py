"""A user's own target, named ``MODULE:FACTORY``.

``FACTORY`` is a packer factory ``(config, gate) -> packer`` itself (two required positional parameters),
or it is called with no arguments and returns one of:

* a **gate**: an object with ``ready(view) -> bool`` and ``spec() -> dict`` (and, if it keeps
  state, ``state_dict()`` / ``load_state_dict()``). It is tested inside dynbsz's
  ``GreedyPacker``; ``FACTORY()`` is called again for every packer so no state leaks
  between runs. Its component is ``gate:<spec kind>``; the gate-rule property applies when
  the spec is a built-in kind (``fixed``, ``token_aware``), whose rule is documented.
* a **packer factory**: a callable ``(config: PackerConfig, gate) -> packer``, the packer
  having ``put, ready, cut, drain, state_dict, load_state_dict, __len__``
  (``dynbsz.packer.Packer``). Optional attributes on the factory narrow what is drawn:
  ``gates`` (families among ``fixed``, ``token_aware``, ``probe``; default all), ``overlong``
  and ``empty`` (policies among ``emit_alone``, ``drop``), ``json_state`` (default True:
  ``state_dict()`` must survive ``json.dumps``), ``skip_properties`` (``{property: reason}``
  for what the packer does not promise, e.g. ``ordered_greedy`` for a best-fit packer), ``progress`` (a
  ``properties.packer_props.ProgressBound`` for a packer with its own readiness: when a cut is due, how
  long a sample may wait).
* a ``properties.targets.Target``: full control (any kind, including loaders). A
  ``LoaderComponent``'s ``make_loader`` is probed once on a small scenario: the loader must
  have ``set_epoch``, ``__iter__``, ``state_dict``, ``load_state_dict`` and ``close``.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from typing import Any, Callable

from hypothesis import strategies as st

from dynbsz.config import PackerConfig
from dynbsz.errors import ConfigError
from dynbsz.factory import load_object, one_line
from dynbsz.gates import FixedGate
from dynbsz.packer import GreedyPacker

from ..packer_props import gate_rule
from ..repro_setup import protocol_packer
from ..scenarios import LoaderScenario
from .base import Component, LoaderComponent, PackerComponent, Target, TargetError
from .builtin import build_gate, fixed_specs, probe_specs, token_aware_specs

PACKER_METHODS = ("put", "ready", "cut", "drain", "state_dict", "load_state_dict", "__len__")
LOADER_METHODS = ("set_epoch", "__iter__", "state_dict", "load_state_dict", "close")
GATE_METHODS = ("ready", "spec")
HINT = ("FACTORY is a packer factory (config, gate) -> packer, or is called with no arguments and must return a gate "
        "(ready(view), spec()), a packer factory or a properties.targets.Target")
GATE_FAMILIES = {"fixed": fixed_specs, "token_aware": token_aware_specs, "probe": probe_specs}
POLICIES = ("emit_alone", "drop")


def load_factory(name: str) -> Callable[[], Any]:
    try:
        obj = load_object(name, setting="target", example="mypkg.packing:make_packer")
    except ConfigError as e:
        raise TargetError(str(e)) from None
    if not callable(obj):
        attr = name.partition(":")[2]
        raise TargetError(f"target {name!r}: {attr} is a {type(obj).__name__}, not callable; {HINT}")
    return obj


def _call(name: str, factory: Callable[[], Any]) -> Any:
    try:
        return factory()
    except TargetError as e:  # a component built wrong says so itself; the hint about FACTORY would mislead
        raise TargetError(f"target {name!r}: {e}") from None
    except Exception as e:  # noqa: BLE001
        raise TargetError(f"target {name!r}: calling the factory raised {one_line(e)}; {HINT}") from None


def _missing(obj: Any, methods: tuple[str, ...]) -> list[str]:
    return [m for m in methods if not callable(getattr(obj, m, None))]


def _check_gate(name: str, gate: Any) -> dict:
    missing = _missing(gate, GATE_METHODS)
    if missing:
        raise TargetError(f"target {name!r}: the gate ({type(gate).__name__}) lacks "
                          f"{', '.join(m + '()' for m in missing)}; a gate needs ready(view) and spec()")
    try:
        spec = gate.spec()
        json.dumps(spec)
    except Exception as e:  # noqa: BLE001
        raise TargetError(f"target {name!r}: the gate's spec() must return a JSON-serializable dict ({one_line(e)})") from None
    if not isinstance(spec, dict):
        raise TargetError(f"target {name!r}: the gate's spec() returned {type(spec).__name__}, not a dict")
    return spec


def _has_documented_rule(name: str, spec: dict) -> bool:
    """A user gate whose spec claims a built-in kind is held to that kind's documented rule."""
    try:
        return gate_rule(PackerConfig(budget=1), spec) is not None
    except (KeyError, TypeError, ValueError) as e:
        raise TargetError(f"target {name!r}: the gate's spec() claims kind {spec.get('kind')!r} but lacks a field "
                          f"({one_line(e)}); fixed needs buffer_size, token_aware needs margin and pool_cap, warmup_ramp "
                          "needs start, full, hold_steps and ramp_steps") from None


def _gate_target(name: str, factory: Callable[[], Any], gate: Any) -> Target:
    spec = _check_gate(name, gate)

    def make(config: PackerConfig, _spec: dict) -> GreedyPacker:
        return GreedyPacker(config, factory())

    kind = str(spec.get("kind", "user"))
    component = PackerComponent(
        name=f"gate:{kind}", kind="gate", make_packer=make, gate_specs=lambda config: st.just(spec),
        documented_rule=_has_documented_rule(name, spec),
        skip=dict(getattr(gate, "skip_properties", {}) or {}))
    return Target(name=name, description=f"user gate {type(gate).__name__} in dynbsz's GreedyPacker",
                  components=(component,))


def _option(name: str, factory: Any, attr: str, allowed: tuple[str, ...], default: tuple[str, ...]) -> tuple[str, ...]:
    value = getattr(factory, attr, None)
    if value is None:
        return default
    value = (value,) if isinstance(value, str) else tuple(value)
    bad = [v for v in value if v not in allowed]
    if bad or not value:
        raise TargetError(f"target {name!r}: {attr}={value!r} is not supported; allowed values: {', '.join(allowed)}")
    return value


def _packer_target(name: str, packer_factory: Callable[..., Any], *, called: bool = False) -> Target:
    """``called``: ``packer_factory`` is what calling ``MODULE:FACTORY()`` returned (a script calls it too)."""
    try:
        probe = packer_factory(PackerConfig(budget=64), FixedGate(1))
    except Exception as e:  # noqa: BLE001
        raise TargetError(f"target {name!r}: the packer factory raised {one_line(e)} when called as "
                          "factory(PackerConfig(budget=64), FixedGate(1)); it must take (config, gate)") from None
    missing = _missing(probe, PACKER_METHODS)
    if missing:
        raise TargetError(f"target {name!r}: the packer ({type(probe).__name__}) lacks "
                          f"{', '.join(m + '()' for m in missing)}; a packer needs {', '.join(PACKER_METHODS)}")
    families = _option(name, packer_factory, "gates", tuple(GATE_FAMILIES), tuple(GATE_FAMILIES))

    def specs(config: PackerConfig):
        return st.one_of(*(GATE_FAMILIES[f](config) for f in families))

    def make(config: PackerConfig, spec: dict):
        return packer_factory(config, build_gate(spec, config.budget))

    module, _, attribute = name.partition(":")

    def repro(config: PackerConfig, spec: dict):   # the script imports the user's factory, as this target does
        return protocol_packer(config, spec, library=f"{name} (a user's packer factory)",
                               imports=(f"from {module} import {attribute.split('.')[0]}",),
                               construct=f"{attribute}{'()' if called else ''}(CONFIG, GATE)")

    component = PackerComponent(
        name="packer", kind="packer", make_packer=make, gate_specs=specs, repro_setup=repro,
        overlong=_option(name, packer_factory, "overlong", POLICIES, POLICIES),
        empty=_option(name, packer_factory, "empty", POLICIES, POLICIES),
        json_state=bool(getattr(packer_factory, "json_state", True)), accepts_gates="probe" in families,
        progress=getattr(packer_factory, "progress", None),
        skip=dict(getattr(packer_factory, "skip_properties", {}) or {}))
    return Target(name=name, description=f"user packer factory {getattr(packer_factory, '__name__', '?')}",
                  components=(component,))


def _check_loader(name: str, component: LoaderComponent) -> None:
    """Build one loader (nothing is iterated, so no worker starts) and check the protocol."""
    scenario = LoaderScenario(runtime=component.runtime)
    try:
        loader = component.make_loader(scenario)
    except Exception as e:  # noqa: BLE001
        raise TargetError(f"target {name!r}: {component.name}'s make_loader raised {one_line(e)} when called as "
                          f"make_loader(LoaderScenario(runtime={component.runtime!r})); it must take a "
                          "properties.scenarios.LoaderScenario") from None
    missing = _missing(loader, LOADER_METHODS)
    if callable(getattr(loader, "close", None)):
        loader.close()
    if missing:
        raise TargetError(f"target {name!r}: the loader of {component.name} ({type(loader).__name__}) lacks "
                          f"{', '.join(m + '()' for m in missing)}; a loader needs {', '.join(LOADER_METHODS)}")


def _required_positional(fn: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature are called as zero-argument factories
        return 0
    return sum(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def user_target(name: str) -> Target:
    factory = load_factory(name)
    if not isinstance(factory, type) and _required_positional(factory) == 2:
        # MODULE:make_packer may name the (config, gate) -> packer factory itself, not a function returning one
        return _packer_target(name, factory)
    made = _call(name, factory)
    if isinstance(made, Target):
        bad = [type(c).__name__ for c in made.components if not isinstance(c, Component)]
        if bad:
            raise TargetError(f"target {name!r}: components must be properties.targets.Component, got {', '.join(bad)}")
        for component in made.components:
            if isinstance(component, LoaderComponent):
                _check_loader(name, component)
        return dataclasses.replace(made, name=name)
    if isinstance(made, type):  # a class: a packer class is itself a (config, gate) -> packer factory
        return _packer_target(name, made, called=True)
    if callable(getattr(made, "put", None)):
        raise TargetError(f"target {name!r}: the factory returned a packer instance ({type(made).__name__}); "
                          "return a packer factory (config, gate) -> packer, so every run gets a fresh packer")
    if hasattr(made, "ready") or hasattr(made, "spec"):
        return _gate_target(name, factory, made)
    if callable(made):
        return _packer_target(name, made, called=True)
    raise TargetError(f"target {name!r}: the factory returned {type(made).__name__}; {HINT}")
