"""``python -m properties repro FILE.json``: a saved failure as a standalone script a maintainer runs.

The script imports only the library under test (with torch and torchdata where its loader needs them)
and the standard library, never this project. It inlines three things as plain code:

* the example's data and loader, written by the component's ``repro_setup`` (``properties.repro_setup.ReproSetup``:
  each adapter renders the construction it performs, with the scenario's values as literals: ``make()``,
  the expression of a batch's sample ids, the statement run before each epoch);
* the schedule's loop: the adversarial schedule's ``loader_props.run_schedule`` for a stream scenario
  (checkpoints after given batch counts, at epoch ends, an early break, a checkpoint on resume), with
  only the parts the example uses, or a trainer model's loop: ``torchdata``'s (``trainers._torchdata_run``),
  ``lightning-steps``' over a sized loader without ``limit_train_batches`` (``trainers._lightning_run``) or
  ``torchtitan``'s (``trainers._torchtitan_run``);
* the property's judgement: step for step, once per epoch, exactly once with the documented loss, or each
  source of a mixture at its weight (``stream_props.mixture_deviation``).

It prints what the uninterrupted and the resumed runs delivered and the first difference, and exits 1
while the bug is present, 0 once it is fixed. ``tests/test_repro_generated.py`` holds every generated
script to the harness: the batches it prints are the harness's own runs of the same example.

Written here for stream examples (litdata, Hugging Face datasets, torchtitan) of ``stream_resume``,
``stream_exactly_once`` and ``stream_mixture`` under the adversarial schedule, ``stream_trainer_resume`` under
torchdata's, Lightning's (every-step checkpoints) or torchtitan's loop (its overlay; the component's
``training_steps``), ``stream_trainer_epochs`` under Lightning's fit loop or torchtitan's (a finite loader's one
pass) uninterrupted, ``stream_epochs``' replayed epoch (two epochs for each of the seeds it asks), and ``stream_no_hang``
under torchtitan's loop with the DataLoader's timeout on each batch. Loader examples (VeOmni's, dynbsz's, the plain
torchdata loader's) are written by ``properties.repro_loader``, packer examples (``budget``) by
``properties.repro_packer``; the pieces they share are in ``properties.repro_code``. Anything else is refused with
what is supported.
"""

from __future__ import annotations

import shlex
import textwrap
from dataclasses import replace
from typing import Any

from . import corpus
from . import stream_props as S
from .repro_code import (
    EPOCH_IDS,
    SHOW,
    ReproError,
    as_preempted,
    close_lines,
    each_epoch_once,
    header,
    judge_exact,
    judge_once,
    judge_per_epoch,
    schedule_loop,
)
from .repro_loader import SCHEDULE_TRAINERS as LOADER_TRAINERS
from .repro_loader import plan, write_loader
from .repro_packer import SCHEDULE_TRAINERS as PACKER_TRAINERS
from .repro_packer import write_packer
from .stream_scenarios import StreamScenario, decode_stream_scenario
from .stream_suite import epoch_seeds, judged, trainer_kills, trainer_kw
from .targets import resolve
from .trainers import TRAINERS as MODELS
from .trainers import under_trainer

#: the properties a script can be written for, and the trainer models whose loops it inlines for each
STREAM_PROPERTIES = ("stream_resume", "stream_exactly_once", "stream_mixture", "stream_trainer_resume",
                     "stream_trainer_epochs", "stream_no_hang", "stream_epochs")
LOADER_PROPERTIES = tuple(LOADER_TRAINERS)
PACKER_PROPERTIES = tuple(PACKER_TRAINERS)
PROPERTIES = STREAM_PROPERTIES + LOADER_PROPERTIES + PACKER_PROPERTIES
SCHEDULE_TRAINERS = {"stream_resume": ("adversarial",), "stream_exactly_once": ("adversarial",),
                     "stream_mixture": ("adversarial",), "stream_trainer_resume": ("torchdata", "lightning-steps", "torchtitan"),
                     "stream_trainer_epochs": ("lightning", "lightning-steps", "torchtitan"),
                     "stream_no_hang": ("torchtitan",), "stream_epochs": ("adversarial",),
                     **LOADER_TRAINERS, **PACKER_TRAINERS}
TRAINERS = tuple(dict.fromkeys(t for ts in SCHEDULE_TRAINERS.values() for t in ts))
__all__ = ["LOADER_PROPERTIES", "PROPERTIES", "SCHEDULE_TRAINERS", "TRAINERS", "ReproError", "command", "supports",
           "write", "write_file"]


