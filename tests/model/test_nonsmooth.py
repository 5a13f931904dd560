"""Non-smooth functions in models: sign, Abs, Max, Min, Heaviside, Piecewise.

Derivatives are taken almost everywhere (DiracDelta -> 0, |x|' = sign x, Max' = the active
branch, Piecewise branch by branch), every such function prints as Cython and lambdifies for
the NumPy backend, and what cannot be compiled is a ModelError that names the expression, the
row and what to use instead. The reference values are derived by hand in each test.
"""
from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae
from symdae.errors import ModelError
from symdae.model.derivation import derive
from symdae.model.emit import emit_cython
from symdae.model.roundoff import magnitude

t = dynamicsymbols._t
x = dynamicsymbols("x")
m, k, mu, vb = sp.symbols("m k mu v_b")
XD = x.diff(t)


def one_mass(name: str, force, outputs=None) -> symdae.Model:
    return symdae.Model(name, coordinates=[x], mass_matrix=[[m]], forces=[force],
                        parameters={m: 1.0, k: 10.0, mu: 2.0, vb: 0.5},
                        outputs=outputs or {"x": x}, initial_state={x: 1})


LAWS = {
    "sign": -k * x - mu * sp.sign(XD - vb),
    "abs": -k * x * sp.Abs(x) - mu * XD,
    "max": -k * sp.Max(0, x - 0.5) - mu * XD,
    "min": -k * sp.Min(x, 0.5 * x) - mu * XD,
    "heaviside": -k * x - mu * sp.Heaviside(XD),
    "piecewise": -k * x - sp.Piecewise((mu, XD > 0), (-mu, True)),
    "ramp": -k * sp.Piecewise((0, x < 0.5), ((x - 0.5) ** 2, True)) - mu * XD,
}


@pytest.mark.parametrize("law", sorted(LAWS))
def test_every_nonsmooth_law_derives_and_prints(law):
    """Before: sign and Heaviside failed with 'DiracDelta() cannot be compiled', Piecewise
    with a raw AttributeError in the round-off model."""
    ds = derive(one_mass(f"ns_{law}", LAWS[law]))
    for name in ("JG", "GV", "PG"):
        assert not getattr(ds, name).has(sp.DiracDelta), name
    text = emit_cython(ds)
    assert "DiracDelta" not in text


def test_derivatives_almost_everywhere():
    """By hand: d(k x |x|)/dx = 2 k |x| (x sign x = |x|), d Max(0, x - 1/2)/dx = H(x - 1/2),
    d Min(x, x/2)/dx = H(x/2 - x) + H(x - x/2) / 2, d sign / d Heaviside -> 0, a Piecewise
    branch by branch."""
    S = None
    cases = {"abs": 2 * sp.Abs(x) * k, "max": k * sp.Heaviside(x - 0.5)}
    for law, expected in cases.items():
        model = one_mass(f"ns_{law}", LAWS[law])
        S = model.symbols
        ds = derive(model)
        got = ds.JG[0, 0].subs(model.to_kernel(x), sp.Symbol("X"))
        want = model.to_kernel(expected).subs(model.to_kernel(x), sp.Symbol("X"))
        for X in (-0.7, 0.2, 0.9, 1.3):
            vals = {sp.Symbol("X"): X, S.p[1]: 10.0}
            assert float(got.subs(vals)) == pytest.approx(float(want.subs(vals)), rel=1e-14)
    for law in ("sign", "heaviside"):
        ds = derive(one_mass(f"ns_{law}", LAWS[law]))
        assert ds.GV[0, 0] == 0               # the jump contributes nothing a.e.
    ds = derive(one_mass("ns_pw", -sp.Piecewise((mu * XD ** 2, XD > 0), (-mu * XD, True))))
    v0 = ds.symbols.v[0]
    assert float(ds.GV[0, 0].subs({v0: 0.3, ds.symbols.p[2]: 2.0})) == pytest.approx(1.2)
    assert float(ds.GV[0, 0].subs({v0: -0.3, ds.symbols.p[2]: 2.0})) == pytest.approx(-2.0)


