"""The forward, adjoint and tangent sweeps' steps compiled into the kernel module (symdae/
simulation/core/compiled_steps.h) against the core's generic steps (newton.pxd, adjoint.pxd,
tangent.pxd): the same trajectory, counters, stored states, gradients and sensitivities bit
for bit, on every kind of model the
compiled steps take (constraints or none, q-dependent mass matrices, state terms, inputs,
switches without jumps), while the steps that leave their path (a refreshed Newton matrix, a
second solve of a step, a matrix the written LU refuses) go to the generic step and the run
goes on in the compiled ones; modules whose steps stay generic say so."""
from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import symdae
from symdae.model.derivation import derive
from symdae.model.emit import emit_cython, newton_structure, noise_coupling
from symdae.model.kernels import Sizes, kernel_expressions

# (model, scenario changes, steps or None for the whole scenario, the generic steps the
# compiled ones hand over: None where the run needs none but the first)
CASES = [
    # redundant coordinates with a massless node and a saddle point; its start-up transient
    # takes two second solves (newton_restarts)
    ("engine_mount", {}, 3000, "restarts"),
    ("engine_mount", {"scheme": "hht-paper"}, 3000, "restarts"),
    # joint angles: q-dependent M, sin and cos as state terms, no constraint (m = 0)
    ("double_pendulum", {}, None, None),
    # closed loops in joint angles: nonlinear constraints
    ("four_bar_joints", {}, None, None),
    # the written LU refuses some of its Newton matrices (a pivot below the threshold): the
    # generic step's dense LU takes those steps
    ("slider_crank", {}, 500, "lu"),
    # an input force, redundant coordinates with constraints
    ("cart_pendulum_redundant", {}, 1000, None),
    ("two_mass_oscillator", {}, None, None),
    # friction through Max/Abs-type switches (no jumps): refreshed matrices and second solves
    ("belt_friction", {}, None, "refreshes"),
    # impacts on a stop: second solves
    ("end_stop", {}, None, "restarts"),
    # 42 x 42 K, 63 of its 140 entries fixed: the newton kernel's parts print sums whose
    # terms a CSE of their own entries would order otherwise
    ("four_cylinder_tvd", {}, 300, None),
]


def scenario_of(ns, changes, steps):
    sc = symdae.Scenario.make(ns.get("SCENARIO") or {"t_end": 1.0, "h": 1e-3, "alpha": -0.1})
    sc = sc.replace(**changes)
    return sc if steps is None else sc.replace(t_end=sc.t0 + steps * sc.h)


def both(system, sc):
    """The run with the compiled steps, and with the generic step only."""
    be = system.backend
    try:
        be.use_compiled_steps = True
        fast = system.simulate(sc)
        be.use_compiled_steps = False
        generic = system.simulate(sc)
    finally:
        be.use_compiled_steps = True
    return fast, generic


@pytest.mark.parametrize("name, changes, steps, handover", CASES,
                         ids=[f"{c[0]}-{c[1].get('scheme', 'default')}" for c in CASES])
def test_compiled_steps_give_the_generic_steps_numbers_bit_for_bit(name, changes, steps,
                                                                   handover):
    model, ns = symdae.load_model(name)
    system = symdae.compile_model(model)
    fast, generic = both(system, scenario_of(ns, changes, steps))
    for field in ("q", "v", "a", "lam"):
        assert np.array_equal(getattr(fast, field), getattr(generic, field)), field
    for key in generic.outputs:
        assert np.array_equal(fast.outputs[key], generic.outputs[key]), key
    cf, cg = dict(fast.counters), dict(generic.counters)
    n = cg["steps"]
    assert cg["compiled_steps"] == 0
    taken = cf.pop("compiled_steps")
    cg.pop("compiled_steps")
    assert cf == cg
    if handover is None:
        # all but the first step (the round-off levels are set only after it)
        assert taken == n - 1, (taken, n)
    else:
        # the steps off the compiled path went to the generic step, the rest stayed compiled
        counter = {"restarts": "newton_restarts", "refreshes": "jacobian_refreshes"}
        if handover in counter:
            assert cg[counter[handover]] > 0
        assert 0.9 * n < taken < n - 1, (taken, n)


@pytest.mark.parametrize("name, steps", [("engine_mount", 2000), ("four_bar_joints", None),
                                         ("cart_pendulum_redundant", 1000),
                                         ("slider_crank", 500)])
