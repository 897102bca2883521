"""VeOmni 0.1.12's loaders as its own builders build them: the ``veomni-builders`` target.

The ``veomni`` target (``studies.veomni.loaders``) assembles VeOmni's loader classes by
hand, as ``build_native_dataloader`` assembles them. This target assembles nothing: every loader
is what VeOmni's builders return, called the way ``veomni/trainer/base.py`` calls them
(``BaseTrainer.__init__``, 332-335: ``_build_dataset``, ``_build_collate_fn``, ``_build_dataloader``):

* the arguments are VeOmni's own dataclasses, ``VeOmniArguments(model=ModelArguments(...),
  data=DataArguments(...), train=TrainingArguments(...))`` (``veomni/arguments/arguments_types.py``),
  so ``dataloader_batch_size``, ``global_batch_size`` and ``dp_size`` are what their
  ``__post_init__`` derive (arguments_types.py:853-868, 947-968);
* the dataset: ``build_dataset(dataset_name=args.data.dataset_name, transform=..., seed=args.train.seed,
  **asdict(args.data))`` (base.py:484-494): ``"mapping"`` (``build_mapping_dataset``, dataset.py:1449-1476,
  a ``MappingDataset`` over ``load_dataset("json", data_files=..., split="train")``) for the single-source
  components, ``"veomni_weighted_multisource"`` (``build_weighted_multisource_dataset``, dataset.py:1692-1736)
  for the mixture: a YAML ``train_path`` (DataArguments.__post_init__, arguments_types.py:1607-1613, picks
  ``multisource_datasets_type``) whose sources are each ``build_iterable_dataset`` (dataset.py:1479-1513):
  ``load_dataset("json", ..., streaming=True).shuffle(seed, buffer_size=10_000)``,
  ``split_dataset_by_node`` and an ``IterativeDataset``, mixed by ``WeightedMultiSourceDataset`` with the
  builder's defaults (``level="sample"``, ``stopping_strategy="first_exhausted"``, ``upstream_sharded=True``);
* the step count: ``args.compute_train_steps(dataset_length)`` with ``dataset_length`` as base.py:495-497
  computes it (``len / dp_size`` for ``datasets_type="mapping"``; the mixture has no length, so its config
  says ``datasets_type="iterable"``); ``steps_per_epoch`` is ``args.train_steps``;
* the collate function: ``MainCollator(pad_to_length=args.train.pad_to_length,
  seq_classification=data_type == "classification")`` (base.py:499-505);
* the loader: ``build_dataloader(dataloader_type=..., dataset=..., micro_batch_size=..., ...,
  save_steps=args.train.checkpoint.save_steps, **asdict(args.data.dataloader))`` with exactly the keywords
  of ``BaseTrainer._build_dataloader`` (base.py:507-531), which dispatches to ``build_native_dataloader``
  (data_loader.py:47-48, 67-283).

What is still emulated (also in the target's description):

* the process group: one process, ``torch.distributed`` initialised with gloo and world size 1 (an in-memory
  ``HashStore``) as ``BaseTrainer._setup`` initialises it (base.py:356-358), then ``init_parallel_state`` with
  the arguments' accelerator sizes as ``register_parallel_state`` calls it (base.py:383-399). VeOmni reads
  the DP rank and size from that state, so DP ranks (dp_size > 1) would need as many processes: declared
  unsupported (``dp``);
* the data transform and tokenizer: ``BaseTrainer._build_data_transform`` needs ``build_tokenizer`` on a
  model's tokenizer (base.py:471-482). ``transform`` stands in for ``process_plaintext_example``
  (data_transform.py:61-92): it returns the same keys (``input_ids``, ``attention_mask``, ``labels``) for the
  row's token count, every token the sample's id, plus ``id`` (``MainCollator`` collates an unknown key with
  ``default_collate``, data_collator.py:281-289, so a micro batch carries its samples' ids), and sleeps the
  row's decode cost;
* ``ModelArguments`` (only its tokenizer path is read by the data path) gets a dummy ``config_path`` and the
  ``eager`` kernels (its defaults need triton on CUDA);
* the data: a trace of the scenario written as JSON-lines files in a scratch directory (one file for the
  mapping dataset; per source, one file per worker, at least one, so each DataLoader worker has an HF shard).

VeOmni 0.1.12 declares ``datasets>=2.20.0,<=2.21.0`` (and ``psutil``, ``packaging<26``, which its argument
module imports); the venv keeps datasets 5.2.0 for the HF report, so ``bash ci/install.sh --veomni-datasets``
installs datasets 2.21.0 and those packages into an overlay (``OVERLAY.dir()``, properties.targets.overlay), and ``python -m properties``
re-runs a command whose target is ``veomni-builders`` with the overlay first on ``PYTHONPATH``
(``rerun_in_overlay``, called by ``properties.cli.main``). Knobs VeOmni's builder cannot express are declared
unsupported on the components; the adapters never correct VeOmni. A scenario that hits one of VeOmni's documented
deviations D1-D5 (``studies.veomni.deviations``, e.g. a checkpoint with ``in_order=False`` and workers,
which VeOmni warns has no resume guarantee) is refused as ``Unsupported``: the search never reports documented
behaviour as a bug.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
import math
import operator
import os
import sys
import time
from dataclasses import asdict
from types import SimpleNamespace
from typing import Any

import torch

from properties.errors import PropertyViolation, Unsupported
from properties.loader_targets import DelegatingLoader, shutdown_workers, trace_of
from properties.repro_setup import ReproSetup
from properties.scenarios import LoaderScenario
from properties.targets import overlay as _overlay
from properties.targets.base import LoaderComponent, Target
from properties.targets.scratch import scratch_root
from studies.veomni import loaders as L
from studies.veomni.deviations import Refused, documented_loader

VERSION = "0.1.12"
DATASETS_PIN = "2.21.0"


OVERLAY = _overlay.VEOMNI


# ---- VeOmni itself ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def lib() -> SimpleNamespace:
    """VeOmni's argument classes, builders and the classes they return. Raises ImportError without the
    overlay (datasets outside VeOmni's range) or without VeOmni."""
    if not OVERLAY.datasets_in_range():
        raise ImportError(OVERLAY.missing())
    # VeOmni's loggers bind sys.stdout when first created: create them pointing at stderr (a --json report)
    with contextlib.redirect_stdout(sys.stderr):
        import datasets
        import veomni.data.data_loader as data_loader
        import veomni.data.dataset as dataset
        from veomni.arguments import DataArguments, ModelArguments, TrainingArguments, VeOmniArguments
        from veomni.arguments.arguments_types import CheckpointConfig, DataloaderConfig, OpsImplementationConfig
        from veomni.data.data_collator import MainCollator
        from veomni.data.dynamic_batching import DynamicBatchSizeDataLoader
        from veomni.distributed import parallel_state
    datasets.disable_progress_bars()
    datasets.config.HF_DATASETS_CACHE = os.path.join(_root(), "hf-cache")   # not the user's HF cache
    return SimpleNamespace(
        datasets=datasets, data_loader=data_loader, dataset=dataset, parallel_state=parallel_state,
        VeOmniArguments=VeOmniArguments, ModelArguments=ModelArguments, DataArguments=DataArguments,
        TrainingArguments=TrainingArguments, CheckpointConfig=CheckpointConfig, DataloaderConfig=DataloaderConfig,
        OpsImplementationConfig=OpsImplementationConfig, MainCollator=MainCollator,
        DynamicBatchSizeDataLoader=DynamicBatchSizeDataLoader)


def available() -> bool:
    try:
        lib()
    except ImportError:
        return False
    return True


def _root() -> str:
    return scratch_root("veomni-builders")


EAGER_OPS = ("attn_implementation", "moe_implementation", "cross_entropy_loss_implementation",
             "rms_norm_implementation", "swiglu_mlp_implementation", "rotary_pos_emb_implementation",
             "load_balancing_loss_implementation", "rms_norm_gated_implementation", "causal_conv1d_implementation",
             "chunk_gated_delta_rule_implementation")


def _setup(args: Any) -> None:
    """BaseTrainer._setup's distributed part (base.py:356-364, 383-399), once per process: a gloo group of
    world size 1, then the parallel state registered as "base" from the arguments' accelerator sizes."""
    v = lib()
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group("gloo", store=torch.distributed.HashStore(), rank=0, world_size=1)
    if v.parallel_state.is_parallel_state_initialized():
        return
    acc = args.train.accelerator
    with contextlib.redirect_stdout(sys.stderr):
        v.parallel_state.init_parallel_state(
            dp_size=acc.dp_size, dp_replicate_size=acc.dp_replicate_size, dp_shard_size=acc.dp_shard_size,
            tp_size=acc.tp_size, pp_size=acc.pp_size, cp_size=acc.cp_size, ulysses_size=acc.ulysses_size,
            extra_parallel_sizes=acc.extra_parallel_sizes,
            extra_parallel_placement_innermost=acc.extra_parallel_placement_innermost,
            extra_parallel_names=acc.extra_parallel_names, dp_mode=acc.fsdp_config.fsdp_mode,
            async_enabled=acc.enable_async, name="base")


# ---- the emulated parts: data files and the transform ----------------------------------------

def transform(example: dict, source_name: str | None = None, **_: Any) -> list[dict]:
    """Stands in for ``process_plaintext_example`` with a tokenizer (data_transform.py:61-92): the row's
    ``tokens`` tokens, each its sample's id, the same keys, plus ``id``; sleeps the row's decode cost."""
    n, sid = int(example["tokens"]), int(example["id"])
    if example.get("cost_s"):
        time.sleep(float(example["cost_s"]))
    ids = torch.full((n,), sid, dtype=torch.long)
    return [{"input_ids": ids, "attention_mask": torch.ones(n, dtype=torch.long), "labels": ids.clone(), "id": sid}]


def _rows(trace, rows) -> list[dict]:
    return [{"id": int(trace.ids[r]), "tokens": int(trace.tokens[r]), "cost_s": float(trace.cost_s[r]),
             "source": trace.source_names[int(trace.source[r])]} for r in rows]


def _write(path: str, rows: list[dict]) -> None:
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def _data_key(sc: LoaderScenario) -> str:
    digest = hashlib.sha1(repr(sc.workload()).encode()).hexdigest()[:10]
    return f"n{sc.num_samples}-d{sc.data_seed}-{digest}"


def single_file(key: str, sc: LoaderScenario) -> str:
    """The trace as one JSON-lines file: ``data.train_path`` of the mapping dataset."""
    path = os.path.join(_root(), f"{key}.jsonl")
    if not os.path.exists(path):
        trace = trace_of(sc)
        _write(path, _rows(trace, range(len(trace))))
    return path


def multisource_yaml(key: str, shards: int, weights: tuple[float, ...], sc: LoaderScenario) -> str:
    """A multi-source config (``parse_multisource_config``'s form: sources, names, one const schedule) whose
    sources are directories of the trace's rows of each source, ``shards`` files each (at most one per row)."""
    base = os.path.join(_root(), f"{key}-s{shards}-w{'-'.join(f'{w:.6f}' for w in weights)}")
    path = base + ".yaml"
    if os.path.exists(path):
        return path
    trace = trace_of(sc)
    sources = []
    for k, name in enumerate(trace.source_names):
        rows = [r for r in range(len(trace)) if int(trace.source[r]) == k]
        d = os.path.join(base, name)
        os.makedirs(d, exist_ok=True)
        n = max(1, min(shards, len(rows)))
        for i in range(n):
            _write(os.path.join(d, f"part-{i:03d}.jsonl"), _rows(trace, rows[i::n]))
        sources.append(d)
    with open(path, "w") as f:
        json.dump({"sources": sources, "names": list(trace.source_names),
                   "schedule": [{"schedule_type": "const", "weights": list(weights)}]}, f)   # JSON is YAML
    return path


def _weights(sc: LoaderScenario) -> tuple[float, ...]:
    return tuple(sc.video_share if name == "video" else 1.0 - sc.video_share for name in trace_of(sc).source_names)


# ---- the arguments ---------------------------------------------------------------------------

FORMS = ("mapping", "multisource")


#: VeOmni's argument dataclasses in the order they are built (a nested one before its parent), each with the name
#: the standalone script gives it
ARGUMENT_CLASSES = {"OpsImplementationConfig": "ops", "ModelArguments": "model", "DataloaderConfig": "loader",
                    "DataArguments": "data", "CheckpointConfig": "checkpoint", "TrainingArguments": "train"}
#: VeOmni's argument dataclasses as ``argument_kw`` nests them: class -> (field, the class its value is)
NESTED = {"ModelArguments": ("ops_implementation", "OpsImplementationConfig"),
          "DataArguments": ("dataloader", "DataloaderConfig"), "TrainingArguments": ("checkpoint", "CheckpointConfig")}


def argument_kw(sc: LoaderScenario, form: str, train_path: Any, root: Any, output_dir: Any) -> dict[str, dict]:
    """The keyword arguments a user would write for this scenario, per VeOmni argument dataclass (the nested ones
    of ``NESTED`` left out of their parents), the data at ``train_path``, the model config under ``root`` and
    outputs under ``output_dir`` (paths, or the expressions a script writes for them)."""
    tokens = int(trace_of(sc).tokens.sum())
    base_steps = max(1, math.ceil(tokens / (sc.micro_batches_per_step * sc.budget)))
    return {
        "OpsImplementationConfig": {k: "eager" for k in EAGER_OPS},
        "ModelArguments": dict(config_path=root),
        "DataloaderConfig": dict(num_workers=sc.num_workers, prefetch_factor=sc.prefetch_factor or 2,
                                 persistent_workers=sc.persistent_workers, in_order=sc.in_order, drop_last=True),
        "DataArguments": dict(train_path=train_path, train_size=tokens, data_type="plaintext",
                              datasets_type="mapping" if form == "mapping" else "iterable",
                              multisource_datasets_type="veomni_weighted_multisource",
                              dyn_bsz_buffer_size=sc.buffer_size, max_seq_len=sc.budget),
        "CheckpointConfig": dict(output_dir=output_dir, save_steps=1),
        "TrainingArguments": dict(dyn_bsz=True, micro_batch_size=1, global_batch_size=sc.micro_batches_per_step,
                                  bsz_warmup_ratio=sc.warmup_steps / base_steps if sc.warmup_steps else 0.0,
                                  bsz_warmup_init_mbtoken=max(1, sc.budget // 4), dyn_bsz_runtime=sc.runtime,
                                  seed=sc.shuffle_seed)}


def arguments(sc: LoaderScenario, form: str) -> Any:
    """The VeOmniArguments a user would write for this scenario (VeOmni's own dataclasses)."""
    v = lib()
    key = _data_key(sc)
    train_path = single_file(key, sc) if form == "mapping" else \
        multisource_yaml(key, max(1, sc.num_workers), _weights(sc), sc)
    kw = argument_kw(sc, form, train_path, _root(), os.path.join(_root(), "output"))
    with contextlib.redirect_stdout(sys.stderr):
        made = {}
        for cls in ARGUMENT_CLASSES:
            nested = {NESTED[cls][0]: made[NESTED[cls][1]]} if cls in NESTED else {}
            made[cls] = getattr(v, cls)(**kw[cls], **nested)
        return v.VeOmniArguments(model=made["ModelArguments"], data=made["DataArguments"],
                                 train=made["TrainingArguments"])


#: what BaseTrainer._build_dataloader passes build_dataloader besides the dataset, the collator and the dataloader
#: config (base.py:507-531): keyword -> the attribute of the arguments it reads
DATALOADER_ARGS = (
    ("micro_batch_size", "train.micro_batch_size"), ("global_batch_size", "train.global_batch_size"),
    ("dataloader_batch_size", "train.dataloader_batch_size"), ("max_seq_len", "data.max_seq_len"),
    ("train_steps", "train_steps"), ("bsz_warmup_ratio", "train.bsz_warmup_ratio"),
    ("bsz_warmup_init_mbtoken", "train.bsz_warmup_init_mbtoken"), ("dyn_bsz", "train.dyn_bsz"),
    ("dyn_bsz_runtime", "train.dyn_bsz_runtime"), ("dyn_bsz_count_mode", "train.dyn_bsz_count_mode"),
    ("dyn_bsz_physical_overflow_ratio", "train.dyn_bsz_physical_overflow_ratio"),
    ("dyn_bsz_buffer_size", "data.dyn_bsz_buffer_size"), ("seed", "train.seed"),
    ("save_steps", "train.checkpoint.save_steps"))


def build(sc: LoaderScenario, form: str) -> SimpleNamespace:
    """BaseTrainer's _build_dataset, _build_collate_fn and _build_dataloader (base.py:484-531), in order."""
    v = lib()
    args = arguments(sc, form)
    _setup(args)
    with contextlib.redirect_stdout(sys.stderr):
        # _build_dataset (base.py:484-497)
        train_dataset = v.dataset.build_dataset(dataset_name=args.data.dataset_name, transform=transform,
                                                seed=args.train.seed, **asdict(args.data))
        dataset_length = None if not hasattr(train_dataset, "__len__") else len(train_dataset)
        if args.data.datasets_type == "mapping":
            dataset_length = dataset_length / args.train.accelerator.dp_size
        args.compute_train_steps(dataset_length)
        # _build_collate_fn (base.py:499-505)
        collate_fn = v.MainCollator(pad_to_length=args.train.pad_to_length,
                                    seq_classification=args.data.data_type == "classification")
        # _build_dataloader (base.py:507-531)
        dataloader_kwargs = asdict(args.data.dataloader)
        dataloader_type = dataloader_kwargs.pop("type")
        dataloader_kwargs.pop("use_background_prefetcher", None)
        dl = v.data_loader.build_dataloader(
            dataloader_type=dataloader_type, dataset=train_dataset, collate_fn=collate_fn,
            **{k: operator.attrgetter(a)(args) for k, a in DATALOADER_ARGS}, **dataloader_kwargs)
    return SimpleNamespace(args=args, dataset=train_dataset, dataloader=dl, train_steps=args.train_steps)


def train_steps(sc: LoaderScenario, form: str) -> int:
    """``args.train_steps`` after ``compute_train_steps`` as base.py:495-497 calls it (no dataset built: with
    dyn_bsz the step count reads only ``data.train_size``, arguments_types.py:1673-1678)."""
    args = arguments(sc, form)
    length = None if form == "multisource" else sc.num_samples / args.train.accelerator.dp_size
    args.compute_train_steps(length)
    return args.train_steps


class BuiltLoader(DelegatingLoader):
    """``self.dl`` is what ``build_dataloader("native", ...)`` returned; iter, set_epoch, state_dict and
    load_state_dict are its own. ``self.built`` keeps the arguments and the dataset the builders made."""

    def __init__(self, sc: LoaderScenario, form: str):
        self.built = build(sc, form)
        self.dl = self.built.dataloader

    def close(self) -> None:
        if self.dl is None:
            return
        inner = getattr(self.dl, "_dataloader", None)
        if inner is not None:          # the main runtime: DynamicBatchSizeDataLoader around the DistributedDataloader
            gen = getattr(self.dl, "_batch_data_iter", None)
            if gen is not None:
                gen.close()
            shutdown_workers(inner)
        else:
            shutdown_workers(self.dl)
        self.dl = None


def ids_of(step: Any) -> tuple[tuple, ...]:
    """A step is ``list[micro batch]``, each micro batch MainCollator's packed dict: its ``id`` tensor, in
    order; the packed ``input_ids`` must be those samples' tokens in that order (each token is its id)."""
    out = []
    for mb in step:
        ids = tuple(int(x) for x in mb["id"].reshape(-1).tolist())
        runs = [int(k) for k, _ in itertools.groupby(mb["input_ids"].reshape(-1).tolist())]
        it = iter(ids)
        if not all(any(r == i for i in it) for r in runs):
            raise PropertyViolation(f"a micro batch's packed input_ids {runs} are not its samples {ids} in order")
        out.append(ids)
    return tuple(out)


# ---- as a standalone script (properties.repro) ------------------------------------------------

def _files_code(sc: LoaderScenario, form: str) -> list[str]:
    """The data written as ``single_file`` and ``multisource_yaml`` write it, under ``ROOT``; the path the
    arguments name is ``DATA``."""
    if form == "mapping":
        return ["DATA = f'{ROOT}/data.jsonl'  # the data as a user's would be: one JSON-lines file",
                "with open(DATA, 'w') as f:",
                "    f.writelines(json.dumps({'id': i, 'tokens': n}) + '\\n' for i, n, *_ in ROWS)"]
    names = list(trace_of(sc).source_names)
    shards = max(1, sc.num_workers)
    return [f"DATA = f'{{ROOT}}/mixture.yaml'  # the data as a user's would be: a directory of {shards} JSON-lines "
            "file(s) a source",
            f"for name in {names}:",
            "    rows = [r for r in ROWS if r[2] == name]",
            f"    n = max(1, min({shards}, len(rows)))  # files: at most one a row",
            "    os.makedirs(f'{ROOT}/{name}')",
            "    for k in range(n):",
            "        with open(f'{ROOT}/{name}/part-{k:03d}.jsonl', 'w') as f:",
            "            f.writelines(json.dumps({'id': i, 'tokens': t}) + '\\n' for i, t, *_ in rows[k::n])",
            "with open(DATA, 'w') as f:  # parse_multisource_config's form (JSON is YAML)",
            f"    json.dump({{'sources': [f'{{ROOT}}/{{n}}' for n in {names}], 'names': {names},",
            f"               'schedule': [{{'schedule_type': 'const', 'weights': {list(_weights(sc))}}}]}}, f)"]


def repro_builders(sc: LoaderScenario, *, form: str) -> ReproSetup:
    """``BuiltLoader`` as standalone code: the data files, the gloo group and parallel state of ``_setup``,
    ``transform``, and ``make()`` building the arguments (``argument_kw``) and the loader as ``build`` does."""
    v = lib()
    trace = trace_of(sc)
    if trace.ids.tolist() != list(range(len(trace))):
        raise ValueError("the script names sample i by its row: the trace's ids must be 0..n-1")
    timed = sc.num_workers >= 2   # with none or one worker, decode times change nothing the loader delivers
    rows = [(i, int(trace.tokens[i]), trace.source_names[int(trace.source[i])],
             *([round(float(trace.cost_s[i]), 6)] if timed else [])) for i in range(len(trace))]
    code = [f"# (id, tokens, source{', decode s' if timed else ''}) a sample: the harness's trace, data_seed={sc.data_seed}",
            *L._call("ROWS = (", [repr(r) for r in rows]),
            *L._call("EAGER = (", [repr(op) for op in EAGER_OPS], "  # every op eager: no kernels on CPU"), "",
            "def transform(example, source_name=None, **_):  # stands in for the tokenizer: each token is its sample's id",
            "    i, n = example['id'], example['tokens']",
            *(["    time.sleep(ROWS[i][3])  # with two or more workers, which sample is ready first is timing"]
              if timed else []),
            "    ids = torch.full((n,), i)",
            "    return [{'input_ids': ids, 'attention_mask': torch.ones(n).long(), 'labels': ids.clone(), 'id': i}]",
            "", "ROOT = tempfile.mkdtemp()", *_files_code(sc, form),
            "torch.distributed.init_process_group('gloo', store=torch.distributed.HashStore(), rank=0, world_size=1)",
            "parallel_state.init_parallel_state(dp_size=1)  # BaseTrainer._setup's, for one process", ""]
    kw = argument_kw(sc, form, L._Expr("DATA"), L._Expr("ROOT"), L._Expr("f'{ROOT}/output'"))
    code.append("def make():  # BaseTrainer._build_dataset, _build_collate_fn, _build_dataloader (base.py:484-531)")
    for cls, name in ARGUMENT_CLASSES.items():
        if cls == "OpsImplementationConfig":   # EAGER_OPS as a constant above: ten keywords would bury make()
            code.append(f"    {name} = {cls}(**{{k: 'eager' for k in EAGER}})")
            continue
        nested = {NESTED[cls][0]: L._Expr(ARGUMENT_CLASSES[NESTED[cls][1]])} if cls in NESTED else {}
        code += L._call(f"    {name} = {cls}(", L._args(getattr(v, cls), **kw[cls], **nested))
    length = "None)  # an iterable dataset has no length" if form != "mapping" else \
        "len(dataset) / args.train.accelerator.dp_size)"
    code += ["    args = VeOmniArguments(model=model, data=data, train=train)",
             "    dataset = build_dataset(dataset_name=args.data.dataset_name, transform=transform, seed=args.train.seed,",
             "                            **dataclasses.asdict(args.data))",
             f"    args.compute_train_steps({length}",
             "    collate = MainCollator(pad_to_length=args.train.pad_to_length,",
             "                           seq_classification=args.data.data_type == 'classification')",
             "    kw = dataclasses.asdict(args.data.dataloader)",
             "    kw.pop('use_background_prefetcher', None)",
             *L._call("    return build_dataloader(", ["dataloader_type=kw.pop('type')", "dataset=dataset",
                                                       "collate_fn=collate",
                                                       *[f"{k}=args.{a}" for k, a in DATALOADER_ARGS], "**kw"]), ""]
    if sc.num_workers and sc.runtime == "main":
        code += L.MAIN_CLOSE
    imports = ["import torch",
               "from veomni.arguments import DataArguments, ModelArguments, TrainingArguments, VeOmniArguments",
               "from veomni.arguments.arguments_types import CheckpointConfig, DataloaderConfig, OpsImplementationConfig",
               "from veomni.data.data_collator import MainCollator", "from veomni.data.data_loader import build_dataloader",
               "from veomni.data.dataset import build_dataset", "from veomni.distributed import parallel_state"]
    return ReproSetup(f"VeOmni {VERSION} (datasets {v.datasets.__version__})",
                      ("dataclasses", "json", "os", "tempfile", *(("time",) if timed else ())), tuple(imports),
                      "\n".join(code).rstrip(), "tuple(tuple(int(x) for x in mb['id'].reshape(-1).tolist()) for mb in batch)",
                      "loader.set_epoch(epoch)")


# ---- components ------------------------------------------------------------------------------

DP_NOTE = ("one process: VeOmni's builders read the DP rank and size from the parallel state of a real process "
           "group (here gloo, world size 1); DP ranks need as many processes")
WORKER_NOTES = {
    "warmup_steps": "the worker runtime has no batch-size warm-up (build_native_dataloader passes none to "
                    "DynamicBatchingSizeDataset, data_loader.py:213-222)",
    "fetch_batch_size": "TrainingArguments derives dataloader_batch_size (arguments_types.py:962-966)",
    "dp_size": DP_NOTE,
}
MAIN_NOTES = {"fetch_batch_size": "TrainingArguments derives dataloader_batch_size=1 for the main runtime "
                                  "(arguments_types.py:963-964)", "dp_size": DP_NOTE}
MIX_OUT_OF_ORDER = ("out of order a weighted mixture promises neither the order nor each sample once, so "
                    "no property has anything to hold it to")
NO_SKEW = ("the skew model is of a sampler's samples dispatched to workers in plain mode; the builder packs "
           "with MainCollator and its own budget (the veomni target's loader:main runs the skew property)")
MIX_SKIP = {"exactly_once": "a weighted mixture draws sources by weight and stops at the first exhausted one: "
                            "it promises no sample once per epoch",
            "dp_shards": DP_NOTE, "in_order_skew": NO_SKEW}


EMPTY_SOURCE = ("a mixture source with no samples: under first_exhausted (the builder's default) the mixture ends "
                "before its first sample, as datasets documents that strategy; no VeOmni config names an empty source")


def _make(sc: LoaderScenario, *, form: str) -> BuiltLoader | Refused:
    if form == "multisource":
        trace = trace_of(sc)
        empty = [name for k, name in enumerate(trace.source_names) if not (trace.source == k).any()]
        if empty:
            return Refused(Unsupported(f"{EMPTY_SOURCE} (source {', '.join(empty)} of {sc.num_samples} samples)"))
    return BuiltLoader(sc, form)


def components() -> tuple[LoaderComponent, ...]:
    # a run is bounded as BaseTrainer.train bounds it (per epoch range(start_step, train_steps), base.py:937-955)
    common = dict(ids_of=ids_of, state_codec="pickle", stopping=("steps_per_epoch",), trainers=("veomni", "adversarial"),
                  fetch_batch_sizes=(1,), dp=False)
    out = []
    for form, runtime in (("mapping", "main"), ("mapping", "worker"), ("multisource", "main"),
                          ("multisource", "worker")):
        name = f"builders:{runtime}" if form == "mapping" else f"builders:multisource-{runtime}"
        notes = dict(MAIN_NOTES if runtime == "main" else WORKER_NOTES)
        kw: dict[str, Any] = dict(skip={"in_order_skew": NO_SKEW, "dp_shards": DP_NOTE})
        if form == "multisource":
            notes["in_order"] = MIX_OUT_OF_ORDER
            kw = dict(skip=MIX_SKIP, in_order=(True,))
        # held to what VeOmni documents: a scenario hitting D1-D4 is refused, D5's properties are skipped on the main runtime
        out.append(documented_loader(LoaderComponent(
            name=name, runtime=runtime, make_loader=functools.partial(_make, form=form),
            repro_setup=functools.partial(repro_builders, form=form),
            steps_per_epoch=functools.partial(train_steps, form=form), warmup=runtime == "main", knob_notes=notes,
            **kw, **common)))
    return tuple(out)


def target() -> Target:
    description = (f"VeOmni {VERSION}'s loaders as its builders build them, called as BaseTrainer._build_dataset/"
                   "_build_collate_fn/_build_dataloader call them (build_dataset 'mapping' and "
                   "'veomni_weighted_multisource', MainCollator, build_dataloader('native', ...)) from VeOmni's own "
                   "argument dataclasses; emulated: the process group (gloo, world size 1, so no DP ranks), the "
                   "tokenizer and data transform (each token is its sample's id, plus an 'id' key), the model "
                   "arguments, and the data (JSON-lines files of the trace); held to what VeOmni documents: "
                   "examples hitting its deviations D1-D4 are not drawn, the main runtime is not held to per-epoch "
                   "properties (D5) (studies.veomni.builders)")
    if not available():
        return Target(name=OVERLAY.target, description=description, unavailable=OVERLAY.missing())
    v = lib()
    description = description.replace(f"VeOmni {VERSION}'s", f"VeOmni {VERSION} (datasets "
                                                              f"{v.datasets.__version__})'s", 1)
    return Target(name=OVERLAY.target, description=description, components=components())
