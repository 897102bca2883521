"""A loader driven by VeOmni 0.1.12's own training loop, not by a copy of it.

``BaseTrainer.train`` (trainer/base.py:925-972) and its ``CheckpointerCallback`` (checkpoint_callback.py: a save
every ``save_steps`` global steps and at every ``save_epochs``-th epoch end, and on resume ``global_step //
train_steps``, ``global_step % train_steps``, ``load_state_dict`` and the eager ``iter()``) run as installed, so
a diff to VeOmni's trainer runs here as written. What needs a model is left out, and only that:

* ``train_step`` keeps its first two statements (base.py:850-853: ``global_step += 1`` before ``next()``, so a
  ``StopIteration`` still spends a global step) and skips the forward, backward and optimizer step;
* the checkpointer keeps each checkpoint's ``extra_state`` in memory (pickled, as DCP stores non-tensor state)
  instead of writing shards, and the learning-rate scheduler and environment meter have no state;
* the callbacks' ``dist.barrier()`` runs on a gloo process group of one rank, which ``train`` destroys at its end;
* VeOmni's memory housekeeping, ``helper.empty_cache`` (a ``gc.collect()``, 0.2 s here, around every save) and
  ``helper.print_device_mem_info`` (a one-second sleep at every epoch end), does nothing: it frees and reports
  device memory, and no loader state depends on it.

A preemption is an exception raised after a step's ``on_step_end`` (the checkpoint save included), at the first
trained global step at or past each kill, as the trainer model ``veomni`` (properties/trainers.py) fires them;
the next job is a new trainer and a freshly built loader with ``load_path`` set to the latest checkpoint.
tests/test_veomni_trainer_real.py checks the model against this loop.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import tempfile
from types import SimpleNamespace
from typing import Any, Callable

from properties.loader_props import Transcript, default_ids_of
from properties.scenarios import LoaderScenario

MISSING = "VeOmni 0.1.12's trainer is not importable (install the extra: bash ci/install.sh --veomni)"


def available() -> bool:
    try:
        import veomni.trainer.base  # noqa: F401
        import veomni.trainer.callbacks.checkpoint_callback  # noqa: F401
    except Exception:  # noqa: BLE001 - an extra that is absent or half-installed raises what its imports raise
        return False
    return True


class _Preempted(Exception):
    """The job dies here: the trainer's loop is left, its loader closed, and the next job resumes."""


class _MemoryCheckpointer:
    """``CheckpointerBase``'s save/load/wait for one run's jobs: path -> the pickled ``extra_state``."""

    def __init__(self) -> None:
        self.saved: dict[str, bytes] = {}
        self.latest: str | None = None

    def save(self, path: str, state: dict, **_: Any) -> None:
        self.saved[path] = pickle.dumps(state["extra_state"])
        self.latest = path

    def load(self, path: str, state: dict, **_: Any) -> None:
        state["extra_state"] = pickle.loads(self.saved[path])

    def wait_for_pending_save(self) -> None:
        pass


class _Stateless:
    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


@contextlib.contextmanager
def _no_housekeeping():
    from unittest import mock

    from veomni.utils import helper

    with mock.patch.object(helper, "empty_cache", lambda: None), \
            mock.patch.object(helper, "print_device_mem_info", lambda *a, **k: None):
        yield


def _args(epochs: int, train_steps: int, save_steps: int, save_epochs: int, folder: str, load_path: str | None):
    """The fields of ``VeOmniArguments`` that ``train`` and ``CheckpointerCallback`` read."""
    checkpoint = SimpleNamespace(save_steps=save_steps, save_epochs=save_epochs, load_path=load_path,
                                 save_path=folder, save_async=False, dcp_save_to_lowest_rank=False, stage_dir=None)
    return SimpleNamespace(
        train_steps=train_steps,
        train=SimpleNamespace(local_rank=0, num_train_epochs=epochs, checkpoint=checkpoint),
        data=SimpleNamespace(dataloader=SimpleNamespace(use_background_prefetcher=False, drop_last=True)),
        model=SimpleNamespace(lora_config=None))


