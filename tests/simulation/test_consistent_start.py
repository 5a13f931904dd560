"""The consistent initial state in one compiled call (``Kernels.consistent_start``) against the
general path of ``symdae.simulation.initial.initial_state`` on the same kernels: the same a0 and
lam0 to round-off on every bundled model, and None (the general path decides and names the
failure) wherever that path has anything to decide."""
from __future__ import annotations

import numpy as np
import pytest

import maxwell_models
import symdae
from symdae.errors import InconsistentInitialStateError, InputError, SingularMatrixError
from symdae.simulation.initial import initial_state


def general_path(system, monkeypatch, **kw):
    """initial_state with the compiled shortcut switched off."""
    with monkeypatch.context() as mp:
        mp.setattr(system.backend, "consistent_start", lambda *args: None)
        return _start(system, **kw)


def _start(system, params=None, q0=None, v0=None, t0=0.0, tol=1e-9):
    p = system.parameter_vector(params)
    u0 = np.zeros(system.sizes.n_u)
    return initial_state(system.backend, system.model, p, t0, u0, q0, v0, tol=tol)


def check_one_call(system, monkeypatch, params, sc):
    """The one call against the general path at the scenario's start."""
    ref = general_path(system, monkeypatch, params=params, q0=sc.q0, v0=sc.v0, t0=sc.t0)
    p = system.parameter_vector(params)
    fast = system.backend.consistent_start(sc.t0, ref.q, ref.v, p,
                                           np.zeros(system.sizes.n_u), 1e-9)
    if ref.massless:                    # a row the general path differentiates: not here
        assert fast is None
        return
    assert fast is not None, "the one-call path declined a regular start"
    y, y_ref = np.concatenate(fast), np.concatenate([ref.a, ref.lam])
    scale = max(np.max(np.abs(y_ref), initial=0.0), 1e-300)
    # two LU codes (the core's and LAPACK's) on the same matrix: round-off apart (measured:
    # at most 3.2 eps on the 13 x 13 matrix of Andrews' squeezer, 0 on most models)
    assert np.max(np.abs(y - y_ref), initial=0.0) <= 64 * np.finfo(float).eps * scale
    x0 = _start(system, params=params, q0=sc.q0, v0=sc.v0, t0=sc.t0)   # initial_state uses it
    assert np.array_equal(np.concatenate([x0.a, x0.lam]), y)


@pytest.mark.parametrize("name", symdae.bundled_models())
def test_one_call_equals_the_general_path(name, monkeypatch):
    model, ns = symdae.load_model(name)
    system = symdae.compile_model(model)
    sc = symdae.Scenario.make(ns.get("SCENARIO") or {"t_end": 1.0, "h": 1e-3})
    check_one_call(system, monkeypatch, ns.get("START"), sc)


@pytest.mark.parametrize("name", symdae.bundled_models())
def test_the_models_start_values_are_its_initial_state_kernel(name):
    """backend.model_start (the kernel called without at()'s checks) gives the very q0, v0 of
    the initial_state kernel evaluated through the checked path, at the model's parameters
    and, where it has them, at its start values (q0 and v0 may depend on p)."""
    model, ns = symdae.load_model(name)
    system = symdae.compile_model(model)
    sz = system.sizes
    u0 = np.zeros(sz.n_u)
    for params in (None, ns.get("START")):
        p = system.parameter_vector(params)
        out = system.backend.evaluate("initial_state", 0.25, np.zeros(sz.n), np.zeros(sz.n),
                                      np.zeros(sz.n), np.zeros(sz.m), p, u0)
        q0, v0 = system.backend.model_start(0.25, p, u0)
        assert np.array_equal(q0, out[:sz.n]) and np.array_equal(v0, out[sz.n:])
        assert q0.shape == v0.shape == (sz.n,)


def test_the_numpy_backends_start_values_are_the_compiled_ones():
    model, ns = symdae.load_model("double_pendulum")
    compiled = symdae.compile_model(model)
    numpy_backend = symdae.compile_model(model, backend="numpy")
    p = compiled.parameter_vector(ns.get("START"))
    q0, v0 = compiled.backend.model_start(0.0, p, [])
    nq0, nv0 = numpy_backend.backend.model_start(0.0, p, [])
    assert np.any(q0 != 0.0)                   # the double pendulum starts deflected
    np.testing.assert_allclose(nq0, q0, rtol=1e-14, atol=0.0)
    np.testing.assert_allclose(nv0, v0, rtol=1e-14, atol=0.0)


