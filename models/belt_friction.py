"""Mass on a moving belt with Coulomb friction (stick-slip), the classic friction oscillator.

A mass m on a spring k (to a wall) lies on a belt that moves at v_b. The belt drags it with the
friction force N (mu + dmu exp(-|z| / v_s)) S(z), z = v_b - x' the slip velocity, N = m g:
kinetic coefficient mu, a Stribeck rise dmu to the static coefficient mu + dmu (so the mass
sticks to the belt, is pulled back by the spring when k x exceeds the static force, and sticks
again: a stick-slip limit cycle). S is the friction law:

* ``model`` (``belt_friction``): S(z) = tanh(z / v_eps) and |z| = sqrt(z^2 + v_eps^2),
  regularised with v_eps = 1 mm/s: smooth, and a sticking phase is a stiff creep the implicit
  scheme integrates with no special treatment;
* ``model_sign`` (``belt_friction_sign``): S(z) = sign(z). It switches transversally when the
  spring force exceeds the friction at z = 0; in a sticking phase the implicit step has no
  root on either branch, and the Newton iteration's switch search (newton.pxd) ends the step
  on the switch, z = 0 to round-off: the stick of the set-valued law. Those grid points lie
  on a switch (``counters["on_switch"]``), where the gradient is one-sided (README,
  "Non-smooth forces"); SCENARIO_SLIP is the transient before the first stick (3 switches
  inside steps, none on a grid point), where the gradient of the sign law is exact.

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
    if law == "tanh":       # smooth everywhere: |z| regularised like sign(z)
        S, size = sp.tanh(z / v_eps), sp.sqrt(z**2 + v_eps**2)
    else:
        S, size = sp.sign(z), sp.Abs(z)
    friction = m * g * (mu + dmu * sp.exp(-size / v_s)) * S
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
# the transient up to just before the first sticking phase (t = 0.889 s)
SCENARIO_SLIP = symdae.Scenario(t_end=0.85, h=1e-3, alpha=-0.1)
