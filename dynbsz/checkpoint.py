"""One training checkpoint (model, optimizer and loader state together) in one file, written atomically.

A checkpoint that a ``kill -9`` can cut in half, or a disk can flip a bit in, must never be
resumed from: a half-written model trains on garbage, and a loader state that does not load is
one bad ``except`` away from a silent restart at step 0. So:

* **Writing** (``write_atomic``): into a temporary file in the same directory, flushed and
  fsynced, then renamed over the target (``os.replace``, atomic on POSIX) and the directory
  fsynced. A reader sees the previous file or the new one, never a mix; a killed writer leaves
  only a ``*.tmp`` file behind (``remove_temporaries`` clears them before a restart).
* **The file** (``encode_checkpoint``): a 52-byte header (magic ``DYNBSZCK``, format version,
  payload length, SHA-256 of the payload), then a ``torch.save`` payload of
  ``{"model", "optimizer", "loader", "extra"}``. The loader's state is stored as JSON text, the
  form dynbsz documents it in.
* **Reading** (``read_checkpoint``, ``load_checkpoint``): magic, version, length and digest are
  checked before anything is unpickled, and unpickling is ``torch.load(weights_only=True)``. A
  short file raises ``CheckpointTruncatedError``, a damaged one ``CheckpointCorruptError``, a
  foreign file or another format version ``CheckpointFormatError``; a loader state made with
  another dataset, seed, DP layout, runtime, budget or gate raises ``StateMismatchError`` from
  the loader. ``load_checkpoint`` restores nothing unless everything it was asked to restore is
  in the file and fits: a model, optimizer or loader that is asked for and missing raises
  (restoring weights without the loader would silently restart the data at step 0).

```python
from dynbsz.checkpoint import load_checkpoint, save_checkpoint

save_checkpoint(f"ckpt/step-{loader.steps}.pt", model=model, optimizer=opt, loader=loader,
                extra={"lr_step": sched.last_epoch})
state = load_checkpoint(path, model=model, optimizer=opt, loader=loader)   # state["extra"]
```
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
import struct
from typing import Any, Callable

import torch

from .errors import (
    CheckpointCorruptError,
    CheckpointFormatError,
    CheckpointTruncatedError,
    ConfigError,
    StateMismatchError,
)

MAGIC = b"DYNBSZCK"
#: The format version this module writes and reads. Bumped whenever the payload changes shape.
VERSION = 1
#: magic, version (uint32), payload length (uint64), SHA-256 of the payload; little endian.
HEADER = struct.Struct("<8sIQ32s")
#: What a temporary file of ``write_atomic`` ends with; it never is a complete checkpoint.
TMP_SUFFIX = ".tmp"
PARTS = ("model", "optimizer", "loader", "extra")


def _state(obj: Any) -> Any:
    return obj.state_dict() if callable(getattr(obj, "state_dict", None)) else obj


def _check_extra(value: Any, where: str = "extra") -> None:
    """``extra`` must come back through ``torch.load(weights_only=True)``: tensors and plain data."""
    if value is None or isinstance(value, (bool, int, float, str, bytes, torch.Tensor)):
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_extra(v, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, (str, int)):
                raise ConfigError(f"{where} has a key {k!r} ({type(k).__name__}); checkpoint keys must be str or int")
            _check_extra(v, f"{where}[{k!r}]")
        return
    raise ConfigError(f"{where} is a {type(value).__name__}; a checkpoint's extra holds tensors, numbers, strings, "
                      "bytes, None and lists/tuples/dicts of them (what torch.load(weights_only=True) reads back)")


def encode_checkpoint(*, model: Any = None, optimizer: Any = None, loader: Any = None, extra: Any = None) -> bytes:
    """The bytes of one checkpoint. Each of model, optimizer and loader is an object with
    ``state_dict()`` or a state already taken; ``None`` leaves that part out. The loader's state
    must be JSON-safe (dynbsz loaders' is)."""
    loader_state = _state(loader)
    if loader_state is not None:
        try:
            loader_state = json.dumps(loader_state, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"loader state is not JSON-safe ({e}); a dynbsz loader's state_dict() always is") from e
    _check_extra(extra)
    buf = io.BytesIO()
    torch.save({"model": _state(model), "optimizer": _state(optimizer), "loader": loader_state, "extra": extra}, buf)
    payload = buf.getvalue()
    return HEADER.pack(MAGIC, VERSION, len(payload), hashlib.sha256(payload).digest()) + payload


def decode_checkpoint(data: bytes, *, source: str = "checkpoint", map_location: Any = "cpu") -> dict[str, Any]:
    """Verify the header, length and digest of ``data``, then unpickle it (``weights_only=True``).
    Returns ``{"model", "optimizer", "loader", "extra"}`` (a part that was not saved is None)."""
    data = memoryview(data)
    if len(data) < HEADER.size:
        if bytes(data[:len(MAGIC)]) != MAGIC[:min(len(data), len(MAGIC))]:
            raise CheckpointFormatError(f"{source}: not a dynbsz checkpoint (no {MAGIC.decode()} header)")
        raise CheckpointTruncatedError(f"{source}: {len(data)} bytes, shorter than the {HEADER.size}-byte header: "
                                       "the write did not finish")
    magic, version, length, digest = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CheckpointFormatError(f"{source}: not a dynbsz checkpoint (starts with {magic!r}, expected {MAGIC!r})")
    if version != VERSION:
        raise CheckpointFormatError(f"{source}: checkpoint format version {version}; this dynbsz reads version "
                                    f"{VERSION}")
    payload = data[HEADER.size:]
    if len(payload) < length:
        raise CheckpointTruncatedError(f"{source}: payload has {len(payload)} of {length} bytes: the file was cut "
                                       "short (a write that never finished, or a partial copy)")
    if len(payload) > length:
        raise CheckpointCorruptError(f"{source}: {len(payload) - length} bytes after the {length}-byte payload")
    if hashlib.sha256(payload).digest() != digest:
        raise CheckpointCorruptError(f"{source}: SHA-256 of the payload does not match the header: the file is "
                                     "damaged")
    try:
        state = torch.load(io.BytesIO(payload), map_location=map_location, weights_only=True)
    except Exception as e:  # a payload that passes the digest but does not unpickle was written wrong
        raise CheckpointCorruptError(f"{source}: payload does not load ({type(e).__name__}: {e})") from e
    if not isinstance(state, dict) or set(state) != set(PARTS):
        raise CheckpointFormatError(f"{source}: payload is not a dynbsz checkpoint (expected the keys {PARTS})")
    if state["loader"] is not None:
        try:
            state["loader"] = json.loads(state["loader"])
        except (TypeError, ValueError) as e:
            raise CheckpointCorruptError(f"{source}: loader state is not valid JSON ({e})") from e
    return state


def write_atomic(path: str | os.PathLike, data: bytes, *, on_progress: Callable[[int, int], None] | None = None,
                 chunk_size: int = 1 << 20) -> None:
    """Write ``data`` to ``path`` so that ``path`` holds either its previous content or all of
    ``data``, whatever happens (an exception, ``kill -9``, a power cut after the call returns).

    ``on_progress(bytes_written, total)`` is called after every chunk reaches the temporary file.
    If anything raises, the temporary file is removed and ``path`` is untouched."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        try:
            view, total, written = memoryview(data), len(data), 0
            while written < total:
                end = min(written + chunk_size, total)
                while written < end:
                    written += os.write(fd, view[written:end])
                if on_progress is not None:
                    on_progress(written, total)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_directory(directory)


def fsync_directory(directory: str | os.PathLike) -> None:
    """Make a rename or an unlink in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_temporaries(directory: str | os.PathLike) -> list[str]:
    """Remove what killed ``write_atomic`` calls left in ``directory`` (call it when no writer is
    running, e.g. before a restart); returns the names removed."""
    removed = []
    for name in sorted(os.listdir(directory)):
        if name.startswith(".") and name.endswith(TMP_SUFFIX):
            os.unlink(os.path.join(directory, name))
            removed.append(name)
    return removed


def save_checkpoint(path: str | os.PathLike, *, model: Any = None, optimizer: Any = None, loader: Any = None,
                    extra: Any = None, on_progress: Callable[[int, int], None] | None = None,
                    chunk_size: int = 1 << 20) -> int:
    """Write one checkpoint of model, optimizer and loader (and ``extra``) atomically; returns its size.
    Take it between steps: the loader's state is what was handed out so far."""
    data = encode_checkpoint(model=model, optimizer=optimizer, loader=loader, extra=extra)
    write_atomic(path, data, on_progress=on_progress, chunk_size=chunk_size)
    return len(data)


def read_checkpoint(path: str | os.PathLike, *, map_location: Any = "cpu") -> dict[str, Any]:
    """The verified content of a checkpoint file (see ``decode_checkpoint``); restores nothing."""
    with open(path, "rb") as f:
        data = f.read()
    return decode_checkpoint(data, source=os.fspath(path), map_location=map_location)


def _check_model_state(model: Any, saved: dict, source: str) -> None:
    """``load_state_dict`` copies what matches before it complains; check keys and shapes first."""
    current = model.state_dict()
    missing, unexpected = sorted(set(current) - set(saved)), sorted(set(saved) - set(current))
    shapes = [f"{k}: checkpoint {tuple(saved[k].shape)}, model {tuple(v.shape)}" for k, v in current.items()
              if k in saved and isinstance(v, torch.Tensor) and isinstance(saved[k], torch.Tensor)
              and saved[k].shape != v.shape]
    if missing or unexpected or shapes:
        raise StateMismatchError(f"{source}: model checkpoint does not fit this model (missing {missing[:5]}, "
                                 f"unexpected {unexpected[:5]}, shapes {shapes[:5]}); build the model the "
                                 "checkpoint was made with")


def _check_optimizer_state(optimizer: Any, saved: dict, source: str) -> None:
    groups = saved.get("param_groups") if isinstance(saved, dict) else None
    if not isinstance(groups, list):
        return   # not a torch optimizer's state: its own load_state_dict judges it
    mine = [len(g["params"]) for g in optimizer.param_groups]
    theirs = [len(g.get("params", ())) for g in groups]
    if mine != theirs:
        raise StateMismatchError(f"{source}: optimizer checkpoint has parameter groups of sizes {theirs}, this "
                                 f"optimizer {mine}; build the optimizer the checkpoint was made with")


def load_checkpoint(path: str | os.PathLike, *, model: Any = None, optimizer: Any = None, loader: Any = None,
                    map_location: Any = "cpu") -> dict[str, Any]:
    """Verify ``path`` and restore the objects given; returns the checkpoint's content (``extra`` too).

    Every part asked for must be in the file. The loader is restored first: a loader state from
    another configuration raises ``StateMismatchError`` and leaves model, optimizer and loader as
    they were."""
    source = os.fspath(path)
    state = read_checkpoint(path, map_location=map_location)
    for name, obj in (("model", model), ("optimizer", optimizer), ("loader", loader)):
        if obj is not None and state[name] is None:
            raise StateMismatchError(f"{source}: checkpoint holds no {name} state; restoring the rest alone would "
                                     + ("restart the data at step 0" if name == "loader" else
                                        f"continue with a fresh {name}"))
    if model is not None:
        _check_model_state(model, state["model"], source)
    if optimizer is not None and isinstance(getattr(optimizer, "param_groups", None), list):
        _check_optimizer_state(optimizer, state["optimizer"], source)
    if loader is not None:
        before = loader.state_dict()
        try:
            loader.load_state_dict(state["loader"])
        except BaseException:
            loader.load_state_dict(before)   # a loader may have taken part of the state before refusing
            raise
    if model is not None:
        model.load_state_dict(state["model"])
    if optimizer is not None:
        optimizer.load_state_dict(state["optimizer"])
    return state