def test_a_wrong_parameter_vector_is_named_before_the_kernel_reads_it():
    model, _ = symdae.load_model("pendulum")
    system = symdae.compile_model(model)
    with pytest.raises(symdae.errors.InputError, match="initial state: p has 1 entries"):
        system.backend.model_start(0.0, [1.0], [])


def test_one_call_above_the_dense_lu_takes_lapack(monkeypatch):
    """Above the core's own dense LU (DENSE_LU_MAX) the one call factorises with LAPACK: a
    chain of 12 pendula in Cartesian coordinates (36 x 36)."""
    _, ns = symdae.load_model("pendulum_chain")
    system = symdae.compile_model(ns["make_chain"](12))
    assert system.sizes.nm > system.backend.hht.DENSE_LU_MAX
    check_one_call(system, monkeypatch, None, symdae.Scenario(t_end=0.1, h=1e-3))


def test_inconsistent_or_singular_starts_go_the_general_way(monkeypatch):
    """Whatever the general path refuses, the shortcut declines, so the refusal is the same."""
    model, ns = symdae.load_model("slider_crank")
    system = symdae.compile_model(model)
    good = _start(system)
    p, u = system.parameter_vector(None), np.zeros(system.sizes.n_u)
    bad_q = good.q + 1e-3                # off the constraints
    assert system.backend.consistent_start(0.0, bad_q, good.v, p, u, 1e-9) is None
    with pytest.raises(InconsistentInitialStateError, match="violates constraint"):
        _start(system, q0=bad_q, v0=good.v)
    bad_v = good.v + 1.0                 # off the velocity constraints
    assert system.backend.consistent_start(0.0, good.q, bad_v, p, u, 1e-9) is None
    with pytest.raises(InconsistentInitialStateError, match="velocity form"):
        _start(system, q0=good.q, v0=bad_v)
    nan_v = good.v.copy()
    nan_v[0] = np.nan
    assert system.backend.consistent_start(0.0, good.q, nan_v, p, u, 1e-9) is None


def test_a_zero_mass_declines():
    """The Maxwell node's mass is a parameter: 0 makes its row massless at run time."""
    osc = symdae.compile_model(maxwell_models.oscillator(True, "maxwell_oscillator_mz"))
    p = dict(zip(osc.model.parameter_names, osc.model.nominal_values))
    q0, v0 = [p["X0"], p["Z0"]], [p["V0"], 0.0]
    assert osc.backend.consistent_start(0.0, q0, v0, osc.parameter_vector(p), [], 1e-9) is None
    p["mz"] = 0.5
    assert osc.backend.consistent_start(0.0, q0, v0, osc.parameter_vector(p), [],
                                        1e-9) is not None


def test_a_singular_matrix_declines():
    """The Cartesian pendulum at zero length: C_q = 0, the initialisation matrix is singular."""
    model, _ = symdae.load_model("pendulum")
    s = symdae.compile_model(model)
    p = s.parameter_vector({"L": 0.0})
    assert s.backend.consistent_start(0.0, [0.0, 0.0], [0.0, 0.0], p, [], 1e-9) is None
    with pytest.raises(SingularMatrixError):
        _start(s, params={"L": 0.0}, q0=[0.0, 0.0], v0=[0.0, 0.0])


def bundled_start(name):
    """A bundled model's system and consistent start at its start values (or nominal ones):
    (system, scenario, p, u0, x0)."""
    model, ns = symdae.load_model(name)
    system = symdae.compile_model(model)
    sc = symdae.Scenario.make(ns.get("SCENARIO") or {"t_end": 1.0, "h": 1e-3})
    p = system.parameter_vector(ns.get("START"))
    u0 = np.zeros(system.sizes.n_u)
    x0 = initial_state(system.backend, model, p, sc.t0, u0, sc.q0, sc.v0, tol=sc.init_tol)
    return system, sc, p, u0, x0


