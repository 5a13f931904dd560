"""What users install: the wheel holds every module, an installed package builds models into the
per-user cache (never into its own folder), cache folders with odd names work, bad cache folders
and model files that import what is not installed give clear errors, ``symdae --version``.

.ci/run builds the sdist and the wheel from that sdist, which the first test here reads
(``SYMDAE_WHEEL``), and installs the wheel into a fresh virtual environment, where
tests/installed runs from a folder without the source tree."""
from __future__ import annotations

import glob
import math
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae
from symdae.compilation import cache as build_stage
from symdae.errors import BuildError, ModelError

ROOT = Path(__file__).resolve().parents[2]
PKG = Path(symdae.__file__).resolve().parent


def tiny_model(name: str) -> symdae.Model:
    x = dynamicsymbols("x")
    k = sp.Symbol("k")
    return symdae.Model(name, [x], mass_matrix=[[1]], forces=[-k * x], parameters={k: 4.0},
                        outputs={"x": x}, initial_state={x: 1.0})


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel CI built from the sdist (``SYMDAE_WHEEL``), else one built here."""
    given = os.environ.get("SYMDAE_WHEEL")
    if given:
        found = glob.glob(given)
        assert len(found) == 1, f"SYMDAE_WHEEL={given!r} matches {found}"
        return Path(found[0])
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out),
                           str(ROOT)], capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (path,) = out.glob("*.whl")
    return path


@pytest.mark.source_tree
def test_wheel_holds_every_module_header_model_and_extension(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    want = {p.relative_to(ROOT).as_posix() for p in (ROOT / "symdae").rglob("*")
            if p.suffix in (".py", ".pxd", ".h") and "__pycache__" not in p.parts}
    want |= {f"symdae/models/{p.name}" for p in (ROOT / "models").glob("*.py")}
    assert len(want) > 60
    missing = sorted(want - names)
    assert not missing, f"missing from {wheel.name}: {missing}"
    for ext in ("symdae/simulation/core/hht", "symdae/simulation/core/design_sweep"):
        assert any(n.startswith(ext + ".") and n.endswith((".so", ".pyd")) for n in names), ext
    # nothing of the checkout's caches or build folders
    assert not [n for n in names if n.startswith(("generated/", "build/", "tests/"))]


COLD_BUILD = """
import sys, symdae, sympy as sp
from sympy.physics.mechanics import dynamicsymbols
x = dynamicsymbols("x"); k = sp.Symbol("k")
m = symdae.Model("where_probe", [x], mass_matrix=[[1]], forces=[-k * x], parameters={k: 4.0},
                 outputs={"x": x}, initial_state={x: 1.0})
print(symdae.default_cache_dir())
s = symdae.compile_model(m, backend="compiled")
print(s.build_info["folder"])
print(s.simulate(t_end=0.5, h=1e-3).q[-1, 0])
"""


def test_package_without_a_checkout_caches_in_the_user_cache(tmp_path):
    """A package folder with no checkout around it (as in site-packages): models build into the
    platform's user cache folder, and nothing is written into the package."""
    site = tmp_path / "site"
    shutil.copytree(PKG, site / "symdae", ignore=shutil.ignore_patterns("__pycache__"))
    before = sorted(p.relative_to(site) for p in site.rglob("*"))
    env = {k: v for k, v in os.environ.items() if k != "SYMDAE_CACHE_DIR"}
    env.update(XDG_CACHE_HOME=str(tmp_path / "xdg"), PYTHONPATH=str(site))
    out = subprocess.run([sys.executable, "-c", COLD_BUILD], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr
    where, folder, x_end = out.stdout.split("\n")[:3]
    assert Path(where) == tmp_path / "xdg" / "symdae"
    assert Path(folder).parent == tmp_path / "xdg" / "symdae"
    assert float(x_end) == pytest.approx(math.cos(2.0 * 0.5), abs=1e-5)
    after = sorted(p.relative_to(site) for p in site.rglob("*") if "__pycache__" not in p.parts)
    assert after == before


@pytest.mark.parametrize("folder", ["cache with spaces", "caché-ünïcode ✓"])
def test_cache_folder_with_spaces_and_non_ascii(tmp_path, folder):
    cache = tmp_path / folder / "symdae"
    system = symdae.compile_model(tiny_model("odd_path_probe"), cache_dir=cache, backend="compiled")
    assert Path(system.build_info["folder"]).parent == cache
    assert not system.build_info["cache_hit"]
    again = symdae.compile_model(tiny_model("odd_path_probe"), cache_dir=cache, backend="compiled")
    assert again.build_info["cache_hit"]
    x = again.simulate(t_end=0.5, h=1e-3).q[-1, 0]
    assert x == pytest.approx(math.cos(1.0), abs=1e-5)


def test_cache_folder_that_is_a_file_is_named(tmp_path):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("")
    with pytest.raises(BuildError, match=r"not_a_folder is not a folder.*SYMDAE_CACHE_DIR"):
        symdae.compile_model(tiny_model("file_cache_probe"), cache_dir=blocker, backend="compiled")
    assert blocker.read_text() == ""


def test_cache_folder_that_cannot_be_created_is_named(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(BuildError, match=r"cannot create the compile cache .*file/sub"):
        symdae.compile_model(tiny_model("missing_cache_probe"), cache_dir=blocker / "sub", backend="compiled")


def test_read_only_cache_still_loads_what_it_holds(tmp_path, monkeypatch):
    """A warm cache is only read: a model already in it loads, whatever the folder's rights."""
    cache = tmp_path / "cache"
    symdae.compile_model(tiny_model("warm_ro_probe"), cache_dir=cache, backend="compiled")
    monkeypatch.setattr(build_stage, "_usable_cache",
                        lambda c: (_ for _ in ()).throw(AssertionError("would build")))
    again = symdae.compile_model(tiny_model("warm_ro_probe"), cache_dir=cache, backend="compiled")
    assert again.build_info["cache_hit"]


def test_model_file_importing_a_missing_module_is_named(tmp_path):
    path = tmp_path / "needs_more.py"
    path.write_text("import symdae\nfrom symdae.no_such_part import thing\nmodel = None\n")
    with pytest.raises(ModelError, match=r"needs_more\.py imports module "
                                         r"'symdae\.no_such_part' that is not installed"):
        symdae.load_model(path)


def test_version_on_the_command_line():
    out = subprocess.run([sys.executable, "-m", "symdae.cli.main", "--version"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == f"symdae {symdae.__version__}"


def test_a_checkout_caches_in_the_user_cache_too(tmp_path):
    """From the source checkout (an editable install) the default cache is the user's, not
    the library's generated/ folder; SYMDAE_CACHE_DIR overrides it."""
    code = "import symdae; print(symdae.default_cache_dir())"
    env = {k: v for k, v in os.environ.items() if k != "SYMDAE_CACHE_DIR"}
    env.update(XDG_CACHE_HOME=str(tmp_path / "xdg"), PYTHONPATH=str(PKG.parent))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=tmp_path, check=True)
    assert Path(out.stdout.strip()) == tmp_path / "xdg" / "symdae"
    env["SYMDAE_CACHE_DIR"] = str(tmp_path / "mine")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=tmp_path, check=True)
    assert Path(out.stdout.strip()) == tmp_path / "mine"