def _torchdata_loop(sc: StreamScenario, ids: str, epoch_hook: str | None) -> str:
    """``trainers._torchdata_run`` over a stream scenario: torchdata's documented loop, a checkpoint after every
    step, a killed job restarted from its last checkpoint with a fresh loader that re-enters the saved epoch."""
    hook = [f"            {epoch_hook}"] if epoch_hook else []
    lines = close_lines(sc)
    lines += ["def run(kills):",
              '    """torchdata\'s README loop ("Saving and loading state"): state_dict() after every step; a job killed',
              '    after a step in kills restarts from its last checkpoint. Returns what was trained: (epoch, ids) per step."""',
              "    trained, checkpoint, step, start, loader = [], None, 0, 0, make()",
              "    while True:", "        killed = False", "        for epoch in range(start, EPOCHS):", *hook,
              "            for batch in loader:", "                step += 1",
              f"                trained.append((step, epoch, {ids}))",
              "                checkpoint = (step, epoch, pickle.loads(pickle.dumps(loader.state_dict())))",
              "                if kills and step >= kills[0]:  # preempted right after this step",
              "                    kills, killed = kills[1:], True", "                    break",
              "            if killed:", "                break", "        if not killed:",
              "            return [(e, b) for _, e, b in trained]",
              *(["        close(loader)"] if sc.num_workers else []),
              "        step, start, state = checkpoint", "        loader = make()",
              "        loader.load_state_dict(state)",
              "        trained = [t for t in trained if t[0] <= step]  # the steps after the checkpoint are redone"]
    return "\n".join(lines)


def _lightning_steps_loop(sc: StreamScenario, ids: str, epoch_hook: str | None) -> str:
    """``trainers._lightning_run`` with ``ModelCheckpoint(every_n_train_steps=1)`` over a sized loader and no
    ``limit_train_batches``: the fit's one ``iter()`` before its first epoch, then each epoch ``set_epoch`` and (after
    the first) ``iter()``, and ``len(loader)`` batches (the fetcher stops there without asking for StopIteration);
    a job killed after a step restarts from that step's checkpoint: a fresh loader loads it before the fit's
    ``iter()``, and after a checkpoint at an epoch's last batch the next epoch draws from that iterator."""
    hook = [f"        {epoch_hook}"] if epoch_hook else []
    lines = close_lines(sc)
    lines += ["def run(kills):",
              '    """Lightning\'s fit loop with ModelCheckpoint(every_n_train_steps=1): a job killed after a global step in',
              '    kills restarts from that step\'s checkpoint. Returns what was trained: (epoch, ids) per step."""',
              "    trained, kills, loader, epoch, done = [], list(kills), make(), 0, 0",
              "    it, first = iter(loader), True  # the fit's one iter() before its first epoch",
              "    while epoch < EPOCHS:", *hook, "        if not first:", "            it = iter(loader)",
              "        first = killed = False",
              "        while done < len(loader) and (batch := next(it, None)) is not None:  # len() batches an epoch",
              f"            trained.append((epoch, {ids}))", "            done += 1",
              "            state = pickle.loads(pickle.dumps(loader.state_dict()))  # every step's checkpoint",
              "            if kills and len(trained) == kills[0]:  # killed right after this step's checkpoint",
              "                kills.pop(0)",
              *(["                close(loader)"] if sc.num_workers else []),
              "                loader = make()", "                loader.load_state_dict(state)",
              "                it, first, killed = iter(loader), True, True  # the restarted fit's iter()",
              "                break",
              "        if killed and done < len(loader):", "            continue  # the restarted job finishes this epoch",
              "        epoch, done = epoch + 1, 0",
              "    return trained"]
    return "\n".join(lines)


