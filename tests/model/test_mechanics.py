"""Models from sympy.physics.mechanics (``symdae.from_mechanics``).

References are independent of the conversion: SymPy's own KanesMethod equations of the very
same System (``System.form_eoms``: minimal coordinates for the double pendulum; for the
four-bar the dependent angles and speeds eliminated by Kane's velocity constraints, no
multipliers), integrated by scipy's DOP853 at rtol = atol = 1e-12. symdae integrates the
converted model in all coordinates with the loop closures as index-3 constraints; with
alpha = 0 its error against the reference is the HHT discretisation error, O(h^2): the
error ratio is about 4 when h halves.

Gradients on the bundled four-bar (``models/four_bar_joints.py``): adjoint = tangent-linear
to 1e-10, and central finite differences with steps delta and delta/2 agree to their
truncation error (falling about fourfold). An identification recovers the spring and damper
from synthetic data. ``pytest -s`` prints the measured figures.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest
import sympy as sp
from scipy.integrate import solve_ivp
from sympy.physics.mechanics import (
    KanesMethod,
    LagrangesMethod,
    Lagrangian,
    Particle,
    PinJoint,
    Point,
    ReferenceFrame,
    RigidBody,
    System,
    dynamicsymbols,
    inertia,
)

import symdae
from symdae import LeastSquares, MechanicsError, UndeclaredSymbolError, from_mechanics
from symdae.simulation.sensitivity import adjoint_gradient, tangent

t = dynamicsymbols._t
q1, q2 = dynamicsymbols("q1 q2")
u1, u2 = dynamicsymbols("u1 u2")
m1, m2, l1, l2, g, dj = sp.symbols("m1 m2 l1 l2 g d_j")
th10, th20, w10, w20 = sp.symbols("theta10 theta20 omega10 omega20")
PEND = {m1: 1.0, m2: 0.7, l1: 1.0, l2: 0.8, g: 9.81, dj: 0.05,
        th10: 1.1, th20: -0.6, w10: 0.5, w20: 1.5}


# ---------------------------------------------------------------------------- the mechanisms
def rod(name: str, mass, length) -> RigidBody:
    frame = ReferenceFrame(f"{name}_frame")
    center = Point(f"{name}_center")
    return RigidBody(name, masscenter=center, frame=frame, mass=mass,
                     inertia=(inertia(frame, 0, 0, mass * length**2 / 12), center))


def double_pendulum():
    """Two uniform rods on PinJoints (relative joint angles), gravity, a damper torque in the
    second joint (a load on both frames). Returns (system, tip point, joints)."""
    ground = RigidBody("ground")
    N = ground.frame
    r1, r2 = rod("rod1", m1, l1), rod("rod2", m2, l2)
    j1 = PinJoint("j1", ground, r1, q1, u1, child_point=l1 / 2 * r1.frame.y, joint_axis=N.z)
    j2 = PinJoint("j2", r1, r2, q2, u2, parent_point=-l1 / 2 * r1.frame.y,
                  child_point=l2 / 2 * r2.frame.y, joint_axis=r1.frame.z)
    system = System.from_newtonian(ground)
    system.add_joints(j1, j2)
    system.apply_uniform_gravity(-g * N.y)
    torque = -dj * u2 * N.z
    system.add_loads((r2.frame, torque), (r1.frame, -torque))
    tip = r2.masscenter.locatenew("tip", -l2 / 2 * r2.frame.y)
    tip.v2pt_theory(r2.masscenter, N, r2.frame)
    return system, tip, (j1, j2)


def pendulum_model(system=None, tip=None, joints=None, **kw) -> symdae.Model:
    if system is None:
        system, tip, joints = double_pendulum()
    N, O = system.frame, system.fixed_point
    outputs = {"x_tip": tip.pos_from(O).dot(N.x), "vy_tip": tip.vel(N).dot(N.y),
               "ax_tip": tip.acc(N).dot(N.x), "joint1": joints[0]}
    init = {joints[0]: th10, q2: th20, u1: w10, q2.diff(t): w20}
    return from_mechanics(system, name="double_pendulum_mech", parameters=PEND,
                          outputs=outputs, initial_state=init, **kw)


@functools.cache
def pendulum_system():
    return symdae.compile_model(pendulum_model())


@functools.cache
def fourbar_file():
    """The bundled four-bar's model and its file's namespace (its build_system() makes the
    mechanics System), loaded once, when a case first asks (it takes seconds)."""
    return symdae.load_model("four_bar_joints")


@functools.cache
def fourbar_system():
    model, ns = fourbar_file()
    return symdae.compile_model(model), ns


# ---------------------------------------------------------------------------- references
def kane_reference(system: System, model: symdae.Model, t_end: float):
    """SymPy's KanesMethod equations of ``system`` (System.form_eoms), integrated by scipy at
    rtol = atol = 1e-12 from the model's initial state. Returns a dense solution in (q, u)."""
    system.form_eoms()
    params = list(model.parameters)
    values = list(model.parameters.values())
    q, u = system.q, system.u
    M = sp.lambdify((q, u, params), system.mass_matrix_full, cse=True)
    F = sp.lambdify((q, u, params), system.forcing_full, cse=True)
    n = len(q)

    def rhs(_t, x):
        return np.linalg.solve(M(x[:n], x[n:], values), F(x[:n], x[n:], values)).ravel()

    subs = model.parameters
    x0 = [float(e.subs(subs)) for e in model.initial_positions + model.initial_velocities]
    return solve_ivp(rhs, (0.0, t_end), x0, method="DOP853", rtol=1e-12, atol=1e-12,
                     dense_output=True).sol


