"""Stand-ins for the fixtures of the repository's ``tests/conftest.py`` that ``test_iterable_dataset.py``
asks for; each skips the test (see ``utils.py``). The datasets cache goes to a temporary folder."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path, monkeypatch):
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def image_file():
    pytest.skip("the sdist ships no tests/fixtures (image_file)")


@pytest.fixture
def offline_parquet_uploads():
    pytest.skip("the sdist ships no offline Hub fixture (offline_parquet_uploads)")
