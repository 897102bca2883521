"""The measured training loop: dynbsz's loader -> packed micro-batches -> the device -> AdamW.

One function, ``run``, serves all three runs of the resume check:

* A: ``run(cfg, runtime, device, steps=S)``: uninterrupted; its timings are the job's figures;
* B: ``run(..., steps=S1, checkpoint_dir=D)``: stops after S1 steps and checkpoints model,
  optimizer, RNG states (``state.pt``) and the loader (``loader.json``, JSON as dynbsz makes it);
* C: ``run(..., steps=S, resume_from=D)`` in a *fresh process* (``gpu_job.py continue``).

Timing (all ``perf_counter`` after ``torch.cuda.synchronize`` on a GPU, zero at ``iter(loader)``):
``request_s[i]`` when the loop asked the loader for step i, ``handout_s[i]`` when it got it,
``done_s[i]`` when the optimizer step (and its device work) finished. The loop synchronises
every step (the loss is read back anyway), so the time spent in ``next()`` is time the device
had nothing to do: the data stall.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch.utils.data import get_worker_info

from dynbsz import PackerConfig
from dynbsz.datasets import TraceMapDataset
from dynbsz.loader import build_loader
from dynbsz.loader_config import LoaderConfig

from .collate import INPUT, LABEL, POSITION, PackedCollate
from .config import JobConfig
from .device import now, synchronize, uses_pinned_memory
from .model import build_model, packed_loss_sum

RESTORABLE = frozenset({"model", "optimizer", "loader", "rng"})
STATE_FILE, LOADER_FILE, JOB_FILE = "state.pt", "loader.json", "job.json"


@dataclass
class History:
    """What one run did, step by step (steps ``start_step`` .. ``start_step + len - 1``)."""

    runtime: str
    start_step: int
    losses: list[float] = field(default_factory=list)
    ids: list[list[int]] = field(default_factory=list)
    loader_index: list[int] = field(default_factory=list)   # Step.index the loader reported
    tokens: list[int] = field(default_factory=list)
    budgets: list[int] = field(default_factory=list)
    request_s: list[float] = field(default_factory=list)
    handout_s: list[float] = field(default_factory=list)
    done_s: list[float] = field(default_factory=list)
    pinned: list[bool | None] = field(default_factory=list)  # reached the device copy pinned (None: CPU)
    checkpoint_s: float = 0.0

    def __len__(self) -> int:
        return len(self.losses)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "History":
        return cls(**d)


class StampedDataset(TraceMapDataset):
    """TraceMapDataset whose samples also say which worker read them and when it started.

    ``perf_counter`` is CLOCK_MONOTONIC on Linux, one clock for every process of the machine, so
    the main process can place a worker's first fetch on its own timeline (the probe uses it to
    measure worker start-up as the simulator means it: when a worker can begin fetching).
    """

    def __getitem__(self, index: int) -> dict:
        start = time.perf_counter()
        sample = super().__getitem__(index)
        info = get_worker_info()
        sample["fetch_start_s"] = start
        sample["worker"] = -1 if info is None else info.id
        return sample


def make_loader(cfg: JobConfig, runtime: str, device: torch.device, time_scale: float = 1.0, stamped: bool = False):
    pin = uses_pinned_memory(device)
    # runtime='main' collates in the main process *after* the inner loader would have pinned the
    # raw samples, so pinning there is wasted; the collate pins its one output buffer instead.
    # runtime='worker' collates in forked workers (no CUDA there): torch's pin thread pins it.
    collate = PackedCollate(cfg.vocab_size, pin_output=pin and runtime == "main")
    lc = LoaderConfig(num_workers=cfg.num_workers, prefetch_factor=cfg.prefetch_factor, persistent_workers=True,
                      in_order=True, pin_memory=pin and runtime == "worker", seed=cfg.loader_seed, runtime=runtime)
    dataset = (StampedDataset if stamped else TraceMapDataset)(cfg.trace(), time_scale=time_scale, tensor=True)
    return build_loader(dataset, PackerConfig(budget=cfg.budget), cfg.make_gate(), lc, collate_fn=collate)


def make_model_and_optimizer(cfg: JobConfig, device: torch.device):
    model = build_model(cfg.vocab_size, cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.mlp_ratio, cfg.budget,
                        cfg.model_seed, device)
    # foreach=False, fused=False: one fixed update kernel per parameter, the same in every process
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay,
                            foreach=False, fused=False)
    return model, opt


def lr_at(cfg: JobConfig, step: int) -> float:
    """Linear warm-up then constant: a pure function of the step, so a resume needs no scheduler state."""
    return cfg.lr * min(1.0, (step + 1) / cfg.lr_warmup_steps)


def sdpa_kernels(choice: str):
    """A context selecting SDPA kernels (``auto``: torch's choice)."""
    if choice == "auto":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel({"math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION,
                        "efficient": SDPBackend.EFFICIENT_ATTENTION}[choice])


def train_step(model, opt, data: tuple, cfg: JobConfig, device: torch.device, step: int) -> tuple[float, bool | None]:
    """One optimizer step over the step's micro-batches.

    Returns (mean token loss, whether every micro-batch reached its device copy in pinned memory;
    None on the CPU, where there is no copy to speed up).
    """
    for group in opt.param_groups:
        group["lr"] = lr_at(cfg, step)
    opt.zero_grad(set_to_none=True)
    n_labels = max(1, sum(b["n_labels"] for b in data))
    total = torch.zeros((), device=device)
    pinned = True if device.type == "cuda" else None
    bf16 = cfg.bf16 and device.type == "cuda"
    for b in data:
        rows = b["rows"]
        if device.type == "cuda":
            pinned = pinned and rows.is_pinned()
        rows = rows.to(device, non_blocking=True)  # async from pinned memory: overlaps with queued work
        amp = torch.autocast("cuda", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        with amp, sdpa_kernels(cfg.sdpa):  # fresh context objects: sdpa_kernel's is single-use
            logits = model(rows[INPUT], rows[POSITION], b["seq_lens"])
        loss_sum = packed_loss_sum(logits, rows[LABEL])
        (loss_sum / n_labels).backward()
        total += loss_sum.detach()
    if cfg.grad_clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip, foreach=False)
    opt.step()
    return (total / n_labels).item(), pinned


def save_checkpoint(directory: Path, cfg: JobConfig, runtime: str, step: int, model, opt, loader) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    rng = {"cpu": torch.get_rng_state(),
           "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized()
           else None}
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "rng": rng, "step": step},
               directory / STATE_FILE)
    (directory / LOADER_FILE).write_text(json.dumps(loader.state_dict()))
    (directory / JOB_FILE).write_text(json.dumps({"config": cfg.to_dict(), "runtime": runtime, "step": step}))


