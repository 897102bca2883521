"""T1: HuggingFaceTextDataset.state_dict() hands out its live token buffers; with DataLoader workers the state is
pickled by the queue's feeder thread after the worker has gone on filling them. Run with torchtitan's overlay first:

    PYTHONPATH=.venv/overlays/torchtitan python studies/torchtitan/data/t1_buffer_alias.py released 1
    PYTHONPATH=.venv/overlays/torchtitan python studies/torchtitan/data/t1_buffer_alias.py copy 1

Prints, per dataset form, the kill steps (1-10) after which a resumed loader (state_dict, pickle, fresh loader,
state_dict, load_state_dict, as DCP does) delivers other batches than the uninterrupted one.
"""
import pickle
import sys

from properties.stream_scenarios import StreamScenario
from studies.torchtitan import adapter as T

if sys.argv[1] == "copy":   # the proposed fix: copy the buffers in state_dict
    HD = T.lib().HuggingFaceTextDataset
    orig = HD.state_dict

    def state_dict(self):
        return {k: list(v) if k.endswith("_buffer") else v for k, v in orig(self).items()}
    HD.state_dict = state_dict

sc = StreamScenario(sources=(21,), chunk_size=2, seed=1531, num_workers=int(sys.argv[2]), batch_size=2)


def run(form, kill):
    loader = T.TorchtitanLoader(sc, form=form, infinite=True)
    it, out = iter(loader.dl), []
    for s in range(12):
        out.append(T.ids_of(next(it)))
        if s + 1 == kill:
            state = pickle.dumps(loader.dl.state_dict())
            loader.close()
            loader = T.TorchtitanLoader(sc, form=form, infinite=True)
            loader.dl.state_dict()
            loader.dl.load_state_dict(pickle.loads(state))
            it = iter(loader.dl)
    loader.close()
    return out


for form in T.FORMS:
    plain = run(form, None)
    print(form, sys.argv[1], "workers", sys.argv[2], "kills that change the run:",
          [k for k in range(1, 11) if run(form, k) != plain])
