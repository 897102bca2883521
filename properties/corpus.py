"""The regression corpus: every failure as a small JSON file, and the one command that replays it.

A file holds the serialized minimal example (for packers: config, gate spec, stream,
restore points), the target, component and property it failed, the Hypothesis seed
and blob, and what is expected of it: it fails on the target it was found on (for a
mutant: the example still has teeth) and passes on ``dynbsz`` (a bug found anywhere
is a regression test for the production code). The project's tests replay every file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shlex
from pathlib import Path
from typing import Any, Callable, Iterable

from dynbsz.paths import cache_dir

from . import suite
from .runner import Result, hypothesis_version, replay_example
from .targets import TargetError, resolve
from .targets.patched import PatchSet
from .targets.studies import patch_set_of
from .trainers import only as only_trainers

FORMAT = "properties.regression/1"
#: The project's own corpus: what its tests replay. ``check`` and ``fuzz`` write here only when asked
#: (``--corpus tests/regressions``); by default a failure goes to ``failures_dir()``, outside the checkout.
DEFAULT_CORPUS = "tests/regressions"
REQUIRED = ("target", "property", "component", "example", "expect")


class CorpusError(ValueError):
    """A regression file is unreadable or malformed; the message names the file and the field."""


def failures_dir() -> Path:
    """Where ``check``, ``fuzz`` and the pytest plugin save failures unless a corpus is named:
    a scratch directory in the user's cache, so a run never adds or rewrites files in a checkout."""
    return cache_dir() / "failures"


def replay_command(path: str | Path) -> str:
    return f"python -m properties replay {shlex.quote(str(path))}"


def entry_for(result: Result) -> dict[str, Any]:
    if result.status != "fail" or result.minimal_example is None:
        raise ValueError(f"only a failure with an example can be saved, got status {result.status!r}")
    expect = {result.target: "fail"}
    if resolve("dynbsz").component(result.component) is not None:
        # dynbsz has the same component: the example is a regression test for the production code too
        expect.setdefault("dynbsz", "pass")
    return {"format": FORMAT, "target": result.target, "property": result.property, "component": result.component,
            "message": result.message, "expect": expect, "seed": result.seed, "blob": result.blob,
            "hypothesis": hypothesis_version(), "example": result.minimal_example}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


def _same_failure(path: Path, entry: dict[str, Any]) -> bool:
    """``path`` already holds this failure: same target, property, component and encoded example."""
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    keys = ("target", "property", "component", "example")
    return isinstance(old, dict) and all(old.get(k) == entry[k] for k in keys)


def path_for(result: Result, corpus_dir: str | Path) -> Path:
    """Where ``save`` writes this failure: named by its target, property, component and example, so a file
    that exists there already holds the same failure."""
    return _path_of(entry_for(result), corpus_dir)


def _path_of(entry: dict[str, Any], corpus_dir: str | Path) -> Path:
    digest = hashlib.sha256(json.dumps([entry["target"], entry["property"], entry["component"], entry["example"]],
                                       sort_keys=True).encode()).hexdigest()[:10]
    return Path(corpus_dir) / (f"{_slug(entry['property'])}-{_slug(entry['component'])}-{_slug(entry['target'])}"
                               f"-{digest}.json")


