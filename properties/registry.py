"""How properties and mutants are declared: decorators that attach them where they are defined.

A ``Property`` is data: a name, the component kinds it applies to, a strategy factory that
draws examples for one component, a check that raises ``PropertyViolation``, and an
``encode`` / ``decode`` pair that turns an example into the small JSON dict that regression
files and ``--json`` output hold. ``@prop(...)`` on a check function builds one and attaches it
to the function, as Hypothesis's ``@rule`` attaches a rule; ``collect_properties(*modules)``
gathers them in definition order (``properties.suite`` does that for the packer and loader suites).

A ``Mutant`` is a deliberately broken variant of a dynbsz class; ``@mutant(...)`` on the class
attaches it the same way and ``collect_mutants(*modules)`` gathers them (``properties.mutants``).

Names are unique: collecting two properties (or two mutants) of one name is an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, TypeVar

from hypothesis import strategies as st

#: The kinds of component a target can hold (``properties.targets.base``) and a property applies to.
KINDS = ("packer", "gate", "loader", "stream")

PROPERTY_MARKER = "properties_suite_property"
MUTANT_MARKER = "properties_suite_mutant"

T = TypeVar("T")


def _applies(component: Any) -> str | None:
    return None


@dataclass(frozen=True)
class Property:
    """``examples``, ``check``, ``machine`` and ``not_for`` take a ``properties.targets.Component``.

    A property searches in one of two ways. Usually ``examples(component)`` is a strategy of plain
    examples, each run by ``check``. A *stateful* property instead has ``machine(component)``, a
    Hypothesis ``RuleBasedStateMachine`` class whose runs are the examples: each run records what
    it did as a plain example (its ``program``: the class attribute ``last_program``, set as the
    run goes), which ``check`` replays outside Hypothesis (regression files, ``replay``)."""

    name: str
    kinds: frozenset[str]
    doc: str
    examples: Callable[[Any], st.SearchStrategy] | None
    check: Callable[[Any, Any], None]
    encode: Callable[[Any], dict]
    decode: Callable[[dict], Any]
    # Why the property does not apply to a component of a matching kind (None: it applies).
    not_for: Callable[[Any], str | None] = _applies
    # Examples cost this many packer examples (a loader example starts worker processes and
    # sleeps): a profile's example count is divided by it, unless a count is given explicitly.
    cost: int = 1
    # The state the property exists to exercise (a ``properties.coverage.reached`` label): the
    # report gives the share of examples that reached it.
    interesting: str | None = None
    machine: Callable[[Any], type] | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.kinds) - set(KINDS))
        if unknown:
            raise ValueError(f"property {self.name!r} has kinds {unknown}; allowed values: {', '.join(KINDS)}")
        if (self.examples is None) == (self.machine is None):
            raise ValueError(f"property {self.name!r} needs exactly one of examples= (a strategy factory) and "
                             "machine= (a state machine factory)")

    def skip_reason(self, component: Any) -> str | None:
        if component.kind not in self.kinds:
            return f"applies to {'/'.join(sorted(self.kinds))} components, not {component.kind}"
        declared = component.skip.get(self.name)
        if declared:
            return f"the target does not promise it: {declared}"
        return self.not_for(component)

    def examples_for(self, profile_examples: int) -> int:
        """How many examples a profile's ``max_examples`` buys for this property (at least 3)."""
        return max(min(3, profile_examples), profile_examples // self.cost)


def prop(name: str, *, kinds: frozenset[str] | set[str] | tuple[str, ...], doc: str,
         examples: Callable[[Any], st.SearchStrategy] | None = None, encode: Callable[[Any], dict],
         decode: Callable[[dict], Any], not_for: Callable[[Any], str | None] | None = None,
         cost: int = 1, interesting: str | None = None,
         machine: Callable[[Any], type] | None = None) -> Callable[[T], T]:
    """Declare the decorated function ``check(component, example)`` a property. The function is
    returned unchanged (other checks may call it); the ``Property`` is its ``PROPERTY_MARKER``."""
    def register(check: T) -> T:
        setattr(check, PROPERTY_MARKER, Property(
            name=name, kinds=frozenset(kinds), doc=doc, examples=examples, check=check,
            encode=encode, decode=decode, not_for=not_for or _applies, cost=cost, interesting=interesting,
            machine=machine))
        return check

    return register


@dataclass(frozen=True)
class Mutant:
    """``make`` has the signature of what it replaces: a packer class ``(config, gate)``, a gate
    class taking its spec's fields, or a loader factory ``(LoaderScenario) -> loader``. ``replaces``
    names it: ``packer``, for a gate the gate family (``fixed``, ``token_aware``), for a loader
    the dynbsz loader component (``loader:main``, ``loader:worker``) it stands in for."""

    name: str
    component: str          # packer | gate | loader
    description: str
    make: Callable[..., Any]
    replaces: str = "packer"
    # The property the mutant was written to break. A mutation run tries it first, so a kill costs
    # one property's search rather than every property before it in report order (each loader
    # property starts worker processes: ~20 s apiece in the ci profile). Any property may still
    # kill the mutant; the hint only orders the search.
    aims_at: str | None = None
    # A loader mutant whose kill hinges on where a checkpoint falls in an epoch: with workers out of order an
    # epoch's step count is arrival timing, so the same search kills it in one run and not the next. Searched
    # on in_order=True only, its kill (and the test that asserts it) is the same every run.
    in_order_only: bool = False

    def __post_init__(self) -> None:
        if self.component not in KINDS:
            raise ValueError(f"mutant {self.name!r} has component={self.component!r}; allowed values: "
                             f"{', '.join(KINDS)}")


def mutant(name: str, *, component: str, replaces: str | None = None, description: str | None = None,
           factory: Callable[[Any], Callable[..., Any]] | None = None, aims_at: str | None = None,
           in_order_only: bool = False) -> Callable[[T], T]:
    """Declare the decorated class (or factory) a mutant of a ``component`` kind. ``replaces``
    defaults to the kind (``packer``); ``description`` to the docstring, on one line; ``factory``
    turns the decorated object into the mutant's ``make`` (default: the object itself);
    ``aims_at`` names the property it was written to break (``Mutant.aims_at``); ``in_order_only``
    searches a loader mutant on in_order=True scenarios only (``Mutant.in_order_only``)."""
    if in_order_only and component != "loader":
        raise ValueError(f"mutant {name!r}: in_order_only is a loader mutant's setting; component={component!r}")
    def register(obj: T) -> T:
        text = description if description is not None else (obj.__doc__ or "")
        setattr(obj, MUTANT_MARKER, Mutant(name=name, component=component, description=" ".join(text.split()),
                                           make=factory(obj) if factory is not None else obj,
                                           replaces=replaces or component, aims_at=aims_at,
                                           in_order_only=in_order_only))
        return obj

    return register


def _collect(marker: str, what: str, modules: tuple[ModuleType, ...]) -> tuple[Any, ...]:
    """What ``marker`` holds on each function or class defined in ``modules``, in definition order.
    Only an object's own marker counts (a subclass of a mutant is not that mutant)."""
    found: dict[str, Any] = {}
    for module in modules:
        for obj in vars(module).values():
            if getattr(obj, "__module__", None) != module.__name__:
                continue  # imported here, declared elsewhere
            declared = getattr(obj, "__dict__", {}).get(marker)
            if declared is None:
                continue
            if declared.name in found:
                raise ValueError(f"two {what} are named {declared.name!r} ({module.__name__}.{obj.__name__} and "
                                 "another); every name must be unique")
            found[declared.name] = declared
    return tuple(found.values())


def collect_properties(*modules: ModuleType) -> tuple[Property, ...]:
    return _collect(PROPERTY_MARKER, "properties", modules)


def collect_mutants(*modules: ModuleType) -> tuple[Mutant, ...]:
    return _collect(MUTANT_MARKER, "mutants", modules)
