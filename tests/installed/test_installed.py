"""What only the installed package can show, run by .ci/run against the wheel in a fresh virtual
environment from a folder without the source tree (``pytest tests/installed``): every module
imports, the bundled models are there, a model compiles into the cache, simulates, gives an
exact gradient and identifies, and the command line answers. The suite proper runs once, on the
checkout; these cases run there too (they take seconds) so that they cannot rot unseen."""
from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import symdae

pytestmark = pytest.mark.installed

ROOT = Path(__file__).resolve().parents[2]


def test_every_module_imports():
    # (a __main__ module runs the command line when imported)
    names = [m.name for m in pkgutil.walk_packages(symdae.__path__, "symdae.")
             if not m.name.endswith(".__main__")]
    assert len(names) > 60, names
    for name in names:
        importlib.import_module(name)
    for name in symdae.__all__:        # the lazy API resolves every public name
        assert getattr(symdae, name) is not None, name


def test_the_bundled_models_are_installed():
    names = symdae.bundled_models()
    files = sorted(p.stem for p in (ROOT / "models").glob("*.py") if p.stem != "__init__")
    assert names == files
    for name in names:                 # each file is in the package, and loads
        model, _ = symdae.load_model(name)
        assert model.name, name


@pytest.fixture(scope="module")
def oscillator():
    model, ns = symdae.load_model("oscillator")
    return model, symdae.compile_model(model, backend="compiled")


def test_compile_simulate_and_an_exact_gradient(oscillator):
    model, system = oscillator
    assert system.backend.name == "compiled"
    tr = system.simulate(t_end=0.5, h=1e-3)
    # m q'' + d q' + c q = 0 from q = 1, v = 0: the damped cosine, to the scheme's h^2 error
    m, c, d = 1.0, 40.0, 0.4
    w = np.sqrt(c / m - (d / (2 * m)) ** 2)
    t = tr.t
    exact = np.exp(-d / (2 * m) * t) * (np.cos(w * t) + d / (2 * m * w) * np.sin(w * t))
    assert np.max(np.abs(tr.q[:, 0] - exact)) < 1e-3
    data = symdae.Measurement.from_trajectory(tr, ["q"])
    cost = symdae.LeastSquares(data, ["q"])
    moved = system.simulate(t_end=0.5, h=1e-3, params={"c": 42.0, "d": 0.5})
    J, dS = cost.evaluate(system, moved)
    names = model.parameter_names
    g_adj = symdae.adjoint_gradient(system, moved, dS)
    g_tan = np.einsum("is,isd->d", dS, symdae.tangent(system, moved, names).ds)
    scale = np.max(np.abs(g_adj))
    assert J > 0 and scale > 0
    assert np.max(np.abs(g_adj - g_tan)) <= 1e-10 * scale
    # and a central difference in c, to its truncation error
    k, dc = names.index("c"), 1e-4
    Jp = cost.value(system, system.simulate(t_end=0.5, h=1e-3, params={"c": 42.0 + dc, "d": 0.5}))
    Jm = cost.value(system, system.simulate(t_end=0.5, h=1e-3, params={"c": 42.0 - dc, "d": 0.5}))
    assert g_adj[k] == pytest.approx((Jp - Jm) / (2 * dc), rel=1e-6)


def test_identification_reaches_the_truth(oscillator):
    model, system = oscillator
    scenario = symdae.Scenario(t_end=1.0, h=1e-3)
    truth = system.simulate(scenario)
    data = symdae.Measurement.from_trajectory(truth, ["a"])
    exp = symdae.Experiment(system, symdae.LeastSquares(data, ["a"]), scenario)
    res = symdae.identify(exp, ["c", "d"], {"c": 36.0, "d": 0.3})
    assert res.success
    assert res.values["c"] == pytest.approx(40.0, rel=1e-7)
    assert res.values["d"] == pytest.approx(0.4, rel=1e-7)


def test_the_command_line_answers(tmp_path):
    """The console script the wheel installs beside the interpreter, and ``python -m``."""
    script = Path(sys.executable).with_name("symdae")
    assert script.is_file(), f"no console script {script}"
    version = subprocess.run([str(script), "--version"], capture_output=True, text=True,
                             timeout=120, cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.strip() == f"symdae {symdae.__version__}"
    listing = subprocess.run([sys.executable, "-m", "symdae.cli", "models"], capture_output=True,
                             text=True, timeout=120, cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert {line.split()[0] for line in listing.stdout.splitlines() if line[:1].strip()} \
        == set(symdae.bundled_models())