def _torchtitan_loop(sc: StreamScenario, ids: str, steps: int | None) -> str:
    """``trainers._torchtitan_run``: torchtitan's Trainer.train, one lazy ``iter()`` per job, ``training.steps`` steps
    (``steps``; None: until the data runs out, which ends training without a save), a DCP checkpoint after every step
    but the last, and a restart that loads it (DCP asks for ``state_dict()`` first, as a template)."""
    lines = close_lines(sc)
    lines += ["def run(kills):",
              '    """torchtitan\'s Trainer.train (trainer.py) and checkpointer (interval 1): a job killed after a step in',
              '    kills restarts from its last checkpoint. Returns what was trained: (0, ids) per step (no epochs)."""',
              "    trained, kills, checkpoint, step, loader = [], list(kills), None, 0, make()",
              "    while True:", "        it, killed = None, False",
              "        while " + ("step < STEPS:" if steps else "True:  # a finite loader: until the data runs out"),
              "            step += 1", "            it = iter(loader) if it is None else it  # at the first next()",
              "            if (batch := next(it, None)) is None:",
              "                break  # 'Ran out of data; last step was canceled.': neither trained nor saved",
              f"            trained.append((step, 0, {ids}))",
              *(["            if step != STEPS:  # the last step's save holds the model only"] if steps else []),
              ("                " if steps else "            ") + "checkpoint = (step, pickle.dumps(loader.state_dict()))",
              "            if kills and step >= kills[0]:  # preempted right after this step",
              "                kills, killed = kills[1:], True", "                break",
              "        if not killed:", "            return [(e, b) for _, e, b in trained]",
              *(["        it = None", "        close(loader)"] if sc.num_workers else []),
              "        loader = make()",
              *(["        if checkpoint is None:  # one step: its save held the model only",
                 "            trained, step = [], 0", "            continue"] if steps == 1 else []),
              "        step, blob = checkpoint", "        trained = [t for t in trained if t[0] <= step]",
              "        loader.state_dict()  # DCP's load asks for the state first, as a template",
              "        loader.load_state_dict(pickle.loads(blob))"]
    return "\n".join(lines)


def _judge_exactly_once(sc: StreamScenario, loss: Any, reason: str, run: str = "resumed", show: str = SHOW,
                        samples: str | None = None) -> str:
    """``stream_props.check_epoch`` over each epoch of ``run`` (the resumed run, or a trainer's one run); ``samples``:
    the script's function from a run's ids to the samples they deliver (``ReproSetup.samples``)."""
    why = f"  # {reason}" if reason else ""
    if sc.dp_size == 1:
        head = [f"ALL = {{1000 * k + i for k, n in enumerate({list(sc.sources)}) for i in range(n)}}  # each epoch, once each"]
    else:
        head = ["ALL = None  # a DP rank's share is the loader's to choose: only 'at most once' is judged"]
    judged = ["twice"] if sc.dp_size > 1 else ["twice", "foreign"]
    if sc.dp_size == 1 and loss is not None:
        head.append(f"LOSS = {loss!r}{why}")
        judged.append("len(lost) > LOSS" + (" and e != 0" if sc.break_after is not None else ""))
    note = "  # epoch 0's loop broke early: no loss is judged" if sc.break_after is not None and len(judged) > 2 else ""
    got = f"[sid for ee, batch in {run} if ee == e for sid in batch]"
    return each_epoch_once(head, f"{samples}({got})" if samples else got, sc.dp_size, judged,
                           note, "epoch {e} delivered {sorted(twice)} twice, {sorted(foreign)} foreign, "
                                 "left out {sorted(lost)}", show)


def _judge_mixture(sc: StreamScenario, weights: tuple[float, ...], runs: tuple[str, ...]) -> str:
    """``stream_props.mixture_deviation`` over every epoch of ``runs`` (epoch 0 left out after an early break)."""
    first = 1 if sc.break_after is not None else 0
    show = SHOW if "resumed" in runs else "print(f'uninterrupted: {uninterrupted}')\n"
    return EPOCH_IDS + f"SIZES, WEIGHTS = {list(sc.sources)}, {[round(w, 6) for w in weights]}\n" + show + \
        textwrap.dedent(f"""\
        def deviation(ids):  # each source's share before one ran out, against its weight ({S.Z:g} standard deviations)
            counts, prefix = [0] * len(SIZES), 0
            for prefix, sid in enumerate(ids, 1):
                counts[sid // 1000] += 1
                if counts[sid // 1000] >= SIZES[sid // 1000]:
                    break
            for k, p in enumerate(w / sum(WEIGHTS) for w in WEIGHTS):
                sd = math.sqrt(prefix * p * (1 - p)) or 1.0
                if prefix >= 12 and abs(counts[k] - prefix * p) > {S.Z:g} * sd + 1:
                    return f'source {{k}} has {{counts[k]}} of the first {{prefix}} samples, weight {{p:.3f}} expects {{prefix * p:.1f}}'
        bad = [f'epoch {{e}} of the {{name}} run: {{d}}' for name, steps in ({", ".join(f"('{r}', {r})" for r in runs)},)
               for e in range({first}, EPOCHS) if (d := deviation(epoch_ids(steps, e)))]
        print(bad[0] if bad else 'every epoch as weighted')
        sys.exit(1 if bad else 0)
        """)


