"""Every packer and gate property on dynbsz (the packer with each built-in gate), one test per
property and component, through the suite's own pytest plugin: the same path another project
takes to check its packer (see properties/pytest_plugin.py). Saved regressions for a property
and component run first, as explicit examples."""

from __future__ import annotations

import pytest

from properties.pytest_plugin import test_dynbsz_properties  # noqa: F401 - collected here, parametrized by the plugin

pytestmark = pytest.mark.dynbsz_target("dynbsz")
