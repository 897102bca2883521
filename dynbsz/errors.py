"""Exceptions raised by dynbsz.

Every error names the setting at fault and what it allows, so a user reading a
traceback from a training job can fix the config without opening the source.
"""

from __future__ import annotations


class DynbszError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(DynbszError, ValueError):
    """A setting is out of range or a combination of settings is unsupported."""


class SampleError(DynbszError, ValueError):
    """A sample handed to a packer is malformed (bad length, duplicate id)."""


class OverlongSampleError(SampleError):
    """A sample exceeds the micro-batch budget and the policy says `raise`."""


class EmptySampleError(SampleError):
    """A sample has no tokens and the policy says `raise`."""


class StateMismatchError(DynbszError, ValueError):
    """A checkpoint was made under a configuration this object cannot continue."""


class SampleFetchError(DynbszError, RuntimeError):
    """Reading or decoding one sample failed; the message names the sample and the original error."""


class CheckpointError(DynbszError, ValueError):
    """A checkpoint file cannot be used as it is (``dynbsz.checkpoint``); nothing was restored."""


class CheckpointTruncatedError(CheckpointError):
    """The file is shorter than its header says: a write that never finished, or a partial copy."""


class CheckpointCorruptError(CheckpointError):
    """The bytes do not match the digest in the header (or there are bytes after the payload)."""


class CheckpointFormatError(CheckpointError):
    """Not a dynbsz checkpoint, or one in a format version this dynbsz does not read."""


class DroppedSampleWarning(UserWarning):
    """Samples are being dropped because a policy says ``drop``; they are counted, never silent."""


def check_choice(setting: str, value: object, allowed: tuple) -> None:
    if value not in allowed:
        raise ConfigError(f"{setting}={value!r} is not supported; allowed values: {', '.join(map(repr, allowed))}")


def check_int(setting: str, value: object, *, minimum: int, maximum: int | None = None) -> int:
    """Validate an integer setting; bool and float are rejected (a float budget is almost always a unit mistake)."""
    import numbers

    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{setting} must be an integer >= {minimum}, got {value!r} ({type(value).__name__})")
    value = int(value)
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise ConfigError(f"{setting} must be an integer {bound}, got {value}")
    return value


def check_fields(what: str, d: dict, cls: type) -> None:
    """A serialized dataclass (a config or scenario read back from JSON) names only fields ``cls`` has."""
    from dataclasses import fields

    known = [f.name for f in fields(cls)]
    unknown = sorted(set(d) - set(known))
    if unknown:
        raise ConfigError(f"{what} has no field(s) {', '.join(unknown)} (unknown settings; allowed values: "
                          f"{', '.join(known)})")
