"""A mass on a spring-damper that strikes an end stop: a one-sided contact spring-damper.

The mass (m, suspension k, d) is driven by F = A sin(omega t) and hits a stop at x = gap. The
contact force is a spring-damper that acts only in contact, written with Max:

    F_c = Max(0, pen) (k_c + d_c x'),   pen = x - gap  (penetration)

(the damping grows with the penetration, Hunt and Crossley's form): F_c is continuous, zero out
of contact, and only its derivatives jump when contact begins or ends. A damper that acts at
full strength from the first touch, Heaviside(pen) d_c x', would make the force jump at every
impact and the discrete cost jump wherever an impact crosses a grid point (README, "Non-smooth
forces"). Identified: the contact stiffness k_c and damping d_c from the position x (twin
data); START holds the prior guesses. Outputs: x, the contact force.
"""
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae

t = dynamicsymbols._t
x = dynamicsymbols("x")
m, k, d, k_c, d_c, gap, A, omega = sp.symbols("m k d k_c d_c gap A omega")

pen = x - gap
F_c = sp.Max(0, pen) * (k_c + d_c * x.diff(t))

model = symdae.Model(
    "end_stop",
    coordinates=[x],
    mass_matrix=[[m]],
    forces=[A * sp.sin(omega * t) - k * x - d * x.diff(t) - F_c],
    parameters={k_c: 2e4, d_c: 2e3, m: 1.0, k: 100.0, d: 0.5, gap: 0.02, A: 5.0,
                omega: 8.0},
    outputs={"x": x, "contact": F_c},
)

START = {"k_c": 1.5e4, "d_c": 3e3}
FREE = list(START)
OUTPUTS = ["x"]
SCENARIO = symdae.Scenario(t_end=2.0, h=1e-3, alpha=-0.1)