def errors_against(system, reference, t_end, hs, n):
    """max |q - q_ref| over the grid for each step size (alpha = 0)."""
    out = []
    for h in hs:
        traj = system.simulate(t_end=t_end, h=h, alpha=0.0)
        out.append(float(np.max(np.abs(traj.q - reference(traj.t)[:n].T))))
    return np.array(out)


# ---------------------------------------------------------------------------- conversion
def test_double_pendulum_mass_matrix_and_forces_are_kanes():
    model = pendulum_model()
    system, _, _ = double_pendulum()
    system.form_eoms()
    speeds = dict(zip(system.u, (q1.diff(t), q2.diff(t))))
    Mk = system.mass_matrix.xreplace(speeds)
    Fk = system.forcing.xreplace(speeds)
    point = {q1: 0.3, q2: -1.2, q1.diff(t): 0.7, q2.diff(t): -0.4, **PEND}
    assert np.allclose(np.array((model.mass_matrix - Mk).subs(point), float), 0, atol=1e-13)
    assert np.allclose(np.array((model.forces - Fk).subs(point), float), 0, atol=1e-13)
    assert model.n == 2 and model.m == 0


def test_kanes_method_and_lagranges_method_give_the_same_model():
    system, tip, joints = double_pendulum()
    reference = pendulum_model(system, tip, joints)
    system2, _, _ = double_pendulum()
    kane = KanesMethod(system2.frame, q_ind=system2.q, u_ind=system2.u, kd_eqs=system2.kdes,
                       bodies=system2.bodies, forcelist=system2.loads)
    from_kane = from_mechanics(kane, parameters=PEND)
    # Lagrange: a hand-made double pendulum of particles in absolute angles
    N = ReferenceFrame("N")
    O = Point("O")
    O.set_vel(N, 0)
    A = N.orientnew("A", "Axis", (q1, N.z))
    B = N.orientnew("B", "Axis", (q2, N.z))
    P1 = O.locatenew("P1", -l1 * A.y)
    P2 = P1.locatenew("P2", -l2 * B.y)
    P1.set_vel(N, P1.pos_from(O).dt(N))
    P2.set_vel(N, P2.pos_from(O).dt(N))
    b1, b2 = Particle("b1", P1, m1), Particle("b2", P2, m2)
    b1.potential_energy = m1 * g * P1.pos_from(O).dot(N.y)
    b2.potential_energy = m2 * g * P2.pos_from(O).dot(N.y)
    loads = [(B, -dj * (q2.diff(t) - q1.diff(t)) * N.z),
             (A, dj * (q2.diff(t) - q1.diff(t)) * N.z)]
    lm = LagrangesMethod(Lagrangian(N, b1, b2), [q1, q2], forcelist=loads, frame=N)
    from_lagrange = from_mechanics(lm, parameters=PEND)
    assert from_lagrange.lagrangian is not None and from_lagrange.m == 0
    point = {q1: 0.3, q2: -1.2, q1.diff(t): 0.7, q2.diff(t): -0.4, **PEND}
    diff = (reference.mass_matrix - from_kane.mass_matrix).subs(point)
    assert np.allclose(np.array(diff, float), 0, atol=1e-13)
    diff = (reference.forces - from_kane.forces).subs(point)
    assert np.allclose(np.array(diff, float), 0, atol=1e-13)
    # the Lagrange forces: Q = sum T . dw/dq' for the joint damper, zero elsewhere
    assert sp.simplify(from_lagrange.forces[0] - dj * (q2.diff(t) - q1.diff(t))) == 0
    assert sp.simplify(from_lagrange.forces[1] + dj * (q2.diff(t) - q1.diff(t))) == 0


