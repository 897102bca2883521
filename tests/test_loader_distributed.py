"""Two DP ranks as real processes (torch.distributed, gloo on CPU): disjoint shards, complete union,
and the seed's global fill = sum(selected tokens) / (dp_size * budget) agreed across ranks."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from dynbsz import FixedGate, PackerConfig, SourceSpec, Workload
from dynbsz.datasets import TraceMapDataset
from dynbsz.errors import ConfigError
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


# ---- token parity: max_tokens stops every rank at the same step ------------------------------------

MAX_TOKENS = 9000


def _token_rank(rank: int, world: int, store_path: str, out_path: str, runtime: str) -> None:
    warnings.simplefilter("ignore")
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world)
    try:
        def make():
            config = LoaderConfig(num_workers=1, dp_rank=rank, dp_size=world, seed=3, runtime=runtime,
                                  max_tokens=MAX_TOKENS)
            return build_loader(TraceMapDataset(WORKLOAD.sample(N, 8)), PackerConfig(budget=BUDGET), FixedGate(2),
                                config)

        def run(loader, stop_after=None):
            out = []
            while not loader.stopped:        # the documented loop for a bounded run, across epochs
                for step in loader:
                    out.append((step.index, sum(mb.total_tokens for mb in step.micro_batches)))
                    if stop_after is not None and len(out) == stop_after:
                        return out
            return out

        full_loader = make()
        full = run(full_loader)
        total = full_loader.tokens_trained
        full_loader.close()
        first = make()
        head = run(first, stop_after=3)
        state = json.loads(json.dumps(first.state_dict()))
        first.close()
        resumed = make()
        resumed.load_state_dict(state)
        tail = run(resumed)
        resumed.close()
        gathered: list = [None] * world
        dist.all_gather_object(gathered, {"full": full, "total": total, "resumed": head + tail})
        if rank == 0:
            with open(out_path, "w") as f:
                json.dump(gathered, f)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("runtime", ["main", "worker"])
def test_max_tokens_stops_both_ranks_after_the_same_step_and_survives_a_resume(tmp_path, runtime):
    out = tmp_path / "tokens.json"
    mp.spawn(_token_rank, args=(2, str(tmp_path / "store-tokens"), str(out), runtime), nprocs=2, join=True)
    ranks = json.loads(out.read_text())
    steps = [len(r["full"]) for r in ranks]
    assert steps[0] == steps[1] > 3, "every rank stops at the same step"
    per_step = [sum(r["full"][i][1] for r in ranks) for i in range(steps[0])]   # global tokens of each step
    assert sum(per_step) >= MAX_TOKENS > sum(per_step[:-1]), "it stops after the step that reaches max_tokens"
    assert all(r["total"] == sum(per_step) for r in ranks)                       # each rank holds the global count
    assert all(r["resumed"] == r["full"] for r in ranks)                         # the count is in the checkpoint


def test_max_tokens_across_ranks_needs_a_process_group():
    with pytest.raises(ConfigError, match="init_process_group"):
        build_loader(TraceMapDataset(WORKLOAD.sample(N, 8)), PackerConfig(budget=BUDGET), FixedGate(2),
                     LoaderConfig(dp_size=2, dp_rank=0, max_tokens=100))


def test_max_tokens_on_one_rank_counts_its_own_tokens():
    loader = build_loader(TraceMapDataset(WORKLOAD.sample(N, 8)), PackerConfig(budget=BUDGET), FixedGate(2),
                          LoaderConfig(max_tokens=5000))
    seen = []
    while not loader.stopped:
        seen += [sum(mb.total_tokens for mb in s.micro_batches) for s in loader]
    assert sum(seen) == loader.tokens_trained >= 5000 > sum(seen[:-1])
