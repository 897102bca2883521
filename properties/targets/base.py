"""What a target is: one or more components, each a thing the properties can exercise.

A *target* is what the user names on the command line (``dynbsz``, ``veomni``,
``mutant:NAME``, ``MODULE:FACTORY``). It holds *components*, each of one *kind*:

* ``packer``: a packer factory; the packer properties run on it with a range of gates.
* ``gate``: one readiness gate (family), run inside dynbsz's ``GreedyPacker``.
* ``loader``: a whole loader factory taking a ``properties.scenarios.LoaderScenario``
  (``LoaderComponent``; the loader properties are in ``properties.loader_suite``).

A property declares the kinds it applies to; the runner pairs each property with
every component of a matching kind and reports ``skip`` where none matches. A new
kind needs only a ``Component`` subclass and properties that declare it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from hypothesis import strategies as st

from dynbsz.config import PackerConfig

from ..packer_props import ProgressBound
from ..registry import KINDS
from ..repro_setup import PackerReproSetup, ReproSetup
from ..trainers import TRAINERS, needs_epoch_bound


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


def check_trainers(component: Component, *, steps_per_epoch: Any = None) -> None:
    """A loader or stream component's ``trainers``: known trainer models, at least one, and the epoch
    bound a model that counts its own steps per epoch needs (``steps_per_epoch``)."""
    kind = type(component).__name__
    unknown = [t for t in component.trainers if t not in TRAINERS]
    if unknown or not component.trainers:
        raise TargetError(f"{kind} {component.name!r}: trainers {unknown[0] if unknown else '()'!r} is not a "
                          f"trainer model; allowed values: {', '.join(TRAINERS)}")
    bound = [t for t in component.trainers if needs_epoch_bound(t)]
    if bound and not callable(steps_per_epoch):
        raise TargetError(f"{kind} {component.name!r}: trainer {bound[0]!r} bounds an epoch by its own step "
                          "count and needs steps_per_epoch=(scenario -> int)")


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
    progress                        a ``ProgressBound`` for a packer that does not open when its gate's
                                    documented rule does (None: the gate spec's rule; an unknown gate kind
                                    gets ``ProgressBound()``'s default): the progress, bounded_buffer and
                                    bounded_wait properties hold it to that
    repro_setup(config, gate_spec)  the packer ``make_packer`` builds as standalone code for
                                    ``properties.repro_packer`` (a ``properties.repro_setup.PackerReproSetup``;
                                    None: no script is written for this packer's examples)
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
    progress: ProgressBound | None = None
    repro_setup: Callable[[PackerConfig, dict], PackerReproSetup] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.progress is not None and not isinstance(self.progress, ProgressBound):
            raise TargetError(f"PackerComponent {self.name!r}: progress={self.progress!r} (a packer "
                              "factory's .progress attribute) must be a properties.packer_props.ProgressBound "
                              "(min_samples, within_puts, max_wait) or absent (the gate's documented rule)")


MakeLoader = Callable[[Any], Any]          # LoaderScenario -> loader
RUNTIMES = ("main", "worker")
STATE_CODECS = ("json", "pickle")
ORDERS = ("sampler", "balanced")
STOPPING_RULES = ("max_steps", "epoch", "steps_per_epoch")


@dataclass(frozen=True, kw_only=True)
class LoaderComponent(Component):
    """A whole loader (kind ``loader``), built from a ``properties.scenarios.LoaderScenario``.

    make_loader(scenario)   a fresh loader with ``set_epoch(e)``, ``__iter__`` over steps,
                            ``state_dict()``, ``load_state_dict(state)`` and ``close()``
    ids_of(step)            the sample ids a step delivers, one tuple per micro-batch; raise
                            ``PropertyViolation`` when a sample arrives without its own data
    signature(step)         what the loader_resume property compares step by step (default: ids_of);
                            dynbsz adds the step index and each micro-batch's budget
    state_codec             how a checkpoint travels: ``json`` (state_dict() must survive
                            json.dumps) or ``pickle`` (it holds tensors or objects)
    promises_order          with in_order=True a resume continues the stream exactly
    promises_order_under_out_of_order
                            the same with in_order=False (no StatefulDataLoader-based loader can:
                            arrival order is timing); otherwise loader_resume checks exactly-once there
    skew_runner(sc)         one epoch of the loader in plain mode on a ``SkewScenario``, returning
                            delivered ids or a ``SkewRun``; None: in_order_skew does not apply
                            (say why in ``skip``)

    What the scenario draws for it (an example outside these is reported as a skip with the
    reason from ``knob_notes``, never run):

    runtime                 main | worker: fixed per component, written into the scenario
    max_workers, in_order, persistent, fetch_batch_sizes, micro_batches_per_step
    warmup                  batch-size warm-up (warmup_steps > 0) is supported
    dp                      DP ranks (dp_size > 1, this rank's dp_rank) are supported
    orders                  epoch orders: 'sampler', and 'balanced' (with workers; the scenario's
                            ``lookahead`` bounds how far a sample may move)
    reorder_buffer          ``reorder_buffer > 0`` (with in_order=True and workers) is supported
    start_methods           the workers' start methods a scenario may name (None: the default)
    knob_notes              {knob: why it is restricted}, quoted in skip messages

    How a run is bounded (the dp_step_counts property: ranks must stop at the same step):

    stopping                the stopping rules the loader offers, any of: 'max_steps' (it takes the
                            scenario's ``max_steps`` and yields exactly that many steps in total,
                            over epochs: the loop ``while steps < max_steps: for step in loader``),
                            'epoch' (a trainer loops over whole epochs), 'steps_per_epoch' (the
                            trainer runs at most ``steps_per_epoch(scenario)`` steps per epoch and
                            ends the epoch early when the loader runs out)
    steps_per_epoch(sc)     the trainer's per-epoch step count, for 'steps_per_epoch'
    trainers                the trainer models (``properties.trainers``) the loader is used with: the
                            ``trainer_resume`` property preempts each of them, and a failure of the
                            adversarial schedule is classified by whether one of them reproduces it
                            (default: the documented torchdata contract, and the adversarial schedule)
    resumes_dropped_iterator
                            dropping the iterator mid-epoch (and closing the loader) and iterating
                            again continues the epoch with nothing lost or repeated
    repro_setup(sc)         the construction ``make_loader`` performs as standalone code for
                            ``properties.repro`` (a ``properties.repro_setup.ReproSetup``: ``make()``, the ids
                            expression of a ``batch``, here one step, as ``ids_of`` gives them, and the
                            epoch hook); its code may define ``close(loader)`` where the loader ``make()``
                            returns is not the DataLoader whose workers a restart stops. None: no script
    """

    kind: str = "loader"
    make_loader: MakeLoader
    ids_of: Callable[[Any], tuple] | None = None
    signature: Callable[[Any], Any] | None = None
    state_codec: str = "json"
    promises_order: bool = True
    promises_order_under_out_of_order: bool = False
    skew_runner: Callable[[Any], Any] | None = None
    runtime: str = "main"
    max_workers: int = 3
    in_order: tuple[bool, ...] = (True, False)
    persistent: tuple[bool, ...] = (False, True)
    fetch_batch_sizes: tuple[int, ...] = (1, 2, 3)
    micro_batches_per_step: tuple[int, ...] = (1, 2)
    warmup: bool = True
    dp: bool = True
    orders: tuple[str, ...] = ("sampler",)
    reorder_buffer: bool = False
    start_methods: tuple[str | None, ...] = (None,)
    knob_notes: Mapping[str, str] = field(default_factory=dict)
    stopping: tuple[str, ...] = ("max_steps",)
    steps_per_epoch: Callable[[Any], int] | None = None
    resumes_dropped_iterator: bool = False
    trainers: tuple[str, ...] = ("torchdata", "adversarial")
    repro_setup: Callable[[Any], ReproSetup] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.kind != "loader":
            raise TargetError(f"LoaderComponent {self.name!r} must have kind='loader', got {self.kind!r}")
        if not callable(self.make_loader):
            raise TargetError(f"LoaderComponent {self.name!r}: make_loader must be callable (scenario -> loader)")
        if self.runtime not in RUNTIMES:
            raise TargetError(f"LoaderComponent {self.name!r} has runtime={self.runtime!r}; allowed values: "
                              f"{', '.join(RUNTIMES)}")
        if self.state_codec not in STATE_CODECS:
            raise TargetError(f"LoaderComponent {self.name!r} has state_codec={self.state_codec!r}; allowed values: "
                              f"{', '.join(STATE_CODECS)}")
        for knob in ("in_order", "persistent", "fetch_batch_sizes", "micro_batches_per_step", "orders",
                     "start_methods"):
            if not getattr(self, knob):
                raise TargetError(f"LoaderComponent {self.name!r}: {knob} must allow at least one value")
        bad = [o for o in self.orders if o not in ORDERS] + [r for r in self.stopping if r not in STOPPING_RULES]
        if bad:
            raise TargetError(f"LoaderComponent {self.name!r}: unknown order or stopping rule {bad[0]!r}; allowed "
                              f"values: orders {', '.join(ORDERS)}; stopping {', '.join(STOPPING_RULES)}")
        check_trainers(self, steps_per_epoch=self.steps_per_epoch)
        if "steps_per_epoch" in self.stopping and not callable(self.steps_per_epoch):
            raise TargetError(f"LoaderComponent {self.name!r}: stopping rule 'steps_per_epoch' needs "
                              "steps_per_epoch=(scenario -> int)")

    def unsupported(self, sc: Any) -> str | None:
        """Why this component cannot run scenario ``sc`` (None: it can). Names the setting."""
        def why(knob: str, value: Any, allowed: str) -> str:
            note = self.knob_notes.get(knob)
            return f"{knob}={value!r} is not supported by {self.name} ({note or 'allowed: ' + allowed})"

        if sc.runtime != self.runtime:
            return why("runtime", sc.runtime, self.runtime)
        if sc.num_workers > self.max_workers:
            return why("num_workers", sc.num_workers, f"0..{self.max_workers}")
        if sc.in_order not in self.in_order:
            return why("in_order", sc.in_order, str(self.in_order))
        if sc.num_workers and sc.persistent_workers not in self.persistent:
            return why("persistent_workers", sc.persistent_workers, str(self.persistent))
        if sc.fetch_batch_size not in self.fetch_batch_sizes:
            return why("fetch_batch_size", sc.fetch_batch_size, str(self.fetch_batch_sizes))
        if sc.micro_batches_per_step not in self.micro_batches_per_step:
            return why("micro_batches_per_step", sc.micro_batches_per_step, str(self.micro_batches_per_step))
        if sc.warmup_steps and not self.warmup:
            return why("warmup_steps", sc.warmup_steps, "0")
        if sc.dp_size > 1 and not self.dp:
            return why("dp_size", sc.dp_size, "1")
        if sc.order not in self.orders:
            return why("order", sc.order, str(self.orders))
        if sc.reorder_buffer and not self.reorder_buffer:
            return why("reorder_buffer", sc.reorder_buffer, "0")
        if sc.start_method not in self.start_methods:
            return why("start_method", sc.start_method, str(self.start_methods))
        if sc.max_steps is not None and "max_steps" not in self.stopping:
            return why("max_steps", sc.max_steps, "None")
        return None


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
