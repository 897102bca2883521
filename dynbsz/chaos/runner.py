"""The chaos runner: start the ranks of a trial, let them kill themselves, restart, judge.

Per trial (one ``ChaosConfig`` and seed):

1. an uninterrupted run of ``max_steps`` steps (the reference);
2. attempts: each draws a kill (kind, rank, step) that can happen in this configuration, with
   the least-used kinds first, and starts every rank from the last *complete* checkpoint (every
   rank's file for that step exists and verifies; a final-named file that does not verify is a
   broken atomic write and fails the trial). When one rank dies, the runner SIGKILLs the other
   ranks' process groups at whatever point they are (a torn log line they leave is cut, the
   ``*.tmp`` files of their checkpoint writes are removed). After ``kills_per_trial`` kills the
   last attempt runs to the end;
3. before each restart, damaged copies of the checkpoint it restarts from must be refused with
   the named error: cut short (``CheckpointTruncatedError``), one bit flipped (a
   ``CheckpointError``), another format version (``CheckpointFormatError``), and one made by a
   foreign loader: another seed, budget, dataset of the same size, or gate, in turn
   (``StateMismatchError``, leaving the loader untouched); the genuine file must load;
4. the judge (``dynbsz.chaos.judge``) compares the surviving steps with the reference.

Every attempt has a deadline: a hang is killed and reported, never passed. Rank processes are
forked from a forkserver that has torch and dynbsz imported, so a restart costs milliseconds,
not the second and a half of a fresh interpreter.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
import tempfile
import time
import warnings
from collections import Counter
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..checkpoint import HEADER, MAGIC, VERSION, encode_checkpoint, load_checkpoint, read_checkpoint, remove_temporaries
from ..errors import CheckpointError, CheckpointFormatError, CheckpointTruncatedError, StateMismatchError
from ..order import rank_order
from . import trainer
from .judge import Verdict, judge_rank, read_log, reference_steps, surviving_steps
from .trainer import FOREIGN, KINDS, ChaosConfig, KillPlan, RunSpec

CORE = tuple((runtime, in_order, dp) for runtime in ("main", "worker") for in_order in (True, False) for dp in (1, 2))
DEFAULT_MAX_STEPS = 15
DEFAULT_CHECKPOINT_EVERY = 3


def draw_configs(trials: int, rng: np.random.Generator) -> list[ChaosConfig]:
    """Stratified: the 8 (runtime, in_order, dp) combinations in a seeded order, cycled; workers,
    persistence and warm-up drawn per trial."""
    order = rng.permutation(len(CORE))
    out = []
    for t in range(trials):
        runtime, in_order, dp = CORE[order[t % len(CORE)]]
        workers = int(rng.integers(0, 4))
        persistent = bool(workers and rng.integers(2))
        warmup = bool(runtime == "main" and rng.integers(2))
        out.append(ChaosConfig(runtime, in_order, workers, persistent, warmup, dp))
    return out


@dataclass
class TrialResult:
    index: int
    config: dict
    label: str
    seed: int
    kills: list[dict] = field(default_factory=list)       # {"kind", "rank", "step", "attempt"}
    starts: list[int] = field(default_factory=list)       # the checkpoint step each attempt started from
    missed: list[dict] = field(default_factory=list)      # planned kills that never came (the run ended first)
    epochs: int = 0                                        # epochs the reference run reached
    refused: int = 0
    accepted: int = 0
    torn_writes: int = 0                                   # checkpoint temporaries left by killed writers
    hung: int = 0
    verdict: Verdict = field(default_factory=Verdict)
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.verdict.ok and not self.accepted and not self.hung

    def to_json(self) -> dict:
        d = asdict(self)
        d["verdict"] = asdict(self.verdict)
        d["ok"] = self.ok
        return d


@dataclass
class ChaosReport:
    seed: int
    results: list[TrialResult] = field(default_factory=list)
    wall_s: float = 0.0

    def to_json(self) -> dict:
        kinds = Counter(k["kind"] for r in self.results for k in r.kills)
        total = Verdict()
        for r in self.results:
            total.add(r.verdict)
        return {
            "trials": len(self.results),
            "kills": sum(kinds.values()),
            "kills_by_kind": {k: kinds.get(k, 0) for k in KINDS},
            "configs": len({r.label for r in self.results}),
            "lost": total.lost,
            "duplicated": total.duplicated,
            "trajectory_mismatches": total.trajectory_mismatches,
            "refused_checkpoints": sum(r.refused for r in self.results),
            "accepted_checkpoints": sum(r.accepted for r in self.results),
            "hung": sum(r.hung for r in self.results),
            "restarts": sum(max(0, len(r.starts) - 1) for r in self.results),
            "torn_writes": sum(r.torn_writes for r in self.results),
            "missed_kills": sum(len(r.missed) for r in self.results),
            "failures": [f"trial {r.index} ({r.label}): {p}" for r in self.results for p in r.verdict.problems],
            "ok": self.ok,
            "seed": self.seed,
            "wall_s": round(self.wall_s, 2),
            "trial_results": [r.to_json() for r in self.results],
        }

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)


# ---- processes ----------------------------------------------------------------------------------

def _context():
    ctx = mp.get_context("forkserver")
    # what every rank imports, once: torch.optim pulls in torch._dynamo (~1.8 s) on first use
    ctx.set_forkserver_preload(["torch._dynamo", "torch.distributed", "dynbsz.chaos.trainer"])
    return ctx


def warm_up() -> None:
    """Start the forkserver and wait until it has imported what the ranks need (a few seconds,
    once per process), so that no attempt's deadline pays for it."""
    p = _context().Process(target=os.getpid)
    p.start()
    p.join()


