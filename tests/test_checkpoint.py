"""dynbsz.checkpoint: atomic writes, refusals with named errors, and an exact resume of model,
optimizer and loader together; plus the dataset identity in the loaders' fingerprint."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import warnings

import pytest
import torch

from dynbsz import FixedGate, PackerConfig, SourceSpec, Workload
from dynbsz.chaos import trainer
from dynbsz.chaos.trainer import ChaosConfig
from dynbsz.checkpoint import (
    HEADER,
    MAGIC,
    VERSION,
    decode_checkpoint,
    encode_checkpoint,
    load_checkpoint,
    read_checkpoint,
    remove_temporaries,
    save_checkpoint,
    write_atomic,
)
from dynbsz.datasets import TraceMapDataset
from dynbsz.errors import (
    CheckpointCorruptError,
    CheckpointError,
    CheckpointFormatError,
    CheckpointTruncatedError,
    ConfigError,
    StateMismatchError,
)
from dynbsz.loader import build_loader
from dynbsz.loader_config import LoaderConfig

SEED = 5
MAX_STEPS = 12
MAIN = ChaosConfig("main", True, 0, False, True, 1)      # warm-up on: the step counter must resume too
WORKER = ChaosConfig("worker", True, 0, False, False, 1)


class Boom(Exception):
    pass


def objects(config: ChaosConfig = MAIN, **loader_kw):
    model = trainer.make_model(SEED)
    return model, trainer.make_optimizer(model), trainer.make_loader(config, SEED, 0, MAX_STEPS, **loader_kw)


def run(model, opt, loader, until: int) -> list[tuple]:
    """Train up to ``until`` steps in total; (step, ids, loss hex) of each."""
    out = []
    while loader.steps < until:
        for step in loader:
            out.append((step.index, step.sample_ids, trainer.train_step(model, opt, step).hex()))
            if loader.steps >= until:
                break
    return out


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A checkpoint after 5 steps (mid-epoch, packer buffer non-empty) and the uninterrupted run."""
    path = tmp_path_factory.mktemp("ckpt") / "step-5.pt"
    model, opt, loader = objects()
    head = run(model, opt, loader, 5)
    save_checkpoint(path, model=model, optimizer=opt, loader=loader, extra={"step": 5, "rng": torch.arange(3)})
    tail = run(model, opt, loader, MAX_STEPS)
    loader.close()
    return path, head, tail


# ---- round trip -----------------------------------------------------------------------------------

def test_resume_from_a_checkpoint_repeats_the_uninterrupted_run_bit_for_bit(saved):
    path, head, tail = saved
    model, opt, loader = objects()
    state = load_checkpoint(path, model=model, optimizer=opt, loader=loader)
    assert loader.steps == 5 and state["extra"]["step"] == 5
    assert torch.equal(state["extra"]["rng"], torch.arange(3))
    assert run(model, opt, loader, MAX_STEPS) == tail
    assert [s for s, _, _ in head + tail] == list(range(MAX_STEPS))


def test_save_returns_the_size_and_read_checks_without_restoring(saved):
    path = saved[0]
    content = read_checkpoint(path)
    assert set(content) == {"model", "optimizer", "loader", "extra"}
    assert content["loader"]["steps"] == 5     # JSON, as the loader documents its state
    assert decode_checkpoint(path.read_bytes())["loader"] == content["loader"]


def test_state_dicts_can_be_saved_instead_of_objects(tmp_path):
    model, opt, loader = objects()
    path = tmp_path / "c.pt"
    save_checkpoint(path, model=model.state_dict(), optimizer=opt.state_dict(), loader=loader.state_dict())
    m2, o2, l2 = objects()
    load_checkpoint(path, model=m2, optimizer=o2, loader=l2)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), m2.state_dict().values()))


# ---- atomic writes ------------------------------------------------------------------------------

def test_an_exception_mid_write_leaves_the_previous_file_and_no_temporary(tmp_path):
    path = tmp_path / "ckpt.pt"
    write_atomic(path, b"old" * 100)

    def fail_half_way(written, total):
        if 2 * written >= total:
            raise Boom

    with pytest.raises(Boom):
        write_atomic(path, b"new" * 1000, on_progress=fail_half_way, chunk_size=100)
    assert path.read_bytes() == b"old" * 100
    assert os.listdir(tmp_path) == ["ckpt.pt"]


def test_on_progress_sees_every_chunk(tmp_path):
    seen = []
    write_atomic(tmp_path / "x", b"a" * 250, on_progress=lambda w, t: seen.append((w, t)), chunk_size=100)
    assert seen == [(100, 250), (200, 250), (250, 250)]
    assert (tmp_path / "x").read_bytes() == b"a" * 250


