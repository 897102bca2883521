"""``python -m properties repro FILE.json``: a saved failure as a standalone script a maintainer runs.

The script imports only the library under test (with torch and torchdata where its loader needs them)
and the standard library, never this project. It inlines three things as plain code:

* the example's data and loader, written by the component's ``repro_setup`` (``targets.stream.ReproSetup``:
  each adapter renders the construction it performs, with the scenario's values as literals: ``make()``,
  the expression of a batch's sample ids, the statement run before each epoch);
* the schedule's loop: the adversarial schedule's ``loader_props.run_schedule`` for a stream scenario
  (checkpoints after given batch counts, at epoch ends, an early break, a checkpoint on resume), with
  only the parts the example uses, or a trainer model's loop: ``torchdata``'s (``trainers._torchdata_run``) or
  ``lightning-steps``' over a sized loader without ``limit_train_batches`` (``trainers._lightning_run``);
* the property's judgement: step for step, once per epoch, exactly once with the documented loss, or each
  source of a mixture at its weight (``stream_props.mixture_deviation``).

It prints what the uninterrupted and the resumed runs delivered and the first difference, and exits 1
while the bug is present, 0 once it is fixed. ``tests/test_repro_generated.py`` holds every generated
script to the harness: the batches it prints are the harness's own runs of the same example.

Written so far for stream examples (litdata, Hugging Face datasets) of ``stream_resume``,
``stream_exactly_once`` and ``stream_mixture`` under the adversarial schedule and ``stream_trainer_resume``
under torchdata's or Lightning's (every-step checkpoints), and for VeOmni's loader examples (``LoaderScenario``: ``loader:main``, ``loader:worker``,
``loader:multisource``, each ``LoaderComponent.repro_setup`` in ``targets.veomni_loaders``) of ``loader_resume``
and ``exactly_once`` under the adversarial schedule: the loop of ``loader_props.run_schedule`` (checkpoints after
given step counts, at epoch ends, on resume), with the epoch-end restores ``with_boundary_restores`` adds for
loader_resume computed by the harness's own run when the script is written and inlined as literals, judged step for
step (loader_resume, where the loader promises order) or each epoch's samples once (exactly_once). Anything else is
refused with what is supported (the hand-written scripts under ``studies/*/repros/`` cover the rest of what is committed).
"""

from __future__ import annotations

import dataclasses
import functools
import shlex
import textwrap
from pathlib import Path
from typing import Any

from . import corpus
from . import loader_props as L
from . import stream_props as S
from .scenarios import LOADER_FORMAT, LoaderScenario, decode_loader_scenario
from .stream_scenarios import StreamScenario, decode_stream_scenario
from .stream_suite import judged, trainer_kills
from .targets import resolve
from .targets.patched import ROOT
from .targets.studies import fix_diff
from .trainers import TRAINERS as MODELS
from .trainers import under_trainer

#: the properties a script can be written for, and the trainer models whose loops it inlines for each
STREAM_PROPERTIES = ("stream_resume", "stream_exactly_once", "stream_mixture", "stream_trainer_resume")
LOADER_PROPERTIES = ("loader_resume", "exactly_once")
PROPERTIES = STREAM_PROPERTIES + LOADER_PROPERTIES
SCHEDULE_TRAINERS = {"stream_resume": ("adversarial",), "stream_exactly_once": ("adversarial",),
                     "stream_mixture": ("adversarial",), "stream_trainer_resume": ("torchdata", "lightning-steps"),
                     "loader_resume": ("adversarial",), "exactly_once": ("adversarial",)}
TRAINERS = ("adversarial", "torchdata", "lightning-steps")


class ReproError(ValueError):
    """An entry this generator cannot write a script for; the message names what it supports."""


def _close(sc: StreamScenario) -> list[str]:
    """``close(loader)``, as ``loader_targets.shutdown_workers``: a restarted job's workers are gone before the new
    loader starts its own (outcomes can differ while the old ones live: H8's example, a race, passed in every run
    tried that way, and fails in most with them stopped)."""
    if not sc.num_workers:
        return []
    return ["def close(loader):  # a restarted job's old workers are gone before the new loader starts its own",
            "    getattr(loader._iterator, '_shutdown_workers', lambda: None)()", "    loader._iterator = None", ""]


