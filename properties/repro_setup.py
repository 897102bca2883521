"""``ReproSetup``: a component's loader as standalone code, what ``properties.repro`` writes a script around
(``PackerReproSetup``: a packer's, for ``properties.repro_packer``).

Its own module, outside ``properties.targets`` (whose package imports the mutants, which import
``loader_targets``, which renders the torchdata loader), so that every component kind that renders one,
``StreamComponent`` (``targets.stream``, which re-exports it), ``LoaderComponent`` and ``PackerComponent``
(``targets.base``), names the one class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
    #: the expression of a step's signature where the component compares one (``LoaderComponent.signature``: what
    #: loader_resume holds step for step); None: the component compares ids
    signature: str | None = None
    #: where a batch's ids are tokens named by their sample (``StreamComponent.samples_of``): the source of a function
    #: ``delivered(ids)`` that turns a run's ids into the samples they deliver, each once per delivery (a script
    #: that judges samples adds it after ``code``)
    samples: str | None = None


@dataclass(frozen=True)
class PackerReproSetup:
    """A packer as standalone code (``properties.repro_packer``), the config's values as literals: ``code`` defines
    ``put(sid, tokens, physical)`` (a sample arrives), ``ready()`` (a micro-batch may be cut), ``cut(step)`` (the
    next micro-batch of optimizer step ``step``, as ``(ids, tokens, physical, budget)``: its samples' ids, budgeted
    and physical tokens, and the budget it was cut against) and ``empty()`` (nothing is left to drain)."""

    library: str                      # "VeOmni 0.1.12"
    imports: tuple[str, ...]          # the library's import lines
    code: str


#: what ``protocol_packer`` renders: the Packer protocol's calls (``dynbsz.packer.Packer``) as the PackerReproSetup
#: functions, over a module-level ``packer``
_PROTOCOL_CALLS = """\
ready = packer.ready

def put(sid, tokens, physical):  # a sample arrives
    packer.put(sid, tokens, physical)

def cut(step):  # the next micro-batch (the packer counts its steps itself), and the budget it was cut against
    mb = packer.cut()
    return list(mb.ids), list(mb.tokens), list(mb.physical), mb.budget

def empty():  # drain() cuts until the buffer is empty, ignoring the gate
    return len(packer) == 0"""


def protocol_packer(config: Any, spec: dict[str, Any], *, library: str, imports: tuple[str, ...],
                    construct: str) -> PackerReproSetup:
    """A packer of dynbsz's Packer protocol as standalone code: ``construct`` builds it from ``CONFIG`` (the
    ``PackerConfig``) and ``GATE`` (the gate ``dynbsz.gates.resolve_gate`` builds from the spec), e.g.
    ``"GreedyPacker(CONFIG, GATE)"`` or a user's ``"make_packer(CONFIG, GATE)"``. ValueError for a gate spec that
    only the suite builds (the stateful probe)."""
    if spec.get("kind") not in ("fixed", "token_aware", "warmup_ramp"):   # context_aware and auto are among these
        raise ValueError(f"the gate spec {spec!r} is built by the suite (its probe), not by dynbsz.gates.resolve_gate")
    fields = ", ".join(f"{k}={v!r}" for k, v in config.to_dict().items())
    code = [f"CONFIG = PackerConfig({fields})", f"GATE = resolve_gate({dict(spec)!r}, budget=CONFIG.budget)",
            f"packer = {construct}", "", _PROTOCOL_CALLS]
    return PackerReproSetup(library, ("from dynbsz.config import PackerConfig", "from dynbsz.gates import resolve_gate",
                                      *imports), "\n".join(code))
