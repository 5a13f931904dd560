"""Planar slider-crank mechanism in mixed natural coordinates, SI units.

                     P1 = (x1, y1)  crank pin
                    /  `-.
          crank r  /      `-.  connecting rod l
                  / phi       `-.
    ground pivot O --------------- P2 = (x2, y2)  piston pin, slider on the guide y = e
                                   |-- spring-damper (k, d, free length s0) to the frame at x = 0

Coordinates q = (phi, x1, y1, x2, y2), redundant: 5 coordinates, 4 constraints, 1 degree of
freedom.
  phi       crank angle from the x axis, counter-clockwise [rad];
  x1, y1    crank pin P1, natural coordinates of the basic point shared by crank and rod [m];
  x2, y2    piston pin P2, the basic point shared by rod and slider [m].
The crank (uniform bar, mass m1, length r, plus a flywheel of inertia Jf) turns about the fixed
pivot O at the origin; the connecting rod (uniform bar, mass m2, length l) joins P1 and P2; the
slider (mass m3) sits at P2 on a horizontal guide at height e (e = 0: in-line mechanism).

Constraints (lengths and offset are parameters inside them), multipliers in brackets:
  x1 - r cos(phi) = 0,  y1 - r sin(phi) = 0      crank pin on the crank   [lambda_x1, lambda_y1]
  (x2 - x1)^2 + (y2 - y1)^2 - l^2 = 0            rigid connecting rod     [lambda_rod]
  y2 - e = 0                                     slider on its guide      [lambda_guide]

Lagrangian L = T - V: crank (m1 r^2/3 + Jf) phi'^2/2; rod m2/6 (|P1'|^2 + P1'.P2' + |P2'|^2),
exact for a uniform slender bar in natural coordinates; slider m3 |P2'|^2/2; gravity g along -y
on all three bodies. Non-conservative forces: a linear spring-damper between the slider and the
frame, F = -k (x2 - s0) - d x2', and a DC-motor-like drive torque on the crank,
tau = T0 (1 - phi'/Omega) (stall torque T0, no-load speed Omega).

Initial state from the crank angle phi0 and angular velocity omega0 (parameters), by exact
closed-form position and velocity analysis with the slider to the right of the crank pin:
x2 = r cos(phi0) + sqrt(l^2 - (e - r sin(phi0))^2). It satisfies C = 0 and C_q v = 0 for any
parameter values with l > r + |e|.

Outputs: slider position, velocity and acceleration (x_s, v_s, a_s), crank angle and speed
(phi, omega), the rod force (tension positive: F_rod = 2 l lambda_rod, N) and the guide's
normal force on the slider (N_guide = -lambda_guide, N, upward positive).
"""
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae

t = dynamicsymbols._t
phi, x1, y1, x2, y2 = dynamicsymbols("phi x1 y1 x2 y2")
r, l, e = sp.symbols("r l e")                       # crank, rod length; guide offset [m]
m1, m2, m3 = sp.symbols("m1 m2 m3")                 # crank, rod, slider mass [kg]
Jf = sp.Symbol("Jf")                                # flywheel inertia on the crank [kg m^2]
k, d, s0 = sp.symbols("k d s0")                     # spring [N/m], damper [N s/m], free length
T0, Omega, g = sp.symbols("T0 Omega g")             # stall torque [N m], no-load speed [rad/s]
phi0, omega0 = sp.symbols("phi0 omega0")            # initial crank angle [rad], speed [rad/s]
lam_x1, lam_y1, lam_rod, lam_guide = sp.symbols("lambda_x1 lambda_y1 lambda_rod lambda_guide")

dphi, dx1, dy1, dx2, dy2 = (c.diff(t) for c in (phi, x1, y1, x2, y2))

T = (sp.Rational(1, 2) * (m1 * r**2 / 3 + Jf) * dphi**2
     + m2 / 6 * (dx1**2 + dy1**2 + dx1 * dx2 + dy1 * dy2 + dx2**2 + dy2**2)
     + m3 / 2 * (dx2**2 + dy2**2))
V = g * (m1 * r / 2 * sp.sin(phi) + m2 * (y1 + y2) / 2 + m3 * y2)

spring_damper = -k * (x2 - s0) - d * dx2
torque = T0 * (1 - dphi / Omega)

# exact position analysis from the crank angle
X1, Y1 = r * sp.cos(phi0), r * sp.sin(phi0)
root = sp.sqrt(l**2 - (e - Y1)**2)
dX1, dY1 = -r * omega0 * sp.sin(phi0), r * omega0 * sp.cos(phi0)

model = symdae.Model(
    "slider_crank",
    coordinates=[phi, x1, y1, x2, y2],
    lagrangian=T - V,
    forces=[torque, 0, 0, spring_damper, 0],
    constraints=[
        x1 - r * sp.cos(phi),
        y1 - r * sp.sin(phi),
        (x2 - x1)**2 + (y2 - y1)**2 - l**2,
        y2 - e,
    ],
    multipliers=[lam_x1, lam_y1, lam_rod, lam_guide],
    parameters={
        r: 0.08, l: 0.25, e: 0.02,
        m1: 0.8, m2: 1.2, m3: 1.5, Jf: 0.02,
        k: 2.0e3, d: 15.0, s0: 0.27,
        T0: 6.0, Omega: 40.0, g: 9.81,
        phi0: 0.6, omega0: 12.0,
    },
    outputs={
        "x_s": x2, "v_s": dx2, "a_s": x2.diff(t, 2),
        "phi": phi, "omega": dphi,
        "F_rod": 2 * l * lam_rod, "N_guide": -lam_guide,
    },
    initial_state={
        phi: phi0, x1: X1, y1: Y1, x2: X1 + root, y2: e,
        dphi: omega0, dx1: dX1, dy1: dY1, dx2: dX1 + (e - Y1) * dY1 / root, dy2: 0,
    },
)
