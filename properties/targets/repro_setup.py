"""``ReproSetup``: a component's loader as standalone code, what ``properties.repro`` writes a script around
(``PackerReproSetup``: a packer's, for ``properties.repro_packer``).

Its own module so that both component kinds that render one, ``StreamComponent`` (``targets.stream``, which
re-exports it) and ``LoaderComponent`` (``targets.base``, which ``targets.stream`` imports), name the one class.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReproSetup:
    """A stream loader as standalone code (``properties.repro``), the scenario's values as literals: ``code``
    defines ``make()`` (a fresh loader); ``ids`` is the expression of a ``batch``'s sample ids (a flat tuple of
    ints); ``epoch_hook`` is the statement a trainer runs on ``loader`` before each epoch's ``iter()`` (None: the
    loader counts epochs itself). For a loader component (``LoaderComponent.repro_setup``) a ``batch`` is one step
    and ``ids`` its ids per micro-batch, as ``ids_of`` gives them."""

    library: str                      # "litdata 0.2.76"
    stdlib: tuple[str, ...]           # standard-library modules the code imports
    imports: tuple[str, ...]          # the library's import lines
    code: str
    ids: str
    epoch_hook: str | None = None


@dataclass(frozen=True)
class PackerReproSetup:
    """A packer as standalone code (``properties.repro_packer``), the config's values as literals: ``code`` defines
    ``put(sid, tokens, physical)`` (a sample arrives), ``ready()`` (a micro-batch may be cut), ``cut(step)`` (the
    next micro-batch of optimizer step ``step``, as ``(ids, tokens, physical, budget)``: its samples' ids, budgeted
    and physical tokens, and the budget it was cut against) and ``empty()`` (nothing is left to drain)."""

    library: str                      # "VeOmni 0.1.12"
    imports: tuple[str, ...]          # the library's import lines
    code: str
