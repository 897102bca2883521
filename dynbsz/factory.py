"""``MODULE:ATTR``: the one way a user's own object (a gate, a packer factory, a target) is named
on a command line or in a config, and imported."""

from __future__ import annotations

import importlib
from typing import Any

from .errors import ConfigError


def one_line(e: BaseException) -> str:
    """An exception as one line: its type and its message with whitespace collapsed."""
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def load_object(name: str, *, setting: str, example: str = "mypkg.module:make_thing") -> Any:
    """Import ``MODULE:ATTR`` (``ATTR`` may be dotted) and return the attribute.

    Every failure is a ``ConfigError`` of one line naming ``setting``, the spec and the cause:
    a malformed spec, a module that does not import (whatever it raised), a missing attribute.
    """
    module_name, _, attr = name.partition(":") if isinstance(name, str) else ("", "", "")
    if not module_name or not attr:
        raise ConfigError(f"{setting} {name!r} is not of the form MODULE:ATTR (e.g. {example})")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - any import failure is the user's to see, in one line
        raise ConfigError(f"{setting} {name!r}: cannot import module {module_name!r} ({one_line(e)}); "
                          "is it on PYTHONPATH?") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{setting} {name!r}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj
