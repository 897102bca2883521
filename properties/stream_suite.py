"""The streaming-loader properties (kind ``stream``): each check below is declared with ``@prop``.

Each draws a ``StreamScenario`` the component supports and holds the loader to what the component
says it promises for that scenario (``StreamComponent.resume_promise``, ``epoch_loss``,
``dp_loss``, ``reshuffles``), so a documented weakness is checked as documented, not reported as
a bug, and an undocumented one fails. Every example writes or builds small local datasets and
starts real worker processes, so a property runs a fraction of the profile's examples.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from . import stream_props as S
from . import trainers as T
from .errors import Unsupported
from .registry import prop
from .strategies import dp_half_the_time
from .stream_scenarios import StreamScenario, decode_stream_scenario, encode_stream_scenario, stream_scenarios
from .targets.stream import StreamComponent
from .watchdog import pass_bound

STREAM = frozenset({"stream"})


def _supported(component: StreamComponent, sc: StreamScenario) -> None:
    reason = component.unsupported(sc)
    if reason:
        raise Unsupported(reason)


#: the properties that add restores at every epoch end themselves (``stream_props.with_boundaries``)
ADDS_EPOCH_END_RESTORES = ("stream_resume", "stream_mixture")


def judged(component: StreamComponent, sc: StreamScenario, prop: str = "") -> StreamScenario:
    """The scenario as the adversarial property ``prop`` judges it: where the loader documents that the next
    ``iter()`` after a broken-off resumed epoch replays the loaded state (``StreamComponent.after_break``) and epoch 0
    breaks off after a restore in it, epoch 0 alone (what comes next is that documented replay). A restore at the
    break itself counts: the epoch-end restore of ``restore_at_epoch_end``, or of ``prop`` where it adds one."""
    if sc.break_after is None:
        return sc
    at_break = sc.restore_at_epoch_end or prop in ADDS_EPOCH_END_RESTORES
    restores = replace(sc, checkpoints=tuple(sorted({*sc.checkpoints, *([sc.break_after] if at_break else [])})))
    return replace(sc, epochs=1) if component.replays_after_break(restores) else sc


def _stream(component: Any) -> str | None:
    if not isinstance(component, StreamComponent):
        return ("a stream property needs a properties.targets.stream.StreamComponent; "
                f"{getattr(component, 'name', '?')} is a plain Component")
    return None


def _adversarial(component: Any) -> str | None:
    """The properties that drive the loader through every order its API allows run as the
    ``adversarial`` trainer model: only where it is selected (``--trainer``)."""
    return _stream(component) or T.adversarial_skip(component)


def trainer_kw(component: StreamComponent, trainer: str, sc: StreamScenario) -> dict:
    """What ``trainer`` needs to drive this component on ``sc``: one micro-batch of ids a step, the
    state codec, for Lightning the scenario's early break as ``limit_train_batches`` (which bounds
    every epoch, not only the first), for torchtitan the component's ``training_steps``."""
    kw = {"ids_of": lambda batch: (tuple(component.ids_of(batch)),), "codec": component.state_codec}
    if trainer.startswith("lightning"):
        kw["limit_train_batches"] = sc.break_after
    if trainer == "torchtitan":
        kw["training_steps"] = component.training_steps(sc) if component.training_steps else None
    return kw


def trainer_kills(sc: StreamScenario) -> tuple[int, ...]:
    """Where a stream scenario preempts a trainer: its checkpoint batches, as global steps (0 is no preemption)."""
    return tuple(sorted({k for k in sc.checkpoints if k > 0}))


