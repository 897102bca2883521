"""The chaos harness's training loop: a tiny torch LM on dynbsz's loader, checkpointing to disk.

One process per DP rank runs ``train``. It is a real trainer in miniature: a seeded model
(embedding, tanh, linear head) over packed micro-batches, Adam (so the optimizer has state to
lose), gradients all-reduced over gloo when ``world > 1``, the steps-bounded loop docs/guide/loader.md
documents (``while loader.steps < max_steps: for step in loader: ...``), and every
``checkpoint_every`` steps one ``dynbsz.checkpoint`` file per rank holding model, optimizer and
loader together. Each trained step is appended to the rank's log (a JSON line with the attempt,
step index, epoch, sample ids and the loss as ``float.hex``) and fsynced before the checkpoint
that covers it is written, so the log never claims less than a checkpoint holds.

A ``KillPlan`` makes the process ``SIGKILL`` its whole process group (itself and its DataLoader
workers: a node that dies) at one point of one kind:

* ``between_steps``: after step ``at`` is logged (and checkpointed, if one was due);
* ``mid_checkpoint``: half-way through writing the first checkpoint due at or after step ``at``
  (from ``write_atomic``'s progress callback: the temporary file is half written);
* ``drain``: on receiving the first step at or after ``at`` that holds micro-batches cut by the
  end-of-epoch drain (the drain's first step, when ``at`` is its start: more drained
  micro-batches are still to come), before training on it;
* ``prefetch``: on receiving step ``at``, before training on it, with workers holding
  prefetched batches (``num_workers > 0``).

Nothing here knows it is being judged; ``dynbsz.chaos.runner`` starts, kills, restarts and
judges. The GPU job can reuse ``make_model``/``train_step``/``train`` as they are.
"""

from __future__ import annotations

import json
import os
import signal
import time
import warnings
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..checkpoint import encode_checkpoint, load_checkpoint, write_atomic
from ..config import PackerConfig
from ..datasets import TraceMapDataset
from ..errors import ConfigError
from ..gates import FixedGate, TokenAwareGate
from ..loader import build_loader
from ..loader_config import LoaderConfig
from ..workload import SourceSpec, Workload

KINDS = ("between_steps", "mid_checkpoint", "drain", "prefetch")
VOCAB = 64
DIM = 16
BUDGET = 96
MICRO_BATCHES_PER_STEP = 2
SAMPLES_PER_RANK = 40
KEEP_CHECKPOINTS = 3
#: Tiny decode costs (a fraction of a millisecond): the workers really sleep, the run stays fast.
WORKLOAD = Workload((SourceSpec("text", 0.8, 14, sigma=0.6, min_tokens=2, max_tokens=80, cost_base_s=0.0002),
                     SourceSpec("code", 0.2, 30, sigma=0.5, min_tokens=2, max_tokens=80, cost_base_s=0.0004)))