def test_linear_speeds_are_transformed_exactly():
    """u1 = q1', u2 = q1' + q2' (absolute speed of a relative joint): A^T M_u A and
    A^T (f_u - M_u A' q') equal the model with u = q'."""
    N = ReferenceFrame("N")
    O = Point("O")
    O.set_vel(N, 0)
    A = N.orientnew("A", "Axis", (q1, N.z))
    B = A.orientnew("B", "Axis", (q2, A.z))
    A.set_ang_vel(N, u1 * N.z)
    B.set_ang_vel(N, u2 * N.z)
    P1 = O.locatenew("P1", -l1 * A.y)
    P1.v2pt_theory(O, N, A)
    P2 = P1.locatenew("P2", -l2 * B.y)
    P2.v2pt_theory(P1, N, B)
    bodies = [Particle("b1", P1, m1), Particle("b2", P2, m2)]
    loads = [(P1, -m1 * g * N.y), (P2, -m2 * g * N.y)]
    kdes = [q1.diff(t) - u1, q1.diff(t) + q2.diff(t) - u2]
    kane = KanesMethod(N, [q1, q2], [u1, u2], kd_eqs=kdes, bodies=bodies, forcelist=loads)
    got = from_mechanics(kane, parameters=PEND, outputs={"w2": u2, "dw2": u2.diff(t)})
    # the same particles with u = q' (relative speeds)
    A.set_ang_vel(N, q1.diff(t) * N.z)
    B.set_ang_vel(N, (q1.diff(t) + q2.diff(t)) * N.z)
    P1.v2pt_theory(O, N, A)
    P2.v2pt_theory(P1, N, B)
    kdes2 = [q1.diff(t) - u1, q2.diff(t) - u2]
    A.set_ang_vel(N, u1 * N.z)
    B.set_ang_vel(N, (u1 + u2) * N.z)
    P1.v2pt_theory(O, N, A)
    P2.v2pt_theory(P1, N, B)
    kane2 = KanesMethod(N, [q1, q2], [u1, u2], kd_eqs=kdes2, bodies=bodies, forcelist=loads)
    ref = from_mechanics(kane2, parameters=PEND)
    point = {q1: 0.3, q2: -1.2, q1.diff(t): 0.7, q2.diff(t): -0.4, **PEND}
    assert np.allclose(np.array((got.mass_matrix - ref.mass_matrix).subs(point), float), 0,
                       atol=1e-13)
    assert np.allclose(np.array((got.forces - ref.forces).subs(point), float), 0, atol=1e-13)
    assert sp.simplify(got.outputs["w2"] - q1.diff(t) - q2.diff(t)) == 0
    assert sp.simplify(got.outputs["dw2"] - q1.diff(t, 2) - q2.diff(t, 2)) == 0


def test_four_bar_keeps_dependent_coordinates_and_loop_closures():
    model, _ = fourbar_file()
    assert model.coordinate_names == ["q1", "q2", "q3"]
    assert model.m == 2
    a, b, c, d = sp.symbols("a b c d")
    q3 = dynamicsymbols("q3")
    expected = [a * sp.cos(q1) + b * sp.cos(q1 + q2) + c * sp.cos(q1 + q2 + q3) - d,
                a * sp.sin(q1) + b * sp.sin(q1 + q2) + c * sp.sin(q1 + q2 + q3)]
    for got, ref in zip(model.constraints, expected):
        assert sp.simplify(got - ref) == 0
    # the initial state is consistent for the nominal parameters
    subs = model.parameters
    q0 = [float(e.subs(subs)) for e in model.initial_positions]
    v0 = [float(e.subs(subs)) for e in model.initial_velocities]
    state = dict(zip(model.coordinates, q0))
    for con in model.constraints:
        assert abs(float(con.subs(subs).subs(state))) < 1e-12
        rate = con.diff(t).subs(dict(zip(model.velocities, v0))).subs(subs).subs(state)
        assert abs(float(rate)) < 1e-12


