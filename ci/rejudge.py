"""Re-judge a report's pinned findings under the trainer models: every pinned example (a stream study's pins,
``studies/<library>/pins/``, by the findings' prefix: L for litdata, H for Hugging Face) replayed on the library as
released and classified (properties.verdicts.classify): bug (a real trainer model sees it), contract gap
(the adversarial schedule alone), with the trainers it reproduces under.

    python -m ci.rejudge --prefix L [--target litdata] [--json]
    python -m ci.rejudge --prefix L --search 200 --seed 1 --json    # + a search under the trainers per finding

A pinned example is minimal for the adversarial schedule; a real trainer may see the same fault on
another example. ``--search N`` runs ``stream_trainer_resume`` (every real trainer model the target
declares) with N examples on the fixed target with every fix but the finding's own: a failure there
that the fixed target does not show makes the finding a bug under that trainer, with the example.
Writes nothing; the reports' tables are made from its --json output.
"""

from __future__ import annotations

import argparse
import json
import sys

from properties import corpus, suite, verdicts
from properties.runner import RunSettings, replay_example, run_property
from properties.targets import resolve
from studies.hf_datasets.fixes import FIXES as HF_FIXES
from studies.litdata.fixes import FIXES as LITDATA_FIXES

#: a report's finding prefix -> its study's fixes (whose patch set names the released target and the fixed one)
STUDY = {"L": LITDATA_FIXES, "H": HF_FIXES}
PATCH_SETS = {prefix: s.patch_set for prefix, s in STUDY.items()}
DEFAULT_TARGET = {prefix: s.released for prefix, s in PATCH_SETS.items()}
FIXED = {prefix: s.target for prefix, s in PATCH_SETS.items()}


def search(prefix: str, finding: str, examples: int, seed: int) -> dict:
    """stream_trainer_resume on every fix but ``finding``'s: the first failure, and whether the fixed
    target passes that example. The fixes are diffs: the search runs in a process whose copy of the
    library carries them (properties.targets.patched)."""
    patch_set = PATCH_SETS[prefix]
    out = patch_set.call(patch_set.without(finding), "ci.rejudge:search_here", prefix, finding, examples, seed)
    if out["status"] == "fail" and out["minimal_example"] is not None:
        entry = {"property": "stream_trainer_resume", "component": out["component"],
                 "example": out["minimal_example"], "target": FIXED[prefix]}
        out["fixed_status"] = corpus.replay(entry).status
    return out


def search_here(prefix: str, finding: str, examples: int, seed: int) -> dict:
    """``search``'s search, in this process."""
    target = STUDY[prefix].with_fixes(PATCH_SETS[prefix].without(finding))
    prop = suite.get("stream_trainer_resume")
    component = target.components[0]
    rs = RunSettings(profile="ci", seed=seed, max_examples=examples, database=None)
    result = verdicts.classify(target, run_property(target, prop, component, rs))
    return {"status": result.status, "examples": result.examples, "trainers": list(result.trainers),
            "message": result.message[:400], "minimal_example": result.minimal_example, "component": component.name}