def save(result: Result, corpus_dir: str | Path) -> Path:
    """Write the failure to ``corpus_dir`` (created if needed). The name is derived from the content,
    so saving the same failure twice writes one file; a file that already holds the same failure
    (target, property, component, example) is left byte for byte as it is, even if the message,
    seed, blob or Hypothesis version of this run differ."""
    entry = entry_for(result)
    path = _path_of(entry, corpus_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not _same_failure(path, entry):
        path.write_text(dumps(entry))
    return path


def dumps(entry: dict[str, Any]) -> str:
    """One line per field, one line per sample of the stream: small files that diff well."""
    def compact(v: Any) -> str:
        return json.dumps(v, separators=(", ", ": "))

    lines = []
    for key, value in entry.items():
        if key == "example" and isinstance(value, dict):
            inner = []
            for k, v in value.items():
                if isinstance(v, list) and v and all(isinstance(x, list) for x in v):
                    rows = ",\n".join("   " + compact(x) for x in v)
                    inner.append(f"  {json.dumps(k)}: [\n{rows}\n  ]")
                else:
                    inner.append(f"  {json.dumps(k)}: {compact(v)}")
            lines.append(f" {json.dumps(key)}: {{\n" + ",\n".join(inner) + "\n }")
        else:
            lines.append(f" {json.dumps(key)}: {compact(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def load(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        entry = json.loads(path.read_text())
    except FileNotFoundError:
        raise CorpusError(f"{path}: no such regression file") from None
    except (OSError, ValueError) as e:
        raise CorpusError(f"{path}: not a readable JSON regression file ({e})") from None
    if not isinstance(entry, dict) or entry.get("format") != FORMAT:
        got = entry.get("format") if isinstance(entry, dict) else type(entry).__name__
        raise CorpusError(f"{path}: format is {got!r}, expected {FORMAT!r}")
    missing = [k for k in REQUIRED if k not in entry]
    if missing:
        raise CorpusError(f"{path}: missing field(s) {', '.join(missing)}")
    try:
        suite.get(entry["property"])
    except KeyError as e:
        raise CorpusError(f"{path}: {e.args[0]}") from None
    return entry


def files(corpus_dir: str | Path) -> list[Path]:
    return sorted(Path(corpus_dir).glob("*.json"))


def replay(entry: dict[str, Any], target: str | None = None, **kw: Any) -> Result:
    """Replay a loaded entry on its own target, or on ``target`` (``kw``: ``replay_example``'s, the wall-time
    bound). A ``:fixed`` target whose library is a patched copy (``targets.patched``) replays in a process
    that imports the copy. Raises TargetError for a bad target."""
    name = target or entry["target"]
    patch_set = patch_set_of(name)
    if patch_set is not None and patch_set.applied() is None and patch_set.installed():
        return replay_with_fixes(entry, patch_set, None, **kw)
    prop = suite.get(entry["property"])
    return replay_example(resolve(name), prop, entry["component"], entry["example"], **kw)


def replay_with_fixes(entry: dict[str, Any], patch_set: PatchSet, fixes: Iterable[str] | None,
                      **kw: Any) -> Result:
    """Replay the entry on the released adapter in a process whose library carries ``fixes`` of
    ``patch_set`` (None: all): how a pin shows that an example passes with its fix and fails without."""
    out = patch_set.call(fixes, "properties.corpus:replay_here", entry, patch_set.released, kw)
    return Result(**{**out, "trainers": tuple(out["trainers"])})


def replay_here(entry: dict[str, Any], target: str, kw: dict[str, Any]) -> dict[str, Any]:
    """``replay`` in this process, as the fields of its Result (what ``replay_with_fixes`` calls)."""
    return dataclasses.asdict(replay(entry, target, **kw))


def replay_until_with_fixes(entry: dict[str, Any], patch_set: PatchSet, fixes: Iterable[str] | None, status: str,
                            tries: int, trainer_names: Iterable[str] | None = None) -> Result:
    """``replay_until`` in one process whose library carries ``fixes`` of ``patch_set`` (None: all), under
    ``trainer_names`` only where given: a pin's "fails without its fix" (status 'fail', many tries where timing
    may matter) or "passes with every fix" (status 'fail' with few tries: the first failure, or the last pass)."""
    return replay_many_until_with_fixes([entry], patch_set, fixes, status, tries, trainer_names)[0]


def replay_many_until_with_fixes(entries: list[dict[str, Any]], patch_set: PatchSet, fixes: Iterable[str] | None,
                                 status: str, tries: int, trainer_names: Iterable[str] | None = None) -> list[Result]:
    """``replay_until_with_fixes`` for many entries in one process (one start-up and one import of the library)."""
    outs = patch_set.call(fixes, "properties.corpus:replay_until_here", entries, patch_set.released, status, tries,
                          list(trainer_names) if trainer_names is not None else None)
    return [Result(**{**out, "trainers": tuple(out["trainers"])}) for out in outs]


def replay_until_here(entries: list[dict[str, Any]], target: str, status: str, tries: int,
                      trainer_names: list[str] | None) -> list[dict[str, Any]]:
    """``replay_until`` of each entry on ``target`` in this process, as the fields of its Result."""
    with only_trainers(tuple(trainer_names) if trainer_names is not None else None):
        return [dataclasses.asdict(replay_until(entry, status, tries, lambda entry=entry: replay(entry, target)))
                for entry in entries]


def timing_may_matter(entry: dict[str, Any]) -> bool:
    """Whether the example's outcome can depend on timing: a loader scenario with two or more worker
    processes, where which batches are in flight at a checkpoint (and when a worker's stream ends) is
    scheduling. Everything else (packers, gates, zero or one worker) replays identically every run."""
    example = entry.get("example") or {}
    scenario = example.get("scenario") if isinstance(example, dict) else None
    return isinstance(scenario, dict) and int(scenario.get("num_workers", 0) or 0) >= 2


def replay_until(entry: dict[str, Any], status: str, tries: int, replay_once: Callable[[], Result] | None = None,
                 ) -> Result:
    """Replay until an outcome of ``status`` shows, at most ``tries`` times where timing may matter
    (once otherwise): the first such result, or the last one. An existential claim ("this example can
    fail") is then pinned without flipping: at a per-run miss rate q its false alarm is q**tries."""
    once = replay_once or (lambda: replay(entry))
    for _ in range(tries if timing_may_matter(entry) else 1):
        result = once()
        if result.status == status:
            break
    return result


def check_expectations(entry: dict[str, Any]) -> list[tuple[str, str, Result | None, str]]:
    """Replay an entry on every target its ``expect`` names: (target, expected, result, note).
    A target that cannot be resolved here (a user module not installed) gets result None and the reason."""
    out = []
    for name, expected in entry["expect"].items():
        try:
            result = replay(entry, name)
        except TargetError as e:
            out.append((name, expected, None, str(e)))
            continue
        out.append((name, expected, result, result.message))
    return out


__all__ = ["CorpusError", "DEFAULT_CORPUS", "FORMAT", "cache_dir", "check_expectations", "entry_for", "failures_dir",
           "files", "load", "replay", "replay_command", "replay_until", "save",
           "timing_may_matter"]