def _killed_writer(path: str, data: bytes) -> None:
    def die(written, total):
        if 2 * written >= total:
            os.kill(os.getpid(), signal.SIGKILL)
    write_atomic(path, data, on_progress=die, chunk_size=64)


def test_kill_9_mid_write_leaves_the_previous_checkpoint_loadable(tmp_path, saved):
    """A real SIGKILL half-way: the old file is intact and verifies; the half-written temporary is
    all that is left over, and remove_temporaries clears it."""
    path = tmp_path / "ckpt.pt"
    old = saved[0].read_bytes()
    path.write_bytes(old)
    proc = mp.get_context("fork").Process(target=_killed_writer, args=(str(path), b"x" * 10_000))
    proc.start()
    proc.join(60)
    assert proc.exitcode == -signal.SIGKILL
    assert path.read_bytes() == old
    read_checkpoint(path)
    leftovers = [n for n in os.listdir(tmp_path) if n != "ckpt.pt"]
    assert len(leftovers) == 1 and leftovers[0].startswith(".ckpt.pt.") and leftovers[0].endswith(".tmp")
    assert 0 < os.path.getsize(tmp_path / leftovers[0]) < 10_000     # really half written
    assert remove_temporaries(tmp_path) == leftovers
    assert os.listdir(tmp_path) == ["ckpt.pt"]


# ---- refusals -----------------------------------------------------------------------------------

@pytest.mark.parametrize("keep", [0, 1, 7, HEADER.size - 1, HEADER.size, HEADER.size + 1, -1000, -1])
def test_a_truncated_checkpoint_is_refused(tmp_path, saved, keep):
    data = saved[0].read_bytes()
    cut = tmp_path / "cut.pt"
    cut.write_bytes(data[:keep] if keep >= 0 else data[:len(data) + keep])
    model, opt, loader = objects()
    with pytest.raises(CheckpointTruncatedError):
        load_checkpoint(cut, model=model, optimizer=opt, loader=loader)
    assert loader.steps == 0


