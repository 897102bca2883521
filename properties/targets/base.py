"""What a target is: one or more components, each a thing the properties can exercise.

A *target* is what the user names on the command line (``dynbsz``, ``veomni``,
``mutant:NAME``, ``MODULE:FACTORY``). It holds *components*, each of one *kind*:

* ``packer``: a packer factory; the packer properties run on it with a range of gates.
* ``gate``: one readiness gate (family), run inside dynbsz's ``GreedyPacker``.
* ``loader``: a whole loader factory (plugged in by the loader properties).

A property declares the kinds it applies to; the runner pairs each property with
every component of a matching kind and reports ``skip`` where none matches. A new
kind needs only a ``Component`` subclass and properties that declare it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from hypothesis import strategies as st

from dynbsz.config import PackerConfig

KINDS = ("packer", "gate", "loader")


class TargetError(ValueError):
    """A target cannot be resolved or does not meet the protocol. The message is one line that says
    what is missing; the CLI prints it as is."""


@dataclass(frozen=True, kw_only=True)
class Component:
    """One thing under test. ``skip`` maps property names to the reason the target gives for
    not promising them (e.g. a best-fit packer does not promise ordered greedy selection)."""

    name: str
    kind: str
    skip: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise TargetError(f"component {self.name!r} has kind={self.kind!r}; allowed values: {', '.join(KINDS)}")


GateSpecs = Callable[[PackerConfig], st.SearchStrategy[dict]]
MakePacker = Callable[[PackerConfig, dict], Any]


@dataclass(frozen=True, kw_only=True)
class PackerComponent(Component):
    """A packer (kind ``packer``) or a gate inside dynbsz's packer (kind ``gate``).

    make_packer(config, gate_spec)  a fresh packer (and a fresh gate) for one run
    gate_specs(config)              the gate specs to draw for a config
    budgets                         budgets to draw (None: the suite's default, 1..256)
    overlong, empty                 the drop policies to draw (never 'raise': a stream of valid
                                    samples must not crash the target)
    allow_empty                     draw zero-token samples
    json_state                      state_dict() must survive a JSON round trip
    documented_rule                 the gate specs drawn are built-in kinds with a documented opening rule
    accepts_gates                   make_packer hands the packer a gate object built from any spec
                                    (so the suite's stateful probe gate can be used)
    """

    make_packer: MakePacker
    gate_specs: GateSpecs
    budgets: st.SearchStrategy[int] | None = None
    overlong: tuple[str, ...] = ("emit_alone", "drop")
    empty: tuple[str, ...] = ("emit_alone", "drop")
    allow_empty: bool = True
    json_state: bool = True
    documented_rule: bool = False
    accepts_gates: bool = True


@dataclass(frozen=True, kw_only=True)
class Target:
    """A named set of components. ``unavailable`` (a reason) makes every property report skip."""

    name: str
    components: tuple[Component, ...] = ()
    unavailable: str | None = None
    description: str = ""

    def component(self, name: str) -> Component | None:
        return next((c for c in self.components if c.name == name), None)

    def kinds(self) -> tuple[str, ...]:
        return tuple(sorted({c.kind for c in self.components}))
