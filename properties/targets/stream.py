"""A streaming (iterable) loader as a component of kind ``stream``, built from a ``StreamScenario``.

Streaming loaders shard, shuffle, cycle and mix their sources themselves and keep their position in
their own state, so what they promise differs by configuration; a component says so per scenario:

* ``resume_promise(sc)`` -> ``(level, reason)``: ``exact`` (a resume continues the stream sample
  for sample), ``once`` (each sample of an epoch still exactly once, in any order) or ``none``; the
  reason quotes the library's documentation or code where it is weaker than ``exact``.
* ``epoch_loss(sc)`` -> ``(n, reason)``: how many of a rank's samples an epoch may leave out as
  documented (``drop_last`` drops an incomplete last batch per worker, for instance); 0: none.
* ``dp_loss(sc)`` -> ``(n, reason)``: the same for the union of all DP ranks.
* ``mixture_weights(sc)``: the sampling ratios a ``combined`` mixture must follow (default: the
  scenario's weights, or the sources' sizes when it has none).
* ``reshuffles(sc)`` -> ``(bool, reason)``: whether consecutive epochs' orders must differ, and the
  same with persistent and non-persistent workers.
* ``epoch_end(sc)`` -> ``(convention, reason)``: how a state saved after an epoch's last batch (its
  iterator not yet run out) restores: ``open`` (the default, torchdata's contract: the restored
  loader is still in that epoch, and a trainer that re-enters it gets no batch) or ``closed`` (the
  restored loader has moved on: its next ``iter()`` is the next epoch, and a trainer, knowing the
  epoch ended, moves on too); the reason quotes where the library says so. The schedules follow it
  (``loader_props.run_schedule``); a loader that restores the other way fails the resume properties.
* ``epoch_orders(sc)``: how many orders a shuffled epoch can take, where they are few enough that two epochs agree
  by chance (datasets' one-sample shuffle buffer: k shards, k! orders); None, the default: too many to matter.
  ``stream_epochs`` then asks the epochs to differ for at least one of several seeds (``reshuffles`` may say
  they need not for one).
* ``samples_of(sc, ids)``: for a loader that packs samples into windows and names every token by its sample
  (torchtitan's text loader), the samples a run's ids deliver, each once per delivery (a sample's tokens read
  twice count twice); None, the default: ``ids_of`` already gives one id per delivered sample.
* ``after_break(sc)`` -> ``(convention, reason)``: what the next ``iter()`` does after a loop broke off an
  epoch that a restore had resumed: ``fresh`` (the default: the next epoch) or ``replays`` (the loaded
  state again, as litdata documents). Where a scenario's epoch 0 breaks off after a restore in it, a
  ``replays`` loader is judged on that epoch alone (the adversarial properties run epoch 0 only), and
  the trainer models that break every epoch (Lightning's ``limit_train_batches``) skip naming it.

Knobs it can run (``mixes``, ``max_workers``, ``persistent``, ``batch_sizes``, ``drop_last``,
``shuffle``, ``dp``, ``break_early``) bound what the strategy draws; ``trainers`` names the trainer
models (``properties.trainers``) the loader is used with, as ``LoaderComponent.trainers`` does; ``unsupported(sc)`` turns a
replayed example outside them into a skip that names the knob (``knob_notes`` say why).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..loader_props import EPOCH_END_CONVENTIONS
from ..repro_setup import ReproSetup  # noqa: F401 - re-exported: the adapters import it from here
from .base import STATE_CODECS, Component, TargetError, check_trainers

Promise = tuple[Any, str]
RESUME_LEVELS = ("exact", "once", "none")
#: what the next iter() does after a loop broke off a resumed epoch (``StreamComponent.after_break``)
AFTER_BREAK_CONVENTIONS = ("fresh", "replays")
#: each declared convention's allowed values, the default first (``StreamComponent.declared``)
CONVENTIONS = {"epoch_end": EPOCH_END_CONVENTIONS, "after_break": AFTER_BREAK_CONVENTIONS}


def _exact(sc: Any) -> Promise:
    return "exact", ""


def _open(sc: Any) -> Promise:
    return "open", ""


def _fresh(sc: Any) -> Promise:
    return "fresh", ""


def _lossless(sc: Any) -> Promise:
    return 0, ""


def _weights(sc: Any) -> tuple[float, ...]:
    return tuple(sc.weights) if sc.weights else tuple(float(n) for n in sc.sources)


def _many(sc: Any) -> int | None:
    return None


def _reshuffles(sc: Any) -> Promise:
    return bool(sc.shuffle), "" if sc.shuffle else "shuffle=False keeps one order"


@dataclass(frozen=True, kw_only=True)
class StreamComponent(Component):
    kind: str = "stream"
    make_loader: Callable[[Any], Any]
    ids_of: Callable[[Any], tuple]
    state_codec: str = "pickle"
    resume_promise: Callable[[Any], Promise] = _exact
    epoch_loss: Callable[[Any], Promise] = _lossless
    dp_loss: Callable[[Any], Promise] = _lossless
    reshuffles: Callable[[Any], Promise] = _reshuffles
    epoch_orders: Callable[[Any], int | None] = _many
    mixture_weights: Callable[[Any], tuple[float, ...]] = _weights
    epoch_end: Callable[[Any], Promise] = _open
    after_break: Callable[[Any], Promise] = _fresh
    mixes: tuple[str, ...] = ("single",)
    max_workers: int = 3
    persistent: tuple[bool, ...] = (False, True)
    batch_sizes: tuple[int, ...] = (1, 2, 3)
    drop_last: tuple[bool, ...] = (False, True)
    shuffle: tuple[bool, ...] = (False, True)
    dp: bool = True
    break_early: bool = True
    knob_notes: Mapping[str, str] = field(default_factory=dict)
    trainers: tuple[str, ...] = ("torchdata", "adversarial")
    #: a trainer that runs a step budget rather than epochs (torchtitan's training.steps): its budget for a
    #: scenario; None: until the loader runs out
    training_steps: Callable[[Any], int | None] | None = None
    #: a packing loader's delivered samples from a run's token ids (see the module docstring); None: ids are samples
    samples_of: Callable[[Any, list], list] | None = None
    #: the loader as standalone code for ``properties.repro``: ``repro_setup(sc)`` -> ``ReproSetup``; None: this
    #: component writes no standalone script
    repro_setup: Callable[[Any], "ReproSetup"] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.kind != "stream":
            raise TargetError(f"StreamComponent {self.name!r} must have kind='stream', got {self.kind!r}")
        if self.state_codec not in STATE_CODECS:
            raise TargetError(f"StreamComponent {self.name!r} has state_codec={self.state_codec!r}; allowed values: "
                              f"{', '.join(STATE_CODECS)}")
        for knob in ("mixes", "persistent", "batch_sizes", "drop_last", "shuffle"):
            if not getattr(self, knob):
                raise TargetError(f"StreamComponent {self.name!r}: {knob} must allow at least one value")
        check_trainers(self)

    def declared(self, name: str, sc: Any) -> Promise:
        """A declared convention (``epoch_end`` or ``after_break``) for ``sc``, checked: one of its allowed values,
        and a reason for any but the default."""
        allowed = CONVENTIONS[name]
        convention, reason = getattr(self, name)(sc)
        if convention not in allowed:
            raise TargetError(f"StreamComponent {self.name!r}: {name} returned {convention!r}; allowed values: "
                              f"{', '.join(allowed)}")
        if convention != allowed[0] and not reason:
            raise TargetError(f"StreamComponent {self.name!r}: {name} {convention!r} needs its reason (where the "
                              "library documents that convention)")
        return convention, reason

    def epoch_end_convention(self, sc: Any) -> str:
        return self.declared("epoch_end", sc)[0]

    def replays_after_break(self, sc: Any) -> str | None:
        """The reason, where the loader documents that the next ``iter()`` after a broken-off resumed epoch
        replays the loaded state and this scenario breaks off epoch 0 after a restore in it; else None."""
        convention, reason = self.declared("after_break", sc)
        if convention == "fresh" or sc.break_after is None:
            return None
        return reason if any(0 < k <= sc.break_after for k in sc.checkpoints) else None

    def unsupported(self, sc: Any) -> str | None:
        def why(knob: str, value: Any, allowed: str) -> str:
            note = self.knob_notes.get(knob)
            return f"{knob}={value!r} is not supported by {self.name} ({note or 'allowed: ' + allowed})"

        if sc.mix not in self.mixes:
            return why("mix", sc.mix, str(self.mixes))
        if sc.num_workers > self.max_workers:
            return why("num_workers", sc.num_workers, f"0..{self.max_workers}")
        if sc.num_workers and sc.persistent_workers not in self.persistent:
            return why("persistent_workers", sc.persistent_workers, str(self.persistent))
        if sc.batch_size not in self.batch_sizes:
            return why("batch_size", sc.batch_size, str(self.batch_sizes))
        if sc.drop_last not in self.drop_last:
            return why("drop_last", sc.drop_last, str(self.drop_last))
        if sc.shuffle not in self.shuffle:
            return why("shuffle", sc.shuffle, str(self.shuffle))
        if sc.dp_size > 1 and not self.dp:
            return why("dp_size", sc.dp_size, "1")
        if sc.break_after is not None and not self.break_early:
            return why("break_after", sc.break_after, "None")
        return None