def _kill_group(pid: int | None) -> None:
    if pid is None:
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def live_in_group(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that are still alive (zombies waiting for init to reap them do
    not count: they hold nothing). Linux /proc; elsewhere nothing is reported."""
    out = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        state, _, group = stat[stat.rindex(")") + 2:].split()[:3]
        if int(group) == pgid and state not in ("Z", "X"):
            out.append(int(entry))
    return out


def _leftovers(pids: list[int], wait_s: float = 5.0) -> list[int]:
    """Members of the ranks' process groups still alive after they were killed (SIGKILL lands
    asynchronously: give it a moment)."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = [q for pid in pids for q in live_in_group(pid)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


@dataclass
class Outcome:
    status: str                      # "done", "killed", "crashed", "hung"
    exitcodes: list
    detail: str = ""
    kill: dict | None = None


def run_attempt(spec: RunSpec, timeout_s: float) -> Outcome:
    """Start every rank, wait for them (or the deadline); when one rank fails, kill the others'
    process groups. Classify what happened from exit codes and the logs."""
    ctx = _context()
    world = spec.config.dp
    before = [_log_size(spec.directory, r) for r in range(world)]
    procs = [ctx.Process(target=trainer.child_main, args=(r, spec), name=f"chaos-r{r}-a{spec.attempt}")
             for r in range(world)]
    deadline = time.monotonic() + timeout_s
    hung = False
    try:
        for p in procs:
            p.start()
        running = list(procs)
        while running:
            left = deadline - time.monotonic()
            if left <= 0:
                hung = True
                break
            wait([p.sentinel for p in running], timeout=left)
            for p in [p for p in running if p.exitcode is not None]:
                running.remove(p)
                if p.exitcode != 0:
                    for q in running:
                        _kill_group(q.pid)
    finally:
        for p in procs:
            if p.pid is None:
                continue   # never started
            if p.exitcode is None:
                _kill_group(p.pid)
            p.join(timeout=30)
            _kill_group(p.pid)   # orphaned DataLoader workers of a rank that died on its own
    codes = [p.exitcode for p in procs]
    leaked = _leftovers([p.pid for p in procs if p.pid is not None])
    if leaked:
        for p in procs:
            _kill_group(p.pid)
        return Outcome("crashed", codes, f"processes {leaked} outlived their rank's process group being killed")
    news = [_new_records(spec.directory, r, before[r]) for r in range(world)]
    kills = [rec for recs in news for rec in recs if rec.get("type") == "kill"]
    if hung:
        return Outcome("hung", codes, f"ranks still running after {timeout_s:.0f} s (exit codes {codes})")
    if kills:
        k = kills[0]
        if len(kills) == 1 and spec.kill is not None and k["rank"] == spec.kill.rank and \
                codes[k["rank"]] == -signal.SIGKILL:
            return Outcome("killed", codes, kill=k)
        return Outcome("crashed", codes, f"unplanned kill records {kills} (exit codes {codes})")
    if all(c == 0 for c in codes):
        done = [any(rec.get("type") == "done" for rec in recs) for recs in news]
        if all(done):
            return Outcome("done", codes)
        return Outcome("crashed", codes, f"exited 0 without finishing (done per rank: {done})")
    return Outcome("crashed", codes, f"exit codes {codes}: {_stderr_tail(spec)}")