def test_gradients_through_the_compiled_steps_are_the_generic_ones_bit_for_bit(name, steps):
    """A gradient's forward sweep stores each state's factorised Newton matrix, time terms
    and state terms for the adjoint: the compiled steps store the same bits (the adjoint
    reads them, so any other bit would show in the gradient). The slider-crank's written LU
    refuses some of its matrices at accepted states: those steps go to the generic step."""
    from symdae.costs.time_domain import LeastSquares
    from symdae.simulation.checkpoint import cost_and_gradient
    model, ns = symdae.load_model(name)
    system = symdae.compile_model(model)
    sc = scenario_of(ns, {}, steps)
    data = system.simulate(sc).outputs
    cost = LeastSquares({k: data[k] for k in model.output_names}, list(model.output_names))
    moved = {k: v * 1.03 for k, v in zip(model.parameter_names, system.parameter_vector()) if v}
    runs = {}
    for flag in (True, False):
        system.backend.use_compiled_steps = flag
        try:
            runs[flag] = cost_and_gradient(system, sc, cost, moved)
        finally:
            system.backend.use_compiled_steps = True
    fast, generic = runs[True], runs[False]
    assert fast.trajectory.counters["compiled_steps"] > 0.9 * sc.n_steps
    assert fast.cost == generic.cost
    np.testing.assert_array_equal(fast.gradient, generic.gradient)
    assert np.all(np.isfinite(fast.gradient)) and np.any(fast.gradient != 0)


@pytest.mark.parametrize("store", [True, False], ids=["stored", "refactorised"])
@pytest.mark.parametrize("name, steps, dense, scheme", [
    ("engine_mount", 2000, False, "hht-ga"), ("engine_mount", 2000, False, "hht-paper"),
    ("four_bar_joints", None, False, "hht-ga"), ("four_bar_joints", None, False, "hht-paper"),
    ("cart_pendulum_redundant", 1000, False, "hht-ga"), ("slider_crank", 500, True, "hht-ga")])
def test_the_adjoint_sweep_over_stored_states_takes_the_compiled_steps_bit_for_bit(
        name, steps, dense, scheme, store):
    """The adjoint sweep over a forward sweep's stored factorisations (or its matrices
    factorised again at each state), time terms and state terms: the module's compiled steps
    (compiled_steps.h) give the generic steps' adjoint of the initial state and parameter
    adjoint bit for bit. A state whose factorisation is the dense LU's (the slider-crank's
    written LU refuses some of its matrices) goes to the generic step, and the sweep goes on
    in the compiled ones. hht-paper's g_i term (alpha / (1 + alpha) g_i in step i's residual)
    adds the products at the old state."""
    model, ns = symdae.load_model(name)
    system = symdae.compile_model(model)
    sc = scenario_of(ns, {"scheme": scheme}, steps)
    tr = system.simulate(sc, store_factorizations=store, keep_time_terms=True)
    fwd = tr.sweep.forward
    assert (fwd.saved[0] is None) != store
    rng = np.random.default_rng(7)
    dS = rng.standard_normal(fwd.S.shape)
    be = system.backend
    runs = {}
    for flag in (True, False):
        be.use_compiled_steps = flag
        try:
            runs[flag] = be.adjoint(fwd, dS)
        finally:
            be.use_compiled_steps = True
    fast, generic = runs[True], runs[False]
    np.testing.assert_array_equal(fast.grad, generic.grad)
    np.testing.assert_array_equal(fast.xbar0, generic.xbar0)
    np.testing.assert_array_equal(fast.carry, generic.carry)
    assert np.all(np.isfinite(fast.grad)) and np.any(fast.grad != 0)
    n, taken = sc.n_steps, fast.report.counters.compiled_steps
    assert generic.report.counters.compiled_steps == 0
    if dense:
        assert 0.9 * n < taken < n, (taken, n)
    else:
        assert taken == n, (taken, n)


