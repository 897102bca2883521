"""Hypothesis settings profiles: ``ci`` (default: sized for the 15-minute suite on 2 cores),
``dev`` (quick local loop) and ``fuzz`` (long runs for new policies).

Select one with the environment variable ``DYNBSZ_PROFILE`` or pytest's
``--hypothesis-profile``. Every profile prints the reproduction blob of a
failure so it replays from ``@reproduce_failure`` or the example database.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

PROFILES = ("ci", "dev", "fuzz")
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]
# ci and dev leave out the target phase: its hill-climbing (guided by the suite's target() calls)
# roughly doubles the examples run, which pays off in long fuzz runs, not in a 15-minute suite.
_QUICK = [Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink]


def _database() -> dict:
    """``DYNBSZ_HYPOTHESIS_DB=DIR`` keeps Hypothesis's example database outside the checkout, so
    failures found in one CI run are replayed first in the next (.ci/run points it at the user's
    cache directory); unset, Hypothesis uses ``.hypothesis/`` in the working directory."""
    path = os.environ.get("DYNBSZ_HYPOTHESIS_DB")
    if not path:
        return {}
    from hypothesis.database import DirectoryBasedExampleDatabase

    return {"database": DirectoryBasedExampleDatabase(path)}


def register() -> None:
    db = _database()
    settings.register_profile("ci", max_examples=60, deadline=None, print_blob=True, suppress_health_check=_SLOW_OK,
                              phases=_QUICK, **db)
    settings.register_profile("dev", max_examples=20, deadline=None, print_blob=True, suppress_health_check=_SLOW_OK,
                              phases=_QUICK, **db)
    settings.register_profile("fuzz", max_examples=5_000, deadline=None, print_blob=True,
                              suppress_health_check=_SLOW_OK,
                              phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink], **db)


def load(name: str | None = None) -> str:
    register()
    name = name or os.environ.get("DYNBSZ_PROFILE", "ci")
    if name not in PROFILES:
        raise ValueError(f"DYNBSZ_PROFILE={name!r} is not a profile; allowed values: {', '.join(PROFILES)}")
    settings.load_profile(name)
    return name
