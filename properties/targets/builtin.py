"""The suite's own targets: ``dynbsz`` (the production packer, every built-in gate and the loader in
both runtimes) and ``torchdata`` (a plain ``StatefulDataLoader`` as most projects use it). The studied
libraries' targets are their studies' (studies/, ``properties.targets.studies``)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from dynbsz.config import PackerConfig
from dynbsz.gates import (
    AUTO_TABLE,
    CONTEXT_AWARE_TABLE,
    FixedGate,
    TokenAwareGate,
    WarmupRampGate,
    auto_gate,
    context_aware,
    resolve_gate,
)
from dynbsz.packer import GreedyPacker

from .. import probes
from ..repro_setup import PackerReproSetup, protocol_packer
from .base import LoaderComponent, PackerComponent, Target

# ---- gate specs, the serialized form of a gate in examples and regression files -------------


def _counts(maximum: int) -> st.SearchStrategy[int]:
    # Small thresholds half the time: a count threshold only matters when it is reached before
    # the budget is covered, which with streams of a few dozen samples takes a small one.
    return st.one_of(st.integers(1, 6), st.integers(1, maximum))


def fixed_specs(config: PackerConfig, max_buffer: int = 40) -> st.SearchStrategy[dict]:
    return _counts(max_buffer).map(lambda n: FixedGate(n).spec())


def token_aware_specs(config: PackerConfig, max_pool: int = 40) -> st.SearchStrategy[dict]:
    # Margins from a short list keep examples (and regression files) readable; the rule's
    # ceil((1 + margin) * budget) is exercised by the budgets, which vary freely.
    margins = st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.5, 3.0])
    return st.builds(lambda m, p: TokenAwareGate(m, p).spec(), margins, _counts(max_pool))


def warmup_ramp_specs(config: PackerConfig) -> st.SearchStrategy[dict]:
    """The warm-up-scoped gate: a small minimum held for a few steps, rising to a full one. Short
    holds and ramps, so a few dozen samples (a handful of cuts) cross every phase of the schedule."""
    @st.composite
    def draw(draw_):
        start = draw_(_counts(12))
        full = draw_(st.integers(start, start + 24))
        return WarmupRampGate(start, full, draw_(st.integers(0, 3)), draw_(st.integers(0, 6))).spec()

    return draw()


def context_aware_specs(config: PackerConfig) -> st.SearchStrategy[dict]:
    return st.just(context_aware(config.budget).spec())


def auto_specs(config: PackerConfig) -> st.SearchStrategy[dict]:
    return st.just(auto_gate(config.budget).spec())


def _auto_budgets() -> st.SearchStrategy[int]:
    # The table's budgets and the two budgets either side of each boundary between rows (the
    # geometric mean of neighbours), so the row a budget takes is tested where it changes.
    keys = sorted(AUTO_TABLE)
    edges = [int((a * b) ** 0.5) + d for a, b in zip(keys, keys[1:]) for d in (0, 1)]
    return st.sampled_from(keys + edges)


def probe_specs(config: PackerConfig) -> st.SearchStrategy[dict]:
    return st.sampled_from([1.0, 0.75]).map(lambda f: probes.HighWaterGate(f).spec())


def builtin_specs(config: PackerConfig) -> st.SearchStrategy[dict]:
    """What a packer is tested with: the documented count gates, the stateful probe, and the warm-up-scoped
    ramp, the one gate that reads ``view.step``: without it a packer whose step is wrong or not restored
    (mutant ``step-not-restored``) is caught only through the batch-size warm-up's budgets."""
    return st.one_of(fixed_specs(config), token_aware_specs(config), probe_specs(config), warmup_ramp_specs(config))


def build_gate(spec: dict[str, Any], budget: int) -> Any:
    """A fresh gate from its spec: dynbsz's own resolver for built-in kinds, the probe otherwise."""
    if spec.get("kind") == probes.KIND:
        return probes.from_spec(spec)
    return resolve_gate(dict(spec), budget=budget)


def greedy_packer(config: PackerConfig, spec: dict[str, Any]) -> GreedyPacker:
    return GreedyPacker(config, build_gate(spec, config.budget))


CONTEXT_AWARE_BUDGETS = st.sampled_from(sorted(CONTEXT_AWARE_TABLE))

# Which gate family a gate component draws, by name; mutants of a gate replace one of these.
GATE_FAMILIES: dict[str, dict[str, Any]] = {
    "fixed": {"gate_specs": fixed_specs},
    "token_aware": {"gate_specs": token_aware_specs},
    "context_aware": {"gate_specs": context_aware_specs, "budgets": CONTEXT_AWARE_BUDGETS},
    "warmup_ramp": {"gate_specs": warmup_ramp_specs},
    "auto": {"gate_specs": auto_specs, "budgets": _auto_budgets()},
}


def gate_component(family: str, make_packer=greedy_packer) -> PackerComponent:
    return PackerComponent(name=f"gate:{family}", kind="gate", make_packer=make_packer, documented_rule=True,
                           **GATE_FAMILIES[family])


def greedy_packer_repro(config: PackerConfig, spec: dict[str, Any]) -> PackerReproSetup:
    """``greedy_packer`` as standalone code (``properties.repro_packer``): dynbsz's GreedyPacker and the gate
    ``resolve_gate`` builds from the spec."""
    from importlib import metadata

    return protocol_packer(config, spec, library=f"dynbsz {metadata.version('dynbsz-harness')}",
                           imports=("from dynbsz.packer import GreedyPacker",), construct="GreedyPacker(CONFIG, GATE)")