def test_printer_emits_the_c_functions():
    text = emit_cython(derive(one_mass("ns_print", -k * sp.Max(0, x, x - mu) * sp.Abs(XD)
                                       - sp.Min(k, mu) * sp.sign(XD) - mu * sp.Heaviside(x)
                                       - sp.Piecewise((k * x, x > 1), (mu, x < -1), (0, True)))))
    for f in ("fmax(", "fabs(", "fmin(", " ? ", " : "):
        assert f in text, f


def test_piecewise_without_default_is_named():
    """Before: a raw AttributeError (or NaN in the kernels)."""
    with pytest.raises(ModelError, match=r"force 0 \(x\).*Piecewise.*default.*True"):
        one_mass("ns_nodefault", -sp.Piecewise((mu, XD > 0), (-mu, XD < 0)))
    with pytest.raises(ModelError, match=r"output 'f'.*Piecewise"):
        one_mass("ns_nodefault_out", -k * x, outputs={"f": sp.Piecewise((x, x > 0))})


def test_uncompilable_function_is_named_with_advice():
    f = sp.Function("f")
    with pytest.raises(ModelError, match=r"force 0 \(x\).*besselj.*cannot be compiled.*use"):
        one_mass("ns_bessel", -k * sp.besselj(0, x))
    with pytest.raises(ModelError, match=r"output 'y'.*DiracDelta.*cannot be compiled"):
        one_mass("ns_delta", -k * x, outputs={"y": sp.DiracDelta(x)})
    with pytest.raises(ModelError, match=r"force 0 \(x\).*gamma.*its derivative.*polygamma"):
        one_mass("ns_gamma", -k * sp.gamma(x))
    with pytest.raises(symdae.UndeclaredSymbolError):
        one_mass("ns_undef", -k * f(x))


def test_roundoff_of_a_switch_is_its_jump_within_the_switching_argument_rounding():
    """sign(z) is undetermined (any of -1, 0, 1) while |z| is within the rounding of z's
    terms: its magnitude then carries the jump / eps, so a residual row that contains it is at
    round-off there (the Newton acceptance test (b)); elsewhere it is exact."""
    z, c = sp.symbols("z c", real=True)
    eps = np.finfo(float).eps
    e = c * sp.sign(z - 1)
    mag = magnitude(e)
    far = float(mag.subs({z: 1.5, c: 3.0}))
    near = float(mag.subs({z: 1.0 + 2 * eps, c: 3.0}))
    assert far == pytest.approx(3.0, rel=1e-12)
    assert eps * near >= 3.0                      # the jump 2 c is within the row's level
    mp = magnitude(sp.Piecewise((c * z, z > 1), (-c, True)))
    assert float(mp.subs({z: 2.0, c: 3.0})) == pytest.approx(6.0, rel=1e-12)
    assert eps * float(mp.subs({z: 1.0, c: 3.0})) >= 3.0
    mx = magnitude(sp.Max(z, c))
    assert float(mx.subs({z: -2.0, c: 3.0})) == pytest.approx(3.0, rel=1e-12)


@pytest.mark.parametrize("law, jumps", [("sign", 1), ("heaviside", 1), ("piecewise", 1),
                                        ("max", 0), ("min", 0), ("abs", 0), ("ramp", 0)])
def test_the_module_says_whether_the_residual_jumps(law, jumps):
    """Only a residual that can jump lets the Newton iteration search for a switching point
    (newton.pxd): Max, Min, Abs and a ramp Piecewise (continuous at its switch, like the
    four-cylinder engine's) do not, and smooth models keep plain Newton."""
    assert f"_model.jumps = {jumps}\n" in emit_cython(derive(one_mass(f"ns_{law}", LAWS[law])))
    assert "_model.jumps = 0\n" in emit_cython(derive(one_mass("ns_smooth", -k * x)))
