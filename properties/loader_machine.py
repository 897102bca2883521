"""The loader state machine: sequences of operations on a loader, as a Hypothesis
``RuleBasedStateMachine`` (the ``loader_stateful`` property).

Interleaves taking steps, checkpoint-and-restore into a fresh loader, dropping the iterator
mid-epoch (closing the loader) and iterating again, running an epoch out and moving to the next
(set_epoch), in any order. The model is the uninterrupted run of the same scenario: where the
loader promises order (in_order=True) every step taken must be the model's next step (its
signature: for dynbsz the step index, each micro-batch's ids and budget); otherwise every epoch
must deliver each sample at most once, and all of them once it is over.

The machine is built for a loader component (``machine_for``: its factory, knobs and checkpoint
codec), so every loader target's components run it, dynbsz's mutants included. A run is recorded
as it goes as a ``LoaderProgram`` (scenario and operations): the failing run's program is the
minimal example, saved and replayed exactly by ``replay`` outside Hypothesis.
"""

from __future__ import annotations

import traceback
from collections import Counter
from dataclasses import replace
from typing import Any, Callable

from hypothesis import reject
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from . import coverage
from .errors import PropertyViolation, Unsupported
from .loader_props import MULTI_WORKER, RESTORE_MID_EPOCH, default_ids_of, roundtrip
from .scenarios import LoaderProgram, LoaderScenario
from .strategies import start_methods
from .watchdog import LoaderHang, StopSearch, Watch

#: Epochs of a program's scenario, and operations per run (Hypothesis's stateful_step_count).
EPOCHS = 3
STEPS = 25
DROPPED_MID_EPOCH = "iterator dropped mid-epoch"
OUT_OF_ORDER_RESTORE = "restore mid-epoch out of order"


class Driver:
    """Runs a program's operations on loaders a component makes, and checks the model after each."""

    def __init__(self, component: Any, sc: LoaderScenario):
        reason = component.unsupported(sc)
        if reason:
            raise Unsupported(reason)
        self.component, self.sc = component, sc
        self.make = component.make_loader
        self.ids_of: Callable[[Any], tuple] = component.ids_of or default_ids_of
        self.signature: Callable[[Any], Any] = component.signature or self.ids_of
        self.codec = component.state_codec
        self.ordered = component.promises_order if sc.in_order else component.promises_order_under_out_of_order
        self._model: list | None = None
        # Built at the first operation: Hypothesis also starts runs it abandons before any rule,
        # which then cost nothing.
        self.loader: Any = None
        self.it: Any = None
        self.epoch = 0
        self.seen: list[tuple[int, Any, tuple]] = []   # (epoch, signature, ids) of every step taken
        self.watch = Watch(sc, "the loader state machine's program")
        self.epoch_over = False

    @property
    def model(self) -> list[tuple[int, Any]]:
        if self._model is None:
            self._model = self._uninterrupted() if self.ordered else []
        return self._model

    def _start(self) -> None:
        if self.loader is None:
            if self.sc.num_workers >= 2:
                coverage.reached(MULTI_WORKER)
            self.loader = self.make(self.sc)
            self.loader.set_epoch(0)
            self.it = self.watch.iter(self.loader, 0)

    def _uninterrupted(self) -> list[tuple[int, Any]]:
        loader = self.make(self.sc)
        try:
            out = []
            watch = Watch(self.sc, "the uninterrupted run the program is compared with")
            for e in range(self.sc.epochs):
                loader.set_epoch(e)
                out.extend((e, self.signature(step)) for step in watch.iter(loader, e))
            return out
        finally:
            loader.close()

    def finished(self) -> bool:
        """The last epoch ran out."""
        return self.epoch_over and self.epoch + 1 >= self.sc.epochs

    def taken_this_epoch(self) -> int:
        return sum(1 for e, _, _ in self.seen if e == self.epoch)

    # ---- the operations ------------------------------------------------------------------------

    def do(self, op: str) -> None:
        self._start()
        getattr(self, "op_" + op)()

    def op_step(self) -> None:
        if self.epoch_over:
            return
        try:
            step = next(self.it)
        except StopIteration:
            self.epoch_over = True
            return
        self.seen.append((self.epoch, self.signature(step), tuple(s for mb in self.ids_of(step) for s in mb)))

    def op_restore(self) -> None:
        if not self.epoch_over and self.taken_this_epoch():
            coverage.reached(RESTORE_MID_EPOCH)
            if not self.sc.in_order and self.sc.num_workers >= 2:
                coverage.reached(OUT_OF_ORDER_RESTORE)
        state = roundtrip(self.loader.state_dict(), self.codec)
        self.it = None
        self.loader.close()
        self.loader = self.make(self.sc)
        self.loader.load_state_dict(state)
        self.loader.set_epoch(self.epoch)
        self.it = self.watch.iter(self.loader, self.epoch)

    def op_drop(self) -> None:
        # A training loop that breaks out (its workers shut down) and iterates again.
        if self.epoch_over:
            return
        if self.taken_this_epoch():
            coverage.reached(DROPPED_MID_EPOCH)
        self.it = None
        self.loader.close()
        self.it = self.watch.iter(self.loader, self.epoch)

    def op_next_epoch(self) -> None:
        if not self.epoch_over or self.epoch + 1 >= self.sc.epochs:
            return
        self.epoch += 1
        self.it = None
        self.loader.set_epoch(self.epoch)
        self.it = self.watch.iter(self.loader, self.epoch)
        self.epoch_over = False

    def close(self) -> None:
        self.it = None
        if self.loader is not None:
            self.loader.close()

    # ---- the model -----------------------------------------------------------------------------

    def check(self, ops: tuple[str, ...]) -> None:
        if not ops:
            return
        where = f"after {len(ops)} operations {_short(ops)}"
        if self.ordered:
            got = [(e, sig) for e, sig, _ in self.seen]
            k = next((i for i, (a, b) in enumerate(zip(got, self.model)) if a != b), None)
            if k is not None:
                raise PropertyViolation(f"loader state machine: step {k} differs from the uninterrupted run {where}: "
                                        f"{got[k]} vs {self.model[k]}")
            if len(got) > len(self.model):
                raise PropertyViolation(f"loader state machine: {len(got)} steps delivered, the uninterrupted run has "
                                        f"{len(self.model)} {where}")
            if self.epoch_over and len([1 for e, _ in got if e == self.epoch]) != \
                    len([1 for e, _ in self.model if e == self.epoch]):
                raise PropertyViolation(f"loader state machine: epoch {self.epoch} ended early {where}")
            return
        for e in range(self.epoch + 1):
            ids = Counter(sid for ep, _, sids in self.seen if ep == e for sid in sids)
            repeated = sorted(k for k, c in ids.items() if c > 1)
            if repeated:
                raise PropertyViolation(f"loader state machine: epoch {e} delivered {repeated[:10]} more than once "
                                        f"{where}")
            if (e < self.epoch or self.epoch_over) and self.sc.dp_size == 1:
                lost = sorted(set(range(self.sc.num_samples)) - set(ids))
                if lost:
                    raise PropertyViolation(f"loader state machine: epoch {e} ended without {lost[:10]} {where}")


