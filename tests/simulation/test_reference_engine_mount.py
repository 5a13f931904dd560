"""The hand-written references of the engine mount (benchmarks/reference/: the C code and its
numba port) against symdae and each other.

The reference is the yardstick of benchmarks/bench_reference.py, so it must compute the same
thing: the HHT trajectory of the same discrete equations (a1 to round-off), the same cost J and
its exact discrete gradient dJ/d(cE1, cE2, dE, dH2). It is written independently of symdae
(closed-form elimination of the 5 x 5 Newton matrix, hand-derived Jacobians and adjoint), so
agreement checks both. Its gradient is also checked against central differences of its own J
(steps delta and delta/2: the error must fall about 4x, i.e. be truncation), and on a
consistent nonzero initial state, where the initial-state term of the gradient is nonzero.
The numba port (the yardstick "a hand-written numba code of the same scheme") passes the same
tests, and computes what the C code computes: on x86-64 with gcc -O2 bit for bit (C_TOL leaves
room for a compiler that contracts to FMA).

Runs only where a C compiler exists (gcc or cc), as the benchmark does.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import symdae
from symdae.costs.time_domain import LeastSquares
from symdae.simulation.sensitivity import adjoint_gradient

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "reference" / "engine_mount.py"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod          # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


REF = _load("_symdae_em_reference", _PATH)
NB = _load("_symdae_em_numba", _PATH.with_name("engine_mount_numba.py"))  # reuses REF
pytestmark = pytest.mark.skipif(REF.compiler() is None, reason="no C compiler (gcc/cc)")

A1_TOL = 1e-9       # max |a1_ref - a1_symdae| / max |a1|
J_TOL = 1e-10       # relative
GRAD_TOL = 1e-8     # per component, relative, against symdae's adjoint_gradient
FD_TOL = 1e-6       # central differences at delta / 2, relative per component
C_TOL = 1e-12       # numba against C: trajectories (relative to their max), J, gradient


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    model, ns = symdae.load_model("engine_mount")
    assert tuple(model.parameter_names) == REF.PARAMETER_NAMES
    system = symdae.compile_model(model)
    lib = REF.compile_library(REF.FLAGS_O2, tmp_path_factory.mktemp("em_ref"))
    # the hand-written reference implements eq. (15)
    sc = symdae.Scenario.make(ns["SCENARIO"], q0=np.zeros(4), v0=np.zeros(4), scheme="hht-paper")
    data = system.simulate(sc).outputs["a1"].copy()
    return system, lib, sc, data, ns["START"]


@pytest.fixture(params=["C", "numba"])
def make_reference(request, setup):
    """The reference implementation's constructor on a grid (keywords of ReferenceSweeps)."""
    lib = setup[1]
    if request.param == "C":
        return lambda **grid: REF.EngineMountReference(lib, **grid)
    return NB.EngineMountNumba


def _consistent_start(system):
    """A nonzero q0, v0 on the constraint (a + b) x2 - b x3 - a x4 = 0 and its velocity form."""
    par = dict(zip(system.model.parameter_names, system.model.nominal_values))
    a, b = par["a"], par["b"]
    q0 = np.array([1e-3, 0.0, 0.0, 0.0])
    q0[3] = 2e-3
    q0[1] = a * q0[3] / (a + b)
    v0 = np.array([2e-2, 0.0, 0.0, 0.3])
    v0[1] = a * v0[3] / (a + b)
    return q0, v0


def _grid(sc, data) -> dict:
    return dict(t0=sc.t0, h=sc.h, N=sc.n_steps, alpha=sc.alpha, data=data, q0=sc.q0, v0=sc.v0,
                rtol=sc.rtol, max_iter=sc.max_iter)


def _compare(setup, make_reference, q0=None, v0=None):
    system, _, sc, data, start = setup
    if q0 is not None:
        sc = sc.replace(q0=q0, v0=v0)
    cost = LeastSquares({"a1": data}, ["a1"], quadrature="left")
    tr = system.simulate(sc, params=start, store_factorizations=True)
    J, dS = cost.evaluate(system, tr)
    idx = [system.model.parameter_names.index(k) for k in REF.GRADIENT_NAMES]
    g = adjoint_gradient(system, tr, dS)[idx]
    ref = make_reference(**_grid(sc, data))
    p = system.parameter_vector(start)
    Jr, gr = ref.cost_and_gradient(p)
    return tr, J, g, ref, Jr, gr, p


