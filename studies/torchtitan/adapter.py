"""torchtitan 0.3.0's text dataloader as ``stream`` components, built as its Trainer builds it.

What is real: ``torchtitan.hf_datasets.text_datasets.HuggingFaceTextDataLoader`` (a
``ParallelAwareDataloader``, i.e. torchdata's ``StatefulDataLoader``) around torchtitan's
``HuggingFaceTextDataset``, built through its ``Config.build(dp_world_size=, dp_rank=, tokenizer=,
seq_len=, local_batch_size=)`` (torchtitan/trainer.py builds ``config.dataloader`` this way), over a
dataset registered at runtime in ``text_datasets.DATASETS`` as a ``DatasetConfig(path, loader,
sample_processor)`` (torchtitan's docs/datasets.md way). Its state is ``ParallelAwareDataloader``'s
``{"dp_rank_<n>": pickle of StatefulDataLoader.state_dict(), "world_size": n}``; the trainer model
``torchtitan`` (properties.trainers) drives it as torchtitan's Trainer and DCP checkpointer do.

What is emulated (labelled in the target's description):

* the data: a local dataset per process (one JSON-lines file, ``load_dataset(dir, split="train")``,
  the form of torchtitan's ``c4_test``) whose row ``i`` has the text ``str(sample id)``, instead of
  ``allenai/c4``; the streaming components read it as ``.to_iterable_dataset(num_shards=...)``, as
  torchtitan's own checkpointing test builds its streaming c4 stand-in, instead of
  ``load_dataset(..., streaming=True)``;
* the tokenizer (``IdTokenizer``): ``encode("17", add_bos=True, add_eos=True)`` is ``[BOS] + [17] * k +
  [EOS]``, ``k`` (1-4) drawn from the scenario's seed and the sample, so every token of a batch names
  the sample it came from;
* ``seq_len`` (3-6) is drawn from the scenario's seed; the dataset and the packing are torchtitan's own.

torchtitan needs ``datasets>=3.6.0,<4.8.0``; this project's venv keeps datasets 5.2.0 (the HF and
VeOmni reports use it), so ``bash ci/install.sh --torchtitan`` installs torchtitan, datasets 4.7.0 and
what they import into an overlay directory (``OVERLAY.dir()``, properties.targets.overlay), and ``python -m properties`` re-runs a
command whose target is ``torchtitan`` in a subprocess with the overlay first on ``PYTHONPATH``
(``rerun_in_overlay``, called by ``properties.cli.main``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import os
import sys
from collections import Counter
from types import SimpleNamespace
from typing import Any

from properties.loader_targets import DelegatingLoader
from properties.stream_scenarios import StreamScenario
from properties.targets import overlay as _overlay
from properties.targets.base import Target
from properties.targets.scratch import scratch_root
from properties.targets.stream import ReproSetup, StreamComponent

VERSION = "0.3.0"
DATASETS_PIN = "4.7.0"

BOS, EOS = -1, -2


OVERLAY = _overlay.TORCHTITAN


# ---- torchtitan itself -------------------------------------------------------------------------

class _Quiet(logging.Filter):
    """torchtitan logs on the root logger; drop its per-pass notes about this harness's own datasets."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        return not (msg.startswith("Dataset tt-") or msg.startswith("Preparing tt-"))


@functools.lru_cache(maxsize=1)
def lib() -> SimpleNamespace:
    if not OVERLAY.datasets_in_range():
        raise ImportError(OVERLAY.missing())
    with contextlib.redirect_stdout(sys.stderr):
        import datasets
        import torchtitan
        from datasets import load_dataset
        from torchtitan.components.dataloader import ParallelAwareDataloader
        from torchtitan.hf_datasets import DatasetConfig, text_datasets
    from importlib import metadata

    logging.getLogger().addFilter(_Quiet())
    datasets.disable_progress_bars()   # "Generating train split" for every local dataset this process writes
    return SimpleNamespace(version=metadata.version("torchtitan"), datasets_version=datasets.__version__,
                           torchtitan=torchtitan, text_datasets=text_datasets, DatasetConfig=DatasetConfig,
                           ParallelAwareDataloader=ParallelAwareDataloader, load_dataset=load_dataset,
                           HuggingFaceTextDataLoader=text_datasets.HuggingFaceTextDataLoader,
                           HuggingFaceTextDataset=text_datasets.HuggingFaceTextDataset)