def _loop(sc: StreamScenario | LoaderScenario, ids: str, epoch_hook: str | None, restores: bool = True,
          close: bool = True, unit: str = "batch", closed: bool = False) -> str:
    """``run_schedule``'s loop over a stream or a loader scenario (a loader scenario never breaks early), with only
    the branches the example uses (without ``restores``: the uninterrupted run alone; without ``close``: the
    setup's code defines ``close(loader)`` itself). ``unit``: what the loader yields, a batch or a step.
    ``closed``: the loader's state after an epoch's last batch is that epoch over (``epoch_end='closed'``), so a
    restore there moves on to the next epoch, as the trainer that knows the epoch ended does."""
    break_after = getattr(sc, "break_after", None)
    if not restores:
        hook = [f"        {epoch_hook}"] if epoch_hook else []
        taken = break_after is not None
        return "\n".join(["def run():", '    """Epochs as a trainer runs them."""', "    steps, loader = [], make()",
                          "    for epoch in range(EPOCHS):", *hook,
                          *(["        for taken, batch in enumerate(loader):",
                             f"            if epoch == 0 and taken >= {break_after}:  # epoch 0 breaks early",
                             "                break"] if taken else ["        for batch in loader:"]),
                          f"            steps.append((epoch, {ids}))", "    return steps"])
    on_resume = sc.checkpoint_on_resume
    copy = "pickle.loads(pickle.dumps({}))"  # the state as a checkpoint file carries it
    hook = [f"        {epoch_hook}"] if epoch_hook else []
    lines = _close(sc) if close else []
    lines += ["def run(points" + (", at_epoch_end=False):" if sc.restore_at_epoch_end else "):"),
             f'    """Epochs as a trainer runs them; after each {unit} count in points: save, build a fresh loader, '
             'load."""',
             "    loader, steps" + (", pending = make(), [], []" if on_resume else " = make(), []"),
             "    def restore(loader" + (", it=None):" if closed else "):"),
             "        state = " + ("pending.pop() if pending else " if on_resume else "")
             + copy.format("loader.state_dict()"),
             *(["        over = it is not None and next(it, None) is None  # the epoch had ended: the trainer "
                "knows it"] if closed else []),
             *(["        close(loader)"] if sc.num_workers else []),
             "        fresh = make()", "        fresh.load_state_dict(state)"]
    if on_resume:
        lines += ["        pending.append(" + copy.format("fresh.state_dict()") + ")  # a checkpoint at once on resume"]
    lines += ["        return (fresh, over)" if closed else "        return fresh"]
    if 0 in sc.checkpoints:
        lines += ["    for _ in range(points.count(0)):  # a checkpoint before the first batch",
                  "        loader = restore(loader)" + ("[0]" if closed else "")]
    lines += ["    for epoch in range(EPOCHS):", *hook]
    get = "(batch := next(it, None)) is not None"
    if break_after is not None:
        lines += ["        it, taken = iter(loader), 0",
                  f"        while not (epoch == 0 and taken >= {break_after}) and {get}:  # epoch 0 breaks early"]
    else:
        lines += ["        it = iter(loader)", f"        while {get}:"]
    lines += [f"            steps.append((epoch, {ids}))"]
    if break_after is not None:
        lines += ["            taken += 1"]
    if on_resume:
        lines += ["            pending.clear()"]
    if closed:
        lines += ["            over = False",
                  "            for _ in range(points.count(len(steps))):",
                  "                loader, ended = restore(loader, None if over else it)",
                  "                over = over or ended",
                  *["        " + h for h in hook], "                it = None if over else iter(loader)",
                  "            if over:  # a state saved after the epoch's last batch restores as the epoch over",
                  "                break"]
    else:
        lines += ["            for _ in range(points.count(len(steps))):", "                loader = restore(loader)",
                  *["        " + h for h in hook], "                it = iter(loader)"]
    if on_resume and sc.restore_at_epoch_end:   # the next restore otherwise follows a step, which clears it
        lines += ["        pending.clear()"]
    if sc.restore_at_epoch_end:
        lines += ["        if at_epoch_end and epoch < EPOCHS - 1:  # a checkpoint at epoch end, the finished iterator gone first",
                  "            it = None", "            loader = restore(loader)" + ("[0]" if closed else "")]
    return "\n".join(lines + ["    return steps"])


