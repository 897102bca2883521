"""Variants of the torchtitan target for the conformance report (not part of the repo)."""
from dataclasses import replace

from properties.targets import torchtitan_target as T
from properties.targets.base import Target


def _target(name, comps):
    return Target(name=name, description=T.target().description, components=tuple(comps))


def workers0():
    """torchtitan's default Config: num_workers=0."""
    return _target("torchtitan-workers0", [replace(c, max_workers=0) for c in T.components()])


def fix_t1():
    """HuggingFaceTextDataset.state_dict copying its buffers (the proposed fix of T1)."""
    HD = T.lib().HuggingFaceTextDataset
    if not getattr(HD, "_t1", False):
        orig = HD.state_dict

        def state_dict(self):
            return {k: list(v) if k.endswith("_buffer") else v for k, v in orig(self).items()}
        HD.state_dict, HD._t1 = state_dict, True
    return _target("torchtitan-fix-t1", T.components())


def _fix_t3():
    """HuggingFaceTextDataset.reloop setting its own per-worker epoch count (not datasets' shared one + 1), and
    load_state_dict restoring that count from the streaming data's state (the proposed fix of T3)."""
    v = T.lib()
    HD = v.HuggingFaceTextDataset
    if getattr(HD, "_t3", False):
        return
    orig_load = HD.load_state_dict

    def reloop(self):
        self._sample_idx = 0
        self._epoch += 1
        if isinstance(self._data, v.text_datasets.Dataset):
            self._data = self._original_data.shuffle(seed=42 + self._epoch)
        else:
            self._data.set_epoch(self._epoch)

    def load_state_dict(self, state):
        orig_load(self, state)
        if "data" in state:
            self._epoch = state["data"].get("epoch", 0)
    HD.reloop, HD.load_state_dict, HD._t3 = reloop, load_state_dict, True


def fix_t1_t3():
    fix_t1()
    _fix_t3()
    return _target("torchtitan-fix-t1-t3", T.components())