def _short(ops: tuple[str, ...]) -> str:
    """['step x3', 'restore', ...]: a program's operations, runs folded."""
    out: list[str] = []
    for op in ops:
        if out and out[-1].split(" x")[0] == op:
            head, _, k = out[-1].partition(" x")
            out[-1] = f"{head} x{int(k or 1) + 1}"
        else:
            out.append(op)
    return "[" + ", ".join(out) + "]"


def replay(component: Any, program: LoaderProgram) -> None:
    """Run a recorded program outside Hypothesis, checking the model after every operation."""
    driver = Driver(component, program.scenario)
    try:
        for k, op in enumerate(program.ops):
            driver.do(op)
            driver.check(program.ops[:k + 1])
    finally:
        driver.close()


def scenarios(component: Any) -> st.SearchStrategy[LoaderScenario]:
    """The loaders a program runs on (``restore_at_epoch_end=True`` says it is checkpointed: the
    restores themselves are the program's): 10-24 samples, three epochs, no or two workers (two out of
    order), the component's in_order, persistence and micro-batches per step, its balanced order and
    reorder buffer where it has them, and with workers its start method (``strategies.start_methods``:
    the default or fork, never spawn). Out of order (and behind a reorder buffer) slow
    samples cost 20 ms and are 30% of the samples, so deliveries are out of order at most restores."""
    workers = [w for w in (0, 2) if w <= component.max_workers]

    @st.composite
    def draw(draw_):
        in_order = draw_(st.sampled_from(component.in_order))
        # out of order needs workers (without them in_order=False is a FIFO all the same)
        w = draw_(st.sampled_from([w for w in workers if w] or workers) if not in_order else st.sampled_from(workers))
        order = draw_(st.sampled_from(component.orders)) if w else "sampler"
        reorder = draw_(st.sampled_from([0, 2])) if component.reorder_buffer and in_order and w else 0
        seed = draw_(st.integers(0, 99))
        sc = LoaderScenario(
            num_samples=draw_(st.integers(10, 24)), data_seed=seed, shuffle_seed=seed, num_workers=w,
            prefetch_factor=2 if w else None, persistent_workers=draw_(st.sampled_from(component.persistent)) if w
            else False, in_order=in_order, runtime=component.runtime, budget=256, buffer_size=3,
            micro_batches_per_step=draw_(st.sampled_from(component.micro_batches_per_step)), epochs=EPOCHS,
            # the program checkpoints anywhere: said so, for adapters that refuse checkpointed scenarios
            restore_at_epoch_end=True,
            slow_s=0.02 if not in_order or reorder else 0.004, video_share=0.3 if not in_order or reorder else 0.2,
            order=order,
            lookahead=draw_(st.integers(1, 4)) if order == "balanced" else LoaderScenario.lookahead,
            reorder_buffer=reorder)
        # drawn last, so the draws before it stay as they were; never spawn: a program restores again and
        # again, each time starting spawned workers afresh (about 3 s apiece on two cores), and one ci run
        # with spawn allowed here failed loader_stateful flakily under load (22:36 UTC, 2026-12-01)
        return replace(sc, start_method=draw_(start_methods(component, spawn=False))) if w else sc

    return draw()


