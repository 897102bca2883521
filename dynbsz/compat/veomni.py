"""VeOmni 0.1.12's main-process packer (``TextBatchingStrategy``) behind the ``Packer`` protocol.

Optional: needs the ``veomni`` extra (see README). Used by the benchmark and by
the differential tests that pin dynbsz's selection to VeOmni's, micro-batch for
micro-batch.
"""

from __future__ import annotations

import contextlib
import copy
import sys
from operator import itemgetter
from typing import Any

from ..config import PackerConfig
from ..errors import ConfigError
from ..packer import MicroBatch


def available() -> bool:
    try:
        _strategy_class()
    except ImportError:
        return False
    return True


def _strategy_class():
    # VeOmni's loggers write to stdout (handlers bound at import); send them to stderr so
    # `--json` output stays parseable.
    with contextlib.redirect_stdout(sys.stderr):
        from veomni.data.dynamic_batching import TextBatchingStrategy

    return TextBatchingStrategy


class _Ids:
    """Stand-in for ``input_ids``: VeOmni only reads ``.shape[-1]`` (to drop empty strings)."""

    __slots__ = ("shape",)

    def __init__(self, n: int):
        self.shape = (n,)


def make_item(sample_id: Any, tokens: int, physical: int | None = None, source: Any = None,
              payload: Any = None) -> dict[str, Any]:
    """A sample as VeOmni's strategy wants it (lengths are read through get_length_fn)."""
    physical = tokens if physical is None else physical
    return {"id": sample_id, "tokens": tokens, "physical": physical, "source": source, "payload": payload,
            "input_ids": _Ids(physical)}


def make_strategy(config: PackerConfig, buffer_size: int):
    if config.overlong != "emit_alone":
        raise ConfigError(f"VeOmni's TextBatchingStrategy only knows overlong='emit_alone', got {config.overlong!r}")
    cls = _strategy_class()
    return cls(
        token_micro_bsz=config.budget,
        buffer_size=buffer_size,
        bsz_warmup_steps=config.warmup_steps,
        bsz_warmup_init_mbtoken=config.warmup_init_tokens,
        get_length_fn=itemgetter("tokens"),
        physical_token_cap=config.physical_cap,
        get_physical_length_fn=itemgetter("physical"),
    )


class VeOmniPacker:
    """``TextBatchingStrategy`` driven through the ``Packer`` protocol.

    Only fixed gates exist in VeOmni, so the gate is given as its buffer size.
    VeOmni silently drops samples whose ``input_ids`` hold at most one token;
    this adapter passes them on so the property suite can see that happen.
    """

    #: VeOmni has no empty-sample policy: a sample with zero budgeted tokens (all labels masked
    #: under count mode "loss") is packed like any other; dynbsz's ``empty="emit_alone"`` sends it alone.
    empties_alone = False

    def __init__(self, config: PackerConfig, buffer_size: int = 200):
        self.config = config
        self.buffer_size = buffer_size
        self._s = make_strategy(config, buffer_size)
        self.cuts = 0

    def put(self, sample_id, tokens, physical_tokens=None, source=None, payload=None) -> bool:
        before = len(self._s.buffer)
        self._s.put_item(make_item(sample_id, tokens, physical_tokens, source, payload))
        return len(self._s.buffer) > before

    def ready(self) -> bool:
        return self._s.is_ready_for_micro_batch()

    def cut(self, drained: bool = False) -> MicroBatch:
        step = self.cuts // self.config.micro_batches_per_step
        items = self._s.get_micro_batch(step)
        index = self.cuts
        self.cuts += 1
        return MicroBatch(
            tuple(i["id"] for i in items), tuple(i["tokens"] for i in items), tuple(i["physical"] for i in items),
            tuple(i["source"] for i in items), tuple(i["payload"] for i in items), index, step,
            self._s.get_cur_token_micro_bsz(), drained)

    def drain(self):
        while not self._s.empty():
            yield self.cut(drained=True)

    def __len__(self) -> int:
        return len(self._s.buffer)

    def state_dict(self) -> dict[str, Any]:
        # What VeOmni's DynamicBatchSizeDataLoader.state_dict() does with a strategy that has no
        # state_dict(): it keeps the object itself, deep-copied (samples included).
        return {"strategy": copy.deepcopy(self._s), "cuts": self.cuts}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._s = copy.deepcopy(state["strategy"])
        self.cuts = state["cuts"]