def check_trainer_resume(component: StreamComponent, sc: StreamScenario, trainer: str) -> None:
    """Preempt ``trainer`` after the scenario's checkpoint batches (as global steps): what survives
    must be its uninterrupted run, batch for batch where the loader promises an exact resume, each
    sample once per epoch where it promises that, and at most once where it documents losing some."""
    level, reason = component.resume_promise(sc)
    kills = trainer_kills(sc)
    convention, why = component.declared("after_break", sc)
    if convention == "replays" and trainer.startswith("lightning") and sc.break_after is not None and kills:
        # limit_train_batches breaks off every epoch, so every preemption's epoch is a broken-off resumed one
        raise Unsupported(f"{T.under_trainer(trainer)} with limit_train_batches={sc.break_after}, preempted after "
                          f"{list(kills)}: {component.name} documents that the next epoch then replays the loaded "
                          f"state ({why})")
    if level == "none":
        # a documented loss on resume ("examples from shuffle buffers are lost") is no licence to deliver twice
        T.check_under(T.get(trainer), component.make_loader, sc, kills, lossy=True,
                      allowed=sc.all_ids() if sc.dp_size == 1 else None, **trainer_kw(component, trainer, sc))
        return
    # which samples an epoch holds must not depend on its order or on the loader's state: no documented drop,
    # no weighted draw, no parallel mixture (an epoch is its sources' next items, wherever their cycles are),
    # and no limit_train_batches (an epoch cut short holds whichever samples came first)
    fixed = (component.epoch_loss(sc)[0] == 0 and not (sc.mix == "combined" and sc.weights)
             and sc.mix != "parallel" and sc.break_after is None)
    T.check_under(T.get(trainer), component.make_loader, sc, kills, ordered=level == "exact", fixed_epochs=fixed,
                  **trainer_kw(component, trainer, sc))


def _kw(component: StreamComponent) -> dict:
    return {"ids_of": component.ids_of, "codec": component.state_codec}


def _restoring_kw(component: StreamComponent, sc: StreamScenario) -> dict:
    """What a run with restores needs too: how the loader restores a state saved after an epoch's last batch."""
    return {**_kw(component), "epoch_end": component.epoch_end_convention(sc)}


def stream_prop(name: str, *, doc: str, examples, not_for=_stream, cost: int = 5):
    return prop(name, kinds=STREAM, doc=doc, examples=examples, encode=encode_stream_scenario,
                decode=decode_stream_scenario, not_for=not_for, cost=cost)


def _no_parallel(c: StreamComponent) -> tuple[str, ...]:
    return tuple(m for m in c.mixes if m != "parallel") or c.mixes


def _epochs(component: Any) -> str | None:
    if _stream(component):
        return _stream(component)
    if component.max_workers < 1 or set(component.persistent) != {True, False}:
        return "compares persistent with non-persistent workers; the component supports only one of them"
    return None


def _dp(component: Any) -> str | None:
    if _stream(component):
        return _stream(component)
    if not component.dp:
        return component.knob_notes.get("dp_size", "the component reads no DP shards (dp_size > 1 unsupported)")
    return None


def _mixture(component: Any) -> str | None:
    if _stream(component):
        return _stream(component)
    if "combined" not in component.mixes:
        return "the component has no weighted mixture (mix='combined')"
    return None


# ---- the properties --------------------------------------------------------------------------

@stream_prop("stream_resume", examples=stream_scenarios, not_for=_adversarial,
             doc="a resume (at batch 0, mid-epoch, twice, exactly at an epoch end, on the next epoch's first batch, "
                 "after the loop broke early, each perhaps followed at once by a checkpoint of the restored loader) "
                 "continues the uninterrupted stream batch for batch where the loader "
                 "promises it, and delivers each epoch's samples once where it promises only that")
def stream_resume(component: StreamComponent, sc: StreamScenario) -> None:
    _supported(component, sc)
    sc = judged(component, sc, "stream_resume")
    level, reason = component.resume_promise(sc)
    if level == "exact":
        S.check_exact_resume(component.make_loader, sc, **_restoring_kw(component, sc))
    elif level == "once":
        S.check_once_resume(component.make_loader, sc, **_restoring_kw(component, sc))
    else:
        raise Unsupported(f"{component.name} promises nothing on a resume here: {reason}")


@stream_prop("stream_exactly_once", not_for=_adversarial, examples=lambda c: stream_scenarios(c, mix=None if len(_no_parallel(c)) > 1
                                                                        else _no_parallel(c)[0]),
             doc="every epoch delivers each of the rank's samples at most once and leaves out no more than the loader "
                 "documents (drop_last), over checkpoint schedules and an epoch after an early break")
