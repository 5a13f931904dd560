"""Four-bar linkage from sympy.physics.mechanics joints: PinJoints, a loop closure, a spring-damper.

                  B
        coupler  /    \\  rocker
               /        \\
              A           \\
       crank /              \\
            O ---------------- D      ground link O-D (length d, along x)

Built as a ``System``: three uniform bars (RigidBody; crank a, coupler b, rocker c, masses m1,
m2, m3) on PinJoints O (ground-crank), A (crank-coupler), B (coupler-rocker), with joint
angles q1 (crank, absolute), q2 and q3 (relative) and speeds u = q'. The rocker's far end is
held at D by two holonomic loop-closure constraints (index 3, kept: 3 coordinates, 2
constraints, 1 degree of freedom). Loads: gravity (-g along y), a motor torque on the crank
tau = T0 (1 - q1'/Omega) (TorqueActuator), and a linear spring-damper (LinearSpring stiffness
k, free length s0; LinearDamper dk) from the ground anchor E = (xE, yE) to the coupler's mass
center. k and dk are to be identified from the rocker angle and the crank speed.

Initial state: crank angle phi0 and speed omega0 (parameters); the dependent angles follow
in closed form (the coupler above the line A-D), their speeds from the velocity constraints.
``from_mechanics`` turns the System into the symdae Model; ``build_system()`` gives the
System itself (the tests integrate SymPy's own KanesMethod equations of it for reference).
"""
import sympy as sp
from sympy.physics.mechanics import (
    LinearDamper,
    LinearPathway,
    LinearSpring,
    PinJoint,
    Point,
    ReferenceFrame,
    RigidBody,
    System,
    TorqueActuator,
    dynamicsymbols,
    inertia,
)

import symdae

t = dynamicsymbols._t
q1, q2, q3 = dynamicsymbols("q1 q2 q3")
u1, u2, u3 = dynamicsymbols("u1 u2 u3")
a, b, c, d = sp.symbols("a b c d")                  # crank, coupler, rocker, ground [m]
m1, m2, m3, g = sp.symbols("m1 m2 m3 g")            # bar masses [kg], gravity [m/s^2]
T0, Omega = sp.symbols("T0 Omega")                  # stall torque [N m], no-load speed [rad/s]
k, dk, s0, xE, yE = sp.symbols("k dk s0 xE yE")     # spring [N/m], damper [N s/m], anchor [m]
phi0, omega0 = sp.symbols("phi0 omega0")            # initial crank angle [rad], speed [rad/s]
lam_x, lam_y = sp.symbols("lambda_x lambda_y")      # loop-closure forces at D


def bar(name: str, mass, length) -> RigidBody:
    """A uniform slender bar along its frame's x axis, mass center in the middle."""
    frame = ReferenceFrame(f"{name}_frame")
    center = Point(f"{name}_center")
    return RigidBody(name, masscenter=center, frame=frame, mass=mass,
                     inertia=(inertia(frame, 0, 0, mass * length**2 / 12), center))


def build_system() -> System:
    """The four-bar as a sympy.physics.mechanics System (q1 independent, q2, q3 dependent)."""
    ground = RigidBody("ground")
    N, O = ground.frame, ground.masscenter
    crank, coupler, rocker = bar("crank", m1, a), bar("coupler", m2, b), bar("rocker", m3, c)
    joints = (
        PinJoint("O", ground, crank, q1, u1, child_point=-a / 2 * crank.frame.x,
                 joint_axis=N.z),
        PinJoint("A", crank, coupler, q2, u2, parent_point=a / 2 * crank.frame.x,
                 child_point=-b / 2 * coupler.frame.x, joint_axis=crank.frame.z),
        PinJoint("B", coupler, rocker, q3, u3, parent_point=b / 2 * coupler.frame.x,
                 child_point=-c / 2 * rocker.frame.x, joint_axis=coupler.frame.z),
    )
    system = System.from_newtonian(ground)
    system.add_joints(*joints)
    system.q_ind, system.q_dep = [q1], [q2, q3]
    system.u_ind, system.u_dep = [u1], [u2, u3]
    tip = rocker.masscenter.locatenew("rocker_tip", c / 2 * rocker.frame.x)
    loop = tip.pos_from(O) - d * N.x
    system.add_holonomic_constraints(loop.dot(N.x), loop.dot(N.y))
    system.apply_uniform_gravity(-g * N.y)
    anchor = O.locatenew("E", xE * N.x + yE * N.y)
    anchor.set_vel(N, 0)
    path = LinearPathway(anchor, coupler.masscenter)
    system.add_actuators(
        TorqueActuator(T0 * (1 - q1.diff(t) / Omega), N.z, crank.frame, ground.frame),
        LinearSpring(k, path, equilibrium_length=s0),
        LinearDamper(dk, path),
    )
    return system


def initial_angles():
    """(q1, q2, q3) and (q1', q2', q3') at t = 0 in phi0, omega0 and the lengths, exact."""
    Ax, Ay = a * sp.cos(phi0), a * sp.sin(phi0)
    e = sp.sqrt((d - Ax)**2 + Ay**2)                 # distance A-D
    beta = sp.atan2(-Ay, d - Ax)                     # direction of A -> D
    theta2 = beta + sp.acos((b**2 + e**2 - c**2) / (2 * b * e))   # coupler, above A-D
    Bx, By = Ax + b * sp.cos(theta2), Ay + b * sp.sin(theta2)
    theta3 = sp.atan2(-By, d - Bx)                   # rocker from B towards D
    q0 = (phi0, theta2 - phi0, theta3 - theta2)
    # velocity constraints of the loop, with q1' = omega0: solve for (q2', q3')
    angles = (q1, q1 + q2, q1 + q2 + q3)
    pos = sp.Matrix([a * sp.cos(angles[0]) + b * sp.cos(angles[1]) + c * sp.cos(angles[2]),
                     a * sp.sin(angles[0]) + b * sp.sin(angles[1]) + c * sp.sin(angles[2])])
    J = pos.jacobian([q1, q2, q3]).xreplace(dict(zip((q1, q2, q3), q0)))
    v_dep = -J[:, 1:].LUsolve(J[:, 0] * omega0)
    return q0, (omega0, v_dep[0], v_dep[1])


_q0, _v0 = initial_angles()
theta_rocker = q1 + q2 + q3                          # absolute rocker angle
model = symdae.from_mechanics(
    build_system(),
    name="four_bar_joints",
    parameters={
        a: 0.3, b: 1.0, c: 0.8, d: 1.0,
        m1: 1.0, m2: 2.0, m3: 1.5, g: 9.81,
        T0: 4.0, Omega: 6.0,
        k: 150.0, dk: 4.0, s0: 0.6, xE: 0.5, yE: -0.4,
        phi0: 0.4, omega0: 3.0,
    },
    multipliers=[lam_x, lam_y],
    outputs={"theta_rocker": theta_rocker, "omega_crank": q1.diff(t), "crank": q1,
             "alpha_rocker": theta_rocker.diff(t, 2), "F_x": lam_x, "F_y": lam_y},
    initial_state={q1: _q0[0], q2: _q0[1], q3: _q0[2],
                   q1.diff(t): _v0[0], q2.diff(t): _v0[1], q3.diff(t): _v0[2]},
)

START = {"k": 100.0, "dk": 2.5}
FREE = list(START)
OUTPUTS = ["theta_rocker", "omega_crank"]
SCENARIO = symdae.Scenario(t_end=2.0, h=2e-3, alpha=-0.3)