# ---------------------------------------------------------------------------- trajectories
def test_double_pendulum_equals_kanes_equations_with_order_two():
    system = pendulum_system()
    T = 2.0
    ref_system, _, _ = double_pendulum()
    reference = kane_reference(ref_system, system.model, T)
    hs = (4e-3, 2e-3, 1e-3)
    err = errors_against(system, reference, T, hs, 2)
    ratios = err[:-1] / err[1:]
    print(f"\ndouble pendulum: max |q - q_scipy| = {err} for h = {hs}; ratios {ratios}")
    assert err[-1] < 1e-4
    assert np.all((ratios > 3.6) & (ratios < 4.4)), ratios
    # outputs built from points and joints follow the reference too
    traj = system.simulate(t_end=T, h=1e-3, alpha=0.0)
    q = reference(traj.t)[:2].T
    x_tip = PEND[l1] * np.sin(q[:, 0]) + PEND[l2] * np.sin(q[:, 0] + q[:, 1])
    assert np.max(np.abs(traj.outputs["x_tip"] - x_tip)) < 1e-4
    assert np.max(np.abs(traj.outputs["joint1"] - q[:, 0])) < 1e-4


def test_four_bar_equals_kanes_equations_with_order_two():
    system, _ = fourbar_system()
    T = 1.0
    reference = kane_reference(fourbar_file()[1]['build_system'](), system.model, T)
    hs = (4e-3, 2e-3, 1e-3)
    err = errors_against(system, reference, T, hs, 3)
    ratios = err[:-1] / err[1:]
    print(f"\nfour-bar: max |q - q_scipy| = {err} for h = {hs}; ratios {ratios}")
    assert err[-1] < 5e-5
    assert np.all((ratios > 3.6) & (ratios < 4.4)), ratios


# ---------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("alpha, outs", [
    (0.0, ("theta_rocker", "omega_crank")),
    (-0.3, ("theta_rocker", "omega_crank", "F_x")),
])
def test_four_bar_gradients(alpha, outs):
    """All 17 parameters (lengths inside the loop closure, masses, spring, damper, motor,
    initial crank angle and speed). alpha = 0 fits positions and velocities only: there the
    multipliers carry the trapezoidal rule's undamped period-2 mode, which amplifies round-off
    in the lambda sensitivities (adjoint vs tangent 1e-8 with F_x in the cost)."""
    system, _ = fourbar_system()
    names = system.model.parameter_names
    p0 = np.array(system.model.nominal_values)
    p_ref = p0 * (1.0 + 0.05 * np.sin(np.arange(len(p0)) + 1.0))
    T, h = (0.3, 1e-3) if alpha == 0.0 else (1.0, 1e-3)

    def run(p):
        return system.simulate(t_end=T, h=h, alpha=alpha, params=dict(zip(names, p)))

    ref = run(p_ref)
    cost = LeastSquares({k: ref.outputs[k] for k in outs},
                        weights={k: 1.0 / float(np.mean(ref.outputs[k]**2)) for k in outs})
    traj = run(p0)
    J, dJdS = cost.evaluate(system, traj)
    g_adj = adjoint_gradient(system, traj, dJdS)
    sens = tangent(system, traj, names)
    g_tlm = np.einsum("is,isd->d", dJdS, sens.ds)
    scale = np.where(p0 != 0, np.abs(p0), 1.0)
    tlm_err = np.max(np.abs(g_adj - g_tlm) * scale) / np.max(np.abs(g_tlm) * scale)

    def J_of(p):
        return cost.evaluate(system, run(p))[0]

    fd = {}
    for rel in (4e-4, 2e-4):
        g = np.empty(len(p0))
        for k in range(len(p0)):
            step = rel * (abs(p0[k]) or 1.0)
            pp, pm = p0.copy(), p0.copy()
            pp[k] += step
            pm[k] -= step
            g[k] = (J_of(pp) - J_of(pm)) / (2 * step)
        fd[rel] = g
    e1 = np.max(np.abs(fd[4e-4] - g_adj) * scale) / np.max(np.abs(g_adj) * scale)
    e2 = np.max(np.abs(fd[2e-4] - g_adj) * scale) / np.max(np.abs(g_adj) * scale)
    print(f"\nfour-bar alpha={alpha}: J = {J:.4e}, adjoint vs tangent {tlm_err:.2e}, "
          f"FD error {e1:.2e} (delta 4e-4), {e2:.2e} (2e-4), ratio {e1 / e2:.2f}")
    assert tlm_err < 1e-10
    assert e2 < 2e-6
    assert 3.2 < e1 / e2 < 5.0