@dataclass(frozen=True)
class ChaosConfig:
    """What a trial varies: where the packer runs, ordering, workers, warm-up, DP size."""

    runtime: str = "main"
    in_order: bool = True
    num_workers: int = 0
    persistent: bool = False
    warmup: bool = False
    dp: int = 1

    def __post_init__(self) -> None:
        if self.runtime not in ("main", "worker"):
            raise ConfigError(f"runtime={self.runtime!r}: 'main' or 'worker'")
        if not 0 <= self.num_workers <= 3 or self.dp not in (1, 2):
            raise ConfigError(f"num_workers={self.num_workers} (0-3) or dp={self.dp} (1 or 2) out of range")
        if self.persistent and not self.num_workers:
            raise ConfigError("persistent=True needs num_workers >= 1")
        if self.warmup and self.runtime != "main":
            raise ConfigError("warm-up needs runtime='main' (the loader refuses it in the worker runtime)")

    def label(self) -> str:
        return (f"{self.runtime} in_order={'T' if self.in_order else 'F'} workers={self.num_workers}"
                f"{' persistent' if self.persistent else ''}{' warmup' if self.warmup else ''} dp={self.dp}")

    def kinds(self) -> tuple[str, ...]:
        """Kill kinds that can happen in this configuration (a drain also needs an epoch end in range)."""
        return tuple(k for k in KINDS if k != "prefetch" or self.num_workers > 0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class KillPlan:
    kind: str
    rank: int
    at: int


@dataclass(frozen=True)
class RunSpec:
    """One attempt of one trial, for every rank (picklable: it crosses into a fresh process)."""

    config: ChaosConfig
    seed: int
    max_steps: int
    checkpoint_every: int
    directory: str
    attempt: int
    resume_step: int                 # 0: start fresh (no complete checkpoint yet); else restore that step
    kill: KillPlan | None = None
    store: str | None = None         # gloo FileStore path (dp > 1), fresh per attempt
    timeout_s: float = 120.0
    #: Test-only: break the resume on purpose, to prove the judge catches it. 'fresh_optimizer'
    #: drops Adam's state after a restore; 'skip_step' throws the first step after a restore away;
    #: 'hang' stops after the first step, workers alive (the runner must kill it at the deadline).
    sabotage: str | None = None


# ---- what is trained ---------------------------------------------------------------------------

def make_dataset(seed: int, dp: int, variant: int = 0) -> TraceMapDataset:
    """The trial's samples (``variant`` != 0: another dataset of the same size, for foreign checkpoints)."""
    return TraceMapDataset(WORKLOAD.sample(SAMPLES_PER_RANK * dp, [seed, 7919, variant]), tensor=True)


def packer_config(config: ChaosConfig, budget: int = BUDGET) -> PackerConfig:
    warmup = dict(warmup_steps=4, warmup_init_tokens=budget // 3) if config.warmup else {}
    return PackerConfig(budget=budget, micro_batches_per_step=MICRO_BATCHES_PER_STEP, **warmup)


def make_gate():
    return TokenAwareGate(margin=0.5, pool_cap=8)


def make_loader(config: ChaosConfig, seed: int, rank: int, max_steps: int, *, dataset=None, budget: int = BUDGET,
                gate=None, loader_seed: int | None = None):
    """The trial's loader for ``rank`` (the keyword arguments build the foreign variants)."""
    lc = LoaderConfig(num_workers=config.num_workers, persistent_workers=config.persistent, in_order=config.in_order,
                      seed=seed if loader_seed is None else loader_seed, dp_rank=rank, dp_size=config.dp,
                      runtime=config.runtime, max_steps=max_steps,
                      # fork, whatever the process default: workers must be children of the rank,
                      # in its process group (a forkserver child inherits 'forkserver' otherwise)
                      start_method="fork" if config.num_workers else None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # in_order=False's documented cost, warned once per loader
        return build_loader(make_dataset(seed, config.dp) if dataset is None else dataset, packer_config(config, budget),
                            make_gate() if gate is None else gate, lc)


def foreign_loader(config: ChaosConfig, seed: int, rank: int, max_steps: int, what: str):
    """A loader that differs from the trial's in one thing: its state must be refused."""
    if what == "seed":
        return make_loader(config, seed, rank, max_steps, loader_seed=seed + 1)
    if what == "budget":
        return make_loader(config, seed, rank, max_steps, budget=2 * BUDGET)
    if what == "dataset":
        return make_loader(config, seed, rank, max_steps, dataset=make_dataset(seed, config.dp, variant=1))
    if what == "gate":
        return make_loader(config, seed, rank, max_steps, gate=FixedGate(8))
    raise ValueError(f"unknown foreign variant {what!r}")


FOREIGN = ("seed", "budget", "dataset", "gate")


class TinyLM(nn.Module):
    def __init__(self, vocab: int = VOCAB, dim: int = DIM):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.emb(x)))


def make_model(seed: int) -> TinyLM:
    """Weights from one seeded generator: the global RNG is never touched."""
    model = TinyLM()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.1, generator=g)
    return model


def make_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.Adam(model.parameters(), lr=3e-2)


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, step, world: int = 1) -> float:
    """One optimizer step on a packed ``Step``: next-token loss within each sample (no sample sees
    another), gradients averaged over ranks. Returns this rank's loss."""
    xs, ys = [], []
    for mb in step.micro_batches:
        for sid, sample in zip(mb.ids, mb.payloads):
            if sample is None or sample["id"] != sid:
                raise RuntimeError(f"step {step.index}: micro-batch entry {sid} carries the payload of "
                                   f"{None if sample is None else sample['id']}")
            ids = sample["input_ids"] % VOCAB
            xs.append(ids[:-1])
            ys.append(ids[1:])
    loss = F.cross_entropy(model(torch.cat(xs)), torch.cat(ys))
    optimizer.zero_grad(set_to_none=False)
    loss.backward()
    if world > 1:
        import torch.distributed as dist

        grads = [p.grad for p in model.parameters()]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= world
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()
    optimizer.step()
    return loss.item()


# ---- files --------------------------------------------------------------------------------------

def checkpoint_dir(directory: str | Path) -> Path:
    return Path(directory) / "ckpt"


def checkpoint_path(directory: str | Path, rank: int, step: int) -> Path:
    return checkpoint_dir(directory) / f"ckpt-r{rank}-s{step:06d}.pt"