def read_job(directory: Path) -> tuple[JobConfig, str, int]:
    job = json.loads((Path(directory) / JOB_FILE).read_text())
    return JobConfig.from_dict(job["config"]), job["runtime"], int(job["step"])


def load_checkpoint(directory: Path, model, opt, loader, restore: frozenset) -> int:
    unknown = set(restore) - RESTORABLE
    if unknown:
        raise ValueError(f"cannot restore {sorted(unknown)}; restorable: {sorted(RESTORABLE)}")
    # map to the CPU: the RNG states must be CPU byte tensors; load_state_dict copies to the device
    state = torch.load(directory / STATE_FILE, map_location="cpu", weights_only=True)
    if "model" in restore:
        model.load_state_dict(state["model"])
    if "optimizer" in restore:
        opt.load_state_dict(state["optimizer"])
    if "rng" in restore:
        torch.set_rng_state(state["rng"]["cpu"])
        if state["rng"]["cuda"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
    if "loader" in restore:
        loader.load_state_dict(json.loads((directory / LOADER_FILE).read_text()))
    return int(state["step"])


def run(cfg: JobConfig, runtime: str, device: torch.device, *, steps: int, checkpoint_dir: Path | None = None,
        resume_from: Path | None = None, restore: frozenset = RESTORABLE, time_scale: float = 1.0) -> History:
    """Train until ``steps`` steps are done in total; checkpoint at the end if ``checkpoint_dir``."""
    model, opt = make_model_and_optimizer(cfg, device)
    loader = make_loader(cfg, runtime, device, time_scale)
    start = 0
    if resume_from is not None:
        start = load_checkpoint(Path(resume_from), model, opt, loader, restore)
    hist = History(runtime=runtime, start_step=start)
    model.train()
    step = start
    t0 = now(device)
    it = iter(loader)
    try:
        while step < steps:
            t_req = time.perf_counter() - t0
            try:
                s = next(it)
            except StopIteration:
                it = iter(loader)  # epoch over: a finished dynbsz loader starts the next epoch
                continue
            t_got = time.perf_counter() - t0
            loss, pinned = train_step(model, opt, s.data, cfg, device, step)
            synchronize(device)
            t_done = time.perf_counter() - t0
            hist.losses.append(loss)
            hist.ids.append([int(i) for i in s.sample_ids])
            hist.loader_index.append(s.index)
            hist.tokens.append(sum(b["real_tokens"] for b in s.data))
            hist.budgets.append(sum(b["budget"] for b in s.data))
            hist.request_s.append(t_req)
            hist.handout_s.append(t_got)
            hist.done_s.append(t_done)
            hist.pinned.append(pinned)
            step += 1
        if checkpoint_dir is not None:
            t = time.perf_counter()
            save_checkpoint(Path(checkpoint_dir), cfg, runtime, step, model, opt, loader)
            hist.checkpoint_s = time.perf_counter() - t
    finally:
        loader.close()
    return hist


def probe(cfg: JobConfig, runtime: str, device: torch.device, steps: int = 12, pace_s: float = 0.0) -> dict:
    """The same loader over the same trace at zero decode cost, ``pace_s`` of sleep between steps.

    * ``startup_s``: for each worker, when it began its first fetch (seconds after ``iter()``),
      averaged over the workers: the simulator's ``worker_startup_s`` (workers are forked one
      after another, so the first one fetches well before the last one exists);
    * ``first_step_s``: ``iter()`` to the first step in hand at zero cost (for reference);
    * ``floor_s``: median seconds per later step spent in ``next()``: the main process's own
      share of the data path (unpickling results, packing, collating), which no worker hides
      and the simulator does not model. ``pace_s`` (the job passes the run's mean step compute)
      gives the workers the time between steps they have in the real run: asked back to back,
      ``next()`` would also wait for the workers' own per-task time, which the model already
      counts (``task_overhead_s``), and the floor would count it twice.
    """
    loader = make_loader(cfg, runtime, device, time_scale=0.0, stamped=True)
    t0 = now(device)
    it = iter(loader)
    first_step, waits, first_fetch = None, [], {}
    try:
        for _ in range(steps):
            t = time.perf_counter()
            s = next(it)
            if first_step is None:
                first_step = time.perf_counter() - t0
            else:
                waits.append(time.perf_counter() - t)
            if pace_s > 0:
                time.sleep(pace_s)
            for mb in s.micro_batches:
                for p in mb.payloads:
                    w, at = p["worker"], p["fetch_start_s"] - t0
                    first_fetch[w] = min(first_fetch.get(w, at), at)
    except StopIteration:
        pass
    finally:
        loader.close()
    if first_step is None:
        raise RuntimeError("the probe loader delivered no step")
    return {"startup_s": sum(first_fetch.values()) / len(first_fetch), "first_step_s": first_step,
            "first_fetch_s": {str(k): v for k, v in sorted(first_fetch.items())},
            "floor_s": float(sorted(waits)[len(waits) // 2]) if waits else 0.0, "steps": 1 + len(waits),
            "pace_s": pace_s}
