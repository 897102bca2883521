"""VeOmni 0.1.12, V16: a resume after a short epoch restarts the next epoch's stream.

`CheckpointerCallback._load_checkpoint` (checkpoint_callback.py:108-110) resumes at epoch `global_step // train_steps`,
step `global_step % train_steps`, and at step 0 calls `iter()` at once (128-130). An epoch ended early by StopIteration
(which also spends a global step, base.py:850-857) shifts that: epoch 0 has 2 steps of 4, a job killed after global
step 4 restarts epoch 1 at "step 0": the eager iter() uses up the restored position. VeOmni's own BaseTrainer.train
and callback (model step, DCP and memory housekeeping stubbed). Exits 1 while the bug is present, 0 if fixed."""

import sys
import tempfile
from types import SimpleNamespace as NS

import torch.distributed as dist
from torchdata.stateful_dataloader import StatefulDataLoader
from veomni.trainer.base import BaseTrainer
from veomni.trainer.callbacks.base import Callback, TrainerState
from veomni.trainer.callbacks.checkpoint_callback import CheckpointerCallback
from veomni.utils import helper

helper.empty_cache = helper.print_device_mem_info = lambda *a, **k: None   # a gc.collect() per save, 1 s sleeps
SAVED, TRAINED = {}, []   # checkpoint path -> its extra_state; (epoch, samples) per trained step


class Trainer(BaseTrainer):   # its __init__ builds a model: set what train() and the callback read instead
    def __init__(self, load_path, kill):
        ckpt = NS(save_steps=1, save_epochs=1, load_path=load_path, save_path=tempfile.gettempdir(), save_async=False,
                  dcp_save_to_lowest_rank=False, stage_dir=None)
        self.args = NS(train_steps=4, train=NS(local_rank=0, num_train_epochs=2, checkpoint=ckpt),
                       data=NS(dataloader=NS(use_background_prefetcher=False, drop_last=True)), model=NS(lora_config=None))
        self.train_dataloader = StatefulDataLoader(list(range(4)), batch_size=2)   # an epoch of 2 steps
        self.state, self.start_epoch, self.start_step, self.model, self.optimizer, self.kill = TrainerState(), 0, 0, None, None, kill
        self.lr_scheduler = self.environ_meter = NS(state_dict=dict, load_state_dict=lambda s: None)
        self.checkpointer = NS(save=lambda p, s, **k: SAVED.update({p: s["extra_state"]}), wait_for_pending_save=dict,
                               load=lambda p, s, **k: s.update(extra_state=SAVED[p]))
        cb = CheckpointerCallback.__new__(CheckpointerCallback)   # its __init__ builds a DCP checkpointer
        Callback.__init__(cb, self)
        cb.every_n_steps, cb.every_n_epochs, cb._last_saved_step, self._callbacks = 1, 1, -1, [cb]

    def train_step(self, data_iterator):   # base.py:850-853, then the callbacks; no model
        self.state.global_step += 1
        batch = next(data_iterator)
        self.on_step_end(loss=0.0, loss_dict={}, grad_norm=0.0, aux_metrics={})
        TRAINED.append((self.state.epoch, batch.tolist()))
        if self.state.global_step == self.kill:
            raise KeyboardInterrupt   # the job is killed


def run(kill):
    TRAINED.clear(), SAVED.clear()
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        Trainer(None, kill).train()
    except KeyboardInterrupt:   # right after its checkpoint; the next job loads it (train() ends the group)
        Trainer(f"{tempfile.gettempdir()}/global_step_{kill}", None).train()
    return list(TRAINED)


uninterrupted, resumed = run(None), run(4)
print(f"uninterrupted: {uninterrupted}\nkilled after global step 4, resumed: {resumed}")
sys.exit(0 if resumed == uninterrupted else 1)
