"""Flexible beam on spring-damper supports (POD-cost paper, spec pod.md section 5.1), SI units.

A planar steel flat bar (L = 1 m, 30 mm x 10 mm: EI = 500 N m^2, rho A = 2.355 kg/m) that rests
on a vertical spring k_s and a viscous damper c_s at each end; the supports stand for uncertain
joints (friction, contact). A transverse half-sine pulse F(t) (50 N, 2 ms) hits it at x = 0.3 L.
The outputs are the transverse displacements w0 ... w10 at 11 equally spaced points (the nodes
of the 10-element mesh).

Formulation: small-deflection Euler-Bernoulli beam, discretised with two-node Hermite (cubic)
elements in absolute nodal coordinates (y_k, psi_k = l_e phi_k): transverse displacement and
rotation (times the element length, so in metres) of node k, measured from the straight rest
position in a fixed frame. In (w, phi) the element matrices are

    m_e = rho A l_e / 420 [[156, 22 l, 54, -13 l], [22 l, 4 l^2, 13 l, -3 l^2],
                           [54, 13 l, 156, -22 l], [-13 l, -3 l^2, -22 l, 4 l^2]]
    k_e = EI / l_e^3 [[12, 6 l, -12, 6 l], [6 l, 4 l^2, -6 l, 2 l^2],
                      [-12, -6 l, 12, -6 l], [6 l, 2 l^2, -6 l, 4 l^2]]

and with phi = psi / l_e every l_e inside the brackets becomes 1. The scaling is the only
difference from the textbook and keeps the HHT Newton matrix well conditioned (condition 71
instead of 6900 for 10 elements; 176 instead of 1.5e5 for 40). They are assembled into
M q'' + C q' + (EI K_b + K_s) q = f F(t): K_s and C hold k_s and c_s on the
end displacements, f is the consistent (Hermite) load vector of the point force. No gravity
(horizontal plane, or motion about the static equilibrium), no structural damping, no
constraints. Linearised about rest, the paper's floating frame of reference spans the same
Hermite space, so its transverse equations are these (spec 5.2).

``make_beam(ne, n_sensors)`` builds the beam with ``ne`` elements (n = 2 (ne + 1) coordinates)
and ``n_sensors`` equally spaced displacement outputs, evaluated with the Hermite shape
functions (exactly nodal values when the sensors sit on nodes). Parameters: EI, ks, cs, rhoA.
The nominal values are the "true joints" (k_s = 2000 N/m, c_s = 2 N s/m); ``UNCERTAIN_JOINTS``
holds the identification model's mismatched supports of the spec (+20 %, -50 %).

``model_friction`` is the friction variant of the uncertain joints: each support also has dry
friction Fs tanh(y' / v_eps) (Fs = 2 N, v_eps = 1 cm/s; 1 mm/s is too stiff for h = 1e-4),
so the ends stick most of the time (README, "Non-smooth forces").

The model is linear, so the first Newton correction (with the exact, constant matrix) lands
on the step's solution to round-off and the second iteration accepts it: every step takes
exactly 2 iterations at the default tolerance.
"""
import numpy as np
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae

t = dynamicsymbols._t

LENGTH = 1.0                   # m
LOAD_AT = sp.Rational(3, 10)   # load position as a fraction of the length (node 3 of 10)
PULSE_AMPLITUDE = 50.0         # N
PULSE_DURATION = 2e-3          # s


def pulse(time):
    """The half-sine force pulse F(t) = 50 N sin(pi t / 2 ms) for t <= 2 ms, 0 afterwards."""
    time = np.asarray(time, dtype=float)
    inside = (time >= 0.0) & (time <= PULSE_DURATION)
    return np.where(inside, PULSE_AMPLITUDE * np.sin(np.pi * time / PULSE_DURATION), 0.0)


def _hermite(xi):
    """Cubic Hermite shape functions at local coordinate xi in [0, 1], for the nodal values
    (y1, l_e phi1, y2, l_e phi2)."""
    return [1 - 3 * xi**2 + 2 * xi**3, xi - 2 * xi**2 + xi**3,
            3 * xi**2 - 2 * xi**3, -xi**2 + xi**3]


def _locate(fraction, ne):
    """(element, local coordinate) of the point at ``fraction`` of the length (exact)."""
    s = sp.Rational(fraction) * ne
    e = min(int(sp.floor(s)), ne - 1)
    return e, s - e