# ---------------------------------------------------------------------------- identification
def test_identify_spring_and_damper_of_the_bundled_four_bar():
    system, ns = fourbar_system()
    scenario = ns["SCENARIO"]
    truth = {k: system.model.parameters[sp.Symbol(k)] for k in ns["FREE"]}
    data = system.simulate(scenario)
    cost = LeastSquares({k: data.outputs[k] for k in ns["OUTPUTS"]},
                        weights={k: 1.0 / float(np.mean(data.outputs[k]**2))
                                 for k in ns["OUTPUTS"]})
    exp = symdae.Experiment(system, cost, scenario)
    res = symdae.identify(exp, ns["FREE"], ns["START"], progress=False)
    err = res.relative_error(truth)
    print(f"\nfour-bar identification from {ns['START']}: {res.values}, relative errors {err}, "
          f"{res.n_simulations} simulations")
    assert max(err.values()) < 1e-6, res.summary()


def test_cli_identifies_the_bundled_model(tmp_path, capsys):
    fourbar_system()                      # compiled once for the whole file
    from symdae.cli.main import main

    assert main(["identify", "four_bar_joints", "--out-dir", str(tmp_path), "--quiet"]) == 0
    import json

    report = json.loads((tmp_path / "report.json").read_text())
    assert max(report["relative_error"].values()) < 1e-6
    assert "four_bar_joints" in symdae.bundled_models()


# ---------------------------------------------------------------------------- bad input
def test_not_a_mechanics_object():
    with pytest.raises(MechanicsError, match="System, KanesMethod or LagrangesMethod.*dict"):
        from_mechanics({"q": q1})


def test_undeclared_symbol_is_named():
    params = {k: v for k, v in PEND.items() if k != g}
    with pytest.raises(UndeclaredSymbolError, match=r"\bg\b.*formed from the System"):
        from_mechanics(double_pendulum()[0], parameters=params)


def test_nonholonomic_system_is_refused():
    system, _, _ = double_pendulum()
    system.add_nonholonomic_constraints(u1 - u2)
    with pytest.raises(MechanicsError, match="nonholonomic"):
        from_mechanics(system, parameters=PEND)


def test_nonholonomic_kanes_method_is_refused():
    system, _, _ = double_pendulum()
    kane = KanesMethod(system.frame, q_ind=system.q, u_ind=[u1], u_dependent=[u2],
                       kd_eqs=system.kdes, velocity_constraints=[u2 - 2 * u1],
                       bodies=system.bodies, forcelist=system.loads)
    with pytest.raises(MechanicsError, match="velocity constraints.*not the time derivatives"):
        from_mechanics(kane, parameters=PEND)


def test_nonholonomic_lagranges_method_is_refused():
    N = ReferenceFrame("N")
    O = Point("O")
    O.set_vel(N, 0)
    P = O.locatenew("P", q1 * N.x + q2 * N.y)
    P.set_vel(N, P.pos_from(O).dt(N))
    lm = LagrangesMethod(Lagrangian(N, Particle("p", P, m1)), [q1, q2],
                         nonhol_coneqs=[q1.diff(t) - q2 * q2.diff(t)], frame=N)
    with pytest.raises(MechanicsError, match="nonholonomic"):
        from_mechanics(lm, parameters=PEND)


def _particle_system(kdes, q=(q1,), u=(u1,)):
    """A particle moving along N.x (q1) and N.y (q2) with speeds defined by ``kdes``."""
    system = System()
    N, O = system.frame, system.fixed_point
    P = O.locatenew("P", sum((x * v for x, v in zip(q, (N.x, N.y))), sp.S.Zero * N.x))
    P.set_vel(N, sum((w * v for w, v in zip(u, (N.x, N.y))), sp.S.Zero * N.x))
    system.add_coordinates(*q)
    system.add_speeds(*u)
    system.add_kdes(*kdes)
    system.add_bodies(Particle("p", P, m1))
    system.add_loads((P, -m1 * g * N.x))
    return system


def test_nonlinear_speed_definition_is_refused_naming_the_equation():
    system = _particle_system([u1 - q1.diff(t)**2 / 2])
    with pytest.raises(MechanicsError, match=r"equation 0: .* not linear .*u = q'"):
        from_mechanics(system, parameters=PEND)