def _log_size(directory: str, rank: int) -> int:
    path = trainer.log_path(directory, rank)
    return path.stat().st_size if path.exists() else 0


def _new_records(directory: str, rank: int, offset: int) -> list[dict]:
    """Records an attempt appended; a torn last line (the rank was killed inside a write) is cut."""
    path = trainer.log_path(directory, rank)
    if not path.exists():
        return []
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        os.truncate(path, keep)
        data = data[:keep]
    import json

    return [json.loads(line) for line in data[offset:].splitlines() if line]


def _stderr_tail(spec: RunSpec) -> str:
    tails = []
    for r in range(spec.config.dp):
        path = Path(spec.directory) / f"err-r{r}-a{spec.attempt}.txt"
        if path.exists():
            text = path.read_text(errors="replace").strip()
            if text:
                tails.append(f"rank {r}: {text[-600:]}")
    return " | ".join(tails) or "(no stderr)"


# ---- checkpoints --------------------------------------------------------------------------------

def latest_complete(directory: str, world: int) -> tuple[int, list[str]]:
    """The newest step every rank has a verifying checkpoint for (0: none), and any final-named
    file that does not verify (a broken atomic write: must never happen)."""
    ckpt = trainer.checkpoint_dir(directory)
    if not ckpt.exists():
        return 0, []
    steps: dict[int, set] = {}
    for path in ckpt.glob("ckpt-r*-s*.pt"):
        rank, step = path.stem[len("ckpt-r"):].split("-s")
        steps.setdefault(int(step), set()).add(int(rank))
    broken = []
    for step in sorted(steps, reverse=True):
        if steps[step] != set(range(world)):
            continue
        good = True
        for rank in range(world):
            path = trainer.checkpoint_path(directory, rank, step)
            try:
                read_checkpoint(path)
            except CheckpointError as e:
                broken.append(f"{path.name}: {e}")
                good = False
        if good:
            return step, broken
    return 0, broken


