"""``python -m properties repro`` for loader examples (``LoaderScenario``: VeOmni's loader:main, loader:worker,
loader:multisource, each ``LoaderComponent.repro_setup`` in ``studies/veomni/loaders.py``).

Three kinds of script, each the harness's own run written out:

* ``loader_resume`` and ``exactly_once`` under the adversarial schedule: the loop of ``loader_props.run_schedule``
  (checkpoints after given step counts, at epoch ends, on resume), with the epoch-end restores
  ``with_boundary_restores`` adds for loader_resume computed by the harness's own run when the script is written and
  inlined as literals, judged step for step (loader_resume, where the loader promises order) or each epoch's samples
  once (exactly_once);
* ``trainer_resume`` under the ``veomni`` trainer model (``trainers._veomni_run``: VeOmni's own loop, its
  ``train_steps`` bound and its resume arithmetic), preempted after the example's steps, judged as
  ``trainers.judge`` judges it: step for step where the loader promises order, each epoch's samples otherwise;
* ``epoch_reshuffle`` (``loader_props.check_epoch_reshuffle``): the same loader with persistent and non-persistent
  workers, each epoch compared, consecutive epochs told apart, and a fresh loader told ``set_epoch`` of the last.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
from typing import Any

from . import corpus
from . import loader_props as L
from .loader_suite import promises_order
from .repro_code import (
    EPOCH_IDS,
    ReproError,
    as_preempted,
    close_lines,
    each_epoch_once,
    example_and_component,
    header,
    judge_exact,
    judge_per_epoch,
    schedule_loop,
    without_def,
)
from .scenarios import LOADER_FORMAT, LoaderScenario, decode_loader_scenario

#: the properties a loader script is written for, and the trainer models whose loops it inlines for each
SCHEDULE_TRAINERS = {"loader_resume": ("adversarial",), "exactly_once": ("adversarial",),
                     "trainer_resume": ("veomni",), "epoch_reshuffle": ("adversarial",),
                     "dp_step_counts": ("adversarial",)}


def _home(fn: Any) -> str | None:
    """The module of the function that does ``fn``'s work: through wrappers (``__wrapped__``) and partials."""
    while True:
        fn = inspect.unwrap(fn)
        if not isinstance(fn, functools.partial):
            return getattr(fn, "__module__", None)
        fn = fn.func


def plan(entry: dict[str, Any], path: str) -> tuple[LoaderScenario, Any, Any]:
    """The scenario, component and ``ReproSetup`` of a loader entry, or the ReproError that says why none."""
    prop = entry["property"]
    sc, component = example_and_component(entry, path, LOADER_FORMAT, decode_loader_scenario, "loader")
    setup = getattr(component, "repro_setup", None)
    # a repro_setup renders the construction of its own module's make_loader; a component whose make_loader was
    # replaced (a wrapper that changes what is built: the documented VeOmni target's drop_last=False) is not it
    if setup is not None and _home(component.make_loader) != _home(setup):
        raise ReproError(f"{path}: component {entry['component']!r} of target {entry['target']!r} builds its loader "
                         f"with {_home(component.make_loader)}'s make_loader, not the construction its repro_setup "
                         f"renders ({_home(setup)}); write the script from the entry on the target that "
                         "renders it, or replay it instead: " + corpus.replay_command(path))
    if setup is None:
        raise ReproError(f"{path}: component {entry['component']!r} of target {entry['target']!r} renders no "
                         "standalone loader; loader components that do: veomni's loader:main, loader:worker and "
                         "loader:multisource, veomni-builders' four builders:* components, torchdata's loader:main (and "
                         "the stream components of litdata, hf-iterable and torchtitan)")
    # trainer_resume runs the loader without the adversarial schedule's checkpoint on resume (loader_suite)
    seen = dataclasses.replace(sc, checkpoint_on_resume=False) if prop == "trainer_resume" else sc
    why = component.unsupported(seen) or component.skip.get(prop)
    if why:
        raise ReproError(f"{path}: {component.name} does not run this example under {prop}: {why}")
    try:
        code = setup(sc)
    except ValueError as e:
        raise ReproError(f"{path}: {e}") from None
    return sc, component, code


