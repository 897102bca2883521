"""Drive a loader with the real PyTorch Lightning 2.6.5 ``Trainer.fit``, preempted after given global
steps and resumed from its latest checkpoint, so the ``lightning`` trainer models can be compared with
the trainer they model (tests/test_trainers_lightning.py) and a verdict under them re-run on the real
trainer (``python -m ci.rejudge --real-lightning``). Needs the extra: bash ci/install.sh --lightning.

A preemption is an exception raised from the LightningModule's ``on_train_batch_end``, which Lightning
calls after every callback's (ModelCheckpoint's save included); the next job is a new ``Trainer`` and a
freshly built loader, ``fit(ckpt_path=<the newest checkpoint file>)``, as a restarted job runs."""

from __future__ import annotations

import functools
import glob
import logging
import os
import tempfile
import warnings
from types import SimpleNamespace

MISSING = "pytorch-lightning 2.6.5 is not importable (install the extra: bash ci/install.sh --lightning)"


@functools.lru_cache(maxsize=1)
def lib() -> SimpleNamespace:
    """Lightning and the module class the runs use. Raises ImportError without the extra."""
    import pytorch_lightning as pl
    import torch
    from pytorch_lightning.callbacks import ModelCheckpoint

    for name in ("pytorch_lightning", "lightning", "lightning.pytorch", "lightning_fabric"):
        logging.getLogger(name).setLevel(logging.ERROR)

    class Module(pl.LightningModule):
        def __init__(self, kill_at, ids_of, trained):
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)
            self.kill_at, self.ids_of, self.trained = kill_at, ids_of, trained

        def training_step(self, batch, batch_idx):
            self.trained.append((self.global_step + 1, self.current_epoch, self.ids_of(batch)))
            return self.layer(torch.zeros(1, 1)).sum()

        def on_train_batch_end(self, outputs, batch, batch_idx):
            if self.kill_at is not None and self.global_step >= self.kill_at:
                raise Preempted(self.global_step)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.0)

    return SimpleNamespace(pl=pl, torch=torch, ModelCheckpoint=ModelCheckpoint, Module=Module, version=pl.__version__)


def available() -> bool:
    try:
        lib()
    except ImportError:
        return False
    return True


class Preempted(Exception):
    pass


def fit(make, *, epochs, preempt_after=(), ids_of, every_n_train_steps=0, limit_train_batches=None):
    """The steps that survive into the final run, as ``(epoch, ids)`` (what ``Transcript.steps`` holds).
    ``make()`` builds the loader each job hands to ``Trainer.fit``; one with a ``close()`` is closed after."""
    v = lib()
    kills, trained, ckpt = sorted(preempt_after), [], None
    with tempfile.TemporaryDirectory(prefix="lightning-real-") as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while True:
            loader = make()
            checkpoint = v.ModelCheckpoint(dirpath=folder, every_n_train_steps=every_n_train_steps or None,
                                           save_top_k=-1)
            trainer = v.pl.Trainer(max_epochs=epochs, callbacks=[checkpoint], logger=False,
                                   enable_progress_bar=False, enable_model_summary=False,
                                   limit_train_batches=limit_train_batches, num_sanity_val_steps=0,
                                   accelerator="cpu", devices=1)
            try:
                trainer.fit(v.Module(kills[0] if kills else None, ids_of, trained), train_dataloaders=loader,
                            ckpt_path=ckpt)
                break
            except Preempted:
                kills.pop(0)
                files = sorted(glob.glob(os.path.join(folder, "*.ckpt")), key=os.path.getmtime)
                ckpt = files[-1] if files else None
                saved = v.torch.load(ckpt, weights_only=False)["global_step"] if ckpt else 0
                trained[:] = [t for t in trained if t[0] <= saved]
            finally:
                close = getattr(loader, "close", None)
                if close:
                    close()
    return [(epoch, ids) for _, epoch, ids in trained]


def fit_adapter(make_adapter, scenario, **kw):
    """``fit`` on the framework loader an adapter wraps (``.dl``, properties.loader_targets.DelegatingLoader):
    each job builds a fresh adapter, hands Lightning its loader, and closes the adapter after."""
    adapters = []

    def make():
        adapters.append(make_adapter(scenario))
        return adapters[-1].dl

    try:
        return fit(make, epochs=scenario.epochs, **kw)
    finally:
        for adapter in adapters:
            adapter.close()


__all__ = ["MISSING", "Preempted", "available", "fit", "fit_adapter", "lib"]
