"""Variants of the torchtitan target for the conformance report (not part of the repo)."""
from dataclasses import replace

from properties.targets.base import Target
from studies.torchtitan import adapter as T


def _target(name, comps):
    return Target(name=name, description=T.target().description, components=tuple(comps))


def workers0():
    """torchtitan's default Config: num_workers=0."""
    return _target("torchtitan-workers0", [replace(c, max_workers=0) for c in T.components()])


# T1's fix is no longer a monkeypatch here: it is studies/torchtitan/patches/T1.diff, and torchtitan with every
# diff applied is the target studies.torchtitan:fixed (studies.torchtitan.fixes.FIXES).
# (fuzz-variant-fix_t1*.json were run on 2026-12-03/04 with the monkeypatch this replaced: state_dict returning
# list() copies of the three buffers, what T1.diff does.)


def t3_partial():
    """T3's partial fix, an experiment and not a proposed fix (it has no diff: the restore still writes two workers'
    epochs into datasets' one shared value): HuggingFaceTextDataset.reloop sets its own per-worker epoch count (not
    datasets' shared one + 1), and load_state_dict restores that count from the streaming data's state. On top of
    whatever torchtitan this process imports: run it in the T1-patched copy's process (t3_fix.py says how)."""
    v = T.lib()
    HD = v.HuggingFaceTextDataset
    if getattr(HD, "_t3", False):
        return _target("torchtitan-t3-partial", T.components())
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
    return _target("torchtitan-t3-partial", T.components())