def machine_for(component: Any) -> type[RuleBasedStateMachine]:
    """A state machine class driving loaders that ``component`` makes. The runner sets the class
    attributes ``observe(labels)`` (called with what each run reached) and ``on_violation(program,
    message)``; ``last_program`` is the running (or last) run as a ``LoaderProgram``."""

    # "step" first: the simplest program only steps (what shrinking moves towards). Restores thrice.
    ops = ("step", "restore", "restore", "restore") + (("drop",) if component.resumes_dropped_iterator else ())

    class LoaderMachine(RuleBasedStateMachine):
        step_count = STEPS
        last_program: LoaderProgram | None = None
        observe: Callable[[set], None] = staticmethod(lambda labels: None)
        on_violation: Callable[[Any, str], None] = staticmethod(lambda program, message: None)

        def __init__(self) -> None:
            super().__init__()
            self.driver: Driver | None = None
            self.ops: list[str] = []
            self.labels = coverage.begin()

        def _record(self) -> LoaderProgram:
            program = LoaderProgram(self.driver.sc if self.driver else LoaderScenario(), tuple(self.ops))
            type(self).last_program = program
            return program

        def _guard(self, action: Callable[[], None]) -> None:
            try:
                action()
            except LoaderHang as e:
                type(self).on_violation(self._record(), f"{e} (after {_short(tuple(self.ops))})")
                traceback.clear_frames(e.__traceback__)
                raise StopSearch(e) from e   # not shrunk: every attempt would wait the bound out again
            except PropertyViolation as e:
                type(self).on_violation(self._record(), str(e))
                raise
            except Unsupported:
                reject()   # a scenario this component cannot run (a knob, a documented deviation): no evidence
            except Exception as e:  # noqa: BLE001 - a target that crashes on a valid sequence fails it
                text = " ".join(str(e).split())
                message = (f"loader state machine: the target raised {type(e).__name__}: {text} (after "
                           f"{_short(tuple(self.ops))})")
                type(self).on_violation(self._record(), message)
                # The traceback holds the loader's frames, and through them its torch iterator: drop their
                # locals now, so the workers shut down here rather than at a garbage collection that may
                # run inside a later forked worker.
                traceback.clear_frames(e.__traceback__)
                raise PropertyViolation(message) from e

        @initialize(sc=scenarios(component))
        def build(self, sc: LoaderScenario) -> None:
            self.ops = []

            def make() -> None:
                self.driver = Driver(component, sc)

            type(self).last_program = LoaderProgram(sc, ())
            self._guard(make)

        def _op(self, op: str, then: int = 0, before: int = 0) -> None:
            """Up to ``before`` steps, one operation, then up to ``then`` steps: every rule moves the
            run forward, so a run of 25 rules restores and drops between steps (mid-epoch, where
            what was delivered ahead or is still buffered matters) rather than in long runs of its own."""
            for name in ["step"] * before + [op] + ["step"] * then:
                if name == "step" and self.driver.epoch_over:
                    continue
                self.ops.append(name)
                self._record()
                self._guard(lambda: self.driver.do(name))

        # One rule for every operation: Hypothesis's swarm testing switches whole rules off in some
        # runs, and a run without restores would be most of the runs' loss. An epoch that ran out is
        # followed by the next one first. Its precondition reads nothing the loader did: where an epoch
        # runs out is timing out of order (arrival order changes the packing), and a rule choice that
        # followed it made two runs of the same choices draw differently, which Hypothesis reports as
        # Flaky ("Inconsistent data generation"; 2 of 3 ci runs on dynbsz with two busy-loops beside
        # them). After the last epoch ran out, the rule does nothing.
        @precondition(lambda self: self.driver is not None)
        @rule(op=st.sampled_from(ops), before=st.integers(0, 3), then=st.integers(0, 4))
        def act(self, op: str, before: int, then: int) -> None:
            if self.driver.finished():
                return
            if self.driver.epoch_over:
                self._op("next_epoch")
            # A restore comes after at least one step of its epoch: mid-epoch, or exactly at its end.
            self._op(op, then, max(before, 1) if op == "restore" else before)

        @invariant()
        def matches_the_uninterrupted_run(self) -> None:
            if self.driver is not None:
                self._guard(lambda: self.driver.check(tuple(self.ops)))

        def teardown(self) -> None:
            try:
                if self.driver is not None:
                    self.driver.close()
            finally:
                coverage.end(self.labels)
                if self.ops:   # a run Hypothesis abandoned before its first operation is no example
                    type(self).observe(self.labels)

    LoaderMachine.__name__ = LoaderMachine.__qualname__ = f"LoaderMachine[{component.name}]"
    return LoaderMachine
