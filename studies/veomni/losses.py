"""What the documented deviations (and V5) lose on realistic workloads, counted by driving
VeOmni's own classes over streams drawn from the project's workloads (``dynbsz.workload``)."""

from __future__ import annotations

import math
import time
from typing import Any

from dynbsz.workload import SourceSpec, Workload, text_workload
from properties.runner import quiet_target
from studies.veomni.loaders import classes


def workloads() -> dict[str, Workload]:
    """The streams the report counts on, by name."""
    from simulator.workloads import SEED_TEXT

    return {
        "bench_text": text_workload(median_tokens=2048, sigma=1.0),   # the packer benchmark's stream
        "seed_text": SEED_TEXT,                                       # the simulator's calibrated long context
        # Short texts (labels, captions): the one workload here with one-token samples.
        "short_text": Workload((SourceSpec("text", median_tokens=16, sigma=2.0, min_tokens=1),)),
    }


def lengths_of(workload: str, n: int, seed: int):
    """Token lengths of the first ``n`` samples of a named workload's stream."""
    return workloads()[workload].sample(n, seed).tokens


def count_overlong(workload: str, n: int, budget: int, seed: int) -> dict[str, Any]:
    """D2: samples and tokens the worker runtime drops at ``budget``, counted by driving VeOmni's
    DynamicBatchingSizeDataset itself over the lengths."""
    import torch
    from torch.utils.data import IterableDataset

    v = classes()
    lengths = lengths_of(workload, n, seed)

    class Lengths(IterableDataset):
        def __iter__(self):
            for i, L in enumerate(lengths.tolist()):
                # attention_mask as a one-element tensor holding the length: the default length function sums it
                yield {"id": i, "attention_mask": torch.tensor([L])}

    ds = v.DynamicBatchingSizeDataset(Lengths(), micro_batch_seq_length=budget, ready_for_micro_batch_threshold=200,
                                      dynamic_batching_collate_fn=v.NoopDataCollator(), save_by_idx=False)
    with quiet_target():
        kept = {s["id"] for mb in ds for s in mb}
    dropped = [i for i in range(n) if i not in kept]
    return {"workload": workload, "budget": budget, "samples": n, "seed": seed,
            "dropped_samples": len(dropped), "dropped_share": len(dropped) / n,
            "tokens": int(lengths.sum()), "dropped_tokens": int(lengths[dropped].sum()) if dropped else 0,
            "dropped_token_share": (float(lengths[dropped].sum()) / float(lengths.sum())) if dropped else 0.0,
            "longest_dropped": int(lengths[dropped].max()) if dropped else None}


def count_one_token(workload: str, n: int, budget: int, seed: int) -> dict[str, Any]:
    """D1, through VeOmni's TextBatchingStrategy (put_item drops them)."""
    import torch

    v = classes()
    lengths = lengths_of(workload, n, seed)
    strategy = v.TextBatchingStrategy(token_micro_bsz=budget, buffer_size=200,
                                      get_length_fn=v.get_length_fn_by_count_mode("total"))
    kept = 0
    with quiet_target():
        for L in lengths.tolist():
            before = len(strategy.buffer)
            strategy.put_item({"input_ids": torch.zeros(L, dtype=torch.long), "attention_mask": torch.ones(L)})
            kept += len(strategy.buffer) > before
            while strategy.is_ready_for_micro_batch():
                strategy.get_micro_batch(0)
    return {"workload": workload, "samples": n, "seed": seed, "dropped_samples": n - kept,
            "one_token_samples": int((lengths <= 1).sum())}


def count_main_epochs(workload: str, n: int, budget: int, buffer_size: int, seed: int, epochs: int = 3,
                      warmup_ratio: float = 0.0, micro_batches: int = 1) -> dict[str, Any]:
    """V5: VeOmni's real main-runtime loader (num_workers=0, no decode cost),
    ``length`` = VeOmni's train_steps for dynamic batching, run for ``epochs`` trainer epochs the way
    BaseTrainer runs them (set_epoch, iter, train_steps steps); what each epoch misses and repeats."""
    from collections import Counter

    import torch

    v = classes()
    lengths = lengths_of(workload, n, seed)

    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return n

        def __getitem__(self, i):
            L = int(lengths[i])
            return [{"id": i, "input_ids": torch.zeros(1, dtype=torch.long).expand(L),
                     "attention_mask": torch.ones(1, dtype=torch.long).expand(L)}]

    per_step = micro_batches * budget
    train_steps = math.ceil(int(int(lengths.sum()) * (1 + warmup_ratio / 2)) / per_step)  # compute_train_steps
    ds = DS()
    sampler = v.StatefulDistributedSampler(ds, num_replicas=1, rank=0, shuffle=True, seed=0)
    inner = v.DistributedDataloader(ds, batch_size=1, sampler=sampler, collate_fn=v.UnpackDataCollator(),
                                    num_workers=0, prefetch_factor=None, pin_memory=False, drop_last=True)
    strategy = v.TextBatchingStrategy(token_micro_bsz=budget, buffer_size=buffer_size,
                                      bsz_warmup_steps=int(train_steps * warmup_ratio),
                                      bsz_warmup_init_mbtoken=200, get_length_fn=v.get_length_fn_by_count_mode("total"))
    dl = v.DynamicBatchSizeDataLoader(inner, strategy, collate_fn=None, num_micro_batch=micro_batches,
                                      length=train_steps, drop_last=True)
    rows = []
    with quiet_target():
        for epoch in range(epochs):
            dl.set_epoch(epoch)
            it = iter(dl)
            ids = [s["id"] for _ in range(train_steps) for mb in next(it) for s in mb]
            counts = Counter(ids)
            rows.append({"epoch": epoch, "steps": train_steps, "delivered": len(ids),
                         "distinct": len(counts), "missed": n - len(counts),
                         "repeated": sum(c - 1 for c in counts.values() if c > 1),
                         "fill": float(sum(int(lengths[i]) for i in ids)) / (train_steps * per_step)})
    return {"workload": workload, "samples": n, "budget": budget, "buffer_size": buffer_size,
            "warmup_ratio": warmup_ratio, "train_steps": train_steps, "epochs": rows}


def count_padding(n: int, dp_size: int) -> dict[str, Any]:
    """D3: samples read twice per epoch by the padded DP shards (exact: total_size - n)."""
    return {"samples": n, "dp_size": dp_size, "duplicated_per_epoch": math.ceil(n / dp_size) * dp_size - n}


def deviations_report(quick: bool = False) -> dict[str, Any]:
    n = 20_000 if quick else 100_000
    started = time.time()
    out: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "samples": n}
    out["D2_overlong"] = [count_overlong("bench_text", n, 32 * 1024, 0), count_overlong("seed_text", n, 512 * 1024, 0),
                          count_overlong("bench_text", n, 512 * 1024, 0), count_overlong("seed_text", n, 1024 * 1024, 0)]
    out["D1_one_token"] = [count_one_token("bench_text", n, 32 * 1024, 0), count_one_token("short_text", n, 32 * 1024, 0)]
    out["V5_main_epochs"] = [count_main_epochs("bench_text", n // 5, 32 * 1024, 200, 0),
                             count_main_epochs("bench_text", n // 5, 32 * 1024, 200, 0, warmup_ratio=0.02),
                             count_main_epochs("bench_text", n // 5, 32 * 1024, 24, 0)]
    out["D3_padding"] = [count_padding(n, dp) for dp in (3, 7, 64)]
    out["seconds"] = round(time.time() - started, 1)
    return out
