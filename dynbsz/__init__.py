"""dynbsz: token-budget dynamic batching (packer, readiness gates, loader) for long-context training."""

from .config import EMPTY_POLICIES, OVERLONG_POLICIES, PackerConfig
from .errors import (
    CheckpointCorruptError,
    CheckpointError,
    CheckpointFormatError,
    CheckpointTruncatedError,
    ConfigError,
    DroppedSampleWarning,
    DynbszError,
    EmptySampleError,
    OverlongSampleError,
    SampleError,
    StateMismatchError,
)
from .gates import (
    BufferView,
    FixedGate,
    Gate,
    TokenAwareGate,
    WarmupRampGate,
    context_aware,
    covers_budget,
    resolve_gate,
)
from .packer import GreedyPacker, MicroBatch, Packer
from .workload import SourceSpec, Trace, Workload

__all__ = [
    "BufferView", "CheckpointCorruptError", "CheckpointError", "CheckpointFormatError", "CheckpointTruncatedError", "ConfigError", "DroppedSampleWarning", "DynbszError", "EMPTY_POLICIES", "EmptySampleError", "FixedGate",
    "Gate", "GreedyPacker", "MicroBatch", "OVERLONG_POLICIES", "OverlongSampleError", "Packer", "PackerConfig",
    "SampleError", "SourceSpec", "StateMismatchError", "TokenAwareGate", "Trace", "WarmupRampGate", "Workload",
    "context_aware", "covers_budget", "resolve_gate",
]
