"""Exact derivation and the emitted source.

Reference matrices are derived by hand and written out in the kernel symbols (q[i], v[i], p[k],
lam[k], t); a derived expression passes if its difference from the hand result simplifies to 0.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae
from symdae.errors import ModelError
from symdae.model.kernels import KERNEL_NAMES, Sizes, kernel_expressions, layout


def assert_equal(derived, hand, what: str) -> None:
    derived, hand = sp.Matrix(derived), sp.Matrix(hand)
    assert derived.shape == hand.shape, f"{what}: shape {derived.shape}, expected {hand.shape}"
    diff = (derived - hand).applyfunc(lambda e: sp.simplify(sp.expand(e)))
    assert diff == sp.zeros(*hand.shape), f"{what}: derived {derived} != hand-derived {hand}"


# ---------------------------------------------------------------------------- bundled models
def test_pendulum_matrices_by_hand():
    model, _ = symdae.load_model("pendulum")
    ds = symdae.derive(model)
    S = model.symbols
    x, y = S.q
    vx, vy = S.v
    lam, = S.lam
    m, g, L, d, theta0, omega0 = S.p
    assert model.parameter_names == ["m", "g", "L", "d", "theta0", "omega0"]
    assert_equal(ds.M, [[m, 0], [0, m]], "pendulum M")
    assert_equal(ds.Q, [-d * vx, -m * g - d * vy], "pendulum Q")
    assert_equal(ds.C, [x**2 + y**2 - L**2], "pendulum C")
    assert_equal(ds.Cq, [[2 * x, 2 * y]], "pendulum C_q")
    assert_equal(ds.g, [2 * x * lam + d * vx, 2 * y * lam + m * g + d * vy], "pendulum g")
    assert_equal(ds.cdot, [2 * x * vx + 2 * y * vy], "pendulum C_q v")
    assert_equal(ds.gamma, [2 * vx**2 + 2 * vy**2], "pendulum gamma")
    assert_equal(ds.PC, [[0, 0, -2 * L, 0, 0, 0]], "pendulum dC/dp")


def test_oscillator_matrices_by_hand():
    model, _ = symdae.load_model("oscillator")
    ds = symdae.derive(model)
    S = model.symbols
    q, = S.q
    v, = S.v
    m, c, d, q_init = S.p
    assert model.parameter_names == ["m", "c", "d", "q_init"]
    assert_equal(ds.M, [[m]], "oscillator M")
    assert_equal(ds.Q, [-c * q - d * v], "oscillator Q")
    assert ds.Cq.shape == (0, 1) and ds.C.shape[0] == 0, "oscillator has no constraints"
    assert_equal(ds.JG, [[c]], "oscillator dg/dq")
    assert_equal(ds.GV, [[d]], "oscillator dg/dv")
    assert_equal(ds.q0, [q_init], "oscillator q0")


# ---------------------------------------------------------------------------- Lagrangian
def rotating_polar_model():
    """A particle in polar coordinates (r, theta) relative to a frame turning at the
    prescribed rate omega(t) = Omega + beta t (angle phi(t) = Omega t + beta t^2 / 2), on a
    radial spring, under gravity in the inertial frame, with a radial damper (a force)."""
    t = dynamicsymbols._t
    r, th = dynamicsymbols("r theta")
    m, k, r0, c, g, Omega, beta = sp.symbols("m k r0 c g Omega beta")
    phi = Omega * t + beta * t**2 / 2
    omega = phi.diff(t)
    L = m / 2 * (r.diff(t)**2 + r**2 * (th.diff(t) + omega)**2) \
        - k / 2 * (r - r0)**2 - m * g * r * sp.sin(th + phi)
    return symdae.Model(
        "rotating_polar", [r, th], lagrangian=L, forces=[-c * r.diff(t), 0],
        parameters={m: 1.0, k: 50.0, r0: 0.3, c: 0.2, g: 9.81, Omega: 2.0, beta: 0.5},
    )


def test_lagrangian_velocity_and_time_terms_by_hand():
    """Q = forces + dL/dq - (d2L/dq'dq) q' - d2L/dq'dt: centrifugal, Coriolis and the
    Euler term of the angular acceleration beta (explicit time dependence of dL/dq')."""
    model = rotating_polar_model()
    ds = symdae.derive(model)
    S = model.symbols
    r, th = S.q
    rd, thd = S.v
    m, k, r0, c, g, Omega, beta = S.p
    t = S.t
    w = Omega + beta * t                        # frame rate
    ang = th + Omega * t + beta * t**2 / 2      # inertial angle
    M = [[m, 0], [0, m * r**2]]
    Q = [m * r * (thd + w)**2 - k * (r - r0) - m * g * sp.sin(ang) - c * rd,
         -m * g * r * sp.cos(ang) - 2 * m * r * rd * (thd + w) - m * r**2 * beta]
    assert_equal(ds.M, M, "rotating polar M")
    assert_equal(ds.Q, Q, "rotating polar Q")
    # and what the kernels need from them: J_G = -dQ/dq, G_V = -dQ/dv, P_M = d(M a)/dp
    Qm = sp.Matrix(Q)
    assert_equal(ds.JG, -Qm.jacobian([r, th]), "rotating polar J_G")
    assert_equal(ds.GV, -Qm.jacobian([rd, thd]), "rotating polar G_V")
    a = sp.Matrix(S.a)
    assert_equal(ds.JM, (sp.Matrix(M) * a).jacobian([r, th]), "rotating polar J_M")


def test_lagrangian_not_quadratic_in_velocities_is_rejected():
    t = dynamicsymbols._t
    x = dynamicsymbols("x")
    model = symdae.Model("quartic", [x], lagrangian=x.diff(t)**4)
    with pytest.raises(ModelError, match="not quadratic"):
        symdae.derive(model)


# ---------------------------------------------------------------------------- emitted source
_EMIT = ("import sys, symdae; m, _ = symdae.load_model(sys.argv[1]); "
         "sys.stdout.write(symdae.emit_cython(symdae.derive(m)))")


def test_emitted_source_does_not_depend_on_hash_seed():
    models = ("slider_crank", "engine_mount")
    seeds = ("0", "4242")
    procs = {}
    for name in models:
        for seed in seeds:
            env = dict(os.environ, PYTHONHASHSEED=seed)
            procs[name, seed] = subprocess.Popen([sys.executable, "-c", _EMIT, name], env=env,
                                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                 text=True)
    out = {}
    for key, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"emitting {key} failed:\n{stderr}"
        out[key] = stdout
    for name in models:
        a, b = (out[name, s] for s in seeds)
        assert len(a) > 1000 and "static void _k_newton(" in a
        if a != b:
            diff = next(i for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines()))
                        if x != y)
            pytest.fail(f"{name}: emitted source differs between PYTHONHASHSEED={seeds[0]} and "
                        f"{seeds[1]}, first at line {diff + 1}")
        model, _ = symdae.load_model(name)
        assert symdae.emit_cython(symdae.derive(model)) == a, \
            f"{name}: emitted source differs between this process and a subprocess"