def stream_exactly_once(component: StreamComponent, sc: StreamScenario) -> None:
    _supported(component, sc)
    if sc.mix == "parallel":
        raise Unsupported("a parallel mixture cycles its sources: a sample may recur within an epoch by design")
    sc = judged(component, sc, "stream_exactly_once")
    loss, reason = component.epoch_loss(sc)
    t = S.run_stream(component.make_loader, sc, **_restoring_kw(component, sc))
    expected = sc.all_ids() if sc.dp_size == 1 else None
    for epoch in range(sc.epochs):
        ids = t.epoch_ids(epoch)
        S.check_epoch(ids, expected if expected is not None else set(ids), epoch=epoch, loss=loss,
                      loss_reason=reason, where=S.schedule(sc), partial=epoch == 0 and sc.break_after is not None)


@stream_prop("stream_epochs", not_for=_epochs, cost=5,
             examples=lambda c: stream_scenarios(c, mix="single", checkpoints=False, min_workers=1, shuffle=True),
             doc="with shuffle, epoch e's order is the same under persistent and non-persistent workers and "
                 "consecutive epochs differ; where an epoch can take so few orders that two agree by chance "
                 "(StreamComponent.epoch_orders), epoch 1 differs from epoch 0 for at least one of the seeds that "
                 "make a chance replay for all of them unlikely (1e-9)")
def stream_epochs(component: StreamComponent, sc: StreamScenario) -> None:
    for persistent in (True, False):
        _supported(component, replace(sc, persistent_workers=persistent))
    if sum(sc.sources) < 12:
        raise Unsupported("fewer than 12 samples: two shuffled epochs may agree by chance")
    must, _ = component.reshuffles(sc)
    S.check_reshuffle(component.make_loader, sc, must_differ=bool(must), **_kw(component))
    if (seeds := epoch_seeds(component, sc)) is not None and seeds > 1:
        S.check_reshuffle_across_seeds(component.make_loader, sc, orders=component.epoch_orders(sc), **_kw(component))


def epoch_seeds(component: StreamComponent, sc: StreamScenario) -> int | None:
    """How many seeds ``stream_epochs`` holds epoch 1 apart from epoch 0 over: 1 where the component says one seed's
    epochs must differ, ``seeds_to_tell`` of its ``epoch_orders`` where they are few, None where it holds none."""
    if not sc.shuffle:
        return None
    if component.reshuffles(sc)[0]:
        return 1
    orders = component.epoch_orders(sc)
    return None if orders is None else S.seeds_to_tell(orders)


@stream_prop("stream_persistent_workers", not_for=_epochs, cost=5,
             examples=lambda c: stream_scenarios(c, min_workers=1, max_workers=1),
             doc="one persistent worker delivers batch for batch what one non-persistent worker does under the same "
                 "schedule (restores, epoch ends, an early break and the next iter() of a broken-off resumed epoch): "
                 "persistent_workers keeps processes alive, it must change no batch")
def stream_persistent_workers(component: StreamComponent, sc: StreamScenario) -> None:
    # one worker: with two or more, which batches a restore finds in flight is timing, persistent or not
    for persistent in (True, False):
        _supported(component, replace(sc, persistent_workers=persistent))
    S.check_persistence(component.make_loader, sc, **_restoring_kw(component, sc))


@stream_prop("stream_no_hang", examples=lambda c: dp_half_the_time(stream_scenarios, c),
             doc="every rank's epochs end (a stream endless by design, such as torchtitan's infinite one, is driven "
                 "as its trainer drives it, to the trainer's step count): a pass yields a bounded number of batches "
                 "and every iter() and next() returns within the wall-time bound (--step-timeout; "
                 "properties.watchdog), or the run fails naming the schedule and where it stopped instead of hanging")
def stream_no_hang(component: StreamComponent, sc: StreamScenario) -> None:
    _supported(component, sc)
    for rank in range(sc.dp_size):
        at_rank = replace(sc, dp_rank=rank)
        if component.training_steps is None:
            S.run_stream(component.make_loader, at_rank, **_restoring_kw(component, at_rank))
            continue
        for trainer in T.real_trainers(component):   # endless: the trainer's own step count ends the run
            T.get(trainer).run(component.make_loader, at_rank, **trainer_kw(component, trainer, at_rank))


@stream_prop("stream_dp_shards", not_for=_dp, cost=10,
             examples=lambda c: stream_scenarios(c, mix="single", checkpoints=False, dp=True),
             doc="DP ranks read disjoint shards whose union is the dataset, every epoch, up to what the loader "
                 "documents it drops to even out ranks")
