"""Drive a loader with the real PyTorch Lightning 2.6.5 ``Trainer.fit``, preempted after given global
steps and resumed from its latest checkpoint, so the ``lightning`` trainer models can be compared with
the trainer they model (tests/test_trainers_lightning.py). Needs the extra: bash ci/install.sh --lightning.

A preemption is an exception raised from the LightningModule's ``on_train_batch_end``, which Lightning
calls after every callback's (ModelCheckpoint's save included); the next job is a new ``Trainer`` and a
freshly built loader, ``fit(ckpt_path=<the newest checkpoint file>)``, as a restarted job runs."""

from __future__ import annotations

import glob
import logging
import os
import tempfile
import warnings

import pytest

pl = pytest.importorskip("pytorch_lightning", reason="bash ci/install.sh --lightning installs pytorch-lightning 2.6.5")
import torch  # noqa: E402
from pytorch_lightning.callbacks import ModelCheckpoint  # noqa: E402

for _name in ("pytorch_lightning", "lightning", "lightning.pytorch", "lightning_fabric"):
    logging.getLogger(_name).setLevel(logging.ERROR)


class Preempted(Exception):
    pass


class _Module(pl.LightningModule):
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


def fit(make, *, epochs, preempt_after=(), ids_of, every_n_train_steps=0, limit_train_batches=None):
    """The steps that survive into the final run, as ``(epoch, ids)`` (what ``Transcript.steps`` holds)."""
    kills, trained, ckpt = sorted(preempt_after), [], None
    folder = tempfile.mkdtemp(prefix="lightning-real-")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while True:
            loader = make()
            checkpoint = ModelCheckpoint(dirpath=folder, every_n_train_steps=every_n_train_steps or None,
                                         save_top_k=-1)
            trainer = pl.Trainer(max_epochs=epochs, callbacks=[checkpoint], logger=False, enable_progress_bar=False,
                                 enable_model_summary=False, limit_train_batches=limit_train_batches,
                                 num_sanity_val_steps=0, accelerator="cpu", devices=1)
            try:
                trainer.fit(_Module(kills[0] if kills else None, ids_of, trained), train_dataloaders=loader,
                            ckpt_path=ckpt)
                break
            except Preempted:
                kills.pop(0)
                files = sorted(glob.glob(os.path.join(folder, "*.ckpt")), key=os.path.getmtime)
                ckpt = files[-1] if files else None
                saved = torch.load(ckpt, weights_only=False)["global_step"] if ckpt else 0
                trained[:] = [t for t in trained if t[0] <= saved]
            finally:
                close = getattr(loader, "close", None)
                if close:
                    close()
    return [(epoch, ids) for _, epoch, ids in trained]