def _trainer_of(entry: dict[str, Any], prop: str, trainer: str | None, path: str) -> str:
    """The trainer model whose loop the script inlines: the one asked for, else the one the failure names."""
    written = SCHEDULE_TRAINERS[prop]
    if trainer is None:
        named = [t for t in MODELS if under_trainer(t) in str(entry.get("message", ""))]
        trainer = named[0] if named else written[0]
    if trainer not in written:
        raise ReproError(f"{path}: trainer {trainer!r}: a script of {prop} is written for trainers "
                         f"{', '.join(written)} so far; allowed values: {', '.join(written)} (replay it instead: "
                         f"{corpus.replay_command(path)})")
    return trainer


def write(entry: dict[str, Any], *, path: str = "FILE.json", trainer: str | None = None) -> str:
    """The standalone script for one saved failure (``corpus.load``'s entry); ReproError if unsupported."""
    if trainer is not None and trainer not in TRAINERS:
        raise ReproError(f"--trainer {trainer}: a script is written for the loops of {', '.join(TRAINERS)} only so "
                         f"far; allowed values: {', '.join(TRAINERS)}")
    prop = entry.get("property")
    if prop not in PROPERTIES:
        raise ReproError(f"{path}: property {prop!r}: a script is written for {', '.join(PROPERTIES)} so far "
                         f"(replay it instead: {corpus.replay_command(path)})")
    trainer = _trainer_of(entry, prop, trainer, path)
    if prop in LOADER_PROPERTIES:
        return write_loader(entry, path)
    if prop in PACKER_PROPERTIES:
        return write_packer(entry, path)
    try:
        sc = decode_stream_scenario(entry["example"])
    except (KeyError, TypeError, ValueError) as e:
        raise ReproError(f"{path}: not a stream example ({e}); a script is written for stream examples so far") from None
    target = resolve(entry["target"])
    component = next((c for c in target.components if c.name == entry["component"]), None)
    setup = getattr(component, "repro_setup", None)
    if setup is None:
        built = sorted(c.name for t in ("litdata", "hf-iterable") for c in resolve(t).components)
        raise ReproError(f"{path}: component {entry['component']!r} of target {entry['target']!r} renders no "
                         f"standalone loader; components that do: {', '.join(built) or 'none installed'}")
    if trainer not in component.trainers:
        raise ReproError(f"{path}: {component.name} is not used with trainer {trainer!r} (its trainers: "
                         f"{', '.join(component.trainers)})")
    if prop == "stream_no_hang":
        return _write_no_hang(entry, path, sc, component, setup(sc))
    if prop == "stream_epochs":
        return _write_epochs_across_seeds(entry, path, sc, component, setup)
    if prop != "stream_trainer_resume":
        sc = judged(component, sc, prop)   # a documented replay after a broken-off resumed epoch: epoch 0 alone
    code = setup(sc)
    level, at_end = None, ", at_epoch_end=True" if sc.restore_at_epoch_end else ""
    # a mixture that deviates without a checkpoint needs no resumed run to show it
    mixture_runs = ("uninterrupted",) if (prop == "stream_mixture" and "of the uninterrupted run"
                                          in str(entry.get("message"))) else ("uninterrupted", "resumed")
    loop = schedule_loop(sc, code.ids, code.epoch_hook, restores=len(mixture_runs) > 1,
                 closed=component.epoch_end_convention(sc) == "closed")
    if prop == "stream_mixture":
        judge = _judge_mixture(sc, component.mixture_weights(sc), mixture_runs)
    if prop in ("stream_resume", "stream_trainer_resume"):
        level, reason = component.resume_promise(sc)
        if level == "none":
            raise ReproError(f"{path}: {component.name} promises nothing on a resume here ({reason})")
    if prop == "stream_trainer_epochs":
        return _write_trainer_epochs(entry, path, sc, component, code, trainer)
    if prop == "stream_trainer_resume" and trainer == "lightning-steps":
        if sc.break_after is not None:
            raise ReproError(f"{path}: the lightning-steps loop is written without limit_train_batches so far "
                             f"(this example's is {sc.break_after}); replay it instead: {corpus.replay_command(path)}")
        if sc.mix == "combined" and sc.weights is not None:
            raise ReproError(f"{path}: a weighted mixture has no len(), and the lightning-steps loop is written for "
                             f"sized loaders so far; replay it instead: {corpus.replay_command(path)}")
    if prop == "stream_trainer_resume":
        if trainer == "torchtitan":
            loop = _torchtitan_loop(sc, code.ids, trainer_kw(component, "torchtitan", sc)["training_steps"])
        else:
            loop = (_lightning_steps_loop if trainer == "lightning-steps" else _torchdata_loop)(sc, code.ids,
                                                                                              code.epoch_hook)
        judge = judge_exact() if level == "exact" else judge_per_epoch()
        judge = as_preempted(judge)
        schedule = f"uninterrupted = run([])\npreempted = run({list(trainer_kills(sc))})\n"
    elif prop == "stream_mixture" and mixture_runs == ("uninterrupted",):
        schedule = "uninterrupted = run()\n"
    elif prop in ("stream_resume", "stream_mixture"):
        if prop == "stream_resume":
            judge = judge_exact() if level == "exact" else judge_once()
        schedule = textwrap.dedent(f"""\
            uninterrupted = run([])
            # checkpoints as drawn, and exactly at every epoch end and on the next epoch's first batch
            ends = [sum(1 for e, _ in uninterrupted if e <= k) for k in sorted({{e for e, _ in uninterrupted}})[:-1]]
            resumed = run(sorted(set({list(sc.checkpoints)}) | {{n + d for n in ends for d in (0, 1)}}){at_end})
            """)
    else:
        if sc.mix == "parallel":
            raise ReproError(f"{path}: a parallel mixture cycles its sources; stream_exactly_once does not judge it")
        loss, reason = component.epoch_loss(sc)
        judge = _judge_exactly_once(sc, loss, reason)
        schedule = f"uninterrupted = run([])\nresumed = run({list(sc.checkpoints)}{at_end})\n"
    stdlib = [f"import {m}" for m in sorted({*(["pickle"] if len(mixture_runs) > 1 else []), "sys", *code.stdlib,
                                              *(["math"] if prop == "stream_mixture" else [])})]
    described = ("the harness's adversarial schedule" if trainer == "adversarial"
                 else f"trainer model {trainer!r}, preempted after global steps {list(trainer_kills(sc))}")
    body = [header(entry, code.library, path, described), "", *stdlib, "", *sorted(code.imports), "",
            _bound(sc, component, trainer), code.code.rstrip(), "", loop, "", schedule.rstrip(), judge.rstrip()]
    return "\n".join(body) + "\n"