@pytest.mark.parametrize("name", symdae.bundled_models())
def test_initial_adjoint_in_one_call_equals_the_general_path(name, monkeypatch):
    """The initial-state term of a gradient (dJ/dp through q0, v0, a0, lam0 for an adjoint
    xbar0) in one compiled call equals init_adjoint's NumPy products on the same kernels to
    round-off, on every bundled model (q0, v0 from the model's expressions where it has
    them); a start with massless rows stays on the general path."""
    from symdae.simulation.initial import init_adjoint

    system, sc, p, u0, x0 = bundled_start(name)
    xbar = np.random.default_rng(7).uniform(-1.0, 1.0, system.sizes.nx)
    with monkeypatch.context() as mp:
        mp.setattr(system.backend, "initial_adjoint", lambda *args: None)
        ref = init_adjoint(system.backend, x0, p, sc.t0, u0, xbar)
    fast = system.backend.initial_adjoint(sc.t0, x0.q, x0.v, x0.a, x0.lam, p, u0, xbar,
                                          x0.from_model)
    if x0.massless:
        np.testing.assert_array_equal(init_adjoint(system.backend, x0, p, sc.t0, u0, xbar), ref)
        return
    assert fast is not None and fast.shape == ref.shape
    # products summed in another order, two LU codes: round-off apart, on the log-parameter
    # scale (parameters span many orders of magnitude; measured: at most 1.4e-15)
    scaled = np.abs(fast - ref) * np.abs(p)
    assert np.max(scaled, initial=0.0) <= 1e-13 * max(np.max(np.abs(ref * p)), 1e-300)
    assert np.array_equal(init_adjoint(system.backend, x0, p, sc.t0, u0, xbar), fast)


@pytest.mark.parametrize("name", symdae.bundled_models())
def test_initial_tangent_in_one_call_equals_the_general_path(name, monkeypatch):
    """The sensitivities of (q0, v0, a0, lam0) along parameter directions in one compiled call
    equal init_tangent's NumPy products on the same kernels to round-off, on every bundled
    model (q0, v0 from the model's expressions where it has them); a start with massless
    rows stays on the general path."""
    from symdae.simulation.initial import init_tangent

    system, sc, p, u0, x0 = bundled_start(name)
    # relative changes of every parameter, three directions
    D = np.random.default_rng(7).uniform(-1.0, 1.0, (system.sizes.n_p, 3)) * \
        np.where(p != 0.0, np.abs(p), 1.0)[:, None]
    with monkeypatch.context() as mp:
        mp.setattr(system.backend, "initial_tangent", lambda *args: None)
        ref = init_tangent(system.backend, x0, p, sc.t0, u0, D)
    fast = system.backend.initial_tangent(sc.t0, x0.q, x0.v, x0.a, x0.lam, p, u0, D,
                                          x0.from_model)
    got = init_tangent(system.backend, x0, p, sc.t0, u0, D)
    if x0.massless:
        for g, r in zip(got, ref):
            np.testing.assert_array_equal(g, r)
        return
    assert fast is not None
    errs = []
    for f, g, r in zip(fast, got, ref):
        assert f.shape == r.shape
        np.testing.assert_array_equal(g, f)          # init_tangent takes the compiled call
        # products summed in another order, two LU codes: round-off apart
        errs.append(np.max(np.abs(f - r), initial=0.0) / max(np.max(np.abs(r), initial=0.0),
                                                             1e-300))
    assert max(errs) <= 1e-12


def test_initial_tangent_names_arrays_of_the_wrong_shape():
    model, ns = symdae.load_model("fourbar")
    system = symdae.compile_model(model)
    sz = system.sizes
    z = np.zeros
    state = (0.0, z(sz.n), z(sz.n), z(sz.n), z(sz.m), z(sz.n_p))
    with pytest.raises(InputError, match="directions"):
        system.backend.initial_tangent(*state, z(sz.n_u), z((sz.n_p + 1, 2)), z(2 * sz.n))
    # the compiled call itself: out has 3 rows for 2 directions
    with pytest.raises(ValueError, match="initial_tangent: directions"):
        system.backend.kernels.initial_tangent(*state, z(max(sz.n_u, 1)), z((2, sz.n_p)),
                                               z(2 * sz.n), system.backend._initial_blocks,
                                               z((3, sz.nx)))
