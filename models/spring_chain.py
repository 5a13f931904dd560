"""A chain of masses joined by spring-damper elements, fixed to a wall at one end and driven by
a force at the other: a model with many parameters (a stiffness and a damping per element).

    wall --c1,d1-- m1 --c2,d2-- m2 -- ... --cn,dn-- mn <-- F(t) = A sin(w t)

``make_chain(n, n_parametrised)`` builds it with n masses; the first ``n_parametrised``
elements have symbolic c_k, d_k (parameters), the rest numeric values, so the same mechanics
can carry 2 n_parametrised free parameters (benchmarks/ compares 4 with 40).
"""
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae

t = dynamicsymbols._t


def make_chain(n: int = 20, n_parametrised: int | None = None) -> symdae.Model:
    n_parametrised = n if n_parametrised is None else n_parametrised
    x = dynamicsymbols(f"x1:{n + 1}")
    A, w, mass = sp.symbols("A w mass")
    params = {A: 10.0, w: 30.0, mass: 0.5}
    c, d = [], []
    for k in range(n):
        c_nom, d_nom = 1000.0 * (1 + 0.05 * k), 0.5 * (1 + 0.02 * k)
        if k < n_parametrised:
            ck, dk = sp.symbols(f"c{k + 1} d{k + 1}")
            params[ck], params[dk] = c_nom, d_nom
        else:
            ck, dk = sp.Float(c_nom), sp.Float(d_nom)
        c.append(ck)
        d.append(dk)
    # element k joins mass k-1 (or the wall) and mass k
    elong = [x[0]] + [x[k] - x[k - 1] for k in range(1, n)]
    rate = [e.diff(t) for e in elong]
    f = [c[k] * elong[k] + d[k] * rate[k] for k in range(n)]
    forces = [-f[k] + (f[k + 1] if k + 1 < n else 0) for k in range(n)]
    forces[-1] += A * sp.sin(w * t)
    return symdae.Model(
        f"spring_chain_{n}_{n_parametrised}",
        coordinates=list(x),
        mass_matrix=sp.eye(n) * mass,
        forces=forces,
        parameters=params,
        outputs={"a_end": x[-1].diff(t, 2), "x_end": x[-1]},
    )


model = make_chain(20)
