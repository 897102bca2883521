"""``fuzz``: a long run for new policies. Every applicable property, round after round, each
round with a fresh seed and more examples, until the time is up; every failure is saved
to the corpus and its property retired (the saved file replays it from then on).

The fuzz profile adds Hypothesis's target phase, which the packer suite guides towards
long runs and full buffers (``hypothesis.target`` on micro-batches and peak buffer size).
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable

from hypothesis import settings

from . import corpus, profiles, verdicts
from .runner import Result, RunSettings, plan, run_property, skip_reason, skipped
from .targets.base import Target
from .watchdog import DEFAULT_STEP_TIMEOUT_S

FIRST_CHUNK = 100   # examples per property in the first round; doubled every round
MIN_CHUNK = 10


@dataclass
class PairStats:
    property: str
    component: str
    examples: int = 0
    seconds: float = 0.0
    rounds: int = 0
    failure: Result | None = None
    status: str = "pass"


@dataclass
class FuzzReport:
    target: str
    seed: int
    minutes: float
    rounds: int = 0
    pairs: list[PairStats] = field(default_factory=list)
    saved: list[str] = field(default_factory=list)
    skipped: list[Result] = field(default_factory=list)
    #: with ``--workers N``: per worker process, its pairs' examples and seconds (``fuzz_workers``)
    workers: list[dict] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(p.failure is not None for p in self.pairs)


def fuzz(target: Target, minutes: float, *, seed: int, corpus_dir: str | Path | None, only: Iterable[str] | None = None,
         database: str | None = None, profile: str = "fuzz", clock: Callable[[], float] = time.monotonic,
         progress: Callable[[str], None] = lambda line: None,
         step_timeout_s: float | None = DEFAULT_STEP_TIMEOUT_S, components: Iterable[str] | None = None,
         shard: tuple[int, int] = (0, 1), rounds: int | None = None) -> FuzzReport:
    """Round-robin over the (property, component) pairs until ``minutes`` have passed (``only`` and
    ``components`` narrow them, as ``check``'s do). Round r uses seed ``seed + r``; a run is sized to the time
    left from the pair's measured rate. ``step_timeout_s``: the wall-time bound on a loader's iter() and next()
    (``properties.watchdog``). ``shard=(i, n)``: only the pairs at positions i, i + n, ... of the plan (the
    skipped ones reported by shard 0), so n processes share a campaign (``properties.fuzz_workers``); a pair
    runs with the same seeds whatever the shard. ``rounds``: stop after that many rounds if the time is not up
    first (a fixed amount of work: with time to spare every pair runs the same examples with the same seeds,
    however many processes share the campaign)."""
    index, count = shard
    if rounds is not None and (isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1):
        raise ValueError(f"rounds={rounds!r}: a whole number of rounds >= 1, or None (until the time is up)")
    if not (0 <= index < count):
        raise ValueError(f"shard={shard}: the index must be in 0..{count - 1}")
    profiles.register()
    ceiling = settings.get_profile(profile).max_examples
    deadline = clock() + 60.0 * minutes
    report = FuzzReport(target.name, seed, minutes)
    live: list[tuple] = []
    for position, (prop, component) in enumerate(plan(target, only, components)):
        reason = skip_reason(target, prop, component)
        if reason:
            if index == 0:
                report.skipped.append(skipped(target, prop, component, reason))
            continue
        if position % count != index:
            continue
        stats = PairStats(prop.name, component.name)
        report.pairs.append(stats)
        live.append((prop, component, stats))
    chunk = FIRST_CHUNK
    while live and clock() < deadline and (rounds is None or report.rounds < rounds):
        for prop, component, stats in list(live):
            left = deadline - clock()
            if left <= 0:
                break
            # A loader example costs what a few packer examples do: start its first round smaller.
            n = min(prop.examples_for(chunk), ceiling)
            if stats.examples and stats.seconds > 0:  # fit the run into the time left
                n = max(MIN_CHUNK, min(n, int(left * stats.examples / stats.seconds)))
            rs = RunSettings(profile=profile, seed=seed + report.rounds, max_examples=n, database=database,
                             step_timeout_s=step_timeout_s)
            started = clock()
            result = run_property(target, prop, component, rs)
            stats.seconds += clock() - started
            stats.examples += result.examples
            stats.rounds += 1
            if result.status == "fail":
                result = verdicts.classify(target, result)
                if corpus_dir is not None and result.saveable:
                    path = corpus.save(result, corpus_dir)
                    result = replace(result, file=str(path), replay=corpus.replay_command(path))
                    report.saved.append(str(path))
                else:  # nothing to save (a flaky failure, or no corpus): the search itself replays it
                    result = replace(result, replay=" ".join(shlex.quote(a) for a in (
                        "python", "-m", "properties", "check", "--target", target.name, "--property", prop.name,
                        "--profile", profile, "--seed", str(rs.seed), "--max-examples", str(n))))
                stats.failure, stats.status = result, "fail"
                live.remove((prop, component, stats))
                progress(f"FAIL {prop.name}[{component.name}]: {result.message}\n  replay: {result.replay}")
        report.rounds += 1
        progress(f"round {report.rounds}: {sum(p.examples for p in report.pairs)} examples, "
                 f"{len(live)} properties still passing, {max(0.0, deadline - clock()):.0f}s left")
        chunk *= 2
    return report
