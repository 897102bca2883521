"""V5 in VeOmni's fixed target, as the intent check asked (docs/findings/intent-veomni.md): dp_step_counts and
trainer_resume on loader:main with every fix and with every fix but V5, ci profile, at most 200 examples per
trainer, seeds 1-2.

    python -m ci.veomni_v5_study OUT.json

(2026-12-04: docs/veomni-0.1.12-conformance-data/v5-dp-step-counts-2026-12-04.json; about 25 minutes here.)
"""

from __future__ import annotations

import argparse
import json

from properties import suite
from properties.runner import RunSettings, run_property
from properties.targets.base import Target
from properties.veomni_conformance.documented import documented_components
from properties.veomni_conformance.fixes import ALL_FIXES, fixed_loaders, fixes_applied


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ci.veomni_v5_study", description=__doc__.splitlines()[0])
    ap.add_argument("out", help="where the JSON rows are written")
    args = ap.parse_args(argv)
    out = []
    for label, ids in (("all fixes", ALL_FIXES), ("all but V5", tuple(f for f in ALL_FIXES if f != "V5"))):
        with fixes_applied(ids):
            target = Target(name=f"veomni-{label}", components=documented_components(fixed_loaders()))
            comp = next(c for c in target.components if c.name == "loader:main")
            for prop in ("dp_step_counts", "trainer_resume"):
                for seed in (1, 2):
                    rs = RunSettings(profile="ci", seed=seed, max_examples=200, database=None)
                    r = run_property(target, suite.get(prop), comp, rs)
                    row = {"fixes": label, "property": prop, "seed": seed, "status": r.status, "examples": r.examples,
                           "message": r.message[:500], "trainers": list(r.trainers)}
                    out.append(row); print(json.dumps(row), flush=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