def packer_component(make_packer=greedy_packer) -> PackerComponent:
    # a mutant's packer (make_packer given) is the suite's own class: no script renders it
    return PackerComponent(name="packer", kind="packer", make_packer=make_packer, gate_specs=builtin_specs,
                           repro_setup=greedy_packer_repro if make_packer is greedy_packer else None)


WORKER_SKEW = ("runtime='worker' hands out micro-batches packed inside each worker stream, not samples in "
               "sampler order; the skew model is of a sampler's samples dispatched to workers (runtime='main')")


def dynbsz_loader_component(runtime: str, make_loader=None) -> LoaderComponent:
    """dynbsz's loader in one runtime; a loader mutant stands in for one of these, by name."""
    from ..loader_targets import dynbsz_loader, dynbsz_repro, step_signature
    from ..skew_props import dynbsz_skew_runner

    # a mutant's loader (make_loader given) is the suite's own class: no script renders it
    rendered = {"repro_setup": dynbsz_repro} if make_loader is None else {}
    make_loader = make_loader or dynbsz_loader
    # Both runtimes: bounded by max_steps (max_tokens needs a process group: tests/test_loader_distributed.py
    # runs it on two gloo ranks), an iterator dropped mid-epoch continues, fork or spawn workers.
    common = dict(make_loader=make_loader, signature=step_signature, stopping=("max_steps",),
                  resumes_dropped_iterator=True, start_methods=(None, "fork", "spawn"), **rendered)
    if runtime == "main":
        return LoaderComponent(name="loader:main", runtime="main", skew_runner=dynbsz_skew_runner,
                               orders=("sampler", "balanced"), reorder_buffer=True, **common)
    return LoaderComponent(name="loader:worker", runtime="worker", fetch_batch_sizes=(1,), warmup=False,
                           skip={"in_order_skew": WORKER_SKEW},
                           knob_notes={"warmup_steps": "warm-up needs the global step, which a worker packing ahead "
                                                       "of the trainer does not know (ConfigError)",
                                       "fetch_batch_size": "a worker hands over micro-batches (ConfigError)",
                                       "order": WORKER_ORDER, "reorder_buffer": WORKER_ORDER}, **common)


WORKER_ORDER = ("runtime='worker' packs inside each worker's own stream: there is no dispatch order to balance or "
                "to restore (order='balanced' and reorder_buffer are runtime='main' knobs, ConfigError otherwise)")

LOADER_RUNTIMES = ("main", "worker")


def dynbsz_target() -> Target:
    return Target(name="dynbsz", description="dynbsz's GreedyPacker with every built-in gate, and its loader in both "
                                             "runtimes (must pass everything)",
                  components=(packer_component(),) + tuple(gate_component(f) for f in GATE_FAMILIES)
                  + tuple(dynbsz_loader_component(r) for r in LOADER_RUNTIMES))


def torchdata_target() -> Target:
    """A plain ``StatefulDataLoader`` as most projects use it: ``shuffle=True`` with a seeded generator
    (``StatefulDistributedSampler(shuffle=True, seed)`` with DP), one fetched batch per step, its own
    ``state_dict``, and no ``set_epoch`` (the call projects forget). It is the baseline the suite
    exists to expose, and it is EXPECTED to fail:

    * ``epoch_reshuffle``: non-persistent workers draw one extra seed per epoch from the shared
      generator, so from epoch 1 on the order differs from persistent workers'; and a fresh loader
      told ``set_epoch(e)`` replays epoch 0 (with DP the sampler's epoch never moves).
    * ``dp_shards``: ``StatefulDistributedSampler`` evens out ranks by repeating samples, so with a
      dataset size not divisible by the ranks some samples are read twice in an epoch.
    * ``loader_resume``, even in order and without workers: the sampler's saved generator state is the
      one before the epoch's permutation, and restoring it replays the permutation but not the
      ``_base_seed`` the loader draws from the same generator for every iterator; after a resume
      the generator is one draw behind, so every later epoch's permutation differs from the
      uninterrupted run's (seed 0, 6 samples: epoch 1 is [3, 0, 5, 4, 2, 1] instead of
      [1, 3, 5, 2, 4, 0]).
    * ``exactly_once`` (and ``loader_resume``) with in_order=False: a resume replays a *count* of batches
      from a snapshot, so when deliveries were out of order at the checkpoint some samples are
      lost and others repeated (docs/internals/torch-dataloader-semantics.md 4.6). It depends on
      timing; the slow samples the loader suite draws out of order make it likely.

    * ``dp_step_counts`` under the stopping rule it offers, whole epochs, only after a resume out of
      order: the padded sampler gives every rank the same number of batches (at the price
      ``dp_shards`` counts), until a count-based resume loses or repeats samples on one rank.

    It passes ``in_order_skew`` (it is the behaviour the simulator models). No packing: budget,
    buffer, warm-up and micro-batches per step are not its knobs.
    """
    from ..loader_targets import torchdata_loader, torchdata_repro, torchdata_skew_runner

    component = LoaderComponent(
        name="loader:main", runtime="main", make_loader=torchdata_loader, state_codec="pickle", repro_setup=torchdata_repro,
        skew_runner=torchdata_skew_runner, micro_batches_per_step=(1,), warmup=False, stopping=("epoch",),
        knob_notes={"micro_batches_per_step": "a plain loader hands out one fetched batch per step",
                    "warmup_steps": "a plain loader does not pack, so it has no batch-size warm-up"})
    return Target(name="torchdata", description="a plain torchdata StatefulDataLoader as most projects use it "
                                                "(expected to fail: see properties.targets.builtin.torchdata_target)",
                  components=(component,))


BUILTIN = {"dynbsz": dynbsz_target, "torchdata": torchdata_target}