def available() -> bool:
    try:
        lib()
    except ImportError:
        return False
    return True


# ---- the emulated parts: tokenizer and local data --------------------------------------------

def tokens_per_sample(seed: int, sid: int) -> int:
    """How many copies of its id sample ``sid`` encodes to (1-4), a fixed function of the scenario's seed."""
    return 1 + (seed * 2654435761 + sid * 40503 + 12345) % 4


def seq_len_of(sc: StreamScenario) -> int:
    return 3 + sc.seed % 4


class IdTokenizer:
    """Stands in for torchtitan's HuggingFaceTokenizer: the text dataset calls only ``encode(text,
    add_bos=True, add_eos=True) -> list[int]`` (text_datasets.py, HuggingFaceTextDataset.__iter__)."""

    def __init__(self, seed: int):
        self.seed = seed

    def encode(self, text: str, add_bos: bool = True, add_eos: bool = True) -> list[int]:
        sid = int(text)
        return [BOS] * add_bos + [sid] * tokens_per_sample(self.seed, sid) + [EOS] * add_eos

    def decode(self, tokens: list[int]) -> str:
        return " ".join(str(t) for t in tokens if t >= 0)

    def get_vocab_size(self) -> int:
        return 1 << 62


def _root() -> str:
    return scratch_root("torchtitan-src")


@functools.lru_cache(maxsize=64)
def source_dir(size: int) -> str:
    """A local dataset directory of ``size`` rows ``{"text": str(sample id)}`` (one JSON-lines file)."""
    from properties.stream_scenarios import sample_id

    path = os.path.join(_root(), f"n{size}")
    if not os.path.exists(path):
        os.makedirs(path)
        with open(os.path.join(path, "train.jsonl"), "w") as f:
            for i in range(size):
                f.write(json.dumps({"text": str(sample_id(0, i))}) + "\n")
    return path


@functools.lru_cache(maxsize=64)
def _map_style(path: str):
    # one load per process and directory (a Dataset is immutable: skip, shard and shuffle return new ones);
    # its Arrow cache goes into this process's scratch directory, not the user's HF cache
    with contextlib.redirect_stdout(sys.stderr):
        return lib().load_dataset(path, split="train", cache_dir=os.path.join(_root(), "hf-cache"))


def load_map_style(path: str):
    """The ``c4_test`` loader's form: ``load_dataset(path, split="train")``, a map-style Dataset."""
    return _map_style(path)


def streaming_loader(num_shards: int):
    """The form torchtitan's checkpointing test gives its streaming c4 stand-in:
    ``load_dataset(path, split="train").to_iterable_dataset(num_shards=...)`` (a fresh IterableDataset)."""
    return lambda path: _map_style(path).to_iterable_dataset(num_shards=num_shards)


def text_of(sample: dict) -> str:
    return sample["text"]


def num_shards(sc: StreamScenario) -> int:
    n = sc.sources[0]
    return max(1, min(n, math.ceil(n / sc.chunk_size)))


def register(name: str, loader) -> None:
    """Register (or replace) a dataset in torchtitan's DATASETS, as docs/datasets.md says to."""
    v = lib()
    v.text_datasets.DATASETS[name] = v.DatasetConfig(path="", loader=loader, sample_processor=text_of)


# ---- the loader --------------------------------------------------------------------------------

FORMS = ("map", "streaming")


def build(sc: StreamScenario, *, form: str, infinite: bool):
    """torchtitan's HuggingFaceTextDataLoader for ``sc``, built through its Config as the Trainer builds it."""
    v = lib()
    if form == "map":
        name, loader = "tt-map", load_map_style
    else:
        name, loader = f"tt-streaming-{num_shards(sc)}", streaming_loader(num_shards(sc))
    register(name, loader)
    config = v.HuggingFaceTextDataLoader.Config(dataset=name, dataset_path=source_dir(sc.sources[0]),
                                                infinite=infinite, num_workers=sc.num_workers,
                                                persistent_workers=sc.persistent_workers and sc.num_workers > 0)
    return config.build(dp_world_size=sc.dp_size, dp_rank=sc.dp_rank, tokenizer=IdTokenizer(sc.seed),
                        seq_len=seq_len_of(sc), local_batch_size=sc.batch_size)


class TorchtitanLoader(DelegatingLoader):
    """``self.dl`` is torchtitan's HuggingFaceTextDataLoader; iter, state_dict and load_state_dict are its own."""

    def __init__(self, sc: StreamScenario, *, form: str, infinite: bool):
        self.dl = build(sc, form=form, infinite=infinite)

    def set_epoch(self, epoch: int) -> None:
        pass  # torchtitan has no set_epoch; its trainer model never calls it