def _torchdata_loop(sc: StreamScenario, ids: str, epoch_hook: str | None) -> str:
    """``trainers._torchdata_run`` over a stream scenario: torchdata's documented loop, a checkpoint after every
    step, a killed job restarted from its last checkpoint with a fresh loader that re-enters the saved epoch."""
    hook = [f"            {epoch_hook}"] if epoch_hook else []
    lines = _close(sc)
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
    lines = _close(sc)
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


def _judge_per_epoch() -> str:
    return _EPOCH_IDS + _SHOW + textwrap.dedent("""\
        for e in range(EPOCHS):
            a, b = sorted(epoch_ids(uninterrupted, e)), sorted(epoch_ids(resumed, e))
            if a != b:  # each epoch the same samples, in any order
                print(f'first difference: epoch {e}: uninterrupted {a} vs preempted {b}')
                sys.exit(1)
        """)


_EPOCH_IDS = "def epoch_ids(steps, e):\n    return [sid for ee, batch in steps if ee == e for sid in batch]\n"
_SHOW = "print(f'uninterrupted: {uninterrupted}\\nresumed:       {resumed}')\n"


def _judge_exact(unit: str = "batch") -> str:
    """Step for step: ``unit`` names what the loader yields (a batch, or a loader's step)."""
    return _SHOW + textwrap.dedent("""\
        k = next((k for k, (a, b) in enumerate(zip(uninterrupted, resumed)) if a != b), min(map(len, (uninterrupted, resumed))))
        if uninterrupted != resumed:  # UNIT for UNIT
            print(f'first difference: UNIT {k}: uninterrupted {uninterrupted[k:k + 1]} vs resumed {resumed[k:k + 1]}')
        sys.exit(0 if uninterrupted == resumed else 1)
        """).replace("UNIT", unit)


def _judge_once() -> str:
    return _EPOCH_IDS + "\n" + _SHOW + textwrap.dedent("""\
        for e in range(EPOCHS):
            a, b = epoch_ids(uninterrupted, e), epoch_ids(resumed, e)
            if len(set(b)) != len(b) or set(a) != set(b):  # each epoch's samples once, in any order
                print(f'first difference: epoch {e} lost {sorted(set(a) - set(b))}, delivered '
                      f'{sorted(set(b) - set(a))} the uninterrupted run did not, {sorted({s for s in b if b.count(s) > 1})} twice')
                sys.exit(1)
        """)


def _judge_exactly_once(sc: StreamScenario, loss: Any, reason: str) -> str:
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
    return _each_epoch_once(head, "[sid for ee, batch in resumed if ee == e for sid in batch]", sc.dp_size, judged,
                            note, "epoch {e} delivered {sorted(twice)} twice, {sorted(foreign)} foreign, "
                                  "left out {sorted(lost)}")


def _each_epoch_once(head: list[str], got: str, dp_size: int, judged: list[str], note: str, complaint: str) -> str:
    """Each epoch of the resumed run: ``got`` its sample ids; ``judged`` which of twice, foreign (not in ALL) and
    lost (in ALL, not delivered) fail it; with several DP ranks only ``twice`` is known."""
    body = ["for e in range(EPOCHS):", f"    got = {got}",
            "    twice, foreign, lost = {s for s in got if got.count(s) > 1}, "
            + ("set(got) - ALL, ALL - set(got)" if dp_size == 1 else "set(), set()"),
            f"    if {' or '.join(judged)}:{note}", f"        print(f'{complaint}')", "        sys.exit(1)"]
    return "\n".join(head) + "\n" + _SHOW + "\n".join(body) + "\n"


def _fix_of(entry: dict[str, Any]) -> str | None:
    """The fix the harness proposes for the entry's finding: its diff in a study's patches/, as a path from the
    checkout (None: none proposed)."""
    diff = fix_diff(entry["finding"]) if entry.get("finding") else None
    return None if diff is None else diff.relative_to(ROOT).as_posix()


def _judge_mixture(sc: StreamScenario, weights: tuple[float, ...], runs: tuple[str, ...]) -> str:
    """``stream_props.mixture_deviation`` over every epoch of ``runs`` (epoch 0 left out after an early break)."""
    first = 1 if sc.break_after is not None else 0
    show = _SHOW if "resumed" in runs else "print(f'uninterrupted: {uninterrupted}')\n"
    return _EPOCH_IDS + f"SIZES, WEIGHTS = {list(sc.sources)}, {[round(w, 6) for w in weights]}\n" + show + \
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