def _lightning_uninterrupted(ids: str, epoch_hook: str | None) -> str:
    """``_lightning_steps_loop`` without a preemption: the fit's one ``iter()`` before its first epoch, then each
    epoch ``set_epoch`` (and after the first, ``iter()``) and ``len(loader)`` batches."""
    return "\n".join(["def run(kills):", '    """Lightning\'s fit loop (no preemption: kills is empty). Returns what was '
                      'trained: (epoch, ids) per step."""', "    trained, loader = [], make()",
                      "    it = iter(loader)  # the fit's one iter() before its first epoch",
                      "    for epoch in range(EPOCHS):", *([f"        {epoch_hook}"] if epoch_hook else []),
                      "        it = it if epoch == 0 else iter(loader)",
                      "        for _ in range(len(loader)):  # the fetcher stops after len() batches",
                      "            if (batch := next(it, None)) is None:", "                break",
                      f"            trained.append((epoch, {ids}))", "    return trained"])


def _torchtitan_uninterrupted(ids: str) -> str:
    """``_torchtitan_loop`` without a preemption, over a finite loader: one ``iter()`` at the first ``next()``, a
    checkpoint after every step, until the data runs out."""
    return "\n".join(["def run():", '    """torchtitan\'s Trainer.train (trainer.py), no preemption, a finite loader: steps until '
                      'the data runs out', "    (\'Ran out of data; last step was canceled.\'). Returns what was trained: "
                      '(0, ids) per step (no epochs)."""', "    trained, loader = [], make()",
                      "    for batch in loader:  # iter() at the first next()",
                      f"        trained.append((0, {ids}))",
                      "        pickle.dumps(loader.state_dict())  # the checkpointer's save after every step",
                      "    return trained"])