def rejudge(prefix: str, target: str | None = None, *, search_examples: int = 0, seed: int = 1,
            findings: list[str] | None = None) -> list[dict]:
    target = target or DEFAULT_TARGET[prefix]
    resolved = resolve(target)
    rows = []
    for finding, path in STUDY[prefix].pinned().items():
        if findings and finding not in findings:
            continue
        entry = corpus.load(path)
        # two or more workers: a replay can miss by timing, so "it fails" gets up to 5 tries
        result = verdicts.classify(resolved, corpus.replay_until(entry, "fail", 5, lambda: corpus.replay(entry, target)))
        row = {"finding": finding, "file": str(path), "property": result.property, "status": result.status,
               "class": result.verdict, "trainers": list(result.trainers), "message": result.message[:400]}
        if search_examples:
            row["search"] = search(prefix, finding, search_examples, seed)
            print(json.dumps(row), file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def _real_note(v: dict) -> str:
    real = v.get("real")
    if not real:
        return ""
    seen = "reproduces" if real["real_fails"] else "does not reproduce"
    if real["model_matches_real"] is None:
        return f"; on the real Lightning 2.6.5: {seen} ({real['real_message'].split(':')[0]} raised)"
    return f"; on the real Lightning 2.6.5: {seen}, the model {'agrees' if real['model_matches_real'] else 'DIFFERS'}"


def verdict(prefix: str, row: dict, real_lightning: bool = False) -> dict:
    """The finding's class from its pinned example and its search: a bug where a real trainer model sees it
    (on the pin, or on a search example that the fixed target passes and the release fails too), latent where
    the release passes that search example (only the other fixes expose it), else what the pin said."""
    out = {"class": row["class"], "trainers": [t for t in row["trainers"] if t != "adversarial"], "evidence": "pin"}
    found = row.get("search") or {}
    if out["class"] == "bug":
        out["evidence"] = "pin" if out["trainers"] else "pin, no trainer loop involved"
    elif found.get("status") == "fail" and found.get("fixed_status") == "pass" and found.get("minimal_example"):
        target = resolve(DEFAULT_TARGET[prefix])
        component = target.components[0].name
        released = replay_example(target, suite.get("stream_trainer_resume"), component, found["minimal_example"])
        out.update(trainers=found["trainers"], evidence="search example")
        out["class"] = "bug" if released.status == "fail" else "latent"
        out["released_status"] = released.status
    lightning = [t for t in out["trainers"] if t.startswith("lightning")]
    if real_lightning and lightning and out["class"] == "bug":
        example = found["minimal_example"] if out["evidence"] == "search example" else corpus.load(row["file"])["example"]
        out["real"] = on_real_lightning(prefix, example, lightning[0])
    return out


def on_real_lightning(prefix: str, example: dict, trainer: str) -> dict:
    """The deciding example re-run on the real Lightning 2.6.5 Trainer (properties.lightning_real) beside the
    model: does the real preempted run differ from the real uninterrupted one, and does the model predict
    both real transcripts exactly?"""
    from properties import stream_suite, trainers
    from properties.lightning_real import fit_adapter
    from properties.loader_props import Transcript
    from properties.stream_scenarios import decode_stream_scenario

    component = resolve(DEFAULT_TARGET[prefix]).components[0]
    sc = decode_stream_scenario(example)
    kw = stream_suite.trainer_kw(component, trainer, sc)
    kills = tuple(sorted({k for k in sc.checkpoints if k > 0}))
    every = 1 if trainer == "lightning-steps" else 0
    try:
        real = [fit_adapter(component.make_loader, sc, preempt_after=p, ids_of=kw["ids_of"],
                            every_n_train_steps=every, limit_train_batches=kw.get("limit_train_batches"))
                for p in ((), kills)]
    except Exception as e:  # noqa: BLE001 - the library raised under the real trainer: that is the reproduction
        return {"trainer": trainer, "real_fails": True, "real_message": f"{type(e).__name__}: {str(e)[:200]}",
                "model_matches_real": None}
    model = [trainers.get(trainer).run(component.make_loader, sc, preempt_after=p, **kw).steps for p in ((), kills)]
    level = component.resume_promise(sc)[0]
    why = trainers.judge(Transcript(real[0]), Transcript(real[1]), in_order=level == "exact")
    return {"trainer": trainer, "real_fails": why is not None, "real_message": why or "",
            "model_matches_real": model == real}


def markdown(prefix: str, rows: list[dict], real_lightning: bool = False) -> str:
    lines = ["| finding | pinned example (property): class, trainers | search under the trainers (examples) | "
             "fixed target on the search example | verdict |", "|---|---|---|---|---|"]
    for row in rows:
        v = verdict(prefix, row, real_lightning)
        found = row.get("search") or {}
        searched = (f"{found['status']} ({found['examples']}){': ' + ', '.join(found['trainers']) if found.get('trainers') else ''}"
                    if found else "-")
        lines.append(f"| {row['finding']} | {row['property']}: {row['class']}, "
                     f"{', '.join(row['trainers']) or '-'} | {searched} | {found.get('fixed_status', '-')} | "
                     f"**{v['class']}**{' (' + ', '.join(v['trainers']) + ')' if v['trainers'] else ''}"
                     f"{_real_note(v)} |")
    return "\n".join(lines)


def pin(prefix: str, rows: list[dict], corpus_dir: str) -> list[str]:
    """Save every search example that decided a verdict (a bug or latent requirement under a trainer) as a
    corpus entry naming its finding: what tests/test_trainer_pins.py replays."""
    from pathlib import Path

    Path(corpus_dir).mkdir(parents=True, exist_ok=True)
    written = []
    for row in rows:
        v = verdict(prefix, row)
        found = row.get("search") or {}
        if v["evidence"] != "search example":
            continue
        entry = {"format": "properties.regression/1", "target": DEFAULT_TARGET[prefix],
                 "property": "stream_trainer_resume", "component": resolve(DEFAULT_TARGET[prefix]).components[0].name,
                 "message": found["message"], "finding": row["finding"], "class": v["class"],
                 "trainers": v["trainers"],
                 "found_with": f"python -m ci.rejudge --prefix {prefix} --search N (every fix but {row['finding']}'s)",
                 "expect": {DEFAULT_TARGET[prefix]: "fail" if v["class"] == "bug" else "pass", FIXED[prefix]: "pass"},
                 "example": found["minimal_example"]}
        path = Path(corpus_dir) / f"stream_trainer_resume-{row['finding']}.json"
        path.write_text(corpus.dumps(entry))
        written.append(str(path))
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ci.rejudge", description=__doc__.splitlines()[0])
    ap.add_argument("--prefix", required=True, choices=sorted(DEFAULT_TARGET),
                    help="the findings' id prefix: L (litdata) or H (Hugging Face datasets)")
    ap.add_argument("--target", help="the target to replay on (default: the library as released)")
    ap.add_argument("--search", type=int, default=0, metavar="N",
                    help="also search stream_trainer_resume with N examples on every fix but the finding's own")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--finding", action="append", dest="findings", default=None,
                    help="only this finding (repeatable; default: every pinned one)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--pin", metavar="DIR", help="with --markdown: save the deciding search examples into DIR")
    ap.add_argument("--real-lightning", action="store_true",
                    help="with --markdown: re-run each bug a lightning model sees on the real Lightning Trainer")
    ap.add_argument("--markdown", metavar="FILE",
                    help="print the verdict table of rows saved by an earlier --json run (replays the search examples "
                         "on the release to tell bugs from latent requirements)")
    args = ap.parse_args(argv)
    if args.markdown:
        with open(args.markdown) as f:
            rows = json.load(f)
        if args.pin:
            for path in pin(args.prefix, rows, args.pin):
                print(f"pinned {path}", file=sys.stderr)
        print(markdown(args.prefix, rows, args.real_lightning))
        return 0
    if args.search < 0:
        ap.error(f"--search must be >= 0, got {args.search}")
    rows = rejudge(args.prefix, args.target, search_examples=args.search, seed=args.seed, findings=args.findings)
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
    else:
        for r in rows:
            print(f"{r['finding']:4} {r['property']:20} {r['status']:5} {r['class'] or '-':13} "
                  f"{','.join(r['trainers']) or '-':40} {r['message'][:90]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
