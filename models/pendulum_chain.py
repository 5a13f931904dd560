"""A chain of N pendula in Cartesian coordinates: point masses joined by rigid rods, the first
hung from the origin; gravity, a viscous damper on every mass. 2 N coordinates, N constraints.

    (0, 0) --l-- (x1, y1) --l-- (x2, y2) -- ... --l-- (xN, yN)

``make_chain(N)`` builds it for any N (the size-parameterised model of the scaling benchmark);
the chain starts hanging at an angle theta0, every mass at rest. The Newton matrix is
(3N x 3N) and about 10/(3N) full: banded, which the sparse LU exploits.
"""
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae

t = dynamicsymbols._t


def make_chain(N: int = 5) -> symdae.Model:
    xs = dynamicsymbols(f"x1:{N + 1}")
    ys = dynamicsymbols(f"y1:{N + 1}")
    m, l, g, d, theta0 = sp.symbols("m l g d theta0")
    coords, forces, constraints, init = [], [], [], {}
    px, py = sp.S.Zero, sp.S.Zero                    # the previous joint (the pivot first)
    for k in range(N):
        x, y = xs[k], ys[k]
        coords += [x, y]
        forces += [-d * x.diff(t), -m * g - d * y.diff(t)]
        constraints.append((x - px)**2 + (y - py)**2 - l**2)
        init[x] = (k + 1) * l * sp.sin(theta0)
        init[y] = -(k + 1) * l * sp.cos(theta0)
        px, py = x, y
    return symdae.Model(
        f"pendulum_chain_{N}", coords, mass_matrix=sp.eye(2 * N) * m, forces=forces,
        constraints=constraints,
        parameters={m: 0.5, l: 0.3, g: 9.81, d: 0.05, theta0: 0.4},
        outputs={"x_end": xs[-1], "y_end": ys[-1]}, initial_state=init)


model = make_chain(5)
SCENARIO = symdae.Scenario(t_end=1.0, h=1e-3, alpha=-0.1)
