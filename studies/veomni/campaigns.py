"""What the report is made of: replays with chosen fixes, fix attribution, the leave-one-out
search, the per-configuration failure matrix, fuzz campaigns with their scenario tallies, and
the component-by-property table. VeOmni with fixes runs in a process of its own (``VEOMNI.call``):
a package is imported once per process."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

from properties import corpus, trainers, verdicts
from properties.errors import Unsupported
from properties.runner import Result, RunSettings, run_target
from properties.targets.base import LoaderComponent, Target
from studies.veomni.documented import Refused, documented, documented_components
from studies.veomni.fixes import ALL_FIXES, FIX_COMPONENTS, VEOMNI, fixed


def replay_with(entry: dict[str, Any], fixes: tuple[str, ...] | list[str] = ()) -> Result:
    """Replay a regression entry on VeOmni held to its documentation, in a process whose VeOmni carries
    ``fixes`` (and only those): the Result (pass, fail, or skip naming a documented deviation)."""
    return corpus.replay_with_fixes(entry, VEOMNI, tuple(fixes))


def attribute(entry: dict[str, Any]) -> dict[str, Any]:
    """Which fixes an example needs: it must fail with none and pass with all; then fixes are taken
    out one at a time while it still passes, leaving a minimal set that is sufficient on its own."""
    bare = replay_with(entry)
    if bare.status != "fail":
        return {"status": bare.status, "message": bare.message, "fixes": None}
    full = replay_with(entry, ALL_FIXES)
    if full.status != "pass":
        return {"status": "unexplained", "message": full.message, "fixes": None}
    needed = list(ALL_FIXES)
    for fix in ALL_FIXES:
        trial = [f for f in needed if f != fix]
        if replay_with(entry, trial).status == "pass":
            needed = trial
    return {"status": "fail", "message": bare.message, "fixes": needed}


def leave_one_out(fix: str, corpus_dir: str | None, profile: str = "ci", seed: int = 0,
                  properties: tuple[str, ...] | None = None, trainer_names: tuple[str, ...] | None = None) -> list[Result]:
    """Search for what ``fix`` alone prevents: every property (or ``properties``) on the components it
    touches, on VeOmni held to its documentation with every other fix applied (a process of its own), under
    every trainer model the components declare (or ``trainer_names``). A failure is an example the other fixes
    do not cover (saved as a ``veomni`` regression when it also fails on VeOmni as shipped)."""
    if fix not in FIX_COMPONENTS:
        raise ValueError(f"fix {fix!r}: allowed values: {', '.join(FIX_COMPONENTS)} (the fixes of the documented "
                         "target's components)")
    rows = VEOMNI.call(VEOMNI.without(fix), "studies.veomni.campaigns:search_here", fix, profile, seed,
                       list(properties) if properties else None, list(trainer_names) if trainer_names else None,
                       timeout=None)
    out = []
    for r in (Result(**{**row, "trainers": tuple(row["trainers"])}) for row in rows):
        if r.status == "fail" and r.saveable and corpus_dir is not None:
            shipped = dataclasses.replace(r, target="veomni")
            entry = corpus.entry_for(shipped)
            if replay_with(entry, ()).status == "fail" and replay_with(entry, ALL_FIXES).status == "pass":
                path = corpus.save(shipped, corpus_dir)
                r = dataclasses.replace(r, file=str(path), replay=corpus.replay_command(path))
        out.append(r)
    return out


def search_here(fix: str, profile: str, seed: int, properties: list[str] | None,
                trainer_names: list[str] | None) -> list[dict[str, Any]]:
    """``leave_one_out``'s search, in the process whose VeOmni carries every fix but ``fix``."""
    target = Target(name=f"veomni-fixed-except-{fix}", components=documented_components())
    with trainers.only(tuple(trainer_names) if trainer_names else None):
        results = run_target(target, RunSettings(profile=profile, seed=seed, database=None),
                             only=tuple(properties) if properties else None, components=FIX_COMPONENTS[fix])
        return [dataclasses.asdict(verdicts.classify(target, r)) for r in results]


# ---- the configuration matrix: how often each property fails, per loader configuration -----------