def test_trajectory_cost_and_gradient_match_symdae(setup, make_reference):
    tr, J, g, ref, Jr, gr, _ = _compare(setup, make_reference)
    a1_err = np.max(np.abs(ref.A[:, 0] - tr.a[:, 0])) / np.max(np.abs(tr.a[:, 0]))
    q_err = np.max(np.abs(ref.Q - tr.q)) / np.max(np.abs(tr.q))
    print(f"\na1 {a1_err:.1e}, q {q_err:.1e}, J {abs(Jr - J) / J:.1e}, "
          f"grad {np.max(np.abs(gr - g) / np.abs(g)):.1e}")
    assert a1_err < A1_TOL
    assert q_err < A1_TOL
    assert abs(Jr - J) <= J_TOL * J
    assert np.all(np.abs(gr - g) <= GRAD_TOL * np.abs(g))
    # q0 = v0 = 0: these four parameters enter Q only through x1, x1^3, v1, v4^3, all zero at
    # t0, so the consistent (a0, lam0) do not depend on them
    assert np.all(ref.init_term == 0.0)


def test_gradient_against_central_differences(setup, make_reference):
    *_, ref, _, gr, p = _compare(setup, make_reference)
    steps = np.array(REF.FD_STEPS)
    err = np.abs(ref.central_differences(p, steps) - gr) / np.abs(gr)
    err_half = np.abs(ref.central_differences(p, steps / 2) - gr) / np.abs(gr)
    print(f"\nFD error, steps {steps}: {err}, halved: {err_half}")
    assert np.all(err_half < FD_TOL)
    # truncation error O(delta^2): halving the step divides it by about 4
    ratio = err / err_half
    assert np.all((ratio > 3.2) & (ratio < 5.0)), ratio


def test_nonzero_initial_state_term(setup, make_reference):
    system = setup[0]
    q0, v0 = _consistent_start(system)
    tr, J, g, ref, Jr, gr, _ = _compare(setup, make_reference, q0, v0)
    a1_err = np.max(np.abs(ref.A[:, 0] - tr.a[:, 0])) / np.max(np.abs(tr.a[:, 0]))
    assert a1_err < A1_TOL
    assert abs(Jr - J) <= J_TOL * J
    assert np.all(np.abs(gr - g) <= GRAD_TOL * np.abs(g))
    # the term through (a0, lam0) is there and matters at this tolerance: x1(0), v1(0) and
    # v4(0) are nonzero, so all four parameters move the consistent a0
    init = ref.init_term
    print(f"\nnonzero start: grad {gr}, initial-state term {init}, "
          f"rel. diff to symdae {np.max(np.abs(gr - g) / np.abs(g)):.1e}")
    assert np.all(np.abs(init) > 1e3 * GRAD_TOL * np.abs(g)), (init, g)


def _rel_max(x, y):
    return np.max(np.abs(x - y)) / max(np.max(np.abs(y)), np.finfo(float).tiny)


@pytest.mark.parametrize("start", ["zero", "nonzero"])
def test_the_numba_port_computes_what_the_c_code_does(setup, start):
    system, lib, sc, data, params = setup
    if start == "nonzero":      # the initial-state term of the gradient is nonzero there
        q0, v0 = _consistent_start(system)
        sc = sc.replace(q0=q0, v0=v0)
    grid = _grid(sc, data)
    ref, nb = REF.EngineMountReference(lib, **grid), NB.EngineMountNumba(**grid)
    p = system.parameter_vector(params)
    fr, fn = ref.forward(p), nb.forward(p)
    assert fn == fr                       # J, Newton iterations, refreshes, round-off stops
    Jr, gr = ref.cost_and_gradient(p)
    Jn, gn = nb.cost_and_gradient(p)
    errs = {"a1": _rel_max(nb.A[:, 0], ref.A[:, 0]), "q": _rel_max(nb.Q, ref.Q),
            "v": _rel_max(nb.V, ref.V), "lam": _rel_max(nb.L, ref.L), "J": abs(Jn - Jr) / Jr,
            "grad": np.max(np.abs(gn - gr) / np.abs(gr)),
            "init": _rel_max(nb.init_term, ref.init_term)}
    print(f"\nnumba vs C -O2 ({start} start): " + ", ".join(f"{k} {v:.1e}" for k, v in errs.items()))
    assert all(v <= C_TOL for v in errs.values()), errs
    assert nb.cost_streaming(p) == Jn     # storing or not is the same sweep
