"""What a streaming loader's examples are made of: ``StreamScenario``, its JSON form and its strategy.

A streaming (iterable) loader has no sampler the harness can hand an order to: it reads sources
that it shards over DP ranks and workers itself, shuffles with a seed (and, for some, a buffer),
cycles or mixes sources, and keeps its epoch and position in its own ``state_dict``. The
``LoaderScenario`` knobs (packing budget, fetch batches, warm-up) are not its knobs; these are:

* ``sources``: sizes of one to three sources; sample ``i`` of source ``k`` has id ``1000*k + i``
  (``sample_id``), written into the sample itself by the adapter.
* ``mix``: ``single`` (one source), ``combined`` (a weighted mixture drawing one sample at a time,
  ``weights`` its sampling ratios, or None for the library's default) or ``parallel`` (one sample of
  every source per item; ``cycle_length`` items per epoch, cycling shorter sources, or None: until
  the shortest is exhausted).
* ``chunk_size``: samples per chunk or shard file, so workers hold uneven chunk counts;
  ``shuffle`` with ``seed``, and ``shuffle_buffer`` for loaders that shuffle through a buffer.
* ``num_workers``, ``persistent_workers``, ``batch_size``, ``drop_last``, ``dp_rank`` / ``dp_size``.
* the schedule: ``epochs``; ``checkpoints`` (global batch counts after which the state is saved,
  the loader closed and a fresh one restored; 0: before the first batch); ``restore_at_epoch_end``
  (also after every epoch's iterator ran out); ``break_after`` (epoch 0's loop breaks after that
  many batches and the trainer goes on to epoch 1, None: no break); ``checkpoint_on_resume`` (after
  every restore the trainer writes a checkpoint at once, ``state_dict()`` before it iterates, as
  trainers that checkpoint on resume do, and a restore before the epoch's next batch restores
  that checkpoint; ``loader_props.run_schedule``). Off by default: an example saved before the field
  existed decodes without it, to the same schedule.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from hypothesis import strategies as st

from dynbsz.errors import check_fields

STREAM_FORMAT = "properties.stream_scenario/1"
MIXES = ("single", "combined", "parallel")
SOURCE_STRIDE = 1000


def sample_id(source: int, index: int) -> int:
    return SOURCE_STRIDE * source + index


def source_of(sid: int) -> int:
    return sid // SOURCE_STRIDE


@dataclass(frozen=True)
class StreamScenario:
    sources: tuple[int, ...] = (12,)
    mix: str = "single"
    weights: tuple[float, ...] | None = None
    cycle_length: int | None = None
    chunk_size: int = 4
    shuffle: bool = False
    seed: int = 0
    shuffle_buffer: int = 8
    num_workers: int = 0
    persistent_workers: bool = False
    batch_size: int = 1
    drop_last: bool = False
    dp_rank: int = 0
    dp_size: int = 1
    epochs: int = 2
    checkpoints: tuple[int, ...] = ()
    restore_at_epoch_end: bool = False
    break_after: int | None = None
    checkpoint_on_resume: bool = False

    def __post_init__(self) -> None:
        if self.mix not in MIXES:
            raise ValueError(f"mix={self.mix!r}; allowed values: {', '.join(MIXES)}")
        if not self.sources or (self.mix == "single") != (len(self.sources) == 1):
            raise ValueError(f"mix={self.mix!r} with {len(self.sources)} sources: 'single' needs exactly one")

    def ids(self, source: int) -> list[int]:
        return [sample_id(source, i) for i in range(self.sources[source])]

    def all_ids(self) -> set[int]:
        return {sid for k in range(len(self.sources)) for sid in self.ids(k)}

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["sources"] = list(self.sources)
        d["weights"] = None if self.weights is None else list(self.weights)
        d["checkpoints"] = list(self.checkpoints)
        if not self.checkpoint_on_resume:
            # written only when on: an example without it encodes (and is named in the corpus) as before the field
            del d["checkpoint_on_resume"]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "StreamScenario":
        check_fields("StreamScenario", d, cls)
        return cls(**{**d, "sources": tuple(d["sources"]), "checkpoints": tuple(d.get("checkpoints", ())),
                      "weights": None if d.get("weights") is None else tuple(d["weights"])})


def encode_stream_scenario(sc: StreamScenario) -> dict:
    return {"format": STREAM_FORMAT, "scenario": sc.to_json()}


def decode_stream_scenario(d: dict) -> StreamScenario:
    if d.get("format") != STREAM_FORMAT:
        raise ValueError(f"not a stream example (format {d.get('format')!r}, expected {STREAM_FORMAT!r})")
    return StreamScenario.from_json(d["scenario"])


# ---- the strategy ----------------------------------------------------------------------------

@st.composite
def stream_scenarios(draw, component, *, mix: str | None = None, checkpoints: bool = True, dp: bool = False,
                     min_workers: int = 0, max_workers: int | None = None, shuffle: bool | None = None,
                     max_checkpoints: int = 3):
    """A ``StreamScenario`` the ``component`` (a ``properties.targets.stream.StreamComponent``) supports.

    Sources hold 4-30 samples and chunks 1-8 of them, so with 0-3 workers some workers hold no chunk
    and others several; an epoch is a few to thirty batches. A schedule holds one to
    ``max_checkpoints`` restores at batch counts within the first two epochs, step 0 in about a third,
    a restore at every epoch end in about a third, in about a third a loop that breaks early in
    epoch 0, and a checkpoint written at once after every restore (``checkpoint_on_resume``) in a
    quarter by the draw, a third to half as Hypothesis draws it (it favours the value 0). The
    properties that need checkpoints exactly at epoch ends and on the next epoch's first batch add
    them themselves, from the uninterrupted run. ``min_workers``/``max_workers`` bound the worker count within the
    component's."""
    mixes = component.mixes if mix is None else (mix,)
    mix = draw(st.sampled_from(mixes))
    n_sources = 1 if mix == "single" else draw(st.integers(2, 3))
    sources = tuple(draw(st.lists(st.integers(4, 30), min_size=n_sources, max_size=n_sources)))
    weights = None
    if mix == "combined" and draw(st.booleans()):
        raw = draw(st.lists(st.sampled_from([1, 2, 3, 5]), min_size=n_sources, max_size=n_sources))
        weights = tuple(round(w / sum(raw), 4) for w in raw)
    cycle = draw(st.sampled_from([None, max(sources), sum(sources)])) if mix == "parallel" else None
    most = component.max_workers if max_workers is None else min(max_workers, component.max_workers)
    workers = draw(st.integers(min(min_workers, most), most))
    batch = draw(st.sampled_from(component.batch_sizes))
    dp_size = draw(st.integers(2, 3)) if dp else 1
    points: tuple[int, ...] = ()
    at_end, break_after, on_resume = False, None, False
    if checkpoints:
        horizon = max(2, 2 * sum(sources) // (batch * dp_size))
        drawn = draw(st.lists(st.integers(1, horizon), min_size=1, max_size=max_checkpoints))
        points = tuple(sorted(drawn + ([0] if draw(st.integers(0, 2)) == 0 else [])))
        at_end = draw(st.integers(0, 2)) == 0
        if component.break_early and draw(st.integers(0, 2)) == 0:
            break_after = draw(st.integers(1, max(1, min(sources) // (batch * dp_size))))
    fields = dict(
        sources=sources, mix=mix, weights=weights, cycle_length=cycle, chunk_size=draw(st.integers(1, 8)),
        shuffle=draw(st.sampled_from(component.shuffle)) if shuffle is None else shuffle,
        seed=draw(st.integers(0, 2**16)), shuffle_buffer=draw(st.sampled_from([1, 4, 16, 64])),
        num_workers=workers, persistent_workers=draw(st.sampled_from(component.persistent)) if workers else False,
        batch_size=batch, drop_last=draw(st.sampled_from(component.drop_last)), dp_size=dp_size,
        epochs=2, checkpoints=points, restore_at_epoch_end=at_end, break_after=break_after)
    if checkpoints:
        # drawn last, so the draws before it (and the examples other schedules shrank to) stay as they were
        on_resume = draw(st.integers(0, 3)) == 0
    return StreamScenario(**fields, checkpoint_on_resume=on_resume)