def _write_trainer_epochs(entry: dict[str, Any], path: str, sc: StreamScenario, component: Any, code: Any,
                          trainer: str) -> str:
    """``stream_trainer_epochs`` uninterrupted: under Lightning's fit loop (``trainers._lightning_run``: without a
    preemption its checkpoints change nothing, so ``lightning`` and ``lightning-steps`` run the same loop) each
    epoch ``len(loader)`` batches, judged as ``stream_props.check_epoch`` judges it (each of the rank's samples once,
    no more left out than the loader documents); under torchtitan's (``_torchtitan_loop``, a finite loader) its one
    pass, each sample at most once."""
    show = f"trained = run({'' if trainer == 'torchtitan' else '[]'})\nprint(f'trained: {{trained}}')\n"
    if trainer == "torchtitan":
        if component.training_steps is not None:
            raise ReproError(f"{path}: an endless loader re-loops under torchtitan: stream_trainer_epochs judges a "
                             "finite one")
        samples = "delivered" if code.samples else None
        judge = _judge_exactly_once(replace(sc, epochs=1), None, "", run="trained", show=show, samples=samples)
        bound = f"{_bound(sc, component, trainer)}\nEPOCHS = 1  # no epochs: the loader's one pass"
        loop = "\n\n".join([*([code.samples.rstrip()] if code.samples else []), _torchtitan_uninterrupted(code.ids)])
    elif sc.break_after is not None or (sc.mix == "combined" and sc.weights is not None) or sc.mix == "parallel":
        raise ReproError(f"{path}: a stream_trainer_epochs script is written for a sized loader without "
                         f"limit_train_batches and without a parallel mixture so far; replay it instead: "
                         f"{corpus.replay_command(path)}")
    else:
        judge = _judge_exactly_once(sc, *component.epoch_loss(sc), run="trained", show=show)
        bound, loop = f"EPOCHS = {sc.epochs}", _lightning_uninterrupted(code.ids, code.epoch_hook)
    body = [header(entry, code.library, path, f"trainer model {trainer!r}, uninterrupted"), "",
            *[f"import {m}" for m in sorted({"pickle", "sys", *code.stdlib})], "", *sorted(code.imports), "",
            bound, code.code.rstrip(), "", loop, "", judge.rstrip() + "\nsys.exit(0)"]
    return "\n".join(body) + "\n"


#: seconds a batch may take before the script calls it a hang (the harness's --step-timeout is 120 s; a batch of
#: these examples takes well under one)
HANG_S = 10


def _write_no_hang(entry: dict[str, Any], path: str, sc: StreamScenario, component: Any, code: Any) -> str:
    """``stream_no_hang`` under torchtitan's loop (its ``training.steps`` bound the run), uninterrupted, each batch
    bounded by the DataLoader's own ``timeout`` (``HANG_S``; torchtitan sets none): a worker that never delivers
    ends the run with the loader's error instead of hanging it."""
    steps = trainer_kw(component, "torchtitan", sc)["training_steps"]
    if not sc.num_workers or steps is None:
        raise ReproError(f"{path}: a stream_no_hang script is written for torchtitan's loop with DataLoader workers "
                         f"so far (their timeout bounds a batch); replay it instead: {corpus.replay_command(path)}")
    bounded = ["logging.disable(logging.WARNING)  # a worker that spins re-looping would log on every pass",
               "_make = make", "", "def make():  # a wall-time bound per batch: DataLoader's own timeout",
               "    loader = _make()", "    loader.timeout = HANG_S", "    return loader"]
    judge = ["try:", "    trained = run([])", "except RuntimeError as e:  # 'DataLoader timed out after ... seconds'",
             "    print(f'first difference: a batch did not come within {HANG_S} s: {e}')", "    sys.exit(1)",
             "print(f'uninterrupted: {trained}')", "sys.exit(0)"]
    body = [header(entry, code.library, path, "trainer model 'torchtitan', uninterrupted"), "",
            *[f"import {m}" for m in sorted({"logging", "pickle", "sys", *code.stdlib})], "", *sorted(code.imports), "",
            _bound(sc, component, "torchtitan") + f"\nHANG_S = {HANG_S}  # seconds a batch may take (one takes well "
            "under one)", code.code.rstrip(), "", "\n".join(bounded), "",
            _torchtitan_loop(sc, code.ids, steps), "", "\n".join(judge)]
    return "\n".join(body) + "\n"