def _judge_loader_once(sc: LoaderScenario) -> str:
    """``loader_props.check_exactly_once`` over the resumed run: each epoch no sample twice and, on one rank,
    every sample of the dataset (on one of several ranks the shard is the sampler's: only 'at most once')."""
    if sc.dp_size == 1:
        head = f"ALL = set(range({sc.num_samples}))  # each epoch: every sample, once"
    else:
        head = "ALL = None  # a DP rank's share is its sampler's to choose: only 'at most once' is judged"
    return each_epoch_once([head], "[sid for ee, step in resumed if ee == e for mb in step for sid in mb]",
                            sc.dp_size, ["twice", "foreign", "lost"], "",
                            "first difference: epoch {e}: {sorted(twice)} twice, {sorted(foreign)} foreign, "
                            "{sorted(lost)} left out")


def _compared(path: str, component: Any, code: Any) -> str:
    """What a step-for-step judgement compares: the step's signature where the component compares one (its setup
    must render it), else its ids."""
    if component.signature is None:
        return code.ids
    if code.signature is None:
        raise ReproError(f"{path}: {component.name} compares a signature of each step, which its rendered loader "
                         "does not write; replay it instead: " + corpus.replay_command(path))
    return code.signature


def _write_schedule(entry: dict[str, Any], path: str, sc: LoaderScenario, component: Any, code: Any) -> str:
    """A loader example of loader_resume or exactly_once under the adversarial schedule (``run_schedule``), judged
    as ``loader_suite`` judges it; the epoch-end restores ``with_boundary_restores`` adds are computed here, by the
    harness's own run, and written as literals."""
    prop = entry["property"]
    at_end = ", at_epoch_end=True" if sc.restore_at_epoch_end else ""
    ordered = prop == "loader_resume" and (component.promises_order if sc.in_order
                                           else component.promises_order_under_out_of_order)
    ids = _compared(path, component, code) if ordered else code.ids
    if ordered:
        plain, with_ends = L.with_boundary_restores(component.make_loader, sc, ids_of=component.ids_of or
                                                    L.default_ids_of, codec=component.state_codec)
        points = list(with_ends.checkpoints)
        ends = L.epoch_boundaries(plain)
        schedule = (f"uninterrupted = run([])\nresumed = run({points}{at_end})  # as drawn, {list(sc.checkpoints)}, and "
                    f"at the uninterrupted run's epoch ends, {ends}\n")
        judge = judge_exact("step")
    else:
        points = list(sc.checkpoints)
        schedule = f"uninterrupted = run([])\nresumed = run({points}{at_end})\n"
        judge = _judge_loader_once(sc)
    view = dataclasses.replace(sc, checkpoints=tuple(points))
    loop = schedule_loop(view, ids, code.epoch_hook, close="def close(" not in code.code, unit="step")
    stdlib = [f"import {m}" for m in sorted({"pickle", "sys", *code.stdlib})]
    # the schedule is the only one written for loader examples (the adversarial one): the script's loop says it
    body = [header(entry, code.library, path, None), "", *stdlib, "", *code.imports, "", f"EPOCHS = {sc.epochs}", code.code.rstrip(), "", loop, "",
            schedule.rstrip(), judge.rstrip()]
    return "\n".join(body) + "\n"


def _closer(sc: LoaderScenario, code: Any) -> list[str]:
    """``close(loader)``: the setup's own where it writes one (a runtime with a step generator), else the plain one."""
    return [] if "def close(" in code.code else close_lines(sc)


