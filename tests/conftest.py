"""Test-session setup: models compile into a temporary cache, never into the checkout's
generated/ (set SYMDAE_CACHE_DIR yourself to reuse a cache between runs)."""
from __future__ import annotations

import os
import shutil
import tempfile


def pytest_configure(config):
    if "SYMDAE_CACHE_DIR" not in os.environ:
        folder = tempfile.mkdtemp(prefix="symdae-test-cache-")
        os.environ["SYMDAE_CACHE_DIR"] = folder
        config._symdae_test_cache = folder


def pytest_unconfigure(config):
    folder = getattr(config, "_symdae_test_cache", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop("SYMDAE_CACHE_DIR", None)