def make_beam(ne: int = 10, n_sensors: int = 11, name: str | None = None,
              support_friction: bool = False) -> symdae.Model:
    """The beam with ``ne`` Hermite elements and ``n_sensors`` equally spaced sensors; with
    ``support_friction`` each support also has dry friction Fs tanh(y' / v_eps) (parameters
    Fs, v_eps after the others)."""
    if ne < 1 or n_sensors < 2:
        raise symdae.ModelError(f"the beam needs ne >= 1 elements and >= 2 sensors, got "
                                f"ne = {ne}, n_sensors = {n_sensors}")
    EI, ks, cs, rhoA = sp.symbols("EI ks cs rhoA")
    F = sp.Symbol("F")
    y = dynamicsymbols(f"y0:{ne + 1}")
    psi = dynamicsymbols(f"psi0:{ne + 1}")                 # psi_k = l_e phi_k
    q = [c for pair in zip(y, psi) for c in pair]          # (y0, psi0, y1, psi1, ...)
    n = len(q)
    le = sp.Rational(1, ne) * sp.Float(LENGTH)
    # element matrices in (y1, l_e phi1, y2, l_e phi2): the rotations enter scaled by l_e
    m_e = sp.Matrix([[156, 22, 54, -13], [22, 4, 13, -3], [54, 13, 156, -22], [-13, -3, -22, 4]])
    k_e = sp.Matrix([[12, 6, -12, 6], [6, 4, -6, 2], [-12, -6, 12, -6], [6, 2, -6, 4]])
    M0, Kb = sp.zeros(n, n), sp.zeros(n, n)
    for e in range(ne):
        dofs = range(2 * e, 2 * e + 4)
        for i, r in enumerate(dofs):
            for j, c in enumerate(dofs):
                M0[r, c] += m_e[i, j] * le / 420
                Kb[r, c] += k_e[i, j] / le**3
    f = [sp.Integer(0)] * n
    e, xi = _locate(LOAD_AT, ne)
    for i, Ni in enumerate(_hermite(xi)):
        f[2 * e + i] += Ni
    qd = [c.diff(t) for c in q]
    forces = []
    for r in range(n):
        elastic = sum((Kb[r, c] * q[c] for c in range(n) if Kb[r, c] != 0), sp.Integer(0))
        forces.append(-EI * elastic + f[r] * F)
    Fs, v_eps = sp.symbols("Fs v_eps")
    for end in (0, n - 2):                                   # y0 and y_ne
        forces[end] += -ks * q[end] - cs * qd[end]
        if support_friction:      # the joint's dry friction, regularised (README, Non-smooth)
            forces[end] += -Fs * sp.tanh(qd[end] / v_eps)
    outputs = {}
    for j in range(n_sensors):
        e, xi = _locate(sp.Rational(j, n_sensors - 1), ne)
        outputs[f"w{j}"] = sum((Ni * q[2 * e + i] for i, Ni in enumerate(_hermite(xi))
                                if Ni != 0), sp.Integer(0))
    params = {EI: 500.0, ks: 2000.0, cs: 2.0, rhoA: 2.355}
    if support_friction:
        params.update({Fs: 2.0, v_eps: 1e-2})
    return symdae.Model(
        name or f"flexible_beam_{ne}",
        coordinates=q,
        mass_matrix=rhoA * M0,
        forces=forces,
        parameters=params,
        inputs=[F],
        outputs=outputs,
    )


model = make_beam(10, 11, name="flexible_beam")
# the friction variant of the uncertain joints: dry friction Fs = 2 N in each support
model_friction = make_beam(10, 11, name="flexible_beam_friction", support_friction=True)

# The identification of the spec: EI from a start 20 % low, the 11 displacement outputs, the
# supports of the identification model differ from the data's ("uncertain joints").
START = {"EI": 400.0}
FREE = ["EI"]
OUTPUTS = [f"w{j}" for j in range(11)]
SENSOR_POSITIONS = {f"w{j}": j * LENGTH / 10 for j in range(11)}   # m, for plots of modes
UNCERTAIN_JOINTS = {"ks": 2400.0, "cs": 1.0}
SCENARIO = symdae.Scenario(t_end=1.0, h=1e-4, alpha=-0.05, inputs={"F": pulse})
