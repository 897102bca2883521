"""T4: a finite HuggingFaceTextDataset (infinite=False) checkpointed after its last sample was read, while its
buffer still holds a full window, loses that window on resume: __iter__ drains the buffer only after reading a
sample, and a restored sample_idx == len(data) reads none. num_workers=0, deterministic. Run with the overlay first:

    PYTHONPATH=.venv/overlays/torchtitan python studies/torchtitan/data/t4_lost_window.py
"""
import pickle

from properties.stream_scenarios import StreamScenario
from studies.torchtitan import adapter as T

sc = StreamScenario(sources=(8,), seed=1, batch_size=1)        # the minimal example, t4-minimal-map-finite.json
loader = T.TorchtitanLoader(sc, form="map", infinite=False)
plain = [T.ids_of(b) for b in loader.dl]
loader.close()
loader = T.TorchtitanLoader(sc, form="map", infinite=False)
it = iter(loader.dl)
first = [T.ids_of(next(it)) for _ in range(6)]
state = loader.dl.state_dict()
inner = pickle.loads(state["dp_rank_0"])
ds_state = inner.get("dataset_state") or inner
loader.close()
loader = T.TorchtitanLoader(sc, form="map", infinite=False)
loader.dl.state_dict()
loader.dl.load_state_dict(pickle.loads(pickle.dumps(state)))
rest = [T.ids_of(b) for b in loader.dl]
loader.close()
print("seq_len", T.seq_len_of(sc), "uninterrupted", len(plain), "batches:", plain)
print("state after batch 6:", {k: v for k, v in ds_state.items() if k in ("sample_idx", "inputs_buffer", "epoch")})
print("resumed after 6:", first + rest, f"({len(first + rest)} batches)")
