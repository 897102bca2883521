"""The fix of torchdata's H9 (docs/hf-datasets-5.2.0-conformance.md), in one home for the two fixed
targets it reaches: Hugging Face datasets under ``StatefulDataLoader`` (H9) and VeOmni's
``DistributedDataloader`` (V15, docs/veomni-0.1.12-conformance.md).

torchdata 0.11.0 ``StatefulDataLoader.state_dict`` (stateful_dataloader.py:415-419) with no iterator
builds one from the loaded state at once, which starts the workers (or, without workers, the
dataset's iterator) with the dataset's epoch of that moment, before the trainer's ``set_epoch``;
``__iter__`` (397-399) then reuses that iterator for whatever epoch the trainer set since. A
checkpoint written right after a restore made the next epoch the rest of the restored one, or the
restored epoch from its start again. The fix: between ``load_state_dict()`` and the next ``iter()``
the state is the loaded one, returned as it is, and no iterator is built.
"""

from __future__ import annotations

import copy
from typing import Any


def loaded_state(loader: Any) -> dict | None:
    """The state ``loader`` (a ``StatefulDataLoader``) was loaded with, while no iterator was built from
    it yet; None otherwise (its ``state_dict`` then answers as released)."""
    if loader._iterator is None and loader.next_iter_state is not None:
        return copy.deepcopy(loader.next_iter_state)
    return None