def test_every_flipped_bit_is_refused_with_a_named_error(saved):
    data = saved[0].read_bytes()
    n = len(data)
    named = {}
    for pos in list(range(HEADER.size)) + list(range(HEADER.size, n, max(1, n // 97))) + [n - 1]:
        broken = bytearray(data)
        broken[pos] ^= 1 << (pos % 8)
        with pytest.raises(CheckpointError) as e:
            decode_checkpoint(bytes(broken))
        named[pos] = type(e.value)
    assert named[0] is CheckpointFormatError                           # magic
    assert named[len(MAGIC)] is CheckpointFormatError                  # version
    assert named[HEADER.size - 1] is CheckpointCorruptError            # digest
    assert named[n - 1] is CheckpointCorruptError                      # payload


def test_trailing_bytes_another_version_and_foreign_files_are_refused(tmp_path, saved):
    data = saved[0].read_bytes()
    with pytest.raises(CheckpointCorruptError, match="after the"):
        decode_checkpoint(data + b"\0")
    _, _, length, digest = HEADER.unpack_from(data)
    with pytest.raises(CheckpointFormatError, match=f"version {VERSION + 1}"):
        decode_checkpoint(HEADER.pack(MAGIC, VERSION + 1, length, digest) + data[HEADER.size:])
    plain = tmp_path / "plain.pt"
    torch.save({"model": {}}, plain)
    with pytest.raises(CheckpointFormatError, match="not a dynbsz checkpoint"):
        read_checkpoint(plain)


def test_a_payload_that_is_not_plain_data_is_never_unpickled(tmp_path):
    """weights_only: a well-formed header around a pickle of an arbitrary object is refused."""
    import hashlib
    import io

    buf = io.BytesIO()
    torch.save({"model": Boom(), "optimizer": None, "loader": None, "extra": None}, buf)
    payload = buf.getvalue()
    data = HEADER.pack(MAGIC, VERSION, len(payload), hashlib.sha256(payload).digest()) + payload
    with pytest.raises(CheckpointCorruptError, match="does not load"):
        decode_checkpoint(data)


FOREIGN = {"seed": dict(loader_seed=SEED + 1), "budget": dict(budget=2 * trainer.BUDGET),
           "gate": dict(gate=FixedGate(8)), "dataset": dict(dataset=trainer.make_dataset(SEED, 1, variant=1))}


@pytest.mark.parametrize("config", [MAIN, WORKER], ids=["main", "worker"])
@pytest.mark.parametrize("what", sorted(FOREIGN))
def test_a_foreign_loader_state_is_refused_and_nothing_is_restored(tmp_path, config, what):
    """Another seed, budget, gate or dataset of the same size: StateMismatchError, and the model,
    optimizer and loader are as they were (the loader does not restart anywhere)."""
    model, opt, other = objects(config, **FOREIGN[what])
    run(model, opt, other, 3)
    path = tmp_path / "foreign.pt"
    save_checkpoint(path, model=model, optimizer=opt, loader=other)
    other.close()
    m2, o2, loader = objects(config)
    before = {k: v.clone() for k, v in m2.state_dict().items()}
    state_before = loader.state_dict()
    with pytest.raises(StateMismatchError):
        load_checkpoint(path, model=m2, optimizer=o2, loader=loader)
    assert loader.state_dict() == state_before
    assert all(torch.equal(before[k], v) for k, v in m2.state_dict().items())
    assert o2.state_dict()["state"] == {}
    # and the loader still runs from its own start
    assert run(m2, o2, loader, 1)[0][0] == 0
    loader.close()


def test_a_checkpoint_without_loader_state_never_restarts_the_data_at_step_0(tmp_path):
    model, opt, loader = objects()
    path = tmp_path / "weights-only.pt"
    save_checkpoint(path, model=model, optimizer=opt)
    with pytest.raises(StateMismatchError, match="step 0"):
        load_checkpoint(path, model=model, optimizer=opt, loader=loader)
    load_checkpoint(path, model=model, optimizer=opt)    # asking only for what is there is fine


def test_a_model_of_another_shape_is_refused_before_anything_is_copied(tmp_path):
    model, opt, loader = objects()
    path = tmp_path / "c.pt"
    save_checkpoint(path, model=model, optimizer=opt, loader=loader)
    other = trainer.TinyLM(dim=trainer.DIM * 2)
    before = {k: v.clone() for k, v in other.state_dict().items()}
    with pytest.raises(StateMismatchError, match="shapes"):
        load_checkpoint(path, model=other)
    assert all(torch.equal(before[k], v) for k, v in other.state_dict().items())


def test_an_optimizer_of_another_layout_is_refused_before_the_loader_moves(tmp_path):
    model, opt, loader = objects()
    path = tmp_path / "c.pt"
    save_checkpoint(path, model=model, optimizer=opt, loader=loader)
    m2, _, l2 = objects()
    two_groups = torch.optim.Adam([{"params": [m2.emb.weight]}, {"params": list(m2.head.parameters())}])
    with pytest.raises(StateMismatchError, match="parameter groups"):
        load_checkpoint(path, model=m2, optimizer=two_groups, loader=l2)


def test_extra_must_come_back_through_weights_only(tmp_path):
    with pytest.raises(ConfigError, match="extra"):
        encode_checkpoint(extra={"fn": print})
    with pytest.raises(ConfigError, match="JSON"):
        encode_checkpoint(loader={"steps": object()})


# ---- dataset identity ---------------------------------------------------------------------------

def test_trace_datasets_are_told_apart_by_content_not_size():
    a, b = trainer.make_dataset(SEED, 1), trainer.make_dataset(SEED, 1, variant=1)
    assert len(a) == len(b) and a.fingerprint() != b.fingerprint()
    assert a.fingerprint() == trainer.make_dataset(SEED, 1).fingerprint()
    assert a.fingerprint() == TraceMapDataset(a.trace, time_scale=0.0).fingerprint()   # decode costs do not count


@pytest.mark.parametrize("runtime", ["main", "worker"])
def test_the_loader_fingerprint_carries_the_dataset_identity(runtime):
    trace = Workload((SourceSpec("text", median_tokens=20),)).sample(12, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loader = build_loader(TraceMapDataset(trace), PackerConfig(budget=64), FixedGate(2), LoaderConfig(runtime=runtime))
    assert loader.state_dict()["fingerprint"]["dataset"] == TraceMapDataset(trace).fingerprint()


class Plain(torch.utils.data.Dataset):
    def __init__(self, n, fingerprint=None):
        self.n = n
        if fingerprint is not None:
            self.fingerprint = lambda: fingerprint

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"id": i, "tokens": 3}


def test_a_dataset_without_fingerprint_is_checked_by_size_only_and_a_bad_one_is_named():
    loader = build_loader(Plain(6), PackerConfig(budget=8), FixedGate(2))
    assert "dataset" not in loader.state_dict()["fingerprint"]
    with pytest.raises(ConfigError, match="fingerprint"):
        build_loader(Plain(6, fingerprint=42), PackerConfig(budget=8), FixedGate(2)).state_dict()