def _configs(c: LoaderComponent) -> list[dict[str, Any]]:
    warmups = (False, True) if c.warmup else (False,)
    out = [{"workers": False, "in_order": True, "persistent": False, "warmup": w} for w in warmups]
    out += [{"workers": True, "in_order": o, "persistent": p, "warmup": w}
            for o in c.in_order for p in c.persistent for w in warmups]
    return out


def _config_name(cfg: dict[str, Any]) -> str:
    if not cfg["workers"]:
        return "no workers" + (", warm-up" if cfg["warmup"] else "")
    return ", ".join(["in_order" if cfg["in_order"] else "out of order",
                      "persistent" if cfg["persistent"] else "non-persistent"] + (["warm-up"] if cfg["warmup"] else []))


def matrix(target: Target, examples: int, seed: int = 0,
           progress: Callable[[str], None] = lambda line: None) -> list[dict[str, Any]]:
    """Each loader property on each configuration a component supports (workers or none, in_order,
    persistent workers, warm-up): ``examples`` fresh examples each, counting the failing ones
    instead of stopping at the first, so a failure rate says where a bug lives."""
    import hypothesis
    from hypothesis import Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis.errors import Unsatisfiable

    from properties import suite
    from properties.errors import PropertyViolation
    from properties.runner import guarded_check, quiet_target

    rows = []
    for c in target.components:
        if not isinstance(c, LoaderComponent):
            continue
        for cfg in _configs(c):

            def keep(sc, cfg=cfg):
                return (sc.num_workers > 0) == cfg["workers"] and (sc.warmup_steps > 0) == cfg["warmup"]

            for prop in suite.properties():
                if "loader" not in prop.kinds or prop.name == "in_order_skew" or prop.skip_reason(c):
                    continue
                # epoch_reshuffle runs every scenario both with and without persistent workers itself.
                both = prop.name == "epoch_reshuffle"
                if both and cfg["workers"] and not cfg["persistent"]:
                    continue
                narrowed = dataclasses.replace(c, in_order=(cfg["in_order"],), warmup=cfg["warmup"],
                                               persistent=c.persistent if both else (cfg["persistent"],),
                                               max_workers=c.max_workers if cfg["workers"] else 0)
                tally = {"examples": 0, "failed": 0, "refused": 0, "first": None}

                def make_probe(prop, component, tally):
                    def probe(sc):
                        try:
                            guarded_check(prop, component, sc)
                        except Unsupported:
                            tally["refused"] += 1
                            hypothesis.reject()
                        except PropertyViolation as e:
                            tally["failed"] += 1
                            tally["first"] = tally["first"] or str(e)
                        tally["examples"] += 1

                    return probe

                probe = make_probe(prop, narrowed, tally)
                test = hseed(seed)(settings(max_examples=examples, database=None, deadline=None,
                                            phases=[Phase.generate], suppress_health_check=list(hypothesis.HealthCheck))(
                    given(prop.examples(narrowed).filter(keep))(probe)))
                status = "ok"
                try:
                    with quiet_target():
                        test()
                except Unsatisfiable:
                    status = "n/a"
                rows.append({"component": c.name, "config": _config_name(cfg), "property": prop.name,
                             "status": status, **tally})
                progress(f"{c.name:20} {_config_name(cfg):42} {prop.name:16} {tally['failed']}/{tally['examples']}")
    return rows


