"""Your own loader under the suite, from one factory: ``loader_target(make_loader, ...)``.

A loader here is what a trainer holds: an object with ``set_epoch(epoch)``, ``__iter__`` (over
batches), ``state_dict()`` and ``load_state_dict(state)``, and optionally ``close()``. Most are a
``StatefulDataLoader`` with a sampler inside. ``make_loader(scenario)`` builds one on
``scenario.dataset()`` with the scenario's knobs; ``loader_target`` wraps it into a
``LoaderComponent`` with the defaults of a plain loader (one fetched batch per step, no packing,
the torchdata trainer contract), so the factory states only what differs.

What ``loader_target`` cannot know it asks for, and a wrong answer is one line naming the setting:
how to read the sample ids from a batch (``batch_ids``, default: the ``id`` field the scenario's
dataset puts in every sample, through the default collate or a list of samples), and what the loader
promises (``promises_order``: a resume continues the stream exactly with in_order=True;
``resumes_dropped_iterator``; the trainers it is used with).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from torch.utils.data import DataLoader

from ..errors import PropertyViolation
from ..loader_targets import DelegatingLoader, PlainStep, shutdown_workers
from .base import STATE_CODECS, LoaderComponent, Target, TargetError

BatchIds = Callable[[Any], Any]
REQUIRED = ("set_epoch", "__iter__", "state_dict", "load_state_dict")


def default_batch_ids(batch: Any) -> list:
    """The sample ids of a batch of the scenario's samples: ``batch["id"]`` after the default collate
    (a tensor or a list), or the ``id`` of each sample in a list of samples."""
    if isinstance(batch, Mapping) and "id" in batch:
        ids = batch["id"]
        return ids.tolist() if hasattr(ids, "tolist") else list(ids)
    if isinstance(batch, (list, tuple)) and all(isinstance(s, Mapping) and "id" in s for s in batch):
        return [s["id"] for s in batch]
    raise PropertyViolation(f"cannot read sample ids from a batch of type {type(batch).__name__}: pass "
                            "loader_target(..., batch_ids=lambda batch: <the batch's sample ids>)")


class OwnLoader(DelegatingLoader):
    """The user's loader (``self.dl``), unchanged, seen as steps; ``close`` calls its own ``close`` or,
    without one, stops the workers of a DataLoader it holds (the next loader's forked workers must not
    inherit them)."""

    def __init__(self, loader: Any, batch_ids: BatchIds):
        missing = [m for m in REQUIRED if not callable(getattr(loader, m, None))]
        if missing:
            raise TargetError(f"loader_target: make_loader returned a {type(loader).__name__}, which lacks "
                              f"{', '.join(m + '()' for m in missing)}; a loader needs {', '.join(REQUIRED)} "
                              "(close() is optional)")
        self.dl = loader
        self.batch_ids = batch_ids

    def __iter__(self):
        return (PlainStep(self.batch_ids(batch)) for batch in self.dl)

    def close(self) -> None:
        if self.dl is None:
            return
        if callable(getattr(self.dl, "close", None)):
            self.dl.close()
        else:
            # A loader without close() usually holds its DataLoader as an attribute (self.dl = ...).
            for dl in (self.dl, *getattr(self.dl, "__dict__", {}).values()):
                if isinstance(dl, DataLoader):
                    shutdown_workers(dl)
        self.dl = None


def loader_target(make_loader: Callable[[Any], Any], *, name: str = "loader", trainers: tuple[str, ...] = ("torchdata",),
                  batch_ids: BatchIds = default_batch_ids, promises_order: bool = True,
                  resumes_dropped_iterator: bool = False, state_codec: str = "pickle", max_workers: int = 3,
                  in_order: tuple[bool, ...] = (True, False), persistent: tuple[bool, ...] = (False, True),
                  dp: bool = True, stopping: tuple[str, ...] = ("epoch",),
                  steps_per_epoch: Callable[[Any], int] | None = None, skip: Mapping[str, str] | None = None,
                  description: str = "") -> Target:
    """A target of one loader component, ``loader:<name>``, for ``python -m properties check``.

    make_loader(scenario)    your loader on ``scenario.dataset()``: read ``fetch_batch_size``,
                             ``num_workers``, ``in_order``, ``persistent_workers``, ``shuffle_seed``,
                             ``dp_rank`` and ``dp_size`` from the scenario
    name                     the component is ``loader:<name>``
    trainers                 the trainer models it is used with (``python -m properties list``)
    batch_ids(batch)         the sample ids of one batch (default: the samples' ``id`` field)
    promises_order           with in_order=True a resume continues the stream sample for sample
                             (False: only exactly-once is checked)
    resumes_dropped_iterator a dropped iterator's epoch continues when iterated again
    state_codec              ``pickle`` (default; a StatefulDataLoader's state holds a generator
                             tensor) or ``json`` (your state must survive json.dumps)
    max_workers, in_order, persistent, dp
                             the knobs drawn: worker counts 0..max_workers, in_order values,
                             persistent_workers values, DP ranks (dp=False: one rank)
    stopping, steps_per_epoch
                             how a run is bounded (``LoaderComponent``): whole epochs by default
    skip                     {property: reason} for what the loader does not promise
    """
    for setting, value in (("name", name), ("description", description)):
        if not isinstance(value, str):
            raise TargetError(f"loader_target: {setting}={value!r} must be a string")
    for setting, fn in (("make_loader", make_loader), ("batch_ids", batch_ids)):
        if not callable(fn):
            raise TargetError(f"loader_target: {setting}={fn!r} must be callable")
    if state_codec not in STATE_CODECS:
        raise TargetError(f"loader_target: state_codec={state_codec!r}; allowed values: {', '.join(STATE_CODECS)}")
    for setting, values in (("trainers", trainers), ("in_order", in_order), ("persistent", persistent),
                            ("stopping", stopping)):
        if not isinstance(values, (tuple, list)):
            raise TargetError(f"loader_target: {setting}={values!r} must be a tuple of allowed values, e.g. "
                              f"({values!r},)")
    if not isinstance(max_workers, int) or isinstance(max_workers, bool) or not 0 <= max_workers <= 4:
        raise TargetError(f"loader_target: max_workers={max_workers!r}; allowed values: 0..4 (the suite runs "
                          "at most 4 worker processes)")

    def make(scenario: Any) -> OwnLoader:
        return OwnLoader(make_loader(scenario), batch_ids)

    component = LoaderComponent(
        name=f"loader:{name}", make_loader=make, state_codec=state_codec, promises_order=promises_order,
        resumes_dropped_iterator=resumes_dropped_iterator, trainers=tuple(trainers), max_workers=max_workers,
        in_order=tuple(in_order), persistent=tuple(persistent), dp=dp, stopping=tuple(stopping),
        steps_per_epoch=steps_per_epoch, skip=dict(skip or {}), micro_batches_per_step=(1,), warmup=False,
        knob_notes={"micro_batches_per_step": "a plain loader hands out one fetched batch per step",
                    "warmup_steps": "a plain loader does not pack, so it has no batch-size warm-up"})
    return Target(name=name, components=(component,), description=description or f"{name} (loader_target)")
