"""Four-bar linkage in relative joint angles, closed by two loop-closure constraints; SI units.

                 B -------- coupler l2 -------- C
                /                                \\
         crank l1                                 rocker l3
              /  th1                               \\
    ground A (0, 0) ------------ l0 ------------ D (l0, 0)

Coordinates q = (th1, th2, th3): the crank's angle from the x axis and the coupler's and the
rocker's angles relative to the link before (a1 = th1, a2 = th1 + th2, a3 = a2 + th3 are the
absolute angles). 3 coordinates, 2 constraints (the rocker's end is pinned at D), 1 degree of
freedom; the mass matrix depends on q. Crank-rocker proportions (Grashof: l1 + l0 < l2 + l3),
so the crank turns all the way round under a constant drive torque T0.

Bodies: uniform bars (masses m1, m2, m3, inertia m l^2 / 12 about their centres); gravity g
along -y. A torsional spring-damper (k, d, free angle a30) between the ground and the rocker
at D. Constraints: l1 e(a1) + l2 e(a2) + l3 e(a3) - (l0, 0) = 0 with e(a) = (cos a, sin a);
the lengths are parameters inside them.

Initial state: the crank at th10 at rest, the rest by closed-form position analysis (C on the
circles about B and D, elbow up), consistent for any parameter values of a Grashof linkage.
"""
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae

t = dynamicsymbols._t
th1, th2, th3 = dynamicsymbols("th1 th2 th3")
l0, l1, l2, l3 = sp.symbols("l0 l1 l2 l3")
m1, m2, m3, g, T0, k, d, a30, th10 = sp.symbols("m1 m2 m3 g T0 k d a30 th10")
lx, ly = sp.symbols("lambda_x lambda_y")

a1, a2 = th1, th1 + th2
a3 = a2 + th3


def e(a):
    return sp.Matrix([sp.cos(a), sp.sin(a)])


B = l1 * e(a1)
C = B + l2 * e(a2)
centres = [l1 / 2 * e(a1), B + l2 / 2 * e(a2), C + l3 / 2 * e(a3)]
masses, lengths, angles = (m1, m2, m3), (l1, l2, l3), (a1, a2, a3)
T = sum(m / 2 * (P.diff(t).T * P.diff(t))[0] + m * ln**2 / 24 * a.diff(t)**2
        for m, ln, a, P in zip(masses, lengths, angles, centres))
V = g * sum(m * P[1] for m, P in zip(masses, centres))
tau = -k * (a3 - a30) - d * a3.diff(t)       # on the rocker from the ground, at D
closure = C + l3 * e(a3) - sp.Matrix([l0, 0])

# closed-form position analysis at th1 = th10
Bx, By = l1 * sp.cos(th10), l1 * sp.sin(th10)
dx, dy = l0 - Bx, -By
dist = sp.sqrt(dx**2 + dy**2)
along = (l2**2 - l3**2 + dist**2) / (2 * dist)
up = sp.sqrt(l2**2 - along**2)
Cx = Bx + (along * dx - up * dy) / dist
Cy = By + (along * dy + up * dx) / dist
a20 = sp.atan2(Cy - By, Cx - Bx)
a3_0 = sp.atan2(-Cy, l0 - Cx)

model = symdae.Model(
    "fourbar",
    coordinates=[th1, th2, th3],
    lagrangian=T - V,
    forces=[T0 + tau, tau, tau],
    constraints=list(closure),
    multipliers=[lx, ly],
    parameters={l0: 4.0, l1: 1.2, l2: 3.5, l3: 3.0, m1: 3.0, m2: 8.0, m3: 7.0, g: 9.81,
                T0: 20.0, k: 50.0, d: 2.0, a30: 1.6, th10: 0.5},
    outputs={"crank": th1, "rocker": a3, "omega": th1.diff(t), "Fx": lx, "Fy": ly},
    initial_state={th1: th10, th2: a20 - th10, th3: a3_0 - a20},
)

SCENARIO = {"t_end": 2.0, "h": 2e-3, "alpha": -0.3}
OUTPUTS = ["rocker", "omega"]
FREE = ["k", "d"]
START = {"k": 40.0, "d": 3.0}
