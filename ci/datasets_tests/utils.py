"""Stand-ins for the helpers ``tests/test_iterable_dataset.py`` imports from ``tests/utils.py``, which the
``datasets`` 5.2.0 source distribution does not ship (nor ``tests/conftest.py``). Written here, not copied:
each ``require_*`` skips a test when its package is missing, as its name says; the two helpers that need the
repository's own fixtures (an offline Hub, an Arrow memory probe) skip the test that calls them. A test skipped
here is skipped on the release and on the patched copy alike (``ci/library_tests.py`` compares the two)."""

from __future__ import annotations

import contextlib
import importlib.util
import sys

import pytest


def _requires(module: str):
    return pytest.mark.skipif(importlib.util.find_spec(module) is None, reason=f"{module} is not installed")


require_torch = _requires("torch")
require_tf = _requires("tensorflow")
require_jax = _requires("jax")
require_polars = _requires("polars")
require_pyspark = _requires("pyspark")
require_dill_gt_0_3_2 = _requires("dill")
require_torchdata_stateful_dataloader = pytest.mark.skipif(
    importlib.util.find_spec("torchdata") is None, reason="torchdata is not installed")
require_not_windows = pytest.mark.skipif(sys.platform == "win32", reason="not on Windows")
require_numpy1_on_windows = pytest.mark.skipif(sys.platform == "win32", reason="numpy 1 on Windows only")


@contextlib.contextmanager
def assert_arrow_memory_doesnt_increase():
    pytest.skip("the sdist ships no Arrow memory probe (tests/utils.py)")
    yield


def push_parquet_shards_offline(*args, **kwargs):
    pytest.skip("the sdist ships no offline Hub (tests/utils.py, tests/fixtures)")
