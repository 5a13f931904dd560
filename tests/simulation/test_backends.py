"""The two backends: the NumPy oracle reproduces the compiled sweeps on every bundled model
(trajectories to round-off, tangent and adjoint gradients to 1e-10), and symdae works where
there is no C compiler or no compiled core."""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae
from symdae import LeastSquares, Scenario, adjoint_gradient, tangent

ROOT = Path(__file__).resolve().parents[2]
STEPS = 200       # enough steps for every part of the sweeps; the NumPy sweeps are slow


def short_scenario(ns: dict, model) -> Scenario:
    """The model file's scenario over STEPS steps (its h and alpha), inputs filled in."""
    base = Scenario.make(ns.get("SCENARIO") or {"t_end": 1.0, "h": 1e-3})
    inputs = dict(base.inputs or {})
    for k, name in enumerate(model.input_names):
        inputs.setdefault(name, lambda t, k=k: np.sin((3.0 + k) * t))
    return base.replace(t_end=base.t0 + STEPS * base.h, inputs=inputs or None)


@pytest.mark.parametrize("name", symdae.bundled_models())
def test_numpy_backend_reproduces_the_compiled_sweeps(name):
    """Forward: q, v to round-off; a, lam to the scheme's round-off floor (q = qhat + beta h^2 a
    resolves a only to about eps |q| / (beta h^2), so two Newton policies stop anywhere within
    it). Derivative sweeps on the same trajectory: gradient and sensitivities to 1e-10. Each
    backend end to end: J and the gradient agree to what that floor leaves.
    Measured (200 steps, every bundled model): state differences up to 180 floors (the
    pendulum; 1e3 allowed; q and v also the drift of a's differences), tangent da, dlam up to 110 floors (the four-bar in joint angles, whose loop
    closure makes K worse conditioned; 3e2 allowed), J to 1.3e-10 relative (the four-bar
    in joint angles, whose accelerations are outputs: 1.3e-9 relative differences at their
    floor; its first-order bound from the outputs' differences is 9e-11 absolute, 6e-9
    relative) and gradients to 6e-10 relative (1e-8 allowed)."""
    model, ns = symdae.load_model(name)
    sc = short_scenario(ns, model)
    compiled = symdae.compile_model(model, backend="compiled")
    oracle = symdae.compile_model(model, backend="numpy")
    assert (compiled.backend.name, oracle.backend.name) == ("compiled", "numpy")
    names = model.parameter_names
    moved = {k: v * 1.05 for k, v in zip(names, compiled.parameter_vector()) if v != 0}
    free = names[:6]
    runs = {}
    for system in (compiled, oracle):
        data = system.simulate(sc)
        cost = LeastSquares({k: data.outputs[k] for k in model.output_names},
                            weights={k: 1.0 / max(np.mean(data.outputs[k] ** 2), 1e-300)
                                     for k in model.output_names})
        tr = system.simulate(sc, params=moved, store_factorizations=True)
        J, dS = cost.evaluate(system, tr)
        runs[system.backend.name] = (tr, J, dS, adjoint_gradient(system, tr, dS), data)
    (tc, Jc, dSc, gc, dc), (tn, Jn, _, gn, dn) = runs["compiled"], runs["numpy"]
    beta, gamma = 0.25 * (1 - sc.alpha) ** 2, 0.5 - sc.alpha
    eps = np.finfo(float).eps
    floor_a = eps * np.max(np.abs(tc.q)) / (beta * sc.h ** 2)
    amax = max(np.max(np.abs(tc.a)), 1e-300)
    floors = {"q": beta * sc.h ** 2 * floor_a, "v": gamma * sc.h * floor_a, "a": floor_a,
              "lam": floor_a * np.max(np.abs(tc.lam), initial=0.0) / amax}
    # a difference of a within its floor at one step moves the later q and v as a constant
    # acceleration error would: by da (t - t0)^2 / 2 and da (t - t0) at most (the double
    # pendulum and the four-bar in angles show it: 2.3 times the floor term alone)
    da = np.max(np.abs(tc.a - tn.a))
    elapsed = (tc.t - tc.t[0])[:, None]
    drift = {"q": da * elapsed ** 2 / 2, "v": da * elapsed, "a": 0.0, "lam": 0.0}
    for kind, floor in floors.items():
        X, Y = getattr(tc, kind), getattr(tn, kind)
        tol = 1e-11 * np.max(np.abs(X), axis=0, initial=0.0) + 1e3 * floor + drift[kind] \
            + 1e-300
        err = np.abs(X - Y)
        assert np.all(err <= tol), f"{name}: {kind} differs by {np.max(err / tol):.2f} x tol"
    # J to what the outputs' differences (each backend's data and fitted run) leave: to first
    # order dS . (dy_run - dy_data), bounded with absolute values (twice, for the second
    # order and the outputs' own rounding); they are at the round-off floor of the states
    # checked above, so this is no looser than those checks
    def outputs(tr):
        return np.column_stack([tr.outputs[k] for k in model.output_names])
    moved_by = np.abs(outputs(tn) - outputs(tc)) + np.abs(outputs(dn) - outputs(dc))
    assert abs(Jn - Jc) <= 2 * np.sum(np.abs(dSc) * moved_by) + 1e-13 * abs(Jc), (Jc, Jn)
    gscale = np.max(np.abs(gc))
    assert gscale > 0 and np.max(np.abs(gc - gn)) <= 1e-8 * gscale, (name, gc, gn)

    # the NumPy derivative sweeps on the compiled trajectory: the same numbers to round-off
    fwd = dataclasses.replace(tc.sweep.forward, saved=None)
    shared = dataclasses.replace(tc, sweep=dataclasses.replace(tc.sweep, forward=fwd))
    g_shared = adjoint_gradient(oracle, shared, dSc)
    assert np.max(np.abs(g_shared - gc)) <= 1e-10 * gscale, (name, gc, g_shared)
    dc, dn = tangent(compiled, tc, free), tangent(oracle, shared, free)
    dfloor_a = eps * np.max(np.abs(dc.dq)) / (beta * sc.h ** 2)     # the same floor for da
    # as in the forward check, the multipliers' floor is a's scaled by their size ratio
    dfloor_l = dfloor_a * np.max(np.abs(dc.dlam), initial=0.0) / max(np.max(np.abs(dc.da)),
                                                                      1e-300)
    for kind, floor in (("dq", 0.0), ("dv", 0.0), ("da", dfloor_a), ("dlam", dfloor_l)):
        X, Y = getattr(dc, kind), getattr(dn, kind)
        tol = 1e-10 * np.max(np.abs(X), axis=(0, 1), keepdims=True, initial=0.0) \
            + 3e2 * floor + 1e-300
        assert np.all(np.abs(X - Y) <= tol), f"{name} tangent {kind}: " \
            f"{np.max(np.abs(X - Y) / tol):.2f} x tol"