def written_entries(source: str) -> dict:
    """kernel name -> list of (index, operator, right-hand side) of every ``out[i] op ...``."""
    written, kernel = {}, None
    for line in source.splitlines():
        mk = re.match(r"\s*// kernel (\w+):", line)
        if mk:
            kernel = mk.group(1)
            written[kernel] = []
            continue
        mo = re.match(r"\s+out\[(\d+)\] (\+?=) (.*);$", line)
        if mo:
            assert kernel is not None, f"assignment outside a kernel: {line!r}"
            written[kernel].append((int(mo.group(1)), mo.group(2), mo.group(3)))
    return written


@pytest.mark.parametrize("chunk_ops", [None, 12])
@pytest.mark.parametrize("name", ["pendulum", "slider_crank", "engine_mount"])
def test_structural_zeros_are_not_written(name, chunk_ops):
    """Each structurally nonzero entry is written exactly once (also when kernels are split
    into chunks), with += exactly in the accumulating kernels; no zero is ever written."""
    model, _ = symdae.load_model(name)
    ds = symdae.derive(model)
    kwargs = {} if chunk_ops is None else {"chunk_ops": chunk_ops}
    source = symdae.emit_cython(ds, **kwargs)
    written = written_entries(source)
    table = kernel_expressions(ds)
    # the compiled steps' newton kernel in two parts: its entries fixed in a sweep, the rest
    fixed = written.pop("newton_fixed")
    if "newton_rest" in written:
        assert sorted(i for i, _, _ in fixed + written.pop("newton_rest")) == sorted(
            i for i, _, _ in written["newton"])
    else:
        # no fixed entries: the rest calls the kernel
        assert fixed == [] and "    _k_newton(x, w, out);" in source
    assert list(written) == list(KERNEL_NAMES)
    if chunk_ops is not None:
        assert re.search(r"static void _k_\w+_1\(", source), "small chunk_ops split no kernel"
    for kernel, (exprs, accumulate) in table.items():
        idx = [i for i, _, _ in written[kernel]]
        nonzero = [i for i, e in enumerate(exprs) if e != 0]
        assert sorted(idx) == nonzero, (
            f"{name} {kernel}: written entries {sorted(idx)}, structurally nonzero {nonzero}")
        ops = {op for _, op, _ in written[kernel]}
        assert ops <= {"+=" if accumulate else "="}, f"{name} {kernel}: operators {ops}"
        for i, _, rhs in written[kernel]:
            assert not re.fullmatch(r"-?\(?0(\.0*)?\)?", rhs.strip()), \
                f"{name} {kernel}: out[{i}] is assigned a literal zero"