def test_speeds_not_expressible_through_qdot_are_refused():
    system = _particle_system([q1.diff(t) - u1 - u2, q2.diff(t) - u1 - u2], (q1, q2), (u1, u2))
    with pytest.raises(MechanicsError, match="do not determine the speeds"):
        from_mechanics(system, parameters=PEND)


def test_velocity_constraint_that_is_holonomic_is_accepted():
    """A KanesMethod whose dependent speed comes from a holonomic constraint's derivative."""
    system = fourbar_file()[1]['build_system']()
    system.form_eoms()
    kane = system.eom_method
    model = from_mechanics(kane, parameters=fourbar_file()[1]['model'].parameters)
    assert model.m == 2 and model.n == 3
    # Kane's method by SymPy (this KanesMethod) and the inertial-components route (the
    # bundled model, from the System) agree: spring, damper, motor, gravity, inertia
    ref = fourbar_file()[1]['model']
    q3 = dynamicsymbols("q3")
    point = {q1: 0.3, q2: 1.1, q3: -2.0, q1.diff(t): 0.7, q2.diff(t): -0.4,
             q3.diff(t): 1.3, **ref.parameters}
    for x, y in ((model.mass_matrix, ref.mass_matrix), (model.forces, ref.forces)):
        diff = np.array((sp.Matrix(x) - sp.Matrix(y)).subs(point), float)
        assert np.max(np.abs(diff)) < 1e-12


def test_vector_output_is_refused():
    system, tip, _ = double_pendulum()
    with pytest.raises(MechanicsError, match="output 'tip' is a Vector"):
        from_mechanics(system, parameters=PEND,
                       outputs={"tip": tip.pos_from(system.fixed_point)})


def test_system_that_cannot_be_formed():
    system, _, _ = double_pendulum()
    system.q_ind = [q1]
    system.q_dep = [q2]            # a dependent coordinate without a holonomic constraint
    with pytest.raises(MechanicsError, match="cannot be formed"):
        from_mechanics(system, parameters=PEND)


def test_speeds_in_another_order_than_the_coordinates():
    """u = (q2', q1'): Kane's rows are in the speeds' order; the model's must be in q's."""
    N = ReferenceFrame("N")
    O = Point("O")
    O.set_vel(N, 0)
    P = O.locatenew("P", q1 * N.x + q2 * N.y)
    P.set_vel(N, u2 * N.x + u1 * N.y)
    kane = KanesMethod(N, [q1, q2], [u1, u2], kd_eqs=[u1 - q2.diff(t), u2 - q1.diff(t)],
                       bodies=[Particle("p", P, m1)], forcelist=[(P, -m1 * g * N.y)])
    model = from_mechanics(kane, parameters=PEND)
    assert sp.simplify(model.mass_matrix - sp.diag(m1, m1)) == sp.zeros(2, 2)
    assert sp.simplify(model.forces - sp.Matrix([0, -m1 * g])) == sp.zeros(2, 1)


def test_coordinate_jacobians_equal_sympys():
    """The conversion's dr/dq and dw/dq' (taken on plain symbols for q and q') equal SymPy's
    jacobians by q(t) and q'(t), also with other functions of t (constants to them) and, by
    SymPy's own jacobian, with q'' or the derivative of an expression in q."""
    from symdae.model.mechanics import _Jacobians

    t = dynamicsymbols._t
    q1, q2, f = dynamicsymbols("q1 q2 f")
    jac = _Jacobians((q1, q2))
    qd = [q1.diff(t), q2.diff(t)]
    r = sp.Matrix([sp.cos(q1 + q2) * f + t * q2**2, sp.sin(q1) * f.diff(t) + sp.exp(q2)])
    w = sp.Matrix([qd[0] * sp.cos(q2) + qd[1] * f, qd[1] ** 2 * q1 + f.diff(t) * qd[0]])
    for mine, want in ((jac.of_position(r), r.jacobian([q1, q2])),
                       (jac.of_rate(w), w.jacobian(qd)),
                       (jac.of_rate(w + sp.Matrix([q1.diff(t, 2) * qd[1], 0])),
                        (w + sp.Matrix([q1.diff(t, 2) * qd[1], 0])).jacobian(qd)),
                       (jac.of_rate(sp.Matrix([(q1 * q2).diff(t, evaluate=False) * qd[0]])),
                        sp.Matrix([(q1 * q2).diff(t, evaluate=False) * qd[0]]).jacobian(qd))):
        assert (mine - want).applyfunc(sp.simplify) == sp.zeros(*want.shape), (mine, want)
