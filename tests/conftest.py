"""Test-session setup: models compile into a temporary cache, never into the user's cache
(set SYMDAE_CACHE_DIR yourself to reuse a cache between runs). The cache folder is made once,
before pytest-xdist starts its workers, which inherit it: a model is compiled once per run
(the build's file lock makes a second worker wait for the first), and ``bundled`` loads each
bundled model and its System once per worker."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest


def pytest_configure(config):
    if os.environ.get("SYMDAE_TEST_INSTALLED") == "1":
        # the run that tests the installed wheel must not import the source tree
        import symdae
        where = Path(symdae.__file__).resolve()
        if "site-packages" not in where.parts or Path(__file__).resolve().parents[1] in \
                where.parents:
            pytest.exit(f"SYMDAE_TEST_INSTALLED=1 but symdae was imported from {where}", 2)
    if "SYMDAE_CACHE_DIR" not in os.environ:
        folder = tempfile.mkdtemp(prefix="symdae-test-cache-")
        os.environ["SYMDAE_CACHE_DIR"] = folder
        config._symdae_test_cache = folder


def pytest_unconfigure(config):
    folder = getattr(config, "_symdae_test_cache", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop("SYMDAE_CACHE_DIR", None)


@pytest.fixture(scope="session")
def bundled():
    """``bundled(name)`` -> ``(system, ns)``: a bundled model compiled (the compiled backend)
    and its file's namespace (``ns["model"]``, ``SCENARIO``, ``START``, ...), made once per
    test process and shared by every case that asks for the same model. Cases that change a
    System (its backend, its pools) build their own."""
    import symdae

    made: dict = {}

    def get(name: str):
        if name not in made:
            model, ns = symdae.load_model(name)
            made[name] = (symdae.compile_model(model, backend="compiled"), ns)
        return made[name]

    return get


def pytest_sessionfinish(session, exitstatus):
    """With SYMDAE_NO_SKIPS=1 (set by .ci/run) a skipped test fails the run: CI installs the
    compiler and the test extras, so a skip there means a case went untested."""
    if os.environ.get("SYMDAE_NO_SKIPS") != "1":
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if skipped and session.exitstatus == 0:
        reporter.write_line(f"SYMDAE_NO_SKIPS=1: {len(skipped)} test(s) skipped: "
                            + ", ".join(r.nodeid for r in skipped), red=True)
        session.exitstatus = 1
