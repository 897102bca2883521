"""Hypothesis settings profiles: ``ci`` (default: sized for the 15-minute suite on 2 cores),
``dev`` (quick local loop) and ``fuzz`` (long runs for new policies).

Select one with the environment variable ``DYNBSZ_PROFILE`` or pytest's
``--hypothesis-profile``. Every profile prints the reproduction blob of a
failure so it replays from ``@reproduce_failure`` or the example database.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase, MultiplexedDatabase, ReadOnlyDatabase

from dynbsz.paths import cache_dir

PROFILES = ("ci", "dev", "fuzz")
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]
# ci and dev leave out the target phase: its hill-climbing (guided by the suite's target() calls)
# roughly doubles the examples run, which pays off in long fuzz runs, not in a 15-minute suite.
_QUICK = [Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink]


def example_database(spec: str | None):
    """The Hypothesis example database a ``--database`` value (or ``$DYNBSZ_HYPOTHESIS_DB``) names:

    * a directory (``DirectoryBasedExampleDatabase``, safe for several processes at once);
    * ``redis://HOST:PORT[/DB]``: a Redis server shared by a team (``RedisExampleDatabase``; needs the
      ``redis`` package, installed by ``ci/install.sh --test``);
    * ``ro:SPEC``: SPEC read but never written (``ReadOnlyDatabase``);
    * ``SPEC,SPEC,...``: all of them at once (``MultiplexedDatabase``): e.g. ``~/.cache/db,ro:redis://ci:6379``,
      a developer's own database beside a read-only view of the one CI writes.

    None or an empty string: no database."""
    if not spec:
        return None
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if len(parts) > 1:
        return MultiplexedDatabase(*(example_database(p) for p in parts))
    part = parts[0]
    if part.startswith("ro:"):
        return ReadOnlyDatabase(example_database(part[3:]))
    if part.startswith("redis://"):
        try:  # Hypothesis's own integration (hypothesis.extra.redis), importable only with the redis client
            import redis
            from hypothesis.extra.redis import RedisExampleDatabase
        except ImportError:
            raise ValueError(f"--database {part}: a Redis database needs the redis package "
                             "(bash ci/install.sh --test); allowed values: a directory, redis://HOST:PORT[/DB], "
                             "ro:SPEC, SPEC,SPEC, none") from None
        return RedisExampleDatabase(redis.Redis.from_url(part))
    if "://" in part:
        raise ValueError(f"--database {part}: unknown scheme; allowed values: a directory, redis://HOST:PORT[/DB], "
                         "ro:SPEC, SPEC,SPEC, none")
    return DirectoryBasedExampleDatabase(part)


def database_dir() -> str:
    """The CLI's Hypothesis example database: ``$DYNBSZ_HYPOTHESIS_DB``, else ``<cache_dir>/hypothesis``
    (never a directory of the checkout a run starts in)."""
    return os.environ.get("DYNBSZ_HYPOTHESIS_DB") or str(cache_dir() / "hypothesis")


@contextlib.contextmanager
def storage_in_cache() -> Iterator[None]:
    """Inside the block, Hypothesis's own storage (its constants cache, and the default database if
    any) is ``<cache_dir>/hypothesis-home`` instead of ``./.hypothesis``, unless
    ``$HYPOTHESIS_STORAGE_DIRECTORY`` says otherwise: the CLI writes nothing where it is started.
    On exit Hypothesis resolves its storage as it did before (the CLI may run inside a test)."""
    from hypothesis.configuration import set_hypothesis_home_dir

    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        yield
        return
    set_hypothesis_home_dir(cache_dir() / "hypothesis-home")
    try:
        yield
    finally:
        set_hypothesis_home_dir(None)


def _database() -> dict:
    """``DYNBSZ_HYPOTHESIS_DB=DIR`` keeps Hypothesis's example database outside the checkout, so
    failures found in one CI run are replayed first in the next (.ci/run points it at the user's
    cache directory); unset, Hypothesis uses ``.hypothesis/`` in the working directory."""
    spec = os.environ.get("DYNBSZ_HYPOTHESIS_DB")
    return {"database": example_database(spec)} if spec else {}


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
