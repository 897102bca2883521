"""``python -m studies.veomni``: the report's command line."""

from __future__ import annotations

import argparse
import json
import sys
import time

from properties.targets.patched import PatchError
from studies.veomni import __doc__ as DOC
from studies.veomni.campaigns import attribute, campaign, campaign_targets, leave_one_out, matrix, matrix_table
from studies.veomni.fixes import FIX_COMPONENTS, FIXES, VEOMNI
from studies.veomni.losses import deviations_report


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m studies.veomni", description=DOC,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("deviations", help="count what VeOmni's documented deviations lose on lognormal workloads")
    d.add_argument("--quick", action="store_true", help="20,000 samples instead of 100,000")
    sub.add_parser("fixes", help="list the proposed fixes")
    c = sub.add_parser("campaign", help="fuzz one target and tally the loader configurations it covered (JSON)")
    c.add_argument("--target", required=True, help="dynbsz, veomni, documented or fixed")
    c.add_argument("--minutes", type=float, required=True)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--corpus", default=None, help="save failures here (default: not saved)")
    a = sub.add_parser("attribute", help="the minimal set of proposed fixes that makes saved failures pass")
    a.add_argument("files", nargs="+")
    lo = sub.add_parser("leave-one-out", help="for each fix, search with every other fix applied (JSON lines)")
    lo.add_argument("fixes", nargs="*", default=list(FIX_COMPONENTS))
    lo.add_argument("--corpus", default=None)
    lo.add_argument("--profile", default="ci")
    lo.add_argument("--seed", type=int, default=0)
    lo.add_argument("--property", action="append", dest="properties", default=None,
                    help="search only this property (repeatable; default: all)")
    lo.add_argument("--trainer", action="append", dest="trainers", default=None,
                    help="under this trainer model only (repeatable; default: those the components declare)")
    m = sub.add_parser("matrix", help="failure rate of each loader property per configuration (JSON)")
    m.add_argument("--target", required=True, help="dynbsz, veomni, documented or fixed")
    m.add_argument("--examples", type=int, default=8, help="examples per (configuration, property)")
    m.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if getattr(args, "target", None) == "fixed" and VEOMNI.applied() is None and VEOMNI.installed():
        # the fixed target runs VeOmni's patched copy, which a process imports instead of the release
        try:
            return VEOMNI.rerun("studies.veomni", list(sys.argv[1:] if argv is None else argv))
        except PatchError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    if args.command == "matrix":
        rows = matrix(campaign_targets()[args.target](), args.examples, args.seed, progress=_progress)
        json.dump({"target": args.target, "examples": args.examples, "seed": args.seed, "rows": rows,
                   "table": matrix_table(rows)}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    if args.command == "leave-one-out":
        for fix in args.fixes:
            started = time.time()
            for r in leave_one_out(fix, args.corpus, args.profile, args.seed,
                                   tuple(args.properties) if args.properties else None,
                                   tuple(args.trainers) if args.trainers else None):
                print(json.dumps({"fix": fix, "seconds": round(time.time() - started, 1), **r.to_json()}), flush=True)
        return 0
    if args.command == "attribute":
        from properties import corpus

        for path in args.files:
            print(json.dumps({"file": path, **attribute(corpus.load(path))}), flush=True)
        return 0
    if args.command == "campaign":
        json.dump(campaign(args.target, args.minutes, args.seed, args.corpus, progress=_progress), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    if args.command == "fixes":
        for k, v in FIXES.items():
            print(f"{k:4} {v}")
        return 0
    json.dump(deviations_report(args.quick), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