def test_symbol_names_never_reach_the_source():
    """Names are data: a name crafted as code cannot get into the generated module."""
    t = dynamicsymbols._t
    evil_q = sp.Function("x]; import os")(t)
    q2 = dynamicsymbols("q2")
    k = sp.Symbol("k]; import os")
    lam = sp.Symbol("lam]; import sys")
    u = sp.Symbol("u); exec('print(1)')#")
    model = symdae.Model(
        "evil\"; import os", [evil_q, q2],
        mass_matrix=sp.diag(1, 2),
        forces=[-k * evil_q + u, -k * q2.diff(t)],
        constraints=[evil_q**2 + q2**2 - k**2],
        multipliers=[lam],
        parameters={k: 1.5},
        inputs=[u],
        outputs={"y]; import os": evil_q + lam, "z": u * q2.diff(t, 2)},
        initial_state={evil_q: k},
    )
    source = symdae.emit_cython(symdae.derive(model))
    for bad in ("import os", "import sys", "exec(", "x]", "k]", "lam]", "evil", "q2"):
        assert bad not in source, f"{bad!r} leaked into the emitted source"
    # the symbols are there, as slots
    assert "p[0]" in source and "u[0]" in source and "lam[0]" in source and "q[0]" in source


@pytest.mark.parametrize("bad", ["q[0]", "p[3]", "lam[1]", "w[0]"])
def test_kernel_slot_names_are_reserved(bad):
    x = dynamicsymbols("x")
    s = sp.Symbol(bad)
    with pytest.raises(ModelError, match="reserved"):
        symdae.Model("reserved", [x], mass_matrix=[[1]], forces=[-s * x], parameters={s: 1.0})


@pytest.mark.parametrize("name", ["slider_crank", "engine_mount"])
def test_every_output_range_is_labelled_with_its_block(name):
    """Each out[i] follows a comment naming the spec block that holds entry i (a spec name,
    never a user's), with the block's exact range."""
    model, _ = symdae.load_model(name)
    ds = symdae.derive(model)
    source = symdae.emit_cython(ds)
    n_st = int(re.search(r"^_model\.n_st = (\d+)$", source, re.M).group(1))
    kernel, block, seen = None, None, []
    for line in source.splitlines():
        mk = re.match(r"\s*// kernel (\w+):", line)
        if mk:
            kernel, block = mk.group(1), None
            # the compiled steps' newton_fixed and newton_rest: parts of newton's layout
            lay = layout(re.sub(r"_(fixed|rest)$", "", kernel),
                         Sizes.of({**ds.sizes, "n_tau": 10**6, "n_st": n_st}))
            continue
        mb = re.match(r"\s+// block (\w+) \(([^)]*)\): out\[(\d+):(\d+)\]$", line)
        if mb:
            block = mb.group(1)
            start, stop = int(mb.group(3)), int(mb.group(4))
            assert block in lay, f"{name} {kernel}: comment names unknown block {block}"
            if not kernel.startswith("time_terms"):
                assert (start, stop) == lay[block][:2], f"{name} {kernel}.{block}: {line}"
            seen.append((kernel, block))
            continue
        mo = re.match(r"\s+out\[(\d+)\] \+?= ", line)
        if mo and not kernel.startswith("time_terms"):
            i = int(mo.group(1))
            start, stop, _ = lay[block]
            assert start <= i < stop, f"{name} {kernel}: out[{i}] under block {block}"
    assert ("newton", "K") in seen and ("state_vjp", "qbar") in seen


@pytest.mark.parametrize("name", ["slider_crank", "engine_mount", "pendulum"])
def test_no_bare_negation_temporaries(name):
    model, _ = symdae.load_model(name)
    source = symdae.emit_cython(symdae.derive(model))
    bare = re.findall(r"^\s+(_t\d+) = -(\w+(\[\d+\])?);$", source, flags=re.M)
    assert not bare, f"{name}: temporaries that only negate: {bare[:5]}"
    assert re.search(r"^\s+_t\d+ = ", source, flags=re.M), "no temporaries at all: CSE off?"
