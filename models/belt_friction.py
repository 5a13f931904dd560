"""Mass on a moving belt with Coulomb friction (stick-slip), the classic friction oscillator.

A mass m on a spring k (to a wall) lies on a belt that moves at v_b. The belt drags it with the
friction force N (mu + dmu exp(-|z| / v_s)) S(z), z = v_b - x' the slip velocity, N = m g:
kinetic coefficient mu, a Stribeck rise dmu to the static coefficient mu + dmu (so the mass
sticks to the belt, is pulled back by the spring when k x exceeds the static force, and sticks
again: a stick-slip limit cycle). S is the friction law:

* ``model`` (``belt_friction``): S(z) = tanh(z / v_eps), regularised with v_eps = 1 mm/s, so a
  sticking phase is a stiff creep the implicit scheme integrates with no special treatment;
* ``model_sign`` (``belt_friction_sign``): S(z) = sign(z), the set-valued law's single-valued
  stand-in. It is exact in slip and switches transversally when the spring force exceeds the
  friction at z = 0; at a sticking phase the implicit step has no solution (the friction would
  have to take a value inside [-1, 1] that sign does not have) and the Newton iteration fails
  there with a NewtonError. Its SCENARIO_SIGN ends before the first stick.

The mass starts at x_init = -0.2 m (spring preloaded), at rest. Identified: mu and k from the
position (twin data); START holds the prior guesses.
"""
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae

t = dynamicsymbols._t
x = dynamicsymbols("x")
m, k, mu, dmu, v_s, g, v_b, v_eps, x_init = sp.symbols("m k mu dmu v_s g v_b v_eps x_init")
z = v_b - x.diff(t)                                     # slip velocity of the belt under the mass


def make(law: str) -> symdae.Model:
    """The friction oscillator with the friction law ``"tanh"`` (regularised) or ``"sign"``."""
    S = sp.tanh(z / v_eps) if law == "tanh" else sp.sign(z)
    friction = m * g * (mu + dmu * sp.exp(-sp.Abs(z) / v_s)) * S
    params = {m: 1.0, k: 100.0, mu: 0.3, dmu: 0.2, v_s: 0.05, g: 9.81, v_b: 0.2,
              x_init: -0.2}
    if law == "tanh":
        params[v_eps] = 1e-3
    return symdae.Model(
        "belt_friction" if law == "tanh" else "belt_friction_sign",
        coordinates=[x],
        mass_matrix=[[m]],
        forces=[-k * x + friction],
        parameters=params,
        outputs={"x": x, "v": x.diff(t), "friction": friction},
        initial_state={x: x_init},
    )


model = make("tanh")
model_sign = make("sign")

START = {"mu": 0.25, "k": 80.0}
FREE = list(START)
OUTPUTS = ["x"]
# transient slip with transversal switches, then stick-slip cycles
SCENARIO = symdae.Scenario(t_end=3.0, h=1e-3, alpha=-0.1)
# the sign law up to just before its first sticking phase (t = 0.889 s)
SCENARIO_SIGN = symdae.Scenario(t_end=0.85, h=1e-3, alpha=-0.1)
