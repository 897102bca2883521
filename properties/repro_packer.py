"""``python -m properties repro`` for packer examples (``PackerExample``): the stream put one sample at a time into the
packer a component renders (``PackerComponent.repro_setup``: VeOmni's ``TextBatchingStrategy``, dynbsz's
``GreedyPacker``, a user's ``MODULE:FACTORY`` packer factory, imported by the script), a micro-batch cut
whenever it is ready and the rest drained at the end, as ``packer_props.drive`` runs it without restores, and the
micro-batches judged as the property judges them (``budget``: ``packer_props.check_budget``)."""

from __future__ import annotations

from typing import Any

from .repro_code import ReproError, example_and_component, header
from .scenarios import PACKER_FORMAT, decode_packer_example

#: the packer properties a script is written for (the harness's drive: no trainer loop is involved)
SCHEDULE_TRAINERS = {"budget": ("adversarial",)}

_DRIVE = """\
cuts = []  # (ids, tokens, physical, budget) per micro-batch
for sid, tokens, physical in STREAM:
    put(sid, tokens, physical)
    if ready():
        cuts.append(cut(len(cuts) // MICRO_BATCHES_PER_STEP))
while not empty():  # the end of the data: what is left is drained
    cuts.append(cut(len(cuts) // MICRO_BATCHES_PER_STEP))
print(f'micro-batches: {[ids for ids, *_ in cuts]}')
"""

_JUDGE_BUDGET = """\
for k, (ids, tokens, physical, budget) in enumerate(cuts):
    # only a micro-batch of one sample may be forced past the budget or the physical cap
    if not ids or len(ids) > 1 and (sum(tokens) > budget or CAP is not None and sum(physical) > CAP):
        print(f'first difference: micro-batch {k} holds samples {ids}: {sum(tokens)} tokens (budget {budget}), '
              f'{sum(physical)} physical tokens (cap {CAP})')
        sys.exit(1)
sys.exit(0)
"""


def write_packer(entry: dict[str, Any], path: str) -> str:
    """The script for a packer example; ReproError where none is written."""
    ex, component = example_and_component(entry, path, PACKER_FORMAT, decode_packer_example, "packer")
    if ex.restore_after:
        raise ReproError(f"{path}: a script is written for packer examples without restores so far (this one restores "
                         f"after positions {list(ex.restore_after)})")
    setup = getattr(component, "repro_setup", None)
    if setup is None:
        raise ReproError(f"{path}: component {entry['component']!r} of target {entry['target']!r} renders no "
                         "standalone packer; packer components that do: veomni's packer, dynbsz's packer and a "
                         "MODULE:FACTORY target's packer factory (not a mutant's: the suite's own class)")
    try:
        code = setup(ex.config, ex.gate)
    except ValueError as e:
        raise ReproError(f"{path}: {e}") from None
    stream = [(s.id, s.tokens, s.tokens if s.physical is None else s.physical) for s in ex.stream]
    body = [header(entry, code.library, path, "put one at a time, cut when ready, drained at the end"), "",
            "import sys", "", *code.imports, "",
            f"STREAM = {stream}  # (sample id, budgeted tokens, physical tokens), in arrival order",
            f"MICRO_BATCHES_PER_STEP, CAP = {ex.config.micro_batches_per_step}, {ex.config.physical_cap}", "",
            code.code.rstrip(), "", _DRIVE.rstrip(), _JUDGE_BUDGET.rstrip()]
    return "\n".join(body) + "\n"
