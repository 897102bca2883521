"""Two DP ranks as real processes (torch.distributed, gloo on CPU): disjoint shards, complete union,
and the seed's global fill = sum(selected tokens) / (dp_size * budget) agreed across ranks."""

from __future__ import annotations

import json
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from dynbsz import FixedGate, PackerConfig, SourceSpec, Workload
from dynbsz.datasets import TraceMapDataset
from dynbsz.loader import build_loader
from dynbsz.loader_config import LoaderConfig

BUDGET = 1024
WORKLOAD = Workload((SourceSpec("text", 0.7, 200, cost_base_s=0.0005), SourceSpec("video", 0.3, 700, cost_base_s=0.002)))
N = 45


def _rank_main(rank: int, world: int, store_path: str, out_path: str, runtime: str) -> None:
    warnings.simplefilter("ignore")
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world)
    try:
        config = LoaderConfig(num_workers=1, dp_rank=dist.get_rank(), dp_size=dist.get_world_size(), seed=11,
                              runtime=runtime)
        loader = build_loader(TraceMapDataset(WORKLOAD.sample(N, 5)), PackerConfig(budget=BUDGET), FixedGate(4), config)
        steps = list(loader)
        loader.close()
        ids = [sid for s in steps for sid in s.sample_ids]
        first = sum(steps[0].micro_batches[0].tokens)
        selected = torch.tensor([first], dtype=torch.int64)
        dist.all_reduce(selected)  # the global fill's numerator, summed the way a trainer would
        gathered: list = [None] * world
        dist.all_gather_object(gathered, {"ids": ids, "first_tokens": first, "first_n": len(steps[0].micro_batches[0])})
        if rank == 0:
            with open(out_path, "w") as f:
                json.dump({"ranks": gathered, "allreduced_first_tokens": int(selected.item())}, f)
    finally:
        dist.destroy_process_group()


def _run(tmp_path, runtime):
    out = tmp_path / f"result-{runtime}.json"
    mp.spawn(_rank_main, args=(2, str(tmp_path / f"store-{runtime}"), str(out), runtime), nprocs=2, join=True)
    return json.loads(out.read_text())


def check(result):
    a, b = (set(r["ids"]) for r in result["ranks"])
    assert not a & b, "ranks must read disjoint shards"
    assert a | b == set(range(N)), "the union over ranks must be the dataset"
    assert sum(len(r["ids"]) for r in result["ranks"]) == N, "nothing read twice within a rank"
    fill = result["allreduced_first_tokens"] / (2 * BUDGET)
    assert fill == sum(r["first_tokens"] for r in result["ranks"]) / (2 * BUDGET)
    for r in result["ranks"]:  # a micro-batch fits its budget unless it is one forced overlong sample
        assert r["first_tokens"] <= BUDGET or r["first_n"] == 1
    assert fill > 0.5  # the gate waited for a covered budget on both ranks


def test_two_ranks_main_runtime(tmp_path):
    check(_run(tmp_path, "main"))


def test_two_ranks_worker_runtime(tmp_path):
    check(_run(tmp_path, "worker"))