def _trainer_class():
    from veomni.trainer.base import BaseTrainer
    from veomni.trainer.callbacks.base import Callback, TrainerState
    from veomni.trainer.callbacks.checkpoint_callback import CheckpointerCallback

    class Trainer(BaseTrainer):
        """``BaseTrainer`` with only what ``train`` and the checkpoint callback touch (its ``__init__`` builds a
        model, an optimizer and the parallel state)."""

        def __init__(self, args, loader, checkpointer: _MemoryCheckpointer, on_step: Callable[[Any, Any], None]):
            self.args, self.train_dataloader, self.state = args, loader, TrainerState()
            self.start_epoch, self.start_step = 0, 0
            self.model = self.optimizer = None
            self.lr_scheduler, self.environ_meter = _Stateless(), _Stateless()
            self.checkpointer = checkpointer
            # CheckpointerCallback.__init__ builds a DCP checkpointer from the arguments; the rest of it, as written
            callback = CheckpointerCallback.__new__(CheckpointerCallback)
            Callback.__init__(callback, self)
            callback.every_n_steps = args.train.checkpoint.save_steps
            callback.every_n_epochs = args.train.checkpoint.save_epochs
            callback._last_saved_step = -1
            self._callbacks = [callback]
            self._on_step = on_step

        def train_step(self, data_iterator):
            self.state.global_step += 1
            micro_batches = next(data_iterator)
            self.on_step_end(loss=0.0, loss_dict={}, grad_norm=0.0, aux_metrics={})
            self._on_step(self.state, micro_batches)

    return Trainer


def run(make: Callable[[LoaderScenario], Any], scenario: LoaderScenario, *, preempt_after=(),
        ids_of=default_ids_of, codec: str = "pickle", steps_per_epoch: int | None = None, save_steps: int = 1,
        save_epochs: int = 1) -> Transcript:
    """The steps that survive into the final job, as the trainer model ``veomni`` returns them (``codec`` is taken
    for its signature: the checkpoint pickles the loader's state as part of ``extra_state``)."""
    import torch.distributed as dist

    if steps_per_epoch is None or steps_per_epoch <= 0:
        raise ValueError(f"VeOmni's trainer bounds an epoch by train_steps: steps_per_epoch must be > 0, "
                         f"got {steps_per_epoch!r}")
    if dist.is_initialized():
        raise RuntimeError("BaseTrainer.train destroys the process group at its end: run it in a process "
                           "without one")
    Trainer = _trainer_class()
    kills = sorted(preempt_after)
    trained: list[tuple[int, int, Any]] = []
    checkpointer, load_path = _MemoryCheckpointer(), None

    def on_step(state, micro_batches) -> None:
        trained.append((state.global_step, state.epoch, ids_of(micro_batches)))
        if kills and state.global_step >= kills[0]:
            kills.pop(0)
            raise _Preempted

    with tempfile.TemporaryDirectory(prefix="veomni-trainer-") as folder, _no_housekeeping():
        try:
            while True:
                if not dist.is_initialized():
                    store = dist.FileStore(os.path.join(folder, f"pg-{len(checkpointer.saved)}-{len(trained)}"), 1)
                    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
                args = _args(scenario.epochs, steps_per_epoch, save_steps, save_epochs, folder, load_path)
                loader = make(scenario)
                try:
                    Trainer(args, loader, checkpointer, on_step).train()
                    return Transcript([(epoch, ids) for _, epoch, ids in trained])
                except _Preempted:
                    pass
                finally:
                    loader.close()
                load_path = checkpointer.latest
                last = -1 if load_path is None else int(load_path.rsplit("_", 1)[1])
                trained[:] = [t for t in trained if t[0] <= last]   # the later steps are redone
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
