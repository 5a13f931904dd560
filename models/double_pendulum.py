"""Double pendulum in absolute angles (phi1, phi2): two point masses on massless rods, hung
from the origin; gravity, a viscous damper in each joint. Unconstrained, 2 coordinates; the
mass matrix depends on q through cos(phi1 - phi2), as in every mechanism written in angles.

    (0, 0) --l1-- m1 --l2-- m2,   phi measured from the downward vertical

Lagrangian L = (m1 + m2) l1^2 phi1'^2 / 2 + m2 l2^2 phi2'^2 / 2
               + m2 l1 l2 cos(phi1 - phi2) phi1' phi2' + g ((m1 + m2) l1 cos phi1 + m2 l2 cos phi2);
joint dampers d1 (to the ground) and d2 (between the rods). Started at rest from phi10, phi20.
Outputs: the lower mass's position (x2, y2) and the joint angles.
"""
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae

t = dynamicsymbols._t
phi1, phi2 = dynamicsymbols("phi1 phi2")
m1, m2, l1, l2, g, d1, d2 = sp.symbols("m1 m2 l1 l2 g d1 d2")
phi10, phi20 = sp.symbols("phi10 phi20")
w1, w2 = phi1.diff(t), phi2.diff(t)

T = ((m1 + m2) * l1**2 * w1**2 / 2 + m2 * l2**2 * w2**2 / 2
     + m2 * l1 * l2 * sp.cos(phi1 - phi2) * w1 * w2)
V = -g * ((m1 + m2) * l1 * sp.cos(phi1) + m2 * l2 * sp.cos(phi2))
x2 = l1 * sp.sin(phi1) + l2 * sp.sin(phi2)
y2 = -l1 * sp.cos(phi1) - l2 * sp.cos(phi2)

model = symdae.Model(
    "double_pendulum",
    coordinates=[phi1, phi2],
    lagrangian=T - V,
    forces=[-d1 * w1 + d2 * (w2 - w1), -d2 * (w2 - w1)],
    parameters={m1: 1.0, m2: 1.0, l1: 1.0, l2: 1.0, g: 9.81, d1: 0.05, d2: 0.05,
                phi10: 1.0, phi20: 0.5},
    outputs={"x2": x2, "y2": y2, "phi1": phi1, "phi2": phi2},
    initial_state={phi1: phi10, phi2: phi20},
)

SCENARIO = {"t_end": 2.0, "h": 1e-3, "alpha": -0.1}
OUTPUTS = ["x2", "y2"]
FREE = ["d1", "d2"]
START = {"d1": 0.1, "d2": 0.02}
