"""The harness's own runs of a saved stream or loader example, which a script written by ``python -m properties
repro`` must print (tests/test_repro_generated.py). Imports only the suite, so a subprocess in a library's overlay
(torchtitan's, VeOmni's builders') can compute them too."""

from __future__ import annotations

from dataclasses import replace

from properties import loader_props as L
from properties import stream_props as S
from properties import stream_suite as SS
from properties import trainers as T
from properties.scenarios import decode_loader_scenario
from properties.stream_scenarios import decode_stream_scenario
from properties.targets import resolve


def harness_runs(entry: dict) -> tuple[list, list] | str:
    """The harness's uninterrupted and resumed runs of the entry's example (stream_trainer_epochs: Lightning's or
    torchtitan's uninterrupted run and None; stream_epochs: the example's seed's run and None), or the crash as
    text."""
    sc = decode_stream_scenario(entry["example"])
    component = next(c for c in resolve(entry["target"]).components if c.name == entry["component"])
    if entry["property"] == "stream_trainer_epochs":   # the trainer's loop, uninterrupted: the one run the script prints
        name = "torchtitan" if T.under_trainer("torchtitan") in entry["message"] else "lightning"
        t = T.get(name).run(component.make_loader, sc, **SS.trainer_kw(component, name, sc))
        return [(e, mbs[0]) for e, mbs in t.steps], None
    kw = dict(ids_of=component.ids_of, codec=component.state_codec)
    if entry["property"] == "stream_epochs":   # the first seed's uninterrupted two epochs, the script's first line
        t = S.run_stream(component.make_loader, replace(sc, epochs=2, checkpoints=(), restore_at_epoch_end=False), **kw)
        return t.steps, None
    if entry["property"] != "stream_trainer_resume":
        sc = SS.judged(component, sc, entry["property"])
    if entry["property"] == "stream_trainer_resume":
        name = next((t for t in ("lightning-steps", "torchtitan") if T.under_trainer(t) in entry["message"]), "torchdata")
        trainer, kills = T.get(name), SS.trainer_kills(sc)
        runs = [trainer.run(component.make_loader, sc, preempt_after=k, **SS.trainer_kw(component, name, sc))
                for k in ((), kills)]
        # one micro-batch a step: the script prints its ids flat
        return tuple([(e, mbs[0]) for e, mbs in t.steps] for t in runs)
    try:
        plain = S.run_stream(component.make_loader, replace(sc, checkpoints=(), restore_at_epoch_end=False), **kw)
        schedule = S.with_boundaries(sc, plain) if entry["property"] in ("stream_resume", "stream_mixture") else sc
        resumed = S.run_stream(component.make_loader, schedule, epoch_end=component.epoch_end_convention(sc), **kw)
        return plain.steps, resumed.steps
    except Exception as e:  # noqa: BLE001 - a crashed worker raises whatever the library raised
        return f"{type(e).__name__}: {e}"


def loader_harness_runs(entry: dict) -> tuple[list, list]:
    """The harness's uninterrupted run of the entry's example and its run of the property's schedule (under
    VeOmni's trainer model: preempted; epoch_reshuffle: with persistent and with non-persistent workers)."""
    sc = decode_loader_scenario(entry["example"])
    component = resolve(entry["target"]).component(entry["component"])
    kw = dict(ids_of=component.ids_of or L.default_ids_of, codec=component.state_codec)
    if entry["property"] == "epoch_reshuffle":
        return tuple(L.run_schedule(component.make_loader, replace(sc, persistent_workers=p, checkpoints=()),
                                    **kw).steps for p in (True, False))
    if entry["property"] == "trainer_resume":
        bound = component.steps_per_epoch(sc)
        return tuple(T.VEOMNI.run(component.make_loader, sc, preempt_after=kills, steps_per_epoch=bound, **kw).steps
                     for kills in ((), tuple(sorted({k for k in sc.checkpoints if k > 0}))))
    plain = L.run_schedule(component.make_loader, replace(sc, checkpoints=(), restore_at_epoch_end=False), **kw)
    if entry["property"] == "loader_resume" and sc.in_order:   # step for step, restored at every epoch end too
        sc = L.with_boundary_restores(component.make_loader, sc, **kw)[1]
    return plain.steps, L.run_schedule(component.make_loader, sc, **kw).steps