def test_a_gradient_in_segments_takes_the_same_steps_compiled():
    """A gradient within a memory budget runs the forward sweep in segments, each restarted
    from a checkpoint with the round-off levels and LU orders the last one left, and stores
    nothing on the first pass: its compiled steps must continue each segment as the generic
    step does (cost, outputs and gradient bit for bit)."""
    from symdae.costs.time_domain import LeastSquares
    from symdae.simulation.checkpoint import cost_and_gradient
    model, ns = symdae.load_model("engine_mount")
    system = symdae.compile_model(model)
    sc = scenario_of(ns, {"scheme": "hht-paper"}, 3000)
    data = system.simulate(sc).outputs
    cost = LeastSquares({"a1": data["a1"]}, ["a1"])
    sz = system.sizes
    budget = 2 * sz.gradient_row_bytes * (3000 // 6 + 2)
    runs = {}
    for flag in (True, False):
        system.backend.use_compiled_steps = flag
        try:
            runs[flag] = cost_and_gradient(system, sc, cost, ns["START"], memory_budget=budget)
        finally:
            system.backend.use_compiled_steps = True
    fast, generic = runs[True], runs[False]
    assert fast.plan.segments >= 5
    # the first pass's segments but the last, which stores its states for the adjoint
    last = 3000 - (fast.plan.segments - 1) * fast.plan.segment
    assert fast.trajectory.counters["compiled_steps"] >= 0.99 * (3000 - last)
    assert generic.trajectory.counters["compiled_steps"] == 0
    assert fast.cost == generic.cost
    np.testing.assert_array_equal(fast.trajectory.S, generic.trajectory.S)
    np.testing.assert_array_equal(fast.gradient, generic.gradient)


def test_the_core_loops_lu_keeps_the_generic_step():
    """The compiled steps call the module's written-out LU: where the sweep factorises with
    the core's loops instead (another pivot order), every step is the generic one."""
    model, ns = symdae.load_model("engine_mount")
    system = symdae.compile_model(model)
    sc = scenario_of(ns, {}, 200)
    kernels = system.backend.kernels
    try:
        kernels.model_lu = False
        loops = system.simulate(sc)
    finally:
        kernels.model_lu = True
    assert loops.counters["compiled_steps"] == 0
    assert system.simulate(sc).counters["compiled_steps"] > 0.9 * 200


@pytest.mark.parametrize("graph", [False, True])
def test_modules_with_jumps_or_graph_kernels_have_no_compiled_steps(graph):
    """The switch search (residuals that jump) and a graph module's residual program stay
    in the core: such a module's table has no forward_steps."""
    t = dynamicsymbols._t
    x = dynamicsymbols("x")
    k, c, m = sp.symbols("k c m")

    def one_mass(name, force):
        return symdae.Model(name, coordinates=[x], mass_matrix=[[m]], forces=[force],
                            parameters={m: 1.0, k: 4.0, c: 0.1}, outputs={"x": x})
    smooth = one_mass("fs_smooth", -k * x - c * x.diff(t))
    jumps = one_mass("fs_jumps", -k * x - c * sp.sign(x.diff(t)))
    text = emit_cython(derive(smooth), graph=graph)
    assert ("_model.forward_steps = NULL\n" in text) == graph
    assert ("_model.forward_steps = sd_forward_steps\n" in text) == (not graph)
    assert "_model.forward_steps = NULL\n" in emit_cython(derive(jumps), graph=graph)


def test_the_written_round_off_coupling_is_the_cores_list():
    """The entries through which a constraint's rounding reaches a dynamic row's round-off
    level (sparse.pxd's structure_of: K[i, k] != 0 for i, k < n in a column some constraint
    row reaches, row by row), written out in the compiled steps. The engine mount's one
    constraint c1 q2 + c2 q3 + c3 q4 reaches columns 1..3; the dynamic rows' entries there
    are K[0, 1] (the mount spring between x1 and x2), K[1, 1], K[2, 2] and K[3, 3]: flat 1, 6,
    12, 18 of the 5 x 5 K. Without constraints there are none. The forward sweep's numbers
    with the written code are the core loop's (the bit-for-bit tests above)."""
    ds = derive(symdae.load_model("engine_mount")[0])
    sz = Sizes.of(ds.sizes)
    nonzeros = newton_structure(kernel_expressions(ds), sz, None)
    assert noise_coupling(nonzeros, sz.n, sz.nm) == [1, 6, 12, 18]
    text = emit_cython(ds)
    assert "#define SD_NOISE_NN 4" in text
    assert "nu[0] += fabs(K[1]) * fq[1];" in text and "nu[3] += fabs(K[18]) * fq[3];" in text
    # a hand-made structure: constraint rows 2 and 3 reach columns 0 and 2 of a 4 x 4 K
    assert noise_coupling([0, 1, 2, 5, 8, 10, 14], 2, 4) == [0]
    assert noise_coupling([0, 1, 4, 5], 2, 2) == []


def test_the_steps_form_k_s_fixed_entries_once_per_call():
    """The compiled steps form the Newton matrix's entries that depend on the parameters and
    the weights alone once per call (_k_newton_fixed, written_lu_factor_fixed) and the rest
    at each state. The engine mount's K is constant but for K[0, 0] (the cubic spring on
    x1) and K[3, 3] (the cubic damper on x4's velocity): flat 0 and 18. The double
    pendulum's K (joint angles: M(q), gravity's cos q in every entry) has none.
    The numbers are the whole kernel's and factorisation's (the bit-for-bit tests above,
    tests/model/test_lu_split.py)."""
    from symdae.model.emit import fixed_entries
    from symdae.model.graph import FreeSymbols

    ds = derive(symdae.load_model("engine_mount")[0])
    newton = kernel_expressions(ds)["newton"][0]
    nonzeros = newton_structure(kernel_expressions(ds), Sizes.of(ds.sizes), None)
    fixed = fixed_entries(newton, ds, 16, FreeSymbols())
    assert sorted(set(nonzeros) - set(fixed)) == [0, 18]
    text = emit_cython(ds)
    fixed_part = text.split("static void _k_newton_fixed(")[1].split("}")[0]
    rest_part = text.split("static void _k_newton_rest(")[1].split("}")[0]
    assert all(f"out[{i}] =" in fixed_part for i in fixed)
    assert "out[0] =" in rest_part and "out[18] =" in rest_part and "out[1] =" not in rest_part
    assert "static int written_lu_factor_fixed(" in text and "#define SD_LU_NC " in text
    ds = derive(symdae.load_model("double_pendulum")[0])
    newton = kernel_expressions(ds)["newton"][0]
    assert fixed_entries(newton, ds, 16, FreeSymbols()) == []
    # its steps call the whole kernel and factorisation (not printed a second time)
    text = emit_cython(ds)
    rest_part = text.split("static void _k_newton_rest(")[1].split("}")[0]
    assert rest_part.strip().endswith("_k_newton(x, w, out);")
    assert "return written_lu_factor(K, B, tol);" in text


def kernel_outputs(source: str, fname: str) -> dict:
    """The right-hand side of each ``out[i]`` of the C function ``fname`` with its
    temporaries substituted (parenthesised), as text."""
    import re

    body = source.split(f"static void {fname}(")[1].split("\n    }")[0]
    temps, outs = {}, {}
    for line in body.splitlines():
        m = re.match(r"\s+(_t\d+|out\[\d+\]) = (.*);$", line)
        if not m:
            continue
        rhs = re.sub(r"_t\d+\b", lambda t: f"({temps[t.group(0)]})", m.group(2))
        (temps if m.group(1).startswith("_t") else outs)[m.group(1)] = rhs
    return outs


@pytest.mark.parametrize("name", ["engine_mount", "slider_crank", "cart_pendulum_redundant",
                                  "four_cylinder_tvd"])
def test_the_newton_kernel_s_parts_compute_its_entries_as_it_does(name):
    """_k_newton_fixed and _k_newton_rest write the newton kernel's entries between them, each
    by the kernel's own code (its common subexpressions, not those of the part's entries
    alone, which may group a sum's terms otherwise and round otherwise: the TVD's K[4, 4]
    among others, whose sum a CSE of the rest alone orders differently)."""
    source = emit_cython(derive(symdae.load_model(name)[0]))
    body = "_k_newton_body" if "static void _k_newton_body(" in source else "_k_newton"
    whole = kernel_outputs(source, body)
    parts = {}
    for part in ("_k_newton_fixed", "_k_newton_rest"):
        fn = part + "_body" if f"static void {part}_body(" in source else part
        parts.update(kernel_outputs(source, fn))
    assert parts == whole, name


def tangents_both(system, traj, D, states):
    """The tangent sweep with the module's compiled steps, and with the generic step only."""
    from symdae.simulation.sensitivity import tangent
    be = system.backend
    sz = system.sizes
    zeros = tuple(np.zeros((D.shape[1], k)) for k in (sz.n, sz.n, sz.n, sz.m))
    runs = {}
    for flag in (True, False):
        be.use_compiled_steps = flag
        try:
            runs[flag] = (tangent(system, traj, D, states=states),
                          be.tangent(traj.sweep.forward, D, zeros, states=False).report)
        finally:
            be.use_compiled_steps = True
    return runs[True], runs[False]


@pytest.mark.parametrize("name, steps, dense, scheme, store, states", [
    ("engine_mount", 2000, False, "hht-paper", False, False),
    ("engine_mount", 2000, False, "hht-ga", True, True),
    ("four_bar_joints", None, False, "hht-ga", False, True),
    ("double_pendulum", None, False, "hht-paper", True, False),
    ("cart_pendulum_redundant", 1000, False, "hht-ga", False, False),
    ("slider_crank", 500, True, "hht-ga", False, True),
    ("slider_crank", 500, True, "hht-ga", True, False)])
def test_the_tangent_sweep_takes_the_compiled_steps_bit_for_bit(name, steps, dense, scheme,
                                                                 store, states):
    """The tangent sweep along one to four directions (the written-out products'): the
    module's compiled steps give the generic steps' sensitivities bit for bit (up to the sign
    of a zero: their solve for all directions at once applies the multipliers the generic
    solve skips where they multiply a zero), refactorising
    or reading the stored factorisations, keeping every state's tangents or the outputs'
    only. Where the written LU refuses a matrix (the slider-crank) the generic step takes that
    step with the dense LU and the sweep goes on in the compiled ones; five directions keep to
    the generic step."""
    model, ns = symdae.load_model(name)
    system = symdae.compile_model(model)
    sc = scenario_of(ns, {"scheme": scheme}, steps)
    traj = system.simulate(sc, store_factorizations=store)
    n = sc.n_steps
    p = np.abs(np.array(model.nominal_values, dtype=float))
    rng = np.random.default_rng(3)
    for nd in (1, 3, 4, 5):
        D = rng.uniform(-1.0, 1.0, (len(p), nd)) * np.where(p > 0, p, 1.0)[:, None]
        (fast, frep), (generic, grep) = tangents_both(system, traj, D, states)
        for f in ("dq", "dv", "da", "dlam", "ds"):
            np.testing.assert_array_equal(getattr(fast, f), getattr(generic, f),
                                          err_msg=f"{name} nd={nd} {f}")
        assert np.all(np.isfinite(fast.ds)) and np.any(fast.ds != 0.0)
        taken = frep.counters.compiled_steps
        assert grep.counters.compiled_steps == 0
        if nd > 4:
            assert taken == 0
        elif dense:
            assert 0.9 * n < taken < n, (nd, taken, n)
        else:
            assert taken == n, (nd, taken, n)


def test_the_tangent_steps_solve_per_direction_above_the_block_solve_limit(monkeypatch,
                                                                            tmp_path):
    """Above lu_plan.MAX_BLOCK_SOLVE the compiled tangent steps solve each direction with
    written_lu_solve_rows, as the generic step does: the same sensitivities, the signs of
    their zeros included."""
    from symdae.model import lu_plan
    monkeypatch.setattr(lu_plan, "MAX_BLOCK_SOLVE", 0)
    model, ns = symdae.load_model("engine_mount")
    ds = derive(model)
    assert "written_lu_solve_rows(B, b + d, nd);" in emit_cython(ds)
    system = symdae.compile_model(model, cache_dir=tmp_path)
    sc = scenario_of(ns, {}, 500)
    traj = system.simulate(sc)
    D = np.random.default_rng(5).uniform(-1.0, 1.0, (system.sizes.n_p, 3))
    (fast, frep), (generic, _) = tangents_both(system, traj, D, True)
    assert frep.counters.compiled_steps == 500
    for f in ("dq", "dv", "da", "dlam", "ds"):
        x, y = np.ascontiguousarray(getattr(fast, f)), np.ascontiguousarray(getattr(generic, f))
        assert x.shape == y.shape and x.tobytes() == y.tobytes(), f


def test_the_tangent_sweep_with_the_core_loops_lu_keeps_the_generic_step():
    """The compiled tangent steps call the module's written-out LU: where the sweeps factorise
    with the core's loops, every step is the generic one (with the written-out products), and
    the numbers are the same."""
    model, ns = symdae.load_model("engine_mount")
    system = symdae.compile_model(model)
    sc = scenario_of(ns, {}, 300)
    traj = system.simulate(sc)
    D = np.zeros((system.sizes.n_p, 2))
    D[0, 0], D[2, 1] = 1.0, 1.0
    (fast, frep), _ = tangents_both(system, traj, D, True)
    kernels = system.backend.kernels
    try:
        kernels.model_lu = False
        (loops, lrep), _ = tangents_both(system, traj, D, True)
    finally:
        kernels.model_lu = True
    assert frep.counters.compiled_steps == 300 and lrep.counters.compiled_steps == 0
    for f in ("dq", "dv", "da", "dlam", "ds"):
        np.testing.assert_array_equal(getattr(fast, f), getattr(loops, f), err_msg=f)