def _write_veomni(entry: dict[str, Any], path: str, sc: LoaderScenario, component: Any, code: Any) -> str:
    """``trainer_resume`` under ``trainers._veomni_run``: VeOmni's loop with its ``train_steps`` bound (the component's
    ``steps_per_epoch``, a literal), a checkpoint after every step and at each epoch's end unless just saved, and its
    resume arithmetic; the uninterrupted and the preempted runs judged as ``trainers.judge`` judges them."""
    if code.epoch_hook is None:
        raise ReproError(f"{path}: VeOmni's loop calls set_epoch before each epoch; {component.name} renders none")
    ordered = promises_order(component, sc.in_order)
    ids = _compared(path, component, code) if ordered else code.ids
    kills = sorted({k for k in sc.checkpoints if k > 0})
    save = "pickle.loads(pickle.dumps(loader.state_dict()))"
    loop = _closer(sc, code) + [
        "def run(kills):",
        '    """VeOmni\'s loop as released (trainer/base.py train; callbacks/checkpoint_callback.py; a fix to the loop',
        "    itself is made to this copy too), a job killed after a global step in kills resumed from its last",
        '    checkpoint. Returns what was trained: (epoch, ids) per step."""',
        "    trained, kills, checkpoint, step, start_epoch, start_step, loader = [], list(kills), None, 0, 0, 0, make()",
        "    while True:", "        killed, saved = False, -1", "        for epoch in range(start_epoch, EPOCHS):",
        f"            {code.epoch_hook}", "            it = iter(loader)",
        "            for _ in range(start_step, TRAIN_STEPS):",
        "                step += 1  # before next(): an exhausted iterator still counts a step",
        "                if (batch := next(it, None)) is None:", "                    break",
        f"                trained.append((step, epoch, {ids}))",
        f"                checkpoint, saved = (step, {save}), step",
        "                if kills and step >= kills[0]:  # preempted right after this step",
        "                    kills, killed = kills[1:], True", "                    break",
        "            if killed:", "                break", "            it = None",
        "            if saved != step:  # the epoch-end checkpoint",
        f"                checkpoint, saved = (step, {save}), step", "            start_step = 0",
        "        if not killed:", "            return [(e, b) for _, e, b in trained]",
        *(["        it = None", "        close(loader)"] if sc.num_workers else []),
        "        step, state = checkpoint", "        loader = make()", "        loader.load_state_dict(state)",
        "        start_epoch, start_step = divmod(step, TRAIN_STEPS)  # VeOmni's resume arithmetic",
        "        trained = [t for t in trained if t[0] <= step]  # the steps after the checkpoint are redone",
        "        if start_step == 0:", "            iter(loader)  # VeOmni's resume starts the epoch's iterator at once"]
    judge = judge_exact("step") if ordered else judge_per_epoch()
    judge = as_preempted(judge)
    bound = component.steps_per_epoch(sc)
    body = [header(entry, code.library, path, f"trainer model 'veomni', preempted after global steps {kills}"), "",
            *[f"import {m}" for m in sorted({"pickle", "sys", *code.stdlib})], "", *code.imports, "",
            f"EPOCHS, TRAIN_STEPS = {sc.epochs}, {bound}  # TRAIN_STEPS: VeOmni's train_steps, the steps of an epoch",
            code.code.rstrip(), "", "\n".join(loop), "",
            f"uninterrupted = run([])\npreempted = run({kills})", judge.rstrip()]
    return "\n".join(body) + "\n"


def _write_reshuffle(entry: dict[str, Any], path: str, sc: LoaderScenario, component: Any, code: Any) -> str:
    """``epoch_reshuffle``: the loader built with persistent and with non-persistent workers (``make()`` rendered
    once, ``persistent_workers`` its argument), each epoch compared, consecutive epochs told
    apart, and a fresh loader told ``set_epoch`` of the last epoch against the run that reached it."""
    if sc.warmup_steps:
        raise ReproError(f"{path}: with warm-up steps the property compares a run without them, which the script does "
                         f"not write; replay it instead: {corpus.replay_command(path)}")
    built = component.repro_setup(dataclasses.replace(sc, persistent_workers=True, checkpoints=()))
    if built.code.count("persistent_workers=True") != 1 or built.code.count("def make():") != 1:
        raise ReproError(f"{path}: {component.name}'s rendered loader does not name make() and persistent_workers once")
    # no restarts here: a setup's close(loader) would be dead code
    setup = without_def(built.code, "close").replace("persistent_workers=True", "persistent_workers=persistent")
    setup = setup.replace("def make():", "def make(persistent):")
    last = sc.epochs - 1
    run = ["def run(persistent, first=0):",
           '    """Epochs first.. as a trainer runs them: a fresh loader' + (', told set_epoch before each epoch."""'
                                                                          if code.epoch_hook else '."""'),
           "    steps, loader = [], make(persistent)", "    for epoch in range(first, EPOCHS):",
           *([f"        {code.epoch_hook}"] if code.epoch_hook else []),
           "        for batch in loader:", f"            steps.append((epoch, {code.ids}))", "    return steps"]
    judge = [EPOCH_IDS.rstrip(), "",
             "persistent = run(True)", f"fresh, late = run(False), run(False, {last})",
             "print(f'persistent:     {persistent}\\nnon-persistent: {fresh}')",
             "for e in range(EPOCHS):", "    a, b = epoch_ids(persistent, e), epoch_ids(fresh, e)",
             "    if a != b:  # an epoch's order is the same whether the workers persist or not",
             "        print(f'first difference: epoch {e}: persistent {a} vs non-persistent {b}')", "        sys.exit(1)",
             "    if e and a == epoch_ids(persistent, e - 1):  # set_epoch reshuffles",
             "        print(f'first difference: epoch {e} replays epoch {e - 1}: {a}')", "        sys.exit(1)",
             f"if epoch_ids(late, {last}) != epoch_ids(fresh, {last}):  # the order is a function of (seed, epoch)",
             f"    print(f'first difference: a fresh loader told set_epoch({last}) delivered {{epoch_ids(late, {last})}}')",
             "    sys.exit(1)", "sys.exit(0)"]
    body = [header(entry, code.library, path, "persistent and non-persistent workers"), "",
            *[f"import {m}" for m in sorted({"sys", *code.stdlib})], "", *code.imports, "",
            f"EPOCHS = {sc.epochs}", setup.rstrip(), "", "\n".join(run), "", "\n".join(judge)]
    return "\n".join(body) + "\n"


