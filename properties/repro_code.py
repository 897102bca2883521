"""The pieces every ``python -m properties repro`` script is made of: the schedule's loop, the judgements, the header.

Shared by the stream writer (``properties.repro``) and the loader writer (``properties.repro_loader``): each piece is
rendered here once, as plain code with the example's values as literals.
"""

from __future__ import annotations

import functools
import textwrap
from pathlib import Path
from typing import Any, Callable

from . import corpus
from .scenarios import LoaderScenario
from .stream_scenarios import StreamScenario
from .targets import resolve
from .targets.patched import ROOT
from .targets.studies import fix_diff


class ReproError(ValueError):
    """An entry this generator cannot write a script for; the message names what it supports."""


def close_lines(sc: StreamScenario) -> list[str]:
    """``close(loader)``, as ``loader_targets.shutdown_workers``: a restarted job's workers are gone before the new
    loader starts its own (outcomes can differ while the old ones live: H8's example, a race, passed in every run
    tried that way, and fails in most with them stopped)."""
    if not sc.num_workers:
        return []
    return ["def close(loader):  # a restarted job's old workers are gone before the new loader starts its own",
            "    getattr(loader._iterator, '_shutdown_workers', lambda: None)()", "    loader._iterator = None", ""]


def schedule_loop(sc: StreamScenario | LoaderScenario, ids: str, epoch_hook: str | None, restores: bool = True,
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
    lines = close_lines(sc) if close else []
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


def judge_per_epoch() -> str:
    return EPOCH_IDS + SHOW + textwrap.dedent("""\
        for e in range(EPOCHS):
            a, b = sorted(epoch_ids(uninterrupted, e)), sorted(epoch_ids(resumed, e))
            if a != b:  # each epoch the same samples, in any order
                print(f'first difference: epoch {e}: uninterrupted {a} vs preempted {b}')
                sys.exit(1)
        """)


def without_def(code: str, name: str) -> str:
    """``code`` without its top-level ``def name(...)`` block (to the next blank line), where it has one."""
    lines, out, skipping = code.splitlines(), [], False
    for line in lines:
        if line.startswith(f"def {name}("):
            skipping = True
        elif skipping and not line.strip():
            skipping = False
            continue
        if not skipping:
            out.append(line)
    return "\n".join(out)


EPOCH_IDS = "def epoch_ids(steps, e):\n    return [sid for ee, batch in steps if ee == e for sid in batch]\n"
SHOW = "print(f'uninterrupted: {uninterrupted}\\nresumed:       {resumed}')\n"


def judge_exact(unit: str = "batch") -> str:
    """Step for step: ``unit`` names what the loader yields (a batch, or a loader's step)."""
    return SHOW + textwrap.dedent("""\
        k = next((k for k, (a, b) in enumerate(zip(uninterrupted, resumed)) if a != b), min(map(len, (uninterrupted, resumed))))
        if uninterrupted != resumed:  # UNIT for UNIT
            print(f'first difference: UNIT {k}: uninterrupted {uninterrupted[k:k + 1]} vs resumed {resumed[k:k + 1]}')
        sys.exit(0 if uninterrupted == resumed else 1)
        """).replace("UNIT", unit)


def judge_once() -> str:
    return EPOCH_IDS + "\n" + SHOW + textwrap.dedent("""\
        for e in range(EPOCHS):
            a, b = epoch_ids(uninterrupted, e), epoch_ids(resumed, e)
            if len(set(b)) != len(b) or set(a) != set(b):  # each epoch's samples once, in any order
                print(f'first difference: epoch {e} lost {sorted(set(a) - set(b))}, delivered '
                      f'{sorted(set(b) - set(a))} the uninterrupted run did not, {sorted({s for s in b if b.count(s) > 1})} twice')
                sys.exit(1)
        """)


def each_epoch_once(head: list[str], got: str, dp_size: int, judged: list[str], note: str, complaint: str,
                    show: str = SHOW) -> str:
    """Each epoch of the resumed run: ``got`` its sample ids; ``judged`` which of twice, foreign (not in ALL) and
    lost (in ALL, not delivered) fail it; with several DP ranks only ``twice`` is known. ``show``: the statements
    that print the runs before the judgement."""
    body = ["for e in range(EPOCHS):", f"    got = {got}",
            "    twice, foreign, lost = {s for s in got if got.count(s) > 1}, "
            + ("set(got) - ALL, ALL - set(got)" if dp_size == 1 else "set(), set()"),
            f"    if {' or '.join(judged)}:{note}", f"        print(f'{complaint}')", "        sys.exit(1)"]
    return "\n".join(head) + "\n" + show + "\n".join(body) + "\n"


def as_preempted(judge: str) -> str:
    """A judgement of the ``resumed`` run as one of the ``preempted`` run (a trainer model's restarted job)."""
    return judge.replace("resumed:       ", "preempted:     ").replace("resumed", "preempted")


def fix_of(entry: dict[str, Any]) -> str | None:
    """The fix the harness proposes for the entry's finding: its diff in a study's patches/, as a path from the
    checkout (None: none proposed)."""
    diff = fix_diff(entry["finding"]) if entry.get("finding") else None
    return None if diff is None else diff.relative_to(ROOT).as_posix()


def header(entry: dict[str, Any], library: str, path: str, schedule: str | None) -> str:
    # a crash's message carries the worker's traceback, with this machine's paths: its first line is the finding
    message = " ".join(str(entry.get("message", "")).split("Original Traceback")[0].split())
    message = message if len(message) <= 150 else message[:147] + "..."
    finding = f", {entry['finding']}" if entry.get("finding") else ""
    # file names stay whole on one line (a reader copies them; tests/test_repros.py finds them)
    fill = functools.partial(textwrap.fill, width=116, break_on_hyphens=False, break_long_words=False)
    fix = fix_of(entry)
    source = f"{Path(path).name} ({schedule})" if schedule else Path(path).name
    text = [fill(f"{library}{finding}: {entry['property']} fails: {message}"),
            fill((f"The fix proposed: {fix.rstrip('.')}. " if fix else "")
                 + f"Written by `python -m properties repro` from {source}; exits 1 while the "
                 + (f"behaviour is present (not a bug: {entry['deviation']}), 0 if it changes."
                    if entry.get("deviation") else "bug is present, 0 once it is fixed.")
                 + (" With 2+ workers the outcome can depend on timing: run it a few times."
                    if corpus.timing_may_matter(entry) else ""))]
    return '"""' + "\n\n".join(text) + '\n"""'


def example_and_component(entry: dict[str, Any], path: str, fmt: str, decode: Callable[[dict], Any],
                          kind: str) -> tuple[Any, Any]:
    """The entry's example decoded (``decode``, for examples of format ``fmt``) and its component, or the
    ReproError that says why a script cannot be written from it (``kind``: "loader" or "packer", for the message)."""
    if (entry.get("example") or {}).get("format") != fmt:
        raise ReproError(f"{path}: {entry['property']} is written for {kind} examples ({fmt}) only")
    try:
        example = decode(entry["example"])
    except (KeyError, TypeError, ValueError) as e:
        raise ReproError(f"{path}: not a {kind} example ({e})") from None
    target = resolve(entry["target"])
    if target.unavailable:
        raise ReproError(f"{path}: target {entry['target']!r} is unavailable here: {target.unavailable}")
    return example, target.component(entry["component"])