def _header(entry: dict[str, Any], library: str, path: str, schedule: str | None) -> str:
    # a crash's message carries the worker's traceback, with this machine's paths: its first line is the finding
    message = " ".join(str(entry.get("message", "")).split("Original Traceback")[0].split())
    message = message if len(message) <= 150 else message[:147] + "..."
    finding = f", {entry['finding']}" if entry.get("finding") else ""
    # file names stay whole on one line (a reader copies them; tests/test_repros.py finds them)
    fill = functools.partial(textwrap.fill, width=116, break_on_hyphens=False, break_long_words=False)
    fix = _fix_of(entry)
    source = f"{Path(path).name} ({schedule})" if schedule else Path(path).name
    text = [fill(f"{library}{finding}: {entry['property']} fails: {message}"),
            fill((f"The fix proposed: {fix.rstrip('.')}. " if fix else "")
                 + f"Written by `python -m properties repro` from {source}; exits 1 while the "
                 "bug is present, 0 once it is fixed."
                 + (" With 2+ workers the outcome can depend on timing: run it a few times."
                    if corpus.timing_may_matter(entry) else ""))]
    return '"""' + "\n\n".join(text) + '\n"""'


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
        return _write_loader(entry, path, *_loader_plan(entry, path))
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
    if prop != "stream_trainer_resume":
        sc = judged(component, sc, prop)   # a documented replay after a broken-off resumed epoch: epoch 0 alone
    code = setup(sc)
    level, at_end = None, ", at_epoch_end=True" if sc.restore_at_epoch_end else ""
    # a mixture that deviates without a checkpoint needs no resumed run to show it
    mixture_runs = ("uninterrupted",) if (prop == "stream_mixture" and "of the uninterrupted run"
                                          in str(entry.get("message"))) else ("uninterrupted", "resumed")
    loop = _loop(sc, code.ids, code.epoch_hook, restores=len(mixture_runs) > 1,
                 closed=component.epoch_end_convention(sc) == "closed")
    if prop == "stream_mixture":
        judge = _judge_mixture(sc, component.mixture_weights(sc), mixture_runs)
    if prop in ("stream_resume", "stream_trainer_resume"):
        level, reason = component.resume_promise(sc)
        if level == "none":
            raise ReproError(f"{path}: {component.name} promises nothing on a resume here ({reason})")
    if prop == "stream_trainer_resume" and trainer == "lightning-steps":
        if sc.break_after is not None:
            raise ReproError(f"{path}: the lightning-steps loop is written without limit_train_batches so far "
                             f"(this example's is {sc.break_after}); replay it instead: {corpus.replay_command(path)}")
        if sc.mix == "combined" and sc.weights is not None:
            raise ReproError(f"{path}: a weighted mixture has no len(), and the lightning-steps loop is written for "
                             f"sized loaders so far; replay it instead: {corpus.replay_command(path)}")
    if prop == "stream_trainer_resume":
        loop = (_lightning_steps_loop if trainer == "lightning-steps" else _torchdata_loop)(sc, code.ids,
                                                                                          code.epoch_hook)
        judge = _judge_exact() if level == "exact" else _judge_per_epoch()
        judge = judge.replace("resumed:       ", "preempted:     ").replace("resumed", "preempted")
        schedule = f"uninterrupted = run([])\npreempted = run({list(trainer_kills(sc))})\n"
    elif prop == "stream_mixture" and mixture_runs == ("uninterrupted",):
        schedule = "uninterrupted = run()\n"
    elif prop in ("stream_resume", "stream_mixture"):
        if prop == "stream_resume":
            judge = _judge_exact() if level == "exact" else _judge_once()
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
    body = [_header(entry, code.library, path, described), "", *stdlib, "", *sorted(code.imports), "",
            f"EPOCHS = {sc.epochs}", code.code.rstrip(), "", loop, "", schedule.rstrip(), judge.rstrip()]
    return "\n".join(body) + "\n"


# ---- loader examples (map-style pipelines: VeOmni's loader:main, loader:worker, loader:multisource) ----

def _finding_of(entry: dict[str, Any], path: str) -> str | None:
    """The entry's finding: its ``finding`` field (every study's pin has one; None for a failure not yet judged)."""
    return entry.get("finding") or None