def log_path(directory: str | Path, rank: int) -> Path:
    return Path(directory) / f"log-r{rank}.jsonl"


class StepLog:
    """Append-only JSON lines, each fsynced: what a rank did survives its own ``kill -9``."""

    def __init__(self, path: str | Path):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)

    def write(self, record: dict) -> None:
        os.write(self.fd, (json.dumps(record, separators=(",", ":")) + "\n").encode())
        os.fsync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


def die(log: StepLog, record: dict) -> None:
    """Record the kill, then SIGKILL this rank's whole process group (itself and its workers)."""
    log.write({"type": "kill", **record})
    if os.getpgid(0) == os.getpid():   # leads its own group (``child_main``): take the workers along
        os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def prune(directory: str | Path, rank: int, keep: int = KEEP_CHECKPOINTS) -> None:
    mine = sorted(checkpoint_dir(directory).glob(f"ckpt-r{rank}-s*.pt"))
    for path in mine[:-keep]:
        path.unlink()


# ---- the loop -----------------------------------------------------------------------------------

def train(rank: int, spec: RunSpec) -> None:
    torch.set_num_threads(1)
    config, world = spec.config, spec.config.dp
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group("gloo", init_method=f"file://{spec.store}", rank=rank, world_size=world,
                                timeout=timedelta(seconds=spec.timeout_s))
    checkpoint_dir(spec.directory).mkdir(parents=True, exist_ok=True)
    log = StepLog(log_path(spec.directory, rank))
    model = make_model(spec.seed)
    optimizer = make_optimizer(model)
    loader = make_loader(config, spec.seed, rank, spec.max_steps)
    if spec.resume_step:
        load_checkpoint(checkpoint_path(spec.directory, rank, spec.resume_step), model=model, optimizer=optimizer,
                        loader=loader)
        if loader.steps != spec.resume_step:
            raise RuntimeError(f"checkpoint of step {spec.resume_step} restored a loader at step {loader.steps}")
        if spec.sabotage == "fresh_optimizer":
            optimizer = make_optimizer(model)
    log.write({"type": "start", "attempt": spec.attempt, "resume_step": loader.steps, "pid": os.getpid()})
    kill = spec.kill if spec.kill is not None and spec.kill.rank == rank else None
    here = {"attempt": spec.attempt, "rank": rank}
    skip = spec.sabotage == "skip_step" and spec.resume_step > 0

    while loader.steps < spec.max_steps:
        for step in loader:
            if skip:
                skip = False
                continue
            if kill is not None and step.index >= kill.at:
                if kill.kind == "prefetch":
                    die(log, {**here, "kind": "prefetch", "step": step.index})
                if kill.kind == "drain" and any(mb.drained for mb in step.micro_batches):
                    die(log, {**here, "kind": "drain", "step": step.index})
            loss = train_step(model, optimizer, step, world)
            log.write({"type": "step", "attempt": spec.attempt, "step": step.index, "epoch": step.epoch,
                       "ids": step.sample_ids, "loss": float(loss).hex(), "partial": step.partial,
                       "drained": [mb.drained for mb in step.micro_batches]})
            if spec.sabotage == "hang":
                time.sleep(3600)
            done = step.index + 1
            if done % spec.checkpoint_every == 0:
                data = encode_checkpoint(model=model, optimizer=optimizer, loader=loader,
                                         extra={"rank": rank, "step": done, "seed": spec.seed})
                on_progress = None
                if kill is not None and kill.kind == "mid_checkpoint" and step.index >= kill.at:
                    def on_progress(written: int, total: int, _step: int = done) -> None:
                        if 2 * written >= total:
                            die(log, {**here, "kind": "mid_checkpoint", "step": _step, "written": written,
                                      "total": total})
                write_atomic(checkpoint_path(spec.directory, rank, done), data, on_progress=on_progress,
                             chunk_size=max(1, len(data) // 8))
                prune(spec.directory, rank)
            if kill is not None and kill.kind == "between_steps" and step.index >= kill.at:
                die(log, {**here, "kind": "between_steps", "step": step.index})
    loader.close()
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    log.write({"type": "done", "attempt": spec.attempt, "steps": loader.steps})
    log.close()


def child_main(rank: int, spec: RunSpec) -> None:
    """Entry point of a rank process: its own session (so one ``killpg`` takes its DataLoader
    workers too), stderr to a file the runner reads when something goes wrong."""
    os.setsid()
    err = os.open(Path(spec.directory) / f"err-r{rank}-a{spec.attempt}.txt", os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                  0o666)
    os.dup2(err, 2)
    warnings.simplefilter("ignore")
    train(rank, spec)