def _write_dp_steps(entry: dict[str, Any], path: str, sc: LoaderScenario, component: Any, code: Any) -> str:
    """``dp_step_counts`` without restores, under the stopping rules ``epoch`` and ``steps_per_epoch``
    (``loader_props.run_bounded``): each rank's loader, built with its rank (the rendered ``make()`` reads it from a
    global), counted step by step each epoch; the ranks' counts compared epoch by epoch."""
    rules = tuple(component.stopping)
    if sc.checkpoints or sc.restore_at_epoch_end or not rules or set(rules) - {"epoch", "steps_per_epoch"}:
        raise ReproError(f"{path}: a dp_step_counts script is written for whole epochs or a trainer's steps per "
                         f"epoch without restores so far (this loader's rules: {', '.join(rules) or 'none'}, "
                         f"checkpoints {list(sc.checkpoints)}); replay it instead: {corpus.replay_command(path)}")
    if code.epoch_hook is None:
        raise ReproError(f"{path}: each epoch is begun with set_epoch; {component.name} renders none")
    last = sc.dp_size - 1   # rendered for the last rank, whose rank differs from the default and so is named
    built = component.repro_setup(dataclasses.replace(sc, dp_rank=last))
    setup, named = re.subn(rf"(?<![\w.])rank={last}\b", "rank=RANK", built.code)
    if last == 0 or not named:
        raise ReproError(f"{path}: {component.name}'s rendered loader names no rank to vary")
    bound = component.steps_per_epoch(sc) if "steps_per_epoch" in rules else None
    counts = ["def steps_per_epoch(rank):",
              '    """Rank `rank`\'s loader, each epoch: the steps it yields' + (" (at most TRAIN_STEPS, the trainer's "
              'loop)."""' if bound else '."""'),
              "    global RANK", "    RANK = rank", "    counts, loader = [], make()", "    for epoch in range(EPOCHS):",
              f"        {code.epoch_hook}", "        it, n = iter(loader), 0",
              "        while " + ("n < TRAIN_STEPS and " if bound else "") + "next(it, None) is not None:",
              "            n += 1", "        counts.append(n)", "    return counts", "",
              "counts = [steps_per_epoch(r) for r in range(RANKS)]",
              "print(f'steps per epoch, by rank: {counts}')", "for e in range(EPOCHS):",
              "    if len({c[e] for c in counts}) > 1:  # a rank that stops first leaves the others in a collective",
              "        print(f'first difference: epoch {e} ends after {[c[e] for c in counts]} steps on ranks "
              "0..{RANKS - 1}')", "        sys.exit(1)", "sys.exit(0)"]
    sizes = f"RANKS, EPOCHS = {sc.dp_size}, {sc.epochs}" + (f"\nTRAIN_STEPS = {bound}  # VeOmni's train_steps: the "
                                                             "trainer's steps of an epoch" if bound else "")
    body = [header(entry, code.library, path, "each DP rank's loader in one process"), "",
            *[f"import {m}" for m in sorted({"sys", *code.stdlib})], "", *code.imports, "", sizes,
            setup.rstrip(), "", "\n".join(counts)]
    return "\n".join(body) + "\n"


def write_loader(entry: dict[str, Any], path: str) -> str:
    """The script for a loader example (``plan`` says why none where it cannot be written)."""
    sc, component, code = plan(entry, path)
    writer = {"trainer_resume": _write_veomni, "epoch_reshuffle": _write_reshuffle,
              "dp_step_counts": _write_dp_steps}.get(entry["property"],
                                                                                     _write_schedule)
    return writer(entry, path, sc, component, code)