def check_refusals(config: ChaosConfig, seed: int, max_steps: int, path: Path, scratch: Path,
                   rng: np.random.Generator, foreign: str) -> tuple[int, int, list[str]]:
    """Damaged copies of ``path`` must each be refused with the named error; the genuine one must
    load. Returns (refused, accepted, problems)."""
    rank = int(path.stem[len("ckpt-r"):].split("-s")[0])
    step = int(path.stem.split("-s")[1])
    data = path.read_bytes()
    scratch.mkdir(parents=True, exist_ok=True)
    refused = accepted = 0
    problems: list[str] = []

    def fresh():
        model = trainer.make_model(seed)
        return model, trainer.make_optimizer(model), trainer.make_loader(config, seed, rank, max_steps)

    flipped = bytearray(data)
    bit = int(rng.integers(len(data) * 8))
    flipped[bit // 8] ^= 1 << (bit % 8)
    header = HEADER.unpack_from(data)
    version = HEADER.pack(MAGIC, VERSION + 1, header[2], header[3]) + data[HEADER.size:]
    genuine = read_checkpoint(path)
    other = trainer.foreign_loader(config, seed, rank, max_steps, foreign)
    foreign_bytes = encode_checkpoint(model=genuine["model"], optimizer=genuine["optimizer"], loader=other,
                                      extra=genuine["extra"])
    cases: list[tuple[str, bytes, type]] = [
        ("truncated", data[:int(rng.integers(len(data)))], CheckpointTruncatedError),
        (f"bit {bit} flipped", bytes(flipped), CheckpointError),
        (f"format version {VERSION + 1}", version, CheckpointFormatError),
        (f"foreign ({foreign})", foreign_bytes, StateMismatchError),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for what, blob, expected in cases:
            copy = scratch / f"damaged-{path.name}"
            copy.write_bytes(blob)
            model, opt, loader = fresh()
            weights = {k: v.clone() for k, v in model.state_dict().items()}
            try:
                load_checkpoint(copy, model=model, optimizer=opt, loader=loader)
            except expected:
                refused += 1
                untouched = loader.steps == 0 and all((model.state_dict()[k] == v).all() for k, v in weights.items())
                if not untouched:
                    problems.append(f"{path.name} {what}: refused, but the model or loader was changed")
            except Exception as e:  # refused, but not with the error that names the problem
                problems.append(f"{path.name} {what}: expected {expected.__name__}, got {type(e).__name__}: {e}")
            else:
                accepted += 1
                problems.append(f"{path.name} {what}: ACCEPTED a damaged or foreign checkpoint")
            finally:
                loader.close()
        model, opt, loader = fresh()
        try:
            load_checkpoint(path, model=model, optimizer=opt, loader=loader)
            if loader.steps != step:
                problems.append(f"{path.name}: genuine checkpoint restored the loader at step {loader.steps}")
        except Exception as e:
            problems.append(f"{path.name}: the genuine checkpoint did not load: {type(e).__name__}: {e}")
        finally:
            loader.close()
    return refused, accepted, problems


# ---- kills --------------------------------------------------------------------------------------

def drain_starts(steps: Sequence[dict]) -> list[int]:
    """Indices of the steps that begin an end-of-epoch drain (their first drained micro-batch)."""
    out, prev = [], None
    for rec in steps:
        drained = any(rec["drained"])
        if drained and not (prev is not None and any(prev["drained"]) and prev["epoch"] == rec["epoch"]):
            out.append(rec["step"])
        prev = rec
    return out


def plan_kill(config: ChaosConfig, rng: np.random.Generator, resume: int, max_steps: int, every: int,
              reference: list[list[dict]], used: Counter, remaining: int = 1) -> KillPlan | None:
    """A kill that can happen after ``resume`` in this configuration, least-used kinds first.

    With ``remaining`` kills still to come the step is drawn from the next 1/remaining of the
    steps left (at least one checkpoint interval), so the kills of a trial spread over the run
    instead of the first one landing at the end and leaving nothing to kill."""
    rank = int(rng.integers(config.dp))
    window_end = resume + max(every + 1, -(-(max_steps - resume) // max(1, remaining)))
    options: dict[str, list[int]] = {}
    for kind in config.kinds():
        if kind in ("between_steps", "prefetch"):
            at = list(range(resume, max_steps))
        elif kind == "mid_checkpoint":
            at = [k - 1 for k in range(every, max_steps + 1, every) if k > resume]
        else:
            starts = [s for s in drain_starts(reference[rank]) if s >= resume]
            # out of order an epoch may end a step earlier than in the reference: arm one step early
            at = [max(resume, s - (0 if config.in_order else 1)) for s in starts]
        if at:
            options[kind] = [a for a in at if a < window_end] or [min(at)]
    if not options:
        return None
    fewest = min(used[k] for k in options)
    kinds = [k for k in KINDS if k in options and used[k] == fewest]
    kind = kinds[int(rng.integers(len(kinds)))]
    return KillPlan(kind, rank, int(rng.choice(options[kind])))


# ---- trials -------------------------------------------------------------------------------------

def shards(config: ChaosConfig, seed: int, rank: int, epochs: int) -> dict[int, list[int]]:
    trace = trainer.make_dataset(seed, config.dp).trace
    n = len(trace)
    return {e: trace.ids[rank_order(n, seed, e, rank, config.dp)].tolist() for e in range(epochs)}


def run_trial(index: int, config: ChaosConfig, seed: int, directory: Path, *, kills: int, max_steps: int,
              every: int, timeout_s: float, used: Counter, rng: np.random.Generator,
              sabotage: str | None = None) -> TrialResult:
    t0 = time.perf_counter()
    result = TrialResult(index, config.to_dict(), config.label(), seed)
    problems = result.verdict.problems

    def spec(where: Path, attempt: int, resume: int, kill: KillPlan | None, sabotage: str | None = None) -> RunSpec:
        where.mkdir(parents=True, exist_ok=True)
        return RunSpec(config, seed, max_steps, every, str(where), attempt, resume, kill,
                       store=str(where / f"store-a{attempt}") if config.dp > 1 else None, timeout_s=timeout_s,
                       sabotage=sabotage)

    ref_dir, run_dir = directory / "reference", directory / "run"
    out = run_attempt(spec(ref_dir, 0, 0, None), timeout_s)
    if out.status != "done":
        result.hung += out.status == "hung"
        problems.append(f"uninterrupted run {out.status}: {out.detail}")
        result.wall_s = time.perf_counter() - t0
        return result
    reference = [reference_steps(read_log(trainer.log_path(ref_dir, r))) for r in range(config.dp)]
    result.epochs = max(rec["epoch"] for steps in reference for rec in steps) + 1

    resume, attempt = 0, 0
    while True:
        if attempt > kills + 2:
            problems.append(f"gave up after {attempt} attempts")
            break
        left = kills - len(result.kills)
        plan = plan_kill(config, rng, resume, max_steps, every, reference, used, left) if left > 0 else None
        if resume:
            refused, accepted, bad = check_refusals(config, seed, max_steps,
                                                    trainer.checkpoint_path(run_dir, 0, resume), directory / "damaged",
                                                    rng, FOREIGN[len(result.starts) % len(FOREIGN)])
            result.refused += refused
            result.accepted += accepted
            problems.extend(bad)
        result.starts.append(resume)
        out = run_attempt(spec(run_dir, attempt, resume, plan, sabotage), timeout_s)
        attempt += 1
        result.torn_writes += len(remove_temporaries(trainer.checkpoint_dir(run_dir)))
        if out.status == "killed":
            result.kills.append({"kind": out.kill["kind"], "rank": out.kill["rank"], "step": out.kill["step"],
                                 "attempt": out.kill["attempt"]})
            used[out.kill["kind"]] += 1
            resume, broken = latest_complete(str(run_dir), config.dp)
            problems.extend(f"checkpoint with its final name does not verify: {b}" for b in broken)
            continue
        if out.status == "done":
            if plan is not None:
                result.missed.append(asdict(plan))
            break
        result.hung += out.status == "hung"
        problems.append(f"attempt {attempt - 1} {out.status}: {out.detail}")
        break

    if out.status == "done":
        for rank in range(config.dp):
            survivors, gaps = surviving_steps(read_log(trainer.log_path(run_dir, rank)))
            problems.extend(f"rank {rank}: {g}" for g in gaps)
            # out of order an epoch may end a little earlier or later than in the reference
            ref_shards = shards(config, seed, rank, result.epochs + 3)
            result.verdict.add(judge_rank(survivors, max_steps=max_steps, shards=ref_shards, rank=rank,
                                          reference=reference[rank] if config.in_order else None))
            # the oracle checks the reference itself too: it must deliver exactly once
            ref_verdict = judge_rank({rec["step"]: rec for rec in reference[rank]}, max_steps=max_steps,
                                     shards=ref_shards, rank=rank)
            if not ref_verdict.ok:
                problems.append(f"rank {rank}: the uninterrupted run itself fails: {asdict(ref_verdict)}")
    result.wall_s = time.perf_counter() - t0
    return result


def run_chaos(trials: int = 16, seed: int = 0, *, kills_per_trial: int = 4, configs: Sequence[ChaosConfig] | None = None,
              work_dir: str | os.PathLike | None = None, max_steps: int = DEFAULT_MAX_STEPS,
              checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY, timeout_s: float = 120.0,
              progress: Callable[[TrialResult, int], Any] | None = None, sabotage: str | None = None) -> ChaosReport:
    """Run ``trials`` trials (configurations drawn from ``seed`` unless ``configs`` is given, one
    trial each) and judge them. Work files go under ``work_dir`` (kept) or a temporary
    directory (removed). ``sabotage`` (tests only) breaks every restart on purpose
    (``RunSpec.sabotage``): the report must then fail."""
    t0 = time.perf_counter()
    rng = np.random.default_rng([seed, 13])
    if configs is None:
        configs = draw_configs(trials, rng)
    configs = list(configs)
    root = Path(work_dir) if work_dir is not None else Path(tempfile.mkdtemp(prefix="dynbsz-chaos-"))
    root.mkdir(parents=True, exist_ok=True)
    report = ChaosReport(seed)
    used: Counter = Counter()
    try:
        warm_up()
        for i, config in enumerate(configs):
            trial_seed = int(rng.integers(2**31))
            result = run_trial(i, config, trial_seed, root / f"trial-{i:03d}", kills=kills_per_trial,
                               max_steps=max_steps, every=checkpoint_every, timeout_s=timeout_s, used=used,
                               rng=np.random.default_rng([seed, i, 1]), sabotage=sabotage)
            report.results.append(result)
            if progress is not None:
                progress(result, len(configs))
    finally:
        if work_dir is None:
            shutil.rmtree(root, ignore_errors=True)
    report.wall_s = time.perf_counter() - t0
    return report