def _loader_plan(entry: dict[str, Any], path: str) -> tuple[LoaderScenario, Any, Any]:
    """The scenario, component and ``ReproSetup`` of a loader entry, or the ReproError that says why none."""
    prop = entry["property"]
    if (entry.get("example") or {}).get("format") != LOADER_FORMAT:
        raise ReproError(f"{path}: {prop} is written for loader examples ({LOADER_FORMAT}) only")
    try:
        sc = decode_loader_scenario(entry["example"])
    except (KeyError, TypeError, ValueError) as e:
        raise ReproError(f"{path}: not a loader example ({e})") from None
    target = resolve(entry["target"])
    if target.unavailable:
        raise ReproError(f"{path}: target {entry['target']!r} is unavailable here: {target.unavailable}")
    component = target.component(entry["component"])
    setup = getattr(component, "repro_setup", None)
    # a repro_setup renders the construction of its own module's make_loader; a component whose make_loader was
    # replaced (a wrapper that changes what is built: the documented VeOmni target's drop_last=False) is not it
    if setup is not None and getattr(component.make_loader, "__module__", None) != setup.__module__:
        raise ReproError(f"{path}: component {entry['component']!r} of target {entry['target']!r} builds its loader "
                         f"with {component.make_loader.__module__}'s make_loader, not the construction its repro_setup "
                         f"renders ({setup.__module__}); write the script from the entry on the target that "
                         "renders it, or replay it instead: " + corpus.replay_command(path))
    if setup is None:
        raise ReproError(f"{path}: component {entry['component']!r} of target {entry['target']!r} renders no "
                         "standalone loader; loader components that do: veomni's loader:main, loader:worker and "
                         "loader:multisource (and the stream components of litdata and hf-iterable)")
    why = component.unsupported(sc) or component.skip.get(prop)
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
    return _each_epoch_once([head], "[sid for ee, step in resumed if ee == e for mb in step for sid in mb]",
                            sc.dp_size, ["twice", "foreign", "lost"], "",
                            "first difference: epoch {e}: {sorted(twice)} twice, {sorted(foreign)} foreign, "
                            "{sorted(lost)} left out")


def _write_loader(entry: dict[str, Any], path: str, sc: LoaderScenario, component: Any, code: Any) -> str:
    """A loader example of loader_resume or exactly_once under the adversarial schedule (``run_schedule``), judged
    as ``loader_suite`` judges it; the epoch-end restores ``with_boundary_restores`` adds are computed here, by the
    harness's own run, and written as literals."""
    prop = entry["property"]
    at_end = ", at_epoch_end=True" if sc.restore_at_epoch_end else ""
    ordered = prop == "loader_resume" and (component.promises_order if sc.in_order
                                           else component.promises_order_under_out_of_order)
    if ordered:
        if component.signature is not None:
            raise ReproError(f"{path}: {component.name} compares a signature of each step, not its ids: "
                             "a script compares ids only")
        plain, with_ends = L.with_boundary_restores(component.make_loader, sc, ids_of=component.ids_of or
                                                    L.default_ids_of, codec=component.state_codec)
        points = list(with_ends.checkpoints)
        ends = L.epoch_boundaries(plain)
        schedule = (f"uninterrupted = run([])\nresumed = run({points}{at_end})  # as drawn, {list(sc.checkpoints)}, and "
                    f"at the uninterrupted run's epoch ends, {ends}\n")
        judge = _judge_exact("step")
    else:
        points = list(sc.checkpoints)
        schedule = f"uninterrupted = run([])\nresumed = run({points}{at_end})\n"
        judge = _judge_loader_once(sc)
    view = dataclasses.replace(sc, checkpoints=tuple(points))
    loop = _loop(view, code.ids, code.epoch_hook, close="def close(" not in code.code, unit="step")
    stdlib = [f"import {m}" for m in sorted({"pickle", "sys", *code.stdlib})]
    finding = _finding_of(entry, path)
    # the schedule is the only one written for loader examples (the adversarial one): the script's loop says it
    header = _header({**entry, "finding": finding} if finding else entry, code.library, path, None)
    body = [header, "", *stdlib, "", *code.imports, "", f"EPOCHS = {sc.epochs}", code.code.rstrip(), "", loop, "",
            schedule.rstrip(), judge.rstrip()]
    return "\n".join(body) + "\n"


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
            _loader_plan(entry, "FILE.json")   # without the harness's run that write() makes
        else:
            write(entry)
    except Exception:  # noqa: BLE001 - any refusal or a target not installed: no command to offer
        return False
    return True


def command(path: str) -> str:
    return f"python -m properties repro {shlex.quote(str(path))}"
