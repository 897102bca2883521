"""Loader throughput on uneven decode costs, side by side in one process: torchdata in_order=True and
False, dynbsz in_order=True, dynbsz's exactly-once in_order=False, dynbsz's balanced order
(in_order=True) on exact and on estimated costs, dynbsz's reorder buffer, and torchdata
in_order=False without its per-step snapshots (which dynbsz turns off underneath).

Each sample really sleeps its decode cost in a worker (fast text, slow video).
Throughput is reported as delivered samples per second and as a fraction of the
physical limit: total decode cost divided by the number of workers, i.e. the
makespan of a perfectly balanced schedule with no overhead. Each row is the best of
``repeat`` runs, the runs interleaved (every mode once per round), and the spread
(slowest over fastest) is reported beside it.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
from torch.utils.data import Sampler
from torchdata.stateful_dataloader import StatefulDataLoader

from .costs import CostModel, TraceMeta, estimate_costs, exact_cost
from .datasets import TraceMapDataset
from .loader import build_loader
from .loader_base import identity, torchdata_quiet
from .loader_config import LoaderConfig
from .order import epoch_order, resolve_lookahead
from .tables import pct, ratio, table
from .workload import LOADER_BENCH_MIX, SPARSE_VIDEO, THREE_SOURCE, Trace, with_cost_noise

#: The peer row: plain in_order=False without torchdata's per-step snapshots, as dynbsz runs it underneath.
NO_SNAPSHOTS = "torchdata in_order=False, snapshot_every_n_steps=0"


@dataclass(frozen=True)
class LoaderBenchRow:
    mode: str
    samples: int
    seconds: float
    samples_per_s: float
    fraction_of_limit: float
    exactly_once: bool
    max_displacement: int | None = None   # balanced rows: the farthest a sample moved from sampler order
    reorder_peak: int | None = None       # reorder-buffer rows: most samples held back at once
    worst_seconds: float | None = None    # the slowest of the repeats (``seconds`` is the fastest): the spread


class _ListSampler(Sampler):
    def __init__(self, order):
        self.order = order

    def __iter__(self):
        return iter(self.order)

    def __len__(self):
        return len(self.order)


def run(samples: int = 2000, workers: int = 4, prefetch_factor: int = 2, seed: int = 0, repeat: int = 3, *,
        trace: Trace | None = None, cost_noise: float = 0.3, lookahead: int | str = "auto",
        reorder_buffer: int = 64, only: tuple[str, ...] | None = None) -> list[LoaderBenchRow]:
    """Every row on the same dataset, whose samples sleep their true cost: the trace's (the benchmark mix
    by default) with lognormal noise of ``cost_noise``. The balanced rows order the epoch on exact true
    costs, and on a cost model fitted on the trace (which knows each source's cost, not the noise)."""
    base = trace if trace is not None else LOADER_BENCH_MIX.sample(samples, seed)
    samples = len(base)
    true = with_cost_noise(base, cost_noise, seed)
    dataset = TraceMapDataset(true)
    sampler_order = epoch_order(samples, seed, 0)
    order = sampler_order.tolist()
    limit_s = true.total_cost_s() / workers
    model = CostModel.fit(base)
    # Every row records dataset indices (trace rows): dynbsz's steps carry them, and a plain row maps the
    # sample's trace id back to its row. A trace's ids need not be 0..n-1 (`profile --seed` writes the
    # profiled dataset indices).
    row_of = {int(i): r for r, i in enumerate(true.ids.tolist())}
    if len(row_of) != samples:
        raise ValueError(f"the trace's ids must be distinct: {samples} rows carry {len(row_of)} ids")

    def plain(in_order: bool, snapshots: int = 1) -> Callable[[], tuple[list, int]]:
        def go():
            dl = StatefulDataLoader(dataset, batch_size=1, sampler=_ListSampler(order), num_workers=workers,
                                    prefetch_factor=prefetch_factor, in_order=in_order, collate_fn=identity,
                                    snapshot_every_n_steps=snapshots)
            return [row_of[s["id"]] for batch in dl for s in batch], 0
        return go

    def ours(in_order: bool, **balanced) -> Callable[[], tuple[list, int]]:
        kw = {"meta_fn": balanced.pop("meta_fn")} if "meta_fn" in balanced else {}
        if "cost_fn" in balanced:
            kw["cost_fn"] = balanced.pop("cost_fn")
        config = LoaderConfig(num_workers=workers, prefetch_factor=prefetch_factor, in_order=in_order, seed=seed,
                              **balanced)

        def go():
            ld = build_loader(dataset, None, None, config, **kw)
            try:
                ids = [sid for step in ld for sid in step.sample_ids]
                return ids, ld.reorder_peak
            finally:
                ld.close()
        return go

    balanced = dict(order="balanced", lookahead=lookahead)
    modes = [("torchdata in_order=True", plain(True)), ("torchdata in_order=False", plain(False)),
             ("dynbsz in_order=True", ours(True)), ("dynbsz exactly-once in_order=False", ours(False)),
             ("dynbsz balanced in_order=True, exact costs",
              ours(True, meta_fn=TraceMeta(base, true.cost_s), cost_fn=exact_cost, **balanced)),
             ("dynbsz balanced in_order=True, estimated costs",
              ours(True, meta_fn=TraceMeta(base), cost_model=model, **balanced)),
             (f"dynbsz in_order=True, reorder_buffer={reorder_buffer}", ours(True, reorder_buffer=reorder_buffer)),
             # dynbsz turns torchdata's per-step snapshots off (it checkpoints its own ledger): the same
             # saving on plain torchdata, so a reader can tell what the order gains from what that gains.
             (NO_SNAPSHOTS, plain(False, snapshots=0))]
    if only is not None:
        modes = [(name, fn) for name, fn in modes if name in only]
    position = np.empty(samples, dtype=np.int64)
    position[sampler_order] = np.arange(samples)
    best = dict.fromkeys(names := [name for name, _ in modes], float("inf"))
    worst = dict.fromkeys(names, 0.0)
    peak = dict.fromkeys(names, 0)
    delivered: dict[str, list] = {}
    with warnings.catch_warnings(), torchdata_quiet():
        warnings.simplefilter("ignore")
        # Repeats outermost: each round runs every mode once, so a load that comes and goes on a shared
        # machine falls on all rows alike and the ratios between rows stay comparable.
        for _ in range(repeat):
            for name, fn in modes:
                t0 = time.perf_counter()
                ids, held = fn()
                seconds = time.perf_counter() - t0
                best[name], worst[name] = min(best[name], seconds), max(worst[name], seconds)
                peak[name] = max(peak[name], held)
                delivered[name] = ids
    rows = []
    for name in names:
        ids, seconds = delivered[name], best[name]
        moved = int(np.abs(position[np.asarray(ids)] - np.arange(len(ids))).max()) if "balanced" in name else None
        rows.append(LoaderBenchRow(name, samples, seconds, samples / seconds, limit_s / seconds,
                                   sorted(ids) == list(range(samples)), moved,
                                   peak[name] if "reorder_buffer" in name else None, worst[name]))
    return rows


#: ``suite``'s traces: the bench mix and two whose slowest source is a tenth (``dynbsz.workload``)
SUITE_TRACES = {"bench_mix": LOADER_BENCH_MIX, "three_source": THREE_SOURCE, "sparse_video": SPARSE_VIDEO}
SUITE_MODES = ("torchdata in_order=False", "dynbsz balanced in_order=True, exact costs",
               "dynbsz balanced in_order=True, estimated costs")


def suite(samples: int = 1200, workers: int = 4, prefetch_factors=(2, 4), seed: int = 0, repeat: int = 3,
          cost_noise: float = 0.3, lookahead: int | str = "auto") -> list[dict]:
    """The balanced order against plain in_order=False, side by side in one run, on every trace of
    ``SUITE_TRACES`` at each prefetch factor: one dict per (trace, prefetch) with both ratios and the
    lookahead the balanced rows resolved to (on exact and on estimated costs)."""
    out = []
    for name, workload in SUITE_TRACES.items():
        base = workload.sample(samples, seed)
        true = with_cost_noise(base, cost_noise, seed)
        config = LoaderConfig(num_workers=workers, order="balanced", lookahead=lookahead)
        resolved = {"exact": resolve_lookahead(config, true.cost_s),
                    "estimated": resolve_lookahead(config, estimate_costs(samples, TraceMeta(base),
                                                                          CostModel.fit(base).estimate))}
        for pf in prefetch_factors:
            rows = {r.mode: r for r in run(samples, workers, pf, seed, repeat, trace=base, cost_noise=cost_noise,
                                           lookahead=lookahead, only=SUITE_MODES)}
            plain = rows[SUITE_MODES[0]].samples_per_s
            out.append({"trace": name, "prefetch_factor": pf, "samples": samples,
                        "in_order_false_of_limit": rows[SUITE_MODES[0]].fraction_of_limit,
                        "exact": rows[SUITE_MODES[1]].samples_per_s / plain,
                        "estimated": rows[SUITE_MODES[2]].samples_per_s / plain,
                        "lookahead_exact": resolved["exact"], "lookahead_estimated": resolved["estimated"],
                        "moved_exact": rows[SUITE_MODES[1]].max_displacement,
                        "moved_estimated": rows[SUITE_MODES[2]].max_displacement})
    return out


def format_suite(out: list[dict]) -> str:
    return table(["trace", "prefetch", "in_order=False of limit", "balanced exact", "balanced estimated",
                  "lookahead (exact/est.)"],
                 [[r["trace"], r["prefetch_factor"], pct(r["in_order_false_of_limit"], 1), ratio(r["exact"], 3),
                   ratio(r["estimated"], 3), f"{r['lookahead_exact']}/{r['lookahead_estimated']}"] for r in out])


def format_table(rows: list[LoaderBenchRow]) -> str:
    lines = [table(["mode", "samples", "seconds", "spread", "samples/s", "of limit", "exactly-once", "moved", "held"],
                   [[r.mode, r.samples, f"{r.seconds:.3f}",
                     "-" if r.worst_seconds is None else pct(r.worst_seconds / r.seconds - 1, 1),
                     f"{r.samples_per_s:.1f}", pct(r.fraction_of_limit, 1),
                     "yes" if r.exactly_once else "NO", "-" if r.max_displacement is None else r.max_displacement,
                     "-" if r.reorder_peak is None else r.reorder_peak] for r in rows])]
    by = {r.mode: r for r in rows}
    ooo, plain, bare = by.get("torchdata in_order=False"), by.get("torchdata in_order=True"), by.get(NO_SNAPSHOTS)
    ours = by.get("dynbsz exactly-once in_order=False")
    if ours and ooo:
        lines.append(f"exactly-once out of order runs at {pct(ours.samples_per_s / ooo.samples_per_s, 1)} of plain "
                     "in_order=False (goal: within 5%)")
    for r in rows:
        if (r.max_displacement is not None or r.reorder_peak is not None) and ooo and plain:
            peer = f" ({ratio(r.samples_per_s / bare.samples_per_s, 2)} without its snapshots)" if bare else ""
            lines.append(f"{r.mode}: {ratio(r.samples_per_s / ooo.samples_per_s, 2)} plain in_order=False{peer}, "
                         f"{ratio(r.samples_per_s / plain.samples_per_s, 2)} plain in_order=True")
    return "\n".join(lines)


def rows_to_json(rows: list[LoaderBenchRow]) -> list[dict]:
    return [asdict(r) for r in rows]