def ids_of(batch: Any) -> tuple:
    """The flat tuple of a batch's input tokens, row by row: each is a sample id, or BOS (-1) where a
    sample starts (the label of a sample's last token is EOS, never the next sample's BOS)."""
    inputs, _labels = batch
    return tuple(int(x) for x in inputs["input"].reshape(-1).tolist())


def repro_setup(sc: StreamScenario, *, form: str, infinite: bool) -> ReproSetup:
    """``build`` as standalone code (``properties.repro``): the local dataset written to a temporary directory and
    registered in torchtitan's DATASETS as ``register`` does, the id tokenizer, and the Config's ``build``, the
    scenario's values as literals. Its ``make()`` loads the dataset each time (the harness once per process: the
    same rows)."""
    from properties.stream_scenarios import sample_id

    n = sc.sources[0]
    if [sample_id(0, i) for i in range(n)] != list(range(n)):
        raise ValueError("the script names sample i by its row: the first source's ids must be 0..n-1")
    load = 'load_dataset(p, split="train", cache_dir=f"{ROOT}/cache")'
    if form != "map":
        load += f".to_iterable_dataset(num_shards={num_shards(sc)})"
    persistent = sc.persistent_workers and sc.num_workers > 0
    code = [f"K = {[tokens_per_sample(sc.seed, i) for i in range(n)]}  # sample i encodes to BOS, K[i] copies of i, EOS",
            "ROOT = tempfile.mkdtemp()  # a local JSON-lines dataset (c4_test's form): row i's text is str(i)",
            'os.makedirs(f"{ROOT}/data")', 'with open(f"{ROOT}/data/train.jsonl", "w") as f:',
            f"    f.writelines(json.dumps({{'text': str(i)}}) + '\\n' for i in range({n}))",
            *(["# streamed: to_iterable_dataset, the form torchtitan's checkpointing test gives its streaming c4"]
              if form != "map" else []),
            "text_datasets.DATASETS['tt'] = DatasetConfig(path='', sample_processor=lambda s: s['text'], loader=lambda p: (",
            f"    {load}))", "",
            "class Tokenizer:  # the one method torchtitan's text dataset calls",
            "    def encode(self, text, add_bos=True, add_eos=True):",
            "        return [-1] * add_bos + [int(text)] * K[int(text)] + [-2] * add_eos", "",
            "def make():  # as torchtitan's Trainer builds config.dataloader",
            f"    config = text_datasets.HuggingFaceTextDataLoader.Config(dataset='tt', dataset_path=f'{{ROOT}}/data', "
            f"infinite={infinite},",
            f"                                                            num_workers={sc.num_workers}, "
            f"persistent_workers={persistent})",
            f"    return config.build(dp_world_size={sc.dp_size}, dp_rank={sc.dp_rank}, tokenizer=Tokenizer(), "
            f"seq_len={seq_len_of(sc)}, local_batch_size={sc.batch_size})"]
    delivered = ["def delivered(ids):  # sample i puts K[i] copies of its id into the inputs: n are ceil(n / K[i]) "
                 "deliveries", "    return [s for s in sorted({i for i in ids if i >= 0}) for _ in range(-(-ids.count(s) "
                 "// K[s]))]"]
    return ReproSetup(f"torchtitan {lib().version}", ("json", "os", "tempfile"),
                      ("from datasets import load_dataset", "from torchtitan.hf_datasets import DatasetConfig, text_datasets"),
                      "\n".join(code), "tuple(int(x) for x in batch[0]['input'].reshape(-1).tolist())",
                      samples="\n".join(delivered))


