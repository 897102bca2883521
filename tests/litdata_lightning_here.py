"""Real Lightning ``Trainer.fit`` runs on litdata, as functions a test calls in its own process (litdata as
released) or in a process whose litdata is a patched copy (``LITDATA.call(fixes, "tests.litdata_lightning_here:...")``,
tests/test_trainers_lightning.py). Each returns JSON: the (epoch, ids) steps trained."""

from __future__ import annotations

from properties.lightning_real import fit_adapter
from properties.stream_scenarios import StreamScenario
from studies.litdata import adapter as LT


def _ids(batch) -> tuple:
    return (tuple(LT.ids_of(batch)),)


def fit_here(sc: dict, preempt_after: list[int], every_n_train_steps: int = 0) -> list:
    """Trainer.fit over the scenario (``StreamScenario.to_json``), killed after ``preempt_after`` global steps
    and resumed from the last checkpoint (``every_n_train_steps``: ModelCheckpoint's; 0: its default)."""
    steps = fit_adapter(LT.make_loader, StreamScenario.from_json(sc), preempt_after=tuple(preempt_after),
                        ids_of=_ids, every_n_train_steps=every_n_train_steps)
    return [[epoch, [list(mb) for mb in ids]] for epoch, ids in steps]
