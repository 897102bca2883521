"""pytest plugin (entry point ``pytest11``): registers the Hypothesis profiles of this suite.

Installed with the package, it is active in any project's test run: pass
``--hypothesis-profile=ci|dev|fuzz`` or set ``DYNBSZ_PROFILE``; the default is ``ci``.
"""

from __future__ import annotations

from . import profiles

# At import, before Hypothesis's own plugin reads --hypothesis-profile.
profiles.register()


def pytest_configure(config) -> None:
    if not config.getoption("hypothesis_profile", default=None):
        profiles.load()