def stream_dp_shards(component: StreamComponent, sc: StreamScenario) -> None:
    _supported(component, sc)
    loss, reason = component.dp_loss(sc)
    S.check_dp(component.make_loader, sc, loss=loss, loss_reason=reason, **_kw(component))


@stream_prop("stream_mixture", not_for=_mixture, cost=5, examples=lambda c: stream_scenarios(c, mix="combined"),
             doc="a weighted mixture draws each source at its weight (until a source runs out), in every epoch, "
                 "uninterrupted and after resumes")
def stream_mixture(component: StreamComponent, sc: StreamScenario) -> None:
    _supported(component, sc)
    sc = judged(component, sc, "stream_mixture")
    S.check_mixture(component.make_loader, sc, weights=component.mixture_weights(sc), **_restoring_kw(component, sc))


def _has_real_trainer(component: Any) -> str | None:
    return _stream(component) or T.no_real_trainer(component)


@stream_prop("stream_trainer_resume", not_for=_has_real_trainer, examples=stream_scenarios,
             doc="under every trainer model the loader declares (properties.trainers), preempting the job after the "
                 "drawn batches and restarting it as that trainer restarts leaves what it trains unchanged: batch for "
                 "batch where the loader promises an exact resume, each sample once per epoch where it promises that")
def stream_trainer_resume(component: StreamComponent, sc: StreamScenario) -> None:
    _supported(component, sc)
    for trainer in T.real_trainers(component):
        check_trainer_resume(component, sc, trainer)


def _epochs_under_a_trainer(component: Any) -> str | None:
    why = _has_real_trainer(component)
    if why:
        return why
    if all(T.get(t).no_epochs for t in T.real_trainers(component)) and component.training_steps is not None:
        return ("the component's trainers have no epochs and re-loop this endless loader to their training.steps: a "
                "sample recurs by design (stream_trainer_resume judges the run)")
    return None


@stream_prop("stream_trainer_epochs", not_for=_epochs_under_a_trainer, cost=5,
             examples=lambda c: stream_scenarios(c, checkpoints=False, mix=None if len(_no_parallel(c)) > 1
                                                 else _no_parallel(c)[0]),
             doc="under every trainer model the loader declares that runs epochs, an uninterrupted run delivers each "
                 "epoch's samples once and leaves out no more than the loader documents (a trainer that ends an "
                 "epoch after len() batches trains only what len() promised); under torchtitan's, which has no "
                 "epochs, a finite loader's one pass delivers each sample at most once")
def stream_trainer_epochs(component: StreamComponent, sc: StreamScenario) -> None:
    _supported(component, sc)
    if sc.mix == "parallel":
        raise Unsupported("a parallel mixture cycles its sources: a sample may recur within an epoch by design")
    loss, reason = component.epoch_loss(sc)
    expected = sc.all_ids() if sc.dp_size == 1 else None
    for trainer in T.real_trainers(component):
        model, kw = T.get(trainer), trainer_kw(component, trainer, sc)
        if model.no_epochs and component.training_steps is not None:
            continue   # an endless loader re-loops to training.steps: a sample recurs by design
        if model.no_epochs:
            # training.steps as a job sets it, twice what one pass may yield: a pass that reads its data twice
            # ends with its data and is judged by what it delivered, not stopped (unshrunk) as a runaway
            kw["training_steps"] = 2 * pass_bound(sc)
        t = model.run(component.make_loader, sc, **kw)
        # without epochs the run is the loader's one pass (epoch 0), and what a pass leaves out is the loader's
        # own bound (torchtitan never trains a last window short of seq_len): only what is delivered twice, or
        # from outside the rank's data, is judged there
        for epoch in range(1 if model.no_epochs else sc.epochs):
            ids = t.epoch_ids(epoch)
            if component.samples_of is not None:
                ids = component.samples_of(sc, ids)
            S.check_epoch(ids, expected if expected is not None else set(ids), epoch=epoch,
                          loss=None if model.no_epochs else loss, loss_reason=reason,
                          where=f"{T.under_trainer(trainer)}, uninterrupted", partial=sc.break_after is not None)