def samples_of(sc: StreamScenario, ids: list) -> list:
    """The samples a run's input tokens deliver, each once per delivery: sample ``s`` puts ``tokens_per_sample``
    copies of its id into the inputs (BOS and the separators are not samples), so ``n`` copies are ``ceil(n / k)``
    deliveries (a window boundary or the untrained tail may cut a delivery short, never make one more)."""
    counts = Counter(i for i in ids if i >= 0)
    return [s for s, n in sorted(counts.items()) for _ in range(-(-n // tokens_per_sample(sc.seed, s)))]


def inputs_per_pass(sc: StreamScenario) -> int:
    """Input tokens one pass over the rank's data feeds the packer (each sample: BOS and its k tokens)."""
    from properties.stream_scenarios import sample_id

    return sum(1 + tokens_per_sample(sc.seed, sample_id(0, i)) for i in range(sc.sources[0]))


def training_steps(sc: StreamScenario) -> int:
    """training.steps for an infinite loader: about two and a half passes (so the run re-loops twice, and a
    resume lands in a re-looped, reshuffled pass), and at least the strategy's checkpoint horizon, so every
    drawn preemption falls inside the run."""
    per_step = seq_len_of(sc) * sc.batch_size
    horizon = max(2, 2 * sum(sc.sources) // (sc.batch_size * sc.dp_size))
    return max(horizon, math.ceil(2.5 * inputs_per_pass(sc) / per_step))


# ---- what torchtitan promises ------------------------------------------------------------------

EXACT = ("tests/unit_tests/test_dataset_checkpointing.py (test_c4_resumption) asserts that a loader restored from "
         "state_dict() yields the next batches' input, positions and labels exactly, for c4_test (map-style) and "
         "a sharded to_iterable_dataset, after re-looping")
NO_EPOCHS = ("torchtitan has no epochs: trainer.py's batch_generator calls iter(dataloader) once per job, and nothing "
             "calls set_epoch; re-looping is the dataset's (HuggingFaceTextDataset.reloop)")
NOTES = {
    "mix": "one dataset per HuggingFaceTextDataLoader (InterleavedHuggingFaceTextDataLoader is not modelled here)",
    "shuffle": "torchtitan does not shuffle a first pass (HuggingFaceTextDataset reshuffles map-style data on "
               "reloop only, with seed 42 + epoch, and has no seed setting)",
    "drop_last": "ParallelAwareDataloader passes no drop_last (StatefulDataLoader's default, False)",
    "dp_size": "one rank per loader here; DP ranks (split_dataset_by_node, the dp_rank_<n> key) are pinned by "
               "tests/test_torchtitan_target.py",
    "break_after": NO_EPOCHS,
}
SKIP = {
    "stream_epochs": NO_EPOCHS + "; the property compares two epochs of iter()",
    "stream_persistent_workers": NO_EPOCHS + "; the property iterates the loader for two epochs",
    "stream_dp_shards": "it reads every rank for two epochs of iter() (" + NO_EPOCHS + "); DP ranks are pinned by "
                        "tests/test_torchtitan_target.py",
}


def component(form: str, infinite: bool) -> StreamComponent:
    suffix = "" if infinite else "-finite"
    steps = training_steps if infinite else None
    return StreamComponent(
        name=f"stream:torchtitan-{form}{suffix}", make_loader=functools.partial(_make, form=form, infinite=infinite),
        ids_of=ids_of, state_codec="pickle", resume_promise=lambda sc: ("exact", EXACT), mixes=("single",),
        max_workers=2, batch_sizes=(1, 2, 3), drop_last=(False,), shuffle=(False,), dp=False, break_early=False,
        knob_notes=NOTES, skip=SKIP, trainers=("torchtitan",), training_steps=steps, samples_of=samples_of,
        repro_setup=functools.partial(repro_setup, form=form, infinite=infinite))


def _make(sc: StreamScenario, *, form: str, infinite: bool) -> TorchtitanLoader:
    return TorchtitanLoader(sc, form=form, infinite=infinite)


def components() -> tuple[StreamComponent, ...]:
    # the Config's default (infinite=True) on both dataset forms, and the finite map-style form (training ends
    # when the data does: DataloaderExhaustedError)
    return component("map", True), component("streaming", True), component("map", False)


def target():
    description = (f"torchtitan {VERSION}'s HuggingFaceTextDataLoader (HuggingFaceTextDataset, ParallelAwareDataloader) "
                   "built through its Config as its Trainer builds it, under the torchtitan trainer model; emulated: "
                   "the tokenizer (each token is its sample's id) and the data (a local JSON-lines dataset, map-style "
                   "and to_iterable_dataset, instead of c4) (studies.torchtitan.adapter)")
    if not available():
        return Target(name=OVERLAY.target, description=description, unavailable=OVERLAY.missing())
    v = lib()
    description = description.replace(f"torchtitan {VERSION}'s", f"torchtitan {v.version} (datasets "
                                                                 f"{v.datasets_version})'s", 1)
    return Target(name=OVERLAY.target, description=description, components=components())