def matrix_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: one table row per (component, configuration), failing/run per property."""
    props = list(dict.fromkeys(r["property"] for r in rows))
    out = ["| component | configuration | " + " | ".join(props) + " |", "|---|---|" + "---|" * len(props)]
    for key in dict.fromkeys((r["component"], r["config"]) for r in rows):
        cells = {r["property"]: r for r in rows if (r["component"], r["config"]) == key}
        shown = []
        for prop in props:
            r = cells.get(prop)
            shown.append("·" if r is None else "n/a" if r["status"] == "n/a" or not r["examples"]
                         else f"{r['failed']}/{r['examples']}")
        out.append(f"| {key[0]} | {key[1]} | " + " | ".join(shown) + " |")
    return "\n".join(out)


# ---- the campaign: fuzz one target, tallying the configurations it really ran ---------------------

#: component -> axis -> value -> distinct scenarios built (a property builds several loaders per example).
_TALLY: dict[str, dict[str, dict[str, set]]] = {}


def _axes(sc: Any) -> dict[str, Any]:
    workers = sc.num_workers > 0
    return {"in_order": sc.in_order, "workers": "yes" if workers else "no (main process)",
            "persistent_workers": sc.persistent_workers if workers else "n/a (no workers)",
            "warmup": sc.warmup_steps > 0, "micro_batches_per_step": sc.micro_batches_per_step,
            "dp_size": sc.dp_size, "checkpoints": bool(sc.checkpoints) or sc.restore_at_epoch_end}


def _tallied(target: Target) -> Target:
    def count(component: str, sc: Any, refused: Unsupported | None) -> None:
        key = repr(sc)
        axes = _axes(sc) if refused is None else {"refused": str(refused).split(":")[0]}
        for axis, value in axes.items():
            _TALLY.setdefault(component, {}).setdefault(axis, {}).setdefault(str(value), set()).add(key)

    out = []
    for c in target.components:
        if isinstance(c, LoaderComponent):
            def make_loader(sc, c=c):
                loader = c.make_loader(sc)
                count(c.name, sc, loader.reason if isinstance(loader, Refused) else None)
                return loader

            c = dataclasses.replace(c, make_loader=make_loader)
        out.append(c)
    return dataclasses.replace(target, components=tuple(out))


def campaign_targets() -> dict[str, Callable[[], Target]]:
    from properties.targets import resolve

    return {"dynbsz": lambda: resolve("dynbsz"), "veomni": lambda: resolve("veomni"),
            "documented": documented, "fixed": fixed}


def campaign(target_name: str, minutes: float, seed: int, corpus_dir: str | None,
             progress: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """``fuzz`` on one target (dynbsz, veomni, documented or fixed) with the fuzz profile, and the
    tally of loader configurations its examples covered."""
    from properties.fuzz import fuzz
    from properties.report import fuzz_json

    factories = campaign_targets()
    if target_name not in factories:
        raise ValueError(f"--target {target_name!r}; allowed values: {', '.join(factories)}")
    _TALLY.clear()
    report = fuzz(_tallied(factories[target_name]()), minutes, seed=seed, corpus_dir=corpus_dir, database=None,
                  progress=progress)
    coverage = {comp: {axis: {v: len(ids) for v, ids in sorted(values.items())} for axis, values in axes.items()}
                for comp, axes in _TALLY.items()}
    return {"target": target_name, "date": time.strftime("%Y-%m-%d"), "fuzz": fuzz_json(report),
            "scenarios": coverage}


def table(shipped: dict, documented: dict, fixed: dict, dynbsz: dict, findings: dict[tuple[str, str], str]) -> str:
    """The report's markdown table from the JSON of ``check --json`` (VeOmni as shipped) and of three
    campaigns; ``findings`` maps (property, component) to the findings that explain a failure."""
    def rows(doc: dict) -> dict[tuple[str, str], dict]:
        results = doc["fuzz"]["results"] if "fuzz" in doc else doc["results"]
        return {(r["property"], r["component"]): r for r in results}

    def cell(r: dict | None) -> str:
        if r is None:
            return "n/a"
        if r["status"] == "skip":
            return "not promised" if "does not promise" in r["message"] else "n/a"
        flaky = ", timing-dependent" if r.get("flaky") else ""
        return f"{r['status']} ({r['examples']:,}{flaky})"

    cols = [rows(shipped), rows(documented), rows(fixed), rows(dynbsz)]
    keys = [k for k in cols[0] if k[1] != "-"]
    out = ["| property | component | VeOmni as shipped | held to its docs | with the fixes | dynbsz | findings |",
           "|---|---|---|---|---|---|---|"]
    for prop, comp in keys:
        out.append(f"| {prop} | {comp} | " + " | ".join(cell(c.get((prop, comp))) for c in cols)
                   + f" | {findings.get((prop, comp), '')} |")
    return "\n".join(out)
