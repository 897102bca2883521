"""The torchtitan target: torchtitan 0.3.0's real text dataloader under the torchtitan trainer model.

The helpers (tokenizer, local data, step budget) are tested here; torchtitan itself runs in its overlay
environment (bash ci/install.sh --torchtitan), so what needs it runs in a subprocess, as
``python -m properties`` runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from properties.stream_scenarios import StreamScenario, sample_id
from studies.torchtitan import adapter as T

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
needs_overlay = pytest.mark.skipif(not T.OVERLAY.installed(), reason=f"torchtitan's overlay is not installed "
                                                                      f"({T.OVERLAY.dir()}): {T.OVERLAY.install}")


def test_tokenizer_names_the_sample_in_every_token():
    tok = T.IdTokenizer(seed=7)
    for sid in (0, 5, 29):
        tokens = tok.encode(str(sid), add_bos=True, add_eos=True)
        k = T.tokens_per_sample(7, sid)
        assert 1 <= k <= 4
        assert tokens == [T.BOS] + [sid] * k + [T.EOS]
    assert tok.encode("3", add_bos=False, add_eos=False) == [3] * T.tokens_per_sample(7, 3)
    assert len({T.tokens_per_sample(7, s) for s in range(30)}) > 1     # counts vary across samples


def test_step_budget_and_ids_of():
    sc = StreamScenario(sources=(20,), seed=5, batch_size=2)
    assert 3 <= T.seq_len_of(sc) <= 6
    assert T.inputs_per_pass(sc) == sum(1 + T.tokens_per_sample(5, sample_id(0, i)) for i in range(20))
    steps = T.training_steps(sc)
    assert steps >= 2 * 20 // 2                                       # every drawn preemption falls in the run
    assert steps * T.seq_len_of(sc) * 2 >= 2 * T.inputs_per_pass(sc)  # the run re-loops
    batch = ({"input": torch.tensor([[-1, 3, 3], [4, -1, 5]]), "positions": torch.zeros(2, 3)}, torch.zeros(2, 3))
    assert T.ids_of(batch) == (-1, 3, 3, 4, -1, 5)


def test_local_dataset_rows_are_sample_ids():
    path = T.source_dir(6)
    with open(os.path.join(path, "train.jsonl")) as f:
        assert [json.loads(line)["text"] for line in f] == [str(sample_id(0, i)) for i in range(6)]


def _overlay_env() -> dict:
    return T.OVERLAY.env_for_subprocess()


REAL = textwrap.dedent("""
    import json, pickle
    from properties.stream_scenarios import StreamScenario
    from studies.torchtitan import adapter as T

    v = T.lib()
    out = {"datasets": v.datasets_version, "torchtitan": v.version}
    sc = StreamScenario(sources=(13,), seed=2, batch_size=2, chunk_size=3)
    loader = T.TorchtitanLoader(sc, form="map", infinite=False)
    out["dl"] = type(loader.dl) is v.HuggingFaceTextDataLoader and isinstance(loader.dl, v.ParallelAwareDataloader)
    out["ds"] = type(loader.dl.dataset) is v.HuggingFaceTextDataset
    # T1: the dataset's state_dict hands out its live token buffers, not copies
    ds = loader.dl.dataset
    out["aliased"] = ds.state_dict()["inputs_buffer"] is ds._inputs_buffer
    loader.close()

    def one_pass(sc, form, kill=None):
        loader = T.TorchtitanLoader(sc, form=form, infinite=False)
        it, seen = iter(loader.dl), []
        for batch in it:
            seen.append(T.ids_of(batch))
            if len(seen) == kill:
                state = pickle.dumps(loader.dl.state_dict())
                loader.close()
                loader = T.TorchtitanLoader(sc, form=form, infinite=False)
                loader.dl.state_dict()
                loader.dl.load_state_dict(pickle.loads(state))
                it = iter(loader.dl)
                seen += [T.ids_of(b) for b in it]
                break
        keys = sorted(loader.dl.state_dict())
        loader.close()
        return seen, keys

    for form in T.FORMS:
        plain, _ = one_pass(sc, form)
        out[form + "_exact"] = all(one_pass(sc, form, kill=k)[0] == plain for k in (1, 3))
        ranks = [one_pass(StreamScenario(sources=(13,), seed=2, dp_rank=r, dp_size=2), form) for r in (0, 1)]
        sets = [{t for b in run for t in b if t >= 0} for run, _ in ranks]
        out[form + "_dp"] = {"disjoint": not (sets[0] & sets[1]), "union": sorted(sets[0] | sets[1]),
                             "keys": ranks[1][1]}
    # T2: map-style data is not split over workers: each of two workers reads every sample
    run, _ = one_pass(StreamScenario(sources=(8,), seed=2, num_workers=2), "map")
    out["first_sample_starts"] = sum(b[:2] == (T.BOS, 0) for b in run)   # each worker's first window starts it
    print("RESULT " + json.dumps(out))
""")


@needs_overlay
def test_real_torchtitan_classes_dp_ranks_and_findings():
    p = subprocess.run([sys.executable, "-c", REAL], env=_overlay_env(), cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert p.returncode == 0 and line, p.stderr[-3000:]
    out = json.loads(line[0][len("RESULT "):])
    assert out["torchtitan"] == "0.3.0" and out["datasets"] == T.DATASETS_PIN
    assert out["dl"] and out["ds"]
    for form in T.FORMS:
        assert out[form + "_exact"], form                    # no workers: an exact resume, as torchtitan's test says
        dp = out[form + "_dp"]
        assert dp["disjoint"] and dp["union"] == list(range(13)), dp   # split_dataset_by_node
        assert dp["keys"] == ["dp_rank_1", "world_size"]                # ParallelAwareDataloader.state_dict
    assert out["aliased"]                                   # finding T1 (studies/torchtitan/report.md)
    assert out["first_sample_starts"] == 2                  # finding T2: each of two workers reads sample 0


@needs_overlay
def test_check_runs_the_real_loader_under_the_torchtitan_trainer():
    p = subprocess.run([sys.executable, "-m", "properties", "check", "--target", "torchtitan", "--json",
                        "--property", "stream_trainer_resume", "--database", "none", "--no-shrink",
                        # what is judged is the verdict, not the speed: no wall bound per next() (the bound on steps
                        # stays), so a starved machine cannot turn a pass into a 'hang' (1 of 8 ci.flips runs did)
                        "--step-timeout", "0"],
                       cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert p.returncode in (0, 1), p.stderr[-3000:]
    doc = json.loads(p.stdout)
    assert doc["target"] == "torchtitan" and "torchtitan 0.3.0 (datasets 4.7.0)" in doc["description"]
    rows = [r for r in doc["results"] if r["property"] == "stream_trainer_resume"]
    assert {r["component"] for r in rows} == {c.name for c in T.components()}
    for r in rows:
        assert r["status"] in ("pass", "fail") and r["examples"] > 0, r
        assert "class" in r and "trainers" in r, r
        if r["status"] == "fail":
            # the message first: ci.flips keeps a failure's message, and a dict's repr is cut short there
            assert r["class"] == "bug" and r["trainers"] == ["torchtitan"], (r["message"][:500], r["trainers"])


def test_without_overlay_the_target_says_how_to_install():
    env = dict(os.environ, **{T.OVERLAY.env: os.path.join(ROOT, "no-such-overlay")})
    p = subprocess.run([sys.executable, "-m", "properties", "check", "--target", "torchtitan", "--json"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    doc = json.loads(p.stdout)
    assert {r["status"] for r in doc["results"]} == {"skip"}
    assert all(T.OVERLAY.install in r["message"] for r in doc["results"])