#: two seeds no example draws: where a loader's code differs between them, and only there, it names the seed
_SENTINELS = (918273645, 546372819)


def _seeded_code(sc: StreamScenario, setup: Any, path: str) -> Any:
    """The setup's code with the scenario's seed as the name ``SEED``: rendered at two sentinel seeds, the two must
    differ only where the sentinels stand (a loader whose code derives more from the seed is refused)."""
    a, b = (setup(replace(sc, seed=s)) for s in _SENTINELS)
    if a.code.replace(str(_SENTINELS[0]), "SEED") != b.code.replace(str(_SENTINELS[1]), "SEED") or \
            str(_SENTINELS[0]) not in a.code:
        raise ReproError(f"{path}: the loader's code does not take its seed as one literal: a script across seeds is "
                         f"not written for it; replay it instead: {corpus.replay_command(path)}")
    return replace(a, code=a.code.replace(str(_SENTINELS[0]), "SEED"))


def _write_epochs_across_seeds(entry: dict[str, Any], path: str, sc: StreamScenario, component: Any,
                               setup: Any) -> str:
    """``stream_epochs``' replay of epoch 0 (``stream_props.check_reshuffle`` for one seed,
    ``check_reshuffle_across_seeds`` for as many as the loader's ``epoch_orders`` need): uninterrupted runs of two
    epochs, one per seed, and epoch 1 must differ from epoch 0 for at least one."""
    seeds = epoch_seeds(component, sc)
    if seeds is None or "replays epoch" not in str(entry.get("message")):
        raise ReproError(f"{path}: a stream_epochs script is written for an epoch that replays the one before so far; "
                         f"replay it instead: {corpus.replay_command(path)}")
    code = _seeded_code(replace(sc, epochs=2), setup, path)
    orders = component.epoch_orders(sc)
    why = [f"# an epoch can take {orders} orders: a reshuffle drawn from the seed replays epoch 0 for all {seeds} seeds "
           f"with probability {float(orders) ** -seeds:.0e}"] if seeds > 1 else []
    judge = [*why, f"for SEED in range({sc.seed}, {sc.seed + seeds}):", "    steps = run()",
             "    first, second = ([sid for e, batch in steps if e == k for sid in batch] for k in (0, 1))",
             "    print(f'seed {SEED}: epoch 0 {first}, epoch 1 {second}')", "    if first != second:",
             "        sys.exit(0)", "print('first difference: none: epoch 1 replays epoch 0 for every seed')",
             "sys.exit(1)"]
    described = "uninterrupted, two epochs" + (f" for each of {seeds} seeds" if seeds > 1 else "")
    body = [header(entry, code.library, path, described), "",
            *[f"import {m}" for m in sorted({"sys", *code.stdlib})], "", *sorted(code.imports), "",
            "EPOCHS = 2\nSEED = None  # the loop at the end sets it: make() reads it", code.code.rstrip(), "",
            schedule_loop(replace(sc, epochs=2), code.ids, code.epoch_hook, restores=False), "", "\n".join(judge)]
    return "\n".join(body) + "\n"


def _bound(sc: StreamScenario, component: Any, trainer: str) -> str:
    """The run's length: its epochs, or under torchtitan (no epochs) its training.steps."""
    if trainer != "torchtitan":
        return f"EPOCHS = {sc.epochs}"
    steps = trainer_kw(component, "torchtitan", sc)["training_steps"]
    return (f"STEPS = {steps}  # torchtitan's training.steps" if steps
            else "# torchtitan's training.steps: more than the data holds (a finite loader ends training)")


def write_file(path: str, *, trainer: str | None = None) -> str:
    """``write`` for a corpus file; ReproError (a usage error) for a file that is not one."""
    try:
        entry = corpus.load(path)
    except corpus.CorpusError as e:
        raise ReproError(str(e)) from None
    return write(entry, path=path, trainer=trainer)


def supports(entry: dict[str, Any]) -> bool:
    """Whether ``write`` would write a script for this entry (what ``replay`` offers the command for)."""
    try:
        if entry.get("property") in LOADER_PROPERTIES:
            _trainer_of(entry, entry["property"], None, "FILE.json")
            plan(entry, "FILE.json")   # without the harness's run that write() makes
        else:
            write(entry)
    except Exception:  # noqa: BLE001 - any refusal or a target not installed: no command to offer
        return False
    return True


def command(path: str) -> str:
    return f"python -m properties repro {shlex.quote(str(path))}"
