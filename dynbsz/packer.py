"""The production packer: ordered greedy token-budget packing behind a readiness gate.

Usage, the way a loader drives it::

    packer = GreedyPacker(PackerConfig(budget=32768), gate=FixedGate(200))
    for sample in stream:
        packer.put(sample.id, sample.tokens, source=sample.source, payload=sample)
        if packer.ready():
            yield packer.cut()
    yield from packer.drain()          # end of stream: cut until empty, gate ignored

Selection is identical to VeOmni's ``TextBatchingStrategy`` (see
``dynbsz.selection``); the buffer is kept as compact numpy arrays in arrival
order so a cut costs a few numpy calls and a short Python walk, not a quadratic flush.
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass
from itertools import compress
from operator import itemgetter
from typing import Any, Callable, Iterator, Protocol, runtime_checkable

import numpy as np

from .config import MAX_TOKENS, PackerConfig
from .errors import DroppedSampleWarning, EmptySampleError, OverlongSampleError, SampleError, StateMismatchError
from .gates import FixedGate, Gate
from .selection import NEVER_FITS, select
from .warmup import budget_at_step

STATE_FORMAT = "dynbsz.packer/1"


@dataclass(frozen=True, slots=True)
class MicroBatch:
    """One cut. Tuples are in buffer (arrival) order."""

    ids: tuple
    tokens: tuple
    physical: tuple
    sources: tuple
    payloads: tuple
    index: int          # how many micro-batches were cut before this one
    step: int           # optimizer step it belongs to (index // micro_batches_per_step)
    budget: int         # the budget it was cut against (smaller during warm-up)
    drained: bool       # cut at end of stream, gate ignored

    @property
    def total_tokens(self) -> int:
        return sum(self.tokens)

    @property
    def total_physical(self) -> int:
        return sum(self.physical)

    def __len__(self) -> int:
        return len(self.ids)


@runtime_checkable
class Packer(Protocol):
    """What the loader, the simulator and the property suite call on a packer: nothing else.

    The first seven methods are what a packing loop needs (``dynbsz.packing.pack``) and what the
    property suite checks; the last three are what a loader needs around checkpoints and
    partial steps. A packer is built by a factory ``(PackerConfig, Gate) -> Packer``
    (``GreedyPacker`` itself is one), which the loaders and the simulator take as an argument.
    """

    def put(self, sample_id: Any, tokens: int, physical_tokens: int | None = None, source: Any = None,
            payload: Any = None) -> bool: ...

    def ready(self) -> bool: ...

    def cut(self) -> MicroBatch: ...

    def drain(self) -> Iterator[MicroBatch]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    def __len__(self) -> int: ...

    def start_new_step(self) -> None:
        """Close the current optimizer step early (a partial step at the end of an epoch)."""

    def buffered_ids(self) -> list:
        """Ids of the buffered samples, in arrival order (after a restore: whose payloads to re-read)."""

    def attach_payload(self, sample_id: Any, payload: Any) -> None:
        """Give a buffered sample its payload back (a checkpoint keeps ids, not payloads)."""


#: What builds a packer: ``GreedyPacker`` itself, a subclass, or any callable of this shape.
PackerFactory = Callable[[PackerConfig, Gate], Packer]


class GreedyPacker:
    """Ordered greedy first-fit packer; implements ``Packer`` and the gates' ``BufferView``."""

    _select = staticmethod(select)

    def __init__(self, config: PackerConfig, gate: Gate | None = None):
        if not isinstance(config, PackerConfig):
            raise TypeError(f"config must be a PackerConfig, got {type(config).__name__}")
        self.config = config
        self.gate: Gate = FixedGate() if gate is None else gate
        # BufferView, read by the gate on every ready() call: plain attributes, no properties.
        self.budget = config.budget
        self.physical_cap = config.physical_cap
        self.num_samples = 0
        self.tokens = 0
        self.physical_tokens = 0
        self.cuts = 0
        self.step = 0   # the optimizer step the next cut belongs to (BufferView.step)
        self.current_budget = self._budget_for(0)
        # Dropped samples, by reason. Counted, warned about once, and part of the checkpoint.
        self.dropped: dict[str, list] = {"overlong": [], "empty": []}
        self._reset_buffer()

    # ---- buffer storage -------------------------------------------------------------------
    # Slots [lo, hi) of fixed-capacity numpy arrays hold the lengths in arrival order (ids sit
    # in a plain list beside them: the selection never reads them, and gathering a few from a
    # list is cheaper than fancy-indexing an object array). A taken sample is not removed; its
    # slot is marked NEVER_FITS (a length nothing fits, which the selection skips for free) and its
    # index goes into _dead, so the head can step over it without scanning the arrays. The
    # arrays are compacted only when they fill up, so a cut costs O(k) element writes, not an
    # O(B) shuffle. Samples that arrived since the last cut wait in plain lists (cheap appends)
    # and are written in at the next cut.

    def _reset_buffer(self) -> None:
        self._ids: list = []
        self._tok = np.empty(64, dtype=np.int64)
        self._phy = np.empty(64, dtype=np.int64)
        self._lo = self._hi = 0
        self._dead: set[int] = set()
        self._new_ids: list = []
        self._new_tok: list[int] = []
        self._new_phy: list[int] = []
        # Until some sample's physical length differs from its token length, physical lengths
        # are not stored at all (_phy is unused and phy == tok): the common text-only case.
        self._phy_differs = False
        self._extra: dict[Any, tuple[Any, Any]] = {}  # id -> (source, payload); also the live-id set
        self._n_lone = 0  # empty samples held under emit_alone: they may never be co-packed

    def _fold_new(self) -> None:
        m = len(self._new_tok)
        if not m:
            return
        if self._hi + m > self._tok.shape[0]:
            self._compact(extra=m)
        lo, hi = self._hi, self._hi + m
        self._ids += self._new_ids
        self._tok[lo:hi] = self._new_tok
        if self._phy_differs:
            self._phy[lo:hi] = self._new_phy
        self._hi = hi
        self._new_ids, self._new_tok, self._new_phy = [], [], []

    def _store_physical(self) -> None:
        """Switch to storing physical lengths: up to now they equalled the token lengths."""
        self._phy_differs = True
        self._phy = self._tok.copy()
        self._new_phy = list(self._new_tok)

    def _live_slots(self) -> tuple[list, np.ndarray, np.ndarray]:
        """Ids, token and physical lengths of the slots in [lo, hi) not taken yet, in arrival order."""
        lo, hi = self._lo, self._hi
        live = self._tok[lo:hi] != NEVER_FITS
        return list(compress(self._ids[lo:hi], live.tolist())), self._tok[lo:hi][live], self._phy[lo:hi][live]

    def _compact(self, extra: int) -> None:
        ids, tok_live, phy_live = self._live_slots()
        n = len(ids)
        cap = max(64, 2 * (n + extra))
        tok, phy = np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64)
        tok[:n] = tok_live
        phy[:n] = phy_live
        self._ids, self._tok, self._phy, self._lo, self._hi = ids, tok, phy, 0, n
        self._dead.clear()

    def _budget_for(self, cut_index: int) -> int:
        c = self.config
        return budget_at_step(c.budget, cut_index // c.micro_batches_per_step, c.warmup_steps, c.warmup_init_tokens)

    # ---- the Packer protocol ---------------------------------------------------------------

    def put(self, sample_id: Any, tokens: int, physical_tokens: int | None = None, source: Any = None,
            payload: Any = None) -> bool:
        """Buffer one sample. Returns False if the policy dropped it (it is then counted in ``dropped``)."""
        if sample_id.__class__ is not int and sample_id.__class__ is not str:
            sample_id = _check_id(sample_id)
        if tokens.__class__ is not int or tokens <= 0 or tokens > self.budget:
            tokens = self._admit_unusual_tokens(sample_id, tokens)
            if tokens is None:
                return False
        if physical_tokens is None:
            physical = tokens
        else:
            physical = _check_length("physical_tokens", sample_id, physical_tokens, allow_zero=tokens == 0)
            if self.physical_cap is not None and physical > self.physical_cap and not self._admit_overlong(
                    sample_id, physical, self.physical_cap, "physical_cap"):
                return False
        if sample_id in self._extra:
            raise SampleError(f"sample id {sample_id!r} is already buffered; every sample must be put exactly once")
        self._extra[sample_id] = (source, payload)
        self._new_ids.append(sample_id)
        self._new_tok.append(tokens)
        if self._phy_differs:
            self._new_phy.append(physical)
        elif physical != tokens:
            self._store_physical()
            self._new_phy[-1] = physical
        self.num_samples += 1
        self.tokens += tokens
        self.physical_tokens += physical
        return True

    def ready(self) -> bool:
        return self.num_samples > 0 and self.gate.ready(self)

    def cut(self) -> MicroBatch:
        """Cut the next micro-batch now (whatever the gate says; ask ``ready()`` first)."""
        return self._cut(drained=False)

    def drain(self) -> Iterator[MicroBatch]:
        """End of stream: cut until the buffer is empty, ignoring the gate.

        Lazy: each micro-batch is cut when the caller asks for it, so a checkpoint taken
        half-way through a drain still holds the rest of the buffer.
        """
        while self.num_samples:
            yield self._cut(drained=True)

    def __len__(self) -> int:
        return self.num_samples

    def start_new_step(self) -> None:
        """Begin a new optimizer step even though the current one holds fewer than
        ``micro_batches_per_step`` micro-batches (a partial step at the end of an epoch), so the
        warm-up schedule keeps counting the loader's steps."""
        mbps = self.config.micro_batches_per_step
        self.cuts = -(-self.cuts // mbps) * mbps
        self.step = self.cuts // mbps
        if self.config.warmup_steps:
            self.current_budget = self._budget_for(self.cuts)

    def _cut(self, drained: bool) -> MicroBatch:
        if self.num_samples == 0:
            raise RuntimeError("cut() on an empty packer: put samples first, or check len(packer)")
        self._fold_new()
        budget = self.current_budget
        lo, hi = self._lo, self._hi
        tok = self._tok[lo:hi]
        lone = (tok == 0) if self._n_lone else None
        cap = self.physical_cap
        taken = self._select(tok, budget, self._phy[lo:hi] if cap is not None and self._phy_differs else None, cap, lone)
        k = len(taken)
        if taken[-1] == k - 1:  # a contiguous prefix (the common case at large budgets): slices
            ids = self._ids[lo:lo + k]
            tok_l = tok[:k].tolist()
            phy_l = self._phy[lo:lo + k].tolist() if self._phy_differs else tok_l
            lo += k
        else:  # k >= 2 here, so itemgetter returns tuples
            sel = [lo + i for i in taken]
            ids = itemgetter(*sel)(self._ids)
            sel_a = np.array(sel)
            tok_l = self._tok[sel_a].tolist()
            phy_l = self._phy[sel_a].tolist() if self._phy_differs else tok_l
            self._tok[sel_a] = NEVER_FITS
            j = 1
            while taken[j] == j:  # taken is ascending and not contiguous, so this stops before k
                j += 1
            self._dead.update(sel[j:])
            lo += j
        dead = self._dead
        while lo in dead:  # slots taken by earlier cuts sit behind the head; never at or past hi
            lo += 1
        self._lo = lo
        pop = self._extra.pop
        sources, payloads = zip(*[pop(i) for i in ids])
        t_sum = sum(tok_l)
        self.num_samples -= k
        self.tokens -= t_sum
        self.physical_tokens -= sum(phy_l) if self._phy_differs else t_sum
        if self._n_lone and t_sum == 0:
            self._n_lone -= 1
        index = self.cuts
        self.cuts = index + 1
        self.step = self.cuts // self.config.micro_batches_per_step
        if self.config.warmup_steps:
            self.current_budget = self._budget_for(index + 1)
        return MicroBatch(tuple(ids), tuple(tok_l), tuple(phy_l), sources, payloads,
                          index, index // self.config.micro_batches_per_step, budget, drained)

    # ---- unusual samples -------------------------------------------------------------------

    def _admit_unusual_tokens(self, sample_id: Any, tokens: Any) -> int | None:
        tokens = _check_length("tokens", sample_id, tokens, allow_zero=True)
        if tokens == 0:
            policy = self.config.empty
            if policy == "raise":
                raise EmptySampleError(f"sample {sample_id!r} has 0 tokens and empty='raise'; "
                                       "set empty='emit_alone' or empty='drop' to accept such samples")
            if policy == "drop":
                self._drop("empty", sample_id)
                return None
            self._n_lone += 1
            return 0
        if tokens > self.budget and not self._admit_overlong(sample_id, tokens, self.budget, "budget"):
            return None
        return tokens

    def _admit_overlong(self, sample_id: Any, length: int, limit: int, setting: str) -> bool:
        policy = self.config.overlong
        if policy == "raise":
            raise OverlongSampleError(f"sample {sample_id!r} has {length} tokens, more than {setting}={limit}, and "
                                      "overlong='raise'; set overlong='emit_alone' (a micro-batch of its own) or "
                                      f"overlong='drop', or raise {setting}")
        if policy == "drop":
            self._drop("overlong", sample_id)
            return False
        return True

    def _drop(self, reason: str, sample_id: Any) -> None:
        ids = self.dropped[reason]
        if not ids:
            warnings.warn(f"dynbsz packer: dropping {reason} samples as configured ({reason}='drop'), first: "
                          f"{sample_id!r}; see packer.dropped[{reason!r}] for the full list", DroppedSampleWarning,
                          stacklevel=4)
        ids.append(sample_id)

    # ---- checkpointing ---------------------------------------------------------------------

    def _live(self) -> tuple[list, np.ndarray, np.ndarray]:
        self._fold_new()
        ids, tok, phy = self._live_slots()
        return ids, tok, phy if self._phy_differs else tok

    def buffered_ids(self) -> list:
        return self._live()[0]

    def attach_payload(self, sample_id: Any, payload: Any) -> None:
        """Give a buffered sample its payload back (after a restore, which keeps ids, not payloads)."""
        source, _ = self._extra[sample_id]
        self._extra[sample_id] = (source, payload)

    def state_dict(self) -> dict[str, Any]:
        """Exact, JSON-serializable state. Payloads are not saved: the loader re-reads them by id."""
        ids, tok, phy = self._live()
        state = {
            "format": STATE_FORMAT,
            "config": self.config.to_dict(),
            "gate": self.gate.spec(),
            "buffer": {
                "ids": ids,
                "tokens": tok.tolist(),
                "physical": phy.tolist(),
                "sources": [self._extra[i][0] for i in ids],
            },
            "cuts": self.cuts,
            "dropped": {k: list(v) for k, v in self.dropped.items()},
        }
        if callable(getattr(self.gate, "state_dict", None)):
            state["gate_state"] = self.gate.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise StateMismatchError(f"not a dynbsz packer checkpoint (expected format {STATE_FORMAT!r}, "
                                     f"got {state.get('format') if isinstance(state, dict) else type(state).__name__!r})")
        self.config.check_compatible(state["config"])
        saved_gate, gate = state["gate"], self.gate.spec()
        if saved_gate != gate:
            raise StateMismatchError(f"cannot load a packer checkpoint made with gate {saved_gate} into a packer "
                                     f"with gate {gate}; construct the packer with the checkpoint's gate")
        buf = state["buffer"]
        self._reset_buffer()
        self.num_samples = self.tokens = self.physical_tokens = 0
        for sid, tok, phy, src in zip(buf["ids"], buf["tokens"], buf["physical"], buf["sources"], strict=True):
            if sid in self._extra:
                raise StateMismatchError(f"corrupt packer checkpoint: sample id {sid!r} appears twice in the buffer")
            self._extra[sid] = (src, None)
            self._new_ids.append(sid)
            self._new_tok.append(tok)
            if self._phy_differs:
                self._new_phy.append(phy)
            elif phy != tok:
                self._store_physical()
                self._new_phy[-1] = phy
            self.num_samples += 1
            self.tokens += tok
            self.physical_tokens += phy
            self._n_lone += tok == 0
        self.cuts = state["cuts"]
        self.step = self.cuts // self.config.micro_batches_per_step
        self.current_budget = self._budget_for(self.cuts)
        self.dropped = {k: list(v) for k, v in state["dropped"].items()}
        if "gate_state" in state:
            self.gate.load_state_dict(state["gate_state"])


def _check_id(sample_id: Any) -> int | str:
    if isinstance(sample_id, numbers.Integral) and not isinstance(sample_id, bool):
        return int(sample_id)
    if isinstance(sample_id, str):
        return str(sample_id)
    raise SampleError(f"sample_id must be an int or a str (it is stored in checkpoints), got {sample_id!r} "
                      f"({type(sample_id).__name__})")


def _check_length(setting: str, sample_id: Any, value: Any, *, allow_zero: bool) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise SampleError(f"{setting} of sample {sample_id!r} must be a positive integer, got {value!r} "
                          f"({type(value).__name__})")
    value = int(value)
    if value < 0 or (value == 0 and not allow_zero) or value > MAX_TOKENS:
        raise SampleError(f"{setting} of sample {sample_id!r} must be a positive integer <= {MAX_TOKENS}, got {value}")
    return value
