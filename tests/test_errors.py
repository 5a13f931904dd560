"""Bad input raises a specific exception whose message names the problem."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae
from symdae.errors import (
    InconsistentInitialStateError,
    InputError,
    ModelError,
    NewtonError,
    SimulationError,
    SingularMatrixError,
    SymdaeError,
    UndeclaredSymbolError,
)

t = dynamicsymbols._t


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def pendulum(bundled):
    return bundled("pendulum")[0]


@pytest.fixture(scope="module")
def two_mass(tmp_path_factory):
    """x: m1 x'' = -k x + u(t) (an input);  z: m2 z'' = -k2 z (m2 may be set to 0)."""
    x, z, u = dynamicsymbols("x z u")
    m1, m2, k, k2 = sp.symbols("m1 m2 k k2")
    model = symdae.Model("errors_two_mass", [x, z], mass_matrix=sp.diag(m1, m2),
                         forces=[-k * x + u, -k2 * z], inputs=[u],
                         parameters={m1: 1.0, m2: 1.0, k: 4.0, k2: 16.0},
                         initial_state={x: 0.1, z: 0.2}, outputs={"x": x})
    return symdae.compile_model(model, cache_dir=tmp_path_factory.mktemp("errors_cache"))


def pendulum_state(theta=0.9, omega=0.5, L=0.8):
    q = np.array([L * math.sin(theta), -L * math.cos(theta)])
    v = np.array([L * omega * math.cos(theta), L * omega * math.sin(theta)])
    return q, v


# ---------------------------------------------------------------------------- model definition
def test_undeclared_symbol_is_named():
    x = dynamicsymbols("x")
    m, k, mystery = sp.symbols("m k mystery_coefficient")
    with pytest.raises(UndeclaredSymbolError) as exc:
        symdae.Model("bad", [x], mass_matrix=[[m]], forces=[-k * x - mystery * x.diff(t)],
                     parameters={m: 1.0, k: 1.0})
    assert "mystery_coefficient" in str(exc.value)
    assert "force 0" in str(exc.value)
    assert exc.value.symbols == (mystery,)
    assert isinstance(exc.value, ModelError)


def test_undeclared_function_of_time_is_named():
    x, y = dynamicsymbols("x y")
    with pytest.raises(UndeclaredSymbolError, match=r"\by\(t\).*constraint 0"):
        symdae.Model("bad", [x], mass_matrix=[[1]], constraints=[x - y])


def test_wrong_mass_matrix_shape():
    x, y = dynamicsymbols("x y")
    msg = "mass_matrix has shape (3, 3), expected (2, 2)"
    with pytest.raises(ModelError, match=re.escape(msg)):
        symdae.Model("bad", [x, y], mass_matrix=sp.eye(3))
    with pytest.raises(ModelError, match=re.escape("shape (1, 2)")):
        symdae.Model("bad", [x, y], mass_matrix=[[1, 0]])


def test_forces_of_the_wrong_length():
    x, y = dynamicsymbols("x y")
    with pytest.raises(ModelError, match="forces has 3 entries, expected 2"):
        symdae.Model("bad", [x, y], mass_matrix=sp.eye(2), forces=[-x, -y, 0])
    with pytest.raises(ModelError, match="forces has 1 entries, expected 2"):
        symdae.Model("bad", [x, y], mass_matrix=sp.eye(2), forces=[-x])


def test_velocity_inside_a_constraint():
    x, y = dynamicsymbols("x y")
    with pytest.raises(ModelError, match=r"constraint 0 may not depend on Derivative\(x\(t\), t\)"):
        symdae.Model("bad", [x, y], mass_matrix=sp.eye(2), constraints=[x.diff(t) - y])


def test_acceleration_inside_a_force_and_third_derivative():
    x = dynamicsymbols("x")
    msg = r"force 0 \(x\) may not depend on Derivative\(x\(t\), \(t, 2\)\)"
    with pytest.raises(ModelError, match=msg):
        symdae.Model("bad", [x], mass_matrix=[[1]], forces=[-x.diff(t, 2)])
    with pytest.raises(ModelError, match="only first and second time derivatives"):
        symdae.Model("bad", [x], mass_matrix=[[1]], forces=[-x.diff(t, 3)])


def test_velocity_in_mass_matrix():
    x = dynamicsymbols("x")
    with pytest.raises(ModelError, match=r"mass_matrix\[0, 0\] may not depend on Derivative"):
        symdae.Model("bad", [x], mass_matrix=[[1 + x.diff(t) ** 2]])


def test_non_finite_nominal_parameter_value():
    x = dynamicsymbols("x")
    k = sp.Symbol("k")
    with pytest.raises(ModelError, match="parameter k is not finite"):
        symdae.Model("bad", [x], mass_matrix=[[1]], forces=[-k * x], parameters={k: math.inf})


def test_reserved_symbol_name():
    x = dynamicsymbols("x")
    p0 = sp.Symbol("p[0]")
    with pytest.raises(ModelError, match=re.escape("'p[0]' is reserved")):
        symdae.Model("bad", [x], mass_matrix=[[1]], forces=[-p0 * x], parameters={p0: 1.0})


# ---------------------------------------------------------------------------- run-time data
def test_unknown_parameter_name(pendulum):
    with pytest.raises(KeyError) as exc:
        pendulum.simulate(t_end=0.1, h=0.01, params={"lenght": 1.0})
    msg = exc.value.args[0]
    assert "unknown parameter 'lenght'" in msg and "'L'" in msg


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_parameter_value(pendulum, value):
    with pytest.raises(ValueError, match="value of parameter 'g' is not finite"):
        pendulum.simulate(t_end=0.1, h=0.01, params={"g": value})


def test_non_numeric_parameter_value(pendulum):
    with pytest.raises(symdae.errors.InputError, match="value of parameter 'g' is not a number"):
        pendulum.simulate(t_end=0.1, h=0.01, params={"g": "nine"})


def test_inconsistent_q0_names_the_constraint(pendulum):
    q, v = pendulum_state()
    q_bad = 1.01 * q
    C = q_bad @ q_bad - 0.8**2                      # independent value of C_0(q0)
    with pytest.raises(InconsistentInitialStateError) as exc:
        pendulum.simulate(t_end=0.1, h=0.01, q0=q_bad, v0=v)
    msg = str(exc.value)
    assert "q0 violates constraint 0" in msg
    assert f"{C:.3e}" in msg


def test_inconsistent_v0(pendulum):
    q, v = pendulum_state()
    v_bad = v + 0.01 * q                            # radial component: C_q v = 2 q.v != 0
    with pytest.raises(InconsistentInitialStateError) as exc:
        pendulum.simulate(t_end=0.1, h=0.01, q0=q, v0=v_bad)
    msg = str(exc.value)
    assert "v0 violates the velocity form of constraint 0" in msg
    assert f"{2 * q @ v_bad:.3e}" in msg


def test_consistent_q0_v0_accepted(pendulum):
    q, v = pendulum_state(theta=-0.3, omega=1.1)
    tr = pendulum.simulate(t_end=0.1, h=0.01, q0=q, v0=v)
    np.testing.assert_array_equal(tr.q[0], q)
    np.testing.assert_array_equal(tr.v[0], v)


def test_project_repairs_slightly_inconsistent_q0(pendulum):
    q, v = pendulum_state()
    q_bad = (1 + 1e-4) * q
    with pytest.raises(InconsistentInitialStateError):
        pendulum.simulate(t_end=0.1, h=0.01, q0=q_bad, v0=v)
    tr = pendulum.simulate(t_end=0.1, h=0.01, q0=q_bad, v0=v, project=True)
    # the minimum-norm correction onto the circle is the radial one, back to q
    np.testing.assert_allclose(tr.q[0], q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(tr.v[0], v, rtol=0, atol=1e-12)
    assert abs(tr.q[0] @ tr.q[0] - 0.64) <= 1e-15
    assert abs(tr.q[0] @ tr.v[0]) <= 1e-15
    # and then it integrates like the consistent start
    ref = pendulum.simulate(t_end=0.1, h=0.01, q0=q, v0=v)
    np.testing.assert_allclose(tr.q, ref.q, rtol=0, atol=1e-11)


def test_project_repairs_inconsistent_v0(pendulum):
    q, v = pendulum_state()
    tr = pendulum.simulate(t_end=0.1, h=0.01, q0=q, v0=v + 0.05 * q, project=True)
    np.testing.assert_allclose(tr.v[0], v, rtol=0, atol=1e-12)   # radial part removed


@pytest.mark.parametrize("q0, v0, which, shape", [
    ([0.1, 0.2, 0.3], None, "q0", "(3,)"),
    ([[0.1, 0.2]], None, "q0", "(1, 2)"),
    (None, [0.0], "v0", "(1,)"),
])
def test_wrong_q0_v0_shape(pendulum, q0, v0, which, shape):
    q, v = pendulum_state()
    q0 = q if q0 is None else q0
    v0 = v if v0 is None else v0
    with pytest.raises(ModelError, match=re.escape(f"{which} has shape {shape}, expected (2,)")):
        pendulum.simulate(t_end=0.1, h=0.01, q0=q0, v0=v0)


def test_nan_in_q0(pendulum):
    with pytest.raises(ModelError, match="q0 contains NaN"):
        pendulum.simulate(t_end=0.1, h=0.01, q0=[math.nan, -0.8], v0=[0.0, 0.0])


# ---------------------------------------------------------------------------- time grid, alpha
@pytest.mark.parametrize("t_end, h", [(1.0, 0.3), (0.1, 0.03), (1.0, 0.0007)])
def test_t_end_not_a_multiple_of_h(pendulum, t_end, h):
    with pytest.raises(ValueError, match="not a whole multiple of h"):
        pendulum.simulate(t_end=t_end, h=h)


@pytest.mark.parametrize("t_end, h, match", [
    (1.0, 0.0, "time step h must be positive"),
    (1.0, -0.01, "time step h must be positive"),
    (0.0, 0.01, "must be greater than t0"),
    (math.nan, 0.01, "t_end must be a finite number"),
    (1.0, math.inf, "h must be a finite number"),
])
def test_bad_time_grid(pendulum, t_end, h, match):
    with pytest.raises(ValueError, match=match):
        pendulum.simulate(t_end=t_end, h=h)


@pytest.mark.parametrize("alpha", [0.05, -0.34, -0.5, 1.0, math.nan])
def test_alpha_outside_range(pendulum, alpha):
    with pytest.raises(ValueError, match=r"alpha must lie in \[-1/3, 0\]"):
        pendulum.simulate(t_end=0.1, h=0.01, alpha=alpha)


@pytest.mark.parametrize("alpha", [0.0, -1.0 / 3.0])
def test_alpha_range_ends_accepted(pendulum, alpha):
    assert pendulum.simulate(t_end=0.1, h=0.01, alpha=alpha).counters["steps"] == 10


# ---------------------------------------------------------------------------- inputs
def test_nan_in_inputs(two_mass):
    u = np.zeros(11)
    u[4] = math.nan
    with pytest.raises(ValueError, match=r"input 'u' is NaN or infinite at t = 0.04 \(step 4\)"):
        two_mass.simulate(t_end=0.1, h=0.01, inputs={"u": u})
    with pytest.raises(ValueError, match=r"input 'u' is NaN or infinite at t = 0.06 \(step 6\)"):
        two_mass.simulate(t_end=0.1, h=0.01, inputs={"u": lambda tt: np.where(tt > 0.05, math.inf, 0)})


def test_input_missing_unknown_or_misshaped(two_mass):
    with pytest.raises(ValueError, match="no values for input 'u'"):
        two_mass.simulate(t_end=0.1, h=0.01)
    with pytest.raises(KeyError, match="unknown input 'w'"):
        two_mass.simulate(t_end=0.1, h=0.01, inputs={"u": 1.0, "w": 1.0})
    with pytest.raises(ValueError, match=re.escape("input 'u' has shape (10,), expected (11,)")):
        two_mass.simulate(t_end=0.1, h=0.01, inputs={"u": np.zeros(10)})


def test_inputs_reach_the_sweep(two_mass):
    """A constant input F shifts x's rest position: x = F/k + (x0 - F/k) cos(2 t) exactly
    in the limit h -> 0; the trapezoidal rule keeps the amplitude, so compare loosely."""
    tr = two_mass.simulate(t_end=1.0, h=0.001, alpha=0.0, inputs={"u": 2.0})
    x_exact = 0.5 + (0.1 - 0.5) * np.cos(2.0 * tr.t)
    assert np.max(np.abs(tr.q[:, 0] - x_exact)) < 1e-5


# ---------------------------------------------------------------------------- singular, Newton
def test_zero_mass_not_fixed_by_a_constraint(two_mass):
    with pytest.raises(SingularMatrixError) as exc:
        two_mass.simulate(t_end=0.1, h=0.01, inputs={"u": 0.0}, params={"m2": 0.0})
    msg = str(exc.value)
    assert "singular" in msg and "involves z" in msg and "involves x" not in msg


def test_singular_newton_matrix_in_the_sweep(two_mass):
    """Initial matrix M regular, Newton matrix M/(1+alpha) + beta h^2 K singular in z:
    m2 = -beta h^2 k2 = -(0.5^2 / 4) 16 = -1 at alpha = 0."""
    with pytest.raises(SingularMatrixError) as exc:
        two_mass.simulate(t_end=1.0, h=0.5, alpha=0.0, inputs={"u": 0.0}, params={"m2": -1.0})
    msg = str(exc.value)
    assert "about z" in msg and "t = 0" in msg


def test_overflow_reported_with_time(two_mass):
    """A force of 1e308 N on 1 g from t = 0.6 s: the acceleration overflows. (On 1 kg it
    does not: a = 1e308 is a double, and the run goes on with it.)"""
    u = np.zeros(101)
    u[60:] = 1e308
    with pytest.raises(SimulationError) as exc:
        two_mass.simulate(t_end=1.0, h=0.01, inputs={"u": u}, params={"m1": 1e-3})
    assert not isinstance(exc.value, (NewtonError, SingularMatrixError))
    msg = str(exc.value)
    assert "NaN or infinity" in msg
    m = re.search(r"t = ([0-9.]+) \(step (\d+) of 100", msg)
    assert m and int(m.group(2)) >= 60 and float(m.group(1)) == pytest.approx(
        0.01 * int(m.group(2)))


@pytest.mark.parametrize("padding", [0, 16])
def test_nan_in_one_residual_row_is_reported_as_not_finite(tmp_path, padding):
    """A residual row that turns NaN is reported as such wherever it sits among the rows
    (the max-norm of a NaN row followed by finite ones is NaN, not the finite rows' max),
    at the step where it happens, not as a Newton failure or a silent NaN. With 16 more
    coordinates (the NaN row in the middle of 18), the Newton loop takes its max-norms in
    vector lanes (vector_ops.h), which must carry the NaN too."""
    x, z = dynamicsymbols("x z")
    k, k2 = sp.symbols("k k2")
    pad = list(dynamicsymbols(f"w0:{padding}")) if padding else []
    coords = pad[:padding // 2] + [x] + pad[padding // 2:] + [z]
    forces = {x: -k * sp.sqrt(x - 0.5), z: -k2 * z} | {w: -k2 * w for w in pad}
    # x'' = -k sqrt(x - 0.5) from x = 1 at rest: x falls below 0.5, where x's row is NaN
    model = symdae.Model(f"errors_nan_row_{padding}", coords, mass_matrix=sp.eye(len(coords)),
                         forces=[forces[c] for c in coords],
                         parameters={k: 4.0, k2: 9.0},
                         initial_state={x: 1.0, z: 0.3} | {w: 0.1 for w in pad},
                         outputs={"z": z})
    system = symdae.compile_model(model, cache_dir=tmp_path)
    with pytest.raises(SimulationError) as exc:
        system.simulate(t_end=2.0, h=0.01)
    assert not isinstance(exc.value, (NewtonError, SingularMatrixError))
    msg = str(exc.value)
    assert "NaN or infinity in the residual" in msg and "residual max-norm nan" in msg
    # the step reported is the first whose iterates leave x >= 0.5: the run to the step
    # before it is finite and still above
    m = re.search(r"\(step (\d+) of 200", msg)
    step = int(m.group(1))
    before = system.simulate(t_end=0.01 * (step - 1), h=0.01)
    assert before.q[-1, coords.index(x)] > 0.5 and np.all(np.isfinite(before.q))


def test_newton_failure_for_an_absurd_step(pendulum):
    with pytest.raises(NewtonError) as exc:
        pendulum.simulate(t_end=4.0, h=1.0, max_iter=6)
    e = exc.value
    assert isinstance(e, SymdaeError)
    assert e.time == 1.0 and e.step == 1 and e.iterations == 6
    assert math.isfinite(e.residual_norm) and e.residual_norm > 1e-6
    msg = str(e)
    assert "t = 1 (step 1 of 4, h = 1)" in msg
    assert "after 6 iterations" in msg
    assert f"{e.residual_norm:.3e}" in msg


def test_newton_failure_far_from_the_solution_is_reported_as_newton_error():
    """h = 1 s on the engine mount (whose periods are milliseconds): the first step's start
    value is so far from its solution that 20 iterations do not reach it."""
    model, _ = symdae.load_model("engine_mount")
    system = symdae.compile_model(model)
    with pytest.raises(NewtonError) as exc:
        system.simulate(t_end=2.0, h=1.0)
    assert exc.value.time == pytest.approx(1.0) and exc.value.step == 1
    assert exc.value.iterations == 20 and "t = 1 (step 1 of 2, h = 1)" in str(exc.value)


def test_scalar_function_input_is_called_per_sample(two_mass):
    a = two_mass.simulate(t_end=0.1, h=0.01, inputs={"u": math.sin})
    b = two_mass.simulate(t_end=0.1, h=0.01, inputs={"u": np.sin})
    np.testing.assert_array_equal(a.q, b.q)
    with pytest.raises(InputError, match="input 'u': the callable accepts neither"):
        two_mass.simulate(t_end=0.1, h=0.01, inputs={"u": lambda: 1.0})


def test_non_finite_output_names_the_output_and_time(tmp_path):
    x = dynamicsymbols("x")
    k = sp.Symbol("k")
    model = symdae.Model("errors_nan_output", [x], mass_matrix=[[1]], forces=[-k * x],
                         parameters={k: 4.0}, initial_state={x: 1.0},
                         outputs={"x": x, "root": sp.sqrt(x - 0.5)})
    system = symdae.compile_model(model, cache_dir=tmp_path)
    # x = cos(2 t) falls below 0.5 at t = pi / 6 = 0.5236
    with pytest.raises(SimulationError, match=r"output 'root' is nan at t = 0\.53 \(step 53\), "
                                              r"its first non-finite sample"):
        system.simulate(t_end=1.0, h=0.01)
    tr = system.simulate(t_end=0.5, h=0.01)
    dPhi = np.zeros((len(tr.t), 2))
    dPhi[7, 1] = math.inf
    with pytest.raises(InputError, match=r"dPhi \(the cost's derivative\) is inf for output "
                                         r"'root' at t = 0\.07 \(step 7\)"):
        symdae.adjoint_gradient(system, tr, dPhi)


# ---------------------------------------------------------------------------- across processes
def _every_error() -> list[BaseException]:
    """One instance of each exception class of symdae.errors, with its attributes set."""
    import inspect

    import symdae.errors as errors
    made = {
        errors.NewtonError: errors.NewtonError("Newton failed", time=0.25, step=250,
                                               iterations=8, residual_norm=3e-4,
                                               noise_ratio=12.0),
        errors.UndeclaredSymbolError: errors.UndeclaredSymbolError(["z", "w"], "forces"),
        errors.BuildError: errors.BuildError("build failed", output="gcc: error",
                                             log_path="/tmp/build.log"),
        errors.NotIdentifiableError: errors.NotIdentifiableError(
            "singular", [{"c": 1.0, "d": -1.0}]),
        errors.Interrupted: errors.Interrupted.at(0.5, 2.0, "forward"),
    }
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass)
               if issubclass(c, BaseException) and c.__module__ == errors.__name__]
    assert len(classes) >= 13
    return [made.get(c) or c(f"a {c.__name__}") for c in classes]


@pytest.mark.parametrize("error", _every_error(), ids=lambda e: type(e).__name__)
def test_every_error_pickles_whole(error):
    """What a process pool does with an error raised in its worker: the class, the message
    and every attribute come back (an error whose __init__ takes keyword-only arguments could
    not be unpickled, and the pool broke instead of reporting it)."""
    import pickle
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error)
    assert str(back) == str(error) and back.args == error.args
    assert repr(vars(back)) == repr(vars(error))      # (repr: NaN attributes compare)


def _raise_newton_error(step: int):
    raise NewtonError(f"Newton failed at step {step}", time=step * 1e-3, step=step,
                      iterations=8, residual_norm=1e-2)


def test_an_error_in_a_worker_process_reaches_the_caller_as_itself():
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1) as pool:
        with pytest.raises(NewtonError, match="Newton failed at step 7") as info:
            pool.submit(_raise_newton_error, 7).result(timeout=120)
        # the pool is still usable: it did not break on the error
        assert pool.submit(abs, -3).result(timeout=120) == 3
    assert (info.value.step, info.value.time, info.value.iterations) == (7, 7e-3, 8)
