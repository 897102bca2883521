"""The suite's two outcomes besides a pass, as exceptions a check raises.

``PropertyViolation``: the property does not hold (a failure, saved and replayed).
``Unsupported``: the component cannot run this example (a skip, never a failure).
"""

from __future__ import annotations


class PropertyViolation(AssertionError):
    """A property does not hold. The message names the property and the first offending step."""


class Unsupported(Exception):
    """Raised by a check for an example the component cannot run (e.g. a saved example replayed on
    another target whose loader lacks a knob). The runner reports it as a skip with this message,
    never as a failure."""