def test_numpy_adjoint_equals_numpy_tangent():
    """The oracle's own sweeps agree with each other (on the constrained, parameter-in-the-
    constraint pendulum): adjoint = tangent projected on the cost derivative."""
    model, ns = symdae.load_model("pendulum")
    system = symdae.compile_model(model, backend="numpy")
    sc = Scenario(t_end=0.2, h=1e-3, alpha=-0.2)
    data = system.simulate(sc).outputs
    cost = LeastSquares({k: data[k] for k in ("x", "vy", "lambda")})
    tr = system.simulate(sc, params={"L": 0.83, "d": 0.12}, store_factorizations=True)
    J, dS = cost.evaluate(system, tr)
    grad = adjoint_gradient(system, tr, dS)
    ds = tangent(system, tr, np.eye(len(model.parameter_names))).ds     # (N+1, n_s, n_p)
    want = np.einsum("is,isk->k", dS, ds)
    assert np.max(np.abs(grad - want)) <= 1e-11 * np.max(np.abs(want))


CHECK = """
import warnings, sys, symdae
model, _ = symdae.load_model("oscillator")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    system = symdae.compile_model(model, cache_dir=sys.argv[1])
print(system.backend.name)
print(" | ".join(str(w.message) for w in caught))
tr = system.simulate(t_end=0.1, h=0.01, store_factorizations=True)
print(tr.q[-1, 0])
cost = symdae.LeastSquares({"q": 0.0 * tr.outputs["q"]})
print(symdae.adjoint_gradient(system, tr, cost.evaluate(system, tr)[1])[1])
"""


def run(code, *args, env=None, cwd=None):
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         timeout=300, env=env, cwd=cwd)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_no_c_compiler_falls_back_to_numpy_with_a_warning(tmp_path):
    env = dict(os.environ, CC=str(tmp_path / "no-such-compiler"))
    backend, warning, q_end, dJ_dc = run(CHECK, str(tmp_path / "cache"), env=env)
    assert backend == "numpy"
    # one line: what happened, and how to get the compiled speed
    assert "no C compiler" in warning and "NumPy backend" in warning and "install" in warning
    assert "\n" not in warning
    system = symdae.compile_model(symdae.load_model("oscillator")[0])
    ref = system.simulate(t_end=0.1, h=0.01, store_factorizations=True)
    assert float(q_end) == pytest.approx(ref.q[-1, 0], rel=1e-12)
    cost = LeastSquares({"q": 0.0 * ref.outputs["q"]})
    want = adjoint_gradient(system, ref, cost.evaluate(system, ref)[1])[1]
    assert want != 0 and float(dJ_dc) == pytest.approx(want, rel=1e-9)
    # explicitly compiled without a compiler: a BuildError that says so
    code = ("import sys, symdae\nm, _ = symdae.load_model('oscillator')\ntry:\n"
            "    symdae.compile_model(m, cache_dir=sys.argv[1], backend='compiled')\n"
            "except symdae.BuildError as e:\n    print(type(e).__name__, e)\n")
    (line, *_) = run(code, str(tmp_path / "cache2"), env=env)
    assert line.startswith("BuildError compiling oscillator-")


def test_warm_cache_needs_no_compiler(tmp_path):
    cache = tmp_path / "cache"
    symdae.compile_model(symdae.load_model("oscillator")[0], cache_dir=cache)
    env = dict(os.environ, CC=str(tmp_path / "no-such-compiler"))
    backend, warning, *_ = run(CHECK, str(cache), env=env)
    assert backend == "compiled" and warning == ""


def test_import_and_simulate_without_the_compiled_core(tmp_path):
    """A source tree whose core was never built: import works, compile falls back."""
    shutil.copytree(Path(symdae.__file__).parent, tmp_path / "symdae",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c"))
    shutil.copytree(ROOT / "models", tmp_path / "models",
                    ignore=shutil.ignore_patterns("__pycache__"))
    backend, warning, *_ = run(CHECK, str(tmp_path / "cache"), cwd=tmp_path)
    assert backend == "numpy" and "compiled core symdae.simulation.core.hht is not built" in warning


def test_unknown_backend_is_named():
    x = dynamicsymbols("x")
    k = sp.Symbol("k")
    model = symdae.Model("backend_probe", [x], mass_matrix=[[1]], forces=[-k * x],
                         parameters={k: 1.0})
    with pytest.raises(symdae.InputError, match="backend must be one of"):
        symdae.compile_model(model, backend="fortran")
