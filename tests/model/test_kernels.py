"""Generated kernels of every bundled model against finite differences and the NumPy reference.

1. Every Jacobian a kernel returns equals a central finite difference of the generated kernel it
   differentiates (newton vs the HHT residual, jacobians / param_jacobians vs residual,
   state_jvp / param_jvp (applied to unit vectors) vs residual, output_jvp vs outputs,
   acceleration_constraint vs C_q a + gamma and vs the time derivative of
   constraint_velocity, constraint_velocity vs the time derivative of C,
   initial_state_jacobian vs initial_state); the vjp kernels equal the transposed jvp
   kernels, and newton the combination of M and the jacobians blocks, to round-off.
2. Every compiled kernel equals the lambdified one of the NumPy backend.

Tolerances. A central difference of f_i along x_j with step h_j = DELTA s_j (s_j the scale of
x_j) errs by round-off ~ eps F_i / h_j (F_i: the size of the terms of f_i, see ``magnitude``)
plus truncation ~ DELTA^2 |J_ij| (s_j / l_j)^2 (l_j the length over which f_i bends); with
DELTA = 2e-6 and l_j not much below s_j both are below 1e-9 relative. An entry passes if
|J - J_fd| <= 1e-7 |J| + 100 eps F_i / h_j: relative 1e-7, with a floor of 100 times the
round-off no difference quotient can avoid (it matters only for entries tiny next to the
terms of their row). Compiled against reference: |A - B| <= 1e-12 (|B| + F), F the term size
of that entry (round-off of a sum is relative to its terms, not to its result).

States: a short HHT run of each model at nominal parameters gives realistic magnitudes; one
state is taken as is (consistent, C ~ 0), two are perturbed (state by ~5 % of each
coordinate's range, parameters by up to 10 %).
"""
from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass, replace

import numpy as np
import pytest
import sympy as sp

import symdae
from symdae.model.kernels import KERNELS, kernel_expressions, pack_weights, split, weight_size
from symdae.model.roundoff import magnitude
from symdae.simulation.backends.numpy import NumpyBackend, lambdify_flat

MODELS = ["oscillator", "engine_mount", "pendulum", "slider_crank", "spring_chain"]
CONSTRAINED = ["engine_mount", "pendulum", "slider_crank"]

DELTA = 2e-6        # relative FD step
RTOL_FD = 1e-7      # FD agreement
ROUNDOFF = 100      # FD floor: this many times the round-off eps F / h of a difference quotient
RTOL_REF = 1e-12    # compiled vs lambdified
EPS = np.finfo(float).eps

ALPHA, H_SIM, T_SIM = -0.3, 1e-3, 0.3


def hht_weights(alpha: float, h: float) -> np.ndarray:
    beta, gamma = 0.25 * (1 - alpha) ** 2, 0.5 - alpha
    return np.array([1 / (1 + alpha), beta * h * h, gamma * h])


W_SETS = {
    "hht": hht_weights(ALPHA, H_SIM),      # the coefficients of an actual step
    "generic": np.array([1.25, 0.6, 0.8]),  # O(1): J_M, J_G, G_V weigh as much as M
}


# ---------------------------------------------------------------------------- one model
@dataclass(frozen=True)
class State:
    t: float
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    lam: np.ndarray
    p: np.ndarray
    u: np.ndarray
    label: str


class Case:
    """A bundled model: compiled kernels, reference kernels, term sizes, states and scales."""

    def __init__(self, name: str):
        self.name = name
        self.model, _ = symdae.load_model(name)
        self.system = symdae.compile_model(self.model)
        self.kernels = self.system.backend
        self.sizes = self.system.sizes
        self.ds = symdae.derive(self.model)
        self.table = kernel_expressions(self.ds)
        self.ref = NumpyBackend(self.ds)
        self._mag = {}
        md = self.model
        self.n, self.m, self.n_p, self.n_s = md.n, md.m, len(md.parameters), len(md.outputs)
        rng = np.random.default_rng(zlib.crc32(name.encode()))

        tr = self.system.simulate(t_end=T_SIM, h=H_SIM, alpha=ALPHA)
        p_nom = self.system.parameter_vector()
        u = np.zeros(len(md.inputs))
        # variable scales: each coordinate's range over the run, floored by its kind's range
        self.scale = {}
        for kind, X in (("q", tr.q), ("v", tr.v), ("a", tr.a), ("lam", tr.lam)):
            col = np.max(np.abs(X), axis=0) if X.shape[1] else np.zeros(0)
            top = col.max(initial=0.0)
            self.scale[kind] = np.maximum(col, 1e-3 * top if top > 0 else 1.0)
        self.scale["p"] = np.where(p_nom != 0, np.abs(p_nom), 1.0)

        N = len(tr.t) - 1
        idx = rng.choice(np.arange(N // 3, N + 1), size=3, replace=False)
        i0 = int(idx[0])
        self.states = [State(float(tr.t[i0]), tr.q[i0].copy(), tr.v[i0].copy(),
                             tr.a[i0].copy(), tr.lam[i0].copy(), p_nom.copy(), u,
                             f"trajectory state t={tr.t[i0]:.3f}")]
        for i in idx[1:]:
            i = int(i)
            pert = {}
            for kind, X in (("q", tr.q), ("v", tr.v), ("a", tr.a), ("lam", tr.lam)):
                pert[kind] = X[i] + 0.05 * self.scale[kind] * rng.standard_normal(X.shape[1])
            p = p_nom * rng.uniform(0.9, 1.1, size=p_nom.shape)
            self.states.append(State(float(tr.t[i]), pert["q"], pert["v"], pert["a"],
                                     pert["lam"], p, u, f"perturbed state t={tr.t[i]:.3f}"))

    def s(self, kind: str, st: State) -> np.ndarray:
        """Scale of each variable of ``kind`` at ``st`` (never below its value there)."""
        x = st.p if kind == "p" else getattr(st, kind)
        return np.maximum(self.scale[kind], np.abs(x))

    def k(self, name: str, st: State, w=None) -> np.ndarray:
        return self.kernels.evaluate(name, st.t, st.q, st.v, st.a, st.lam, st.p, st.u, w=w)

    def b(self, name: str, st: State, **weights) -> dict:
        """Kernel ``name`` at ``st`` with named weight blocks, split into its named blocks."""
        w = pack_weights(name, self.sizes, **weights) if weights else None
        return split(name, self.k(name, st, w), self.sizes)

    def mag(self, name: str, st: State, w=None) -> np.ndarray:
        """Term sizes of every entry of kernel ``name`` at ``st``."""
        if name not in self._mag:
            self._mag[name] = lambdify_flat(self.ds, [magnitude(e) for e in self.table[name][0]],
                                            weight_size(name, self.sizes))
        return self._mag[name](st.t, st.q, st.v, st.a, st.lam, st.p, st.u, w)

    def weights(self, name: str, rng) -> np.ndarray | None:
        k = weight_size(name, self.sizes)
        return rng.standard_normal(k) if k else None

    def jvp_matrix(self, name: str, st: State, block: str, k: int, out: str | None = None):
        """The matrix of the linear kernel ``name`` in its weight block ``block`` (k
        entries): one column per unit vector, all output blocks stacked (or just ``out``)."""
        cols = []
        for j in range(k):
            e = np.zeros(k)
            e[j] = 1.0
            r = self.b(name, st, **{block: e})
            cols.append(r[out] if out else self.k(name, st, pack_weights(name, self.sizes,
                                                                         **{block: e})))
        if not cols:
            rows = self.k(name, st, pack_weights(name, self.sizes)) if out is None else \
                self.b(name, st)[out]
            return np.zeros((len(rows), 0))
        return np.column_stack(cols)


@functools.cache
def case(name: str) -> Case:
    return Case(name)


# ---------------------------------------------------------------------------- helpers
def central(f, x: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Central-difference Jacobian of f at x, one column per entry of x."""
    cols = []
    for j, h in enumerate(steps):
        xp, xm = x.copy(), x.copy()
        xp[j] += h
        xm[j] -= h
        cols.append((f(xp) - f(xm)) / (xp[j] - xm[j]))
    if not cols:
        return np.zeros((len(f(x)), 0))
    return np.column_stack(cols)


def check_fd(J, J_fd, F, s, what: str, rows=None, cols=None) -> None:
    """|J - J_fd| <= RTOL_FD |J| + ROUNDOFF eps F_i / (DELTA s_j) entrywise (FD steps DELTA s_j);
    a failure lists the worst entries."""
    J, J_fd = np.atleast_2d(J), np.atleast_2d(J_fd)
    assert J.shape == J_fd.shape, f"{what}: shape {J.shape} vs FD {J_fd.shape}"
    if J.size == 0:
        return
    tol = RTOL_FD * np.abs(J) + ROUNDOFF * EPS * np.outer(F, 1.0 / (DELTA * s))
    err = np.abs(J - J_fd)
    assert np.all(np.isfinite(J)) and np.all(np.isfinite(J_fd)), f"{what}: non-finite entries"
    bad = np.argwhere(err > tol)
    if len(bad):
        worst = sorted(bad.tolist(), key=lambda rc: -err[rc[0], rc[1]] / tol[rc[0], rc[1]])
        lines = []
        for r, c in worst[:6]:
            rn = rows[r] if rows else r
            cn = cols[c] if cols else c
            lines.append(f"  [{rn}, {cn}]: kernel {J[r, c]:.12g}, FD {J_fd[r, c]:.12g}, "
                         f"|diff| {err[r, c]:.3g} > tol {tol[r, c]:.3g}")
        pytest.fail(f"{what}: {len(bad)} of {J.size} entries disagree with finite "
                    "differences\n" + "\n".join(lines))


def labels(prefix: str, k: int) -> list:
    return [f"{prefix}{i}" for i in range(k)]


def res_rows(c: Case) -> list:
    return labels("Ma", c.n) + labels("g", c.n) + labels("C", c.m)


def at(st: State, **kw) -> State:
    return replace(st, **kw)


# ---------------------------------------------------------------------------- FD tests
@pytest.mark.parametrize("name", MODELS)
def test_jacobians_match_fd_of_residual(name):
    """jacobians = [J_M, J_G, G_V, C_q]: d(residual)/dq = [J_M; J_G; C_q], d/dv = [0; G_V; 0]."""
    c = case(name)
    n, m = c.n, c.m
    for st in c.states:
        J = c.b("jacobians", st)
        JM, JG, GV, Cq = J["JM"], J["JG"], J["GV"], J["Cq"]
        F = c.mag("residual", st)
        sq, sv = c.s("q", st), c.s("v", st)
        fq = central(lambda q, st=st: c.k("residual", at(st, q=q)), st.q, DELTA * sq)
        check_fd(np.vstack([JM, JG, Cq]), fq, F, sq, f"{name} jacobians [J_M; J_G; C_q] vs "
                 f"d(residual)/dq at {st.label}", res_rows(c), labels("q", n))
        fv = central(lambda v, st=st: c.k("residual", at(st, v=v)), st.v, DELTA * sv)
        check_fd(np.vstack([np.zeros((n, n)), GV, np.zeros((m, n))]), fv, F, sv,
                 f"{name} jacobians [0; G_V; 0] vs d(residual)/dv at {st.label}",
                 res_rows(c), labels("v", n))


@pytest.mark.parametrize("wset", list(W_SETS))
@pytest.mark.parametrize("name", MODELS)
def test_newton_matches_fd_of_hht_residual(name, wset):
    """newton(c_m, c_q, c_v) = d(R_dyn, R_con)/d(a, lam) with q = q_pred + c_q a,
    v = v_pred + c_v a, R_dyn = c_m Ma + g, R_con = C / c_q (the scaled constraint row)."""
    c = case(name)
    n, m = c.n, c.m
    w = W_SETS[wset]
    c_m, c_q, c_v = w
    for st in c.states:
        K = c.k("newton", st, w=w).reshape(n + m, n + m)
        def R(y, st=st):
            # q = q_pred + c_q a with q_pred = q - c_q a_0, written so that no rounding of
            # the (possibly large) c_q a enters q
            a, lam = y[:n], y[n:]
            r = c.k("residual", at(st, q=st.q + c_q * (a - st.a), v=st.v + c_v * (a - st.a),
                                   a=a, lam=lam))
            return np.concatenate([c_m * r[:n] + r[n:2 * n], r[2 * n:] / c_q])

        Fr = c.mag("residual", st)
        F = np.concatenate([c_m * Fr[:n] + Fr[n:2 * n], Fr[2 * n:] / c_q])
        y0 = np.concatenate([st.a, st.lam])
        sq, sv, sl = c.s("q", st), c.s("v", st), c.s("lam", st)
        # R is linear in a but through q and v: its nonlinearity in a_j has the scale
        # s_q/c_q (constraint rows) or min(s_q/c_q, s_v/c_v) (dynamic rows)
        s_dyn = np.concatenate([np.minimum(sq / c_q, sv / c_v), sl])
        s_con = np.concatenate([sq / c_q, sl])
        J_dyn = central(R, y0, DELTA * s_dyn)[:n]
        J_con = central(R, y0, DELTA * s_con)[n:]
        cols = labels("a", n) + labels("lam", m)
        check_fd(K[:n], J_dyn, F[:n], s_dyn, f"{name} newton (w = {wset}) dynamic rows vs "
                 f"d(R_dyn)/d(a, lam) at {st.label}", labels("R_dyn", n), cols)
        check_fd(K[n:], J_con, F[n:], s_con, f"{name} newton (w = {wset}) constraint rows vs "
                 f"d(R_con)/d(a, lam) at {st.label}", labels("R_con", m), cols)


@pytest.mark.parametrize("name", MODELS)
def test_newton_initialisation_matrix_matches_fd(name):
    """newton(1, 0, 0) = [[M, C_q^T], [C_q, 0]] with M = d(Ma)/da, C_q^T = dg/dlam, C_q = dC/dq."""
    c = case(name)
    n, m = c.n, c.m
    for st in c.states:
        K = c.k("newton", st, w=np.array([1.0, 0.0, 0.0])).reshape(n + m, n + m)
        F = c.mag("residual", st)
        sa, sl, sq = c.s("a", st), c.s("lam", st), c.s("q", st)
        fa = central(lambda a, st=st: c.k("residual", at(st, a=a)), st.a, DELTA * sa)
        check_fd(K[:n, :n], fa[:n], F[:n], sa, f"{name} newton(1,0,0) M vs d(Ma)/da at "
                 f"{st.label}", labels("Ma", n), labels("a", n))
        fl = central(lambda lam, st=st: c.k("residual", at(st, lam=lam)), st.lam, DELTA * sl)
        check_fd(K[:n, n:], fl[n:2 * n], F[n:2 * n], sl, f"{name} newton(1,0,0) C_q^T vs "
                 f"dg/dlam at {st.label}", labels("g", n), labels("lam", m))
        fq = central(lambda q, st=st: c.k("residual", at(st, q=q)), st.q, DELTA * sq)
        check_fd(K[n:, :n], fq[2 * n:], F[2 * n:], sq, f"{name} newton(1,0,0) C_q vs dC/dq at "
                 f"{st.label}", labels("C", m), labels("q", n))
        assert np.all(K[n:, n:] == 0), f"{name} newton(1,0,0): constraint-multiplier block not 0"


@pytest.mark.parametrize("name", MODELS)
def test_param_jacobians_match_fd_of_residual(name):
    """param_jacobians = [P_M; P_G; P_C] = d(residual)/dp."""
    c = case(name)
    for st in c.states:
        P = np.vstack(list(c.b("param_jacobians", st).values()))
        sp_ = c.s("p", st)
        fp = central(lambda p, st=st: c.k("residual", at(st, p=p)), st.p, DELTA * sp_)
        check_fd(P, fp, c.mag("residual", st), sp_, f"{name} param_jacobians vs "
                 f"d(residual)/dp at {st.label}", res_rows(c), c.model.parameter_names)


@pytest.mark.parametrize("name", MODELS)
def test_output_jvp_matches_fd_of_outputs(name):
    """output_jvp(dx, dp) = ds/dx dx + ds/dp dp: its matrices (unit weights) against FD."""
    c = case(name)
    n, m, ns = c.n, c.m, c.n_s
    assert ns > 0
    for st in c.states:
        Sx = c.jvp_matrix("output_jvp", st, "dx", 3 * n + m)
        Sp = c.jvp_matrix("output_jvp", st, "dp", c.n_p)
        F = c.mag("outputs", st)
        x0 = np.concatenate([st.q, st.v, st.a, st.lam])
        sx = np.concatenate([c.s("q", st), c.s("v", st), c.s("a", st), c.s("lam", st)])

        def s_of_x(x, st=st):
            return c.k("outputs", at(st, q=x[:n], v=x[n:2 * n], a=x[2 * n:3 * n],
                                     lam=x[3 * n:]))

        cols = labels("q", n) + labels("v", n) + labels("a", n) + labels("lam", m)
        check_fd(Sx, central(s_of_x, x0, DELTA * sx), F, sx, f"{name} output_jvp "
                 f"ds/dx vs FD at {st.label}", c.model.output_names, cols)
        sp_ = c.s("p", st)
        fp = central(lambda p, st=st: c.k("outputs", at(st, p=p)), st.p, DELTA * sp_)
        check_fd(Sp, fp, F, sp_, f"{name} output_jvp ds/dp vs FD at {st.label}",
                 c.model.output_names, c.model.parameter_names)


@pytest.mark.parametrize("name", MODELS)
def test_state_and_param_jvp_match_fd_of_residual(name):
    """state_jvp(dq, dv, dlam) = d(Ma, g, C)/d(q, v, lam) and param_jvp(dp) = d(...)/dp:
    their matrices (unit weights) against central differences of the residual kernel."""
    c = case(name)
    n, m = c.n, c.m
    for st in c.states:
        F = c.mag("residual", st)
        for block, kind, k in (("dq", "q", n), ("dv", "v", n), ("dlam", "lam", m),
                               ("dp", "p", c.n_p)):
            kern = "param_jvp" if block == "dp" else "state_jvp"
            J = c.jvp_matrix(kern, st, block, k)
            sc = c.s(kind, st)
            x = getattr(st, kind)
            fd = central(lambda y, st=st, kind=kind: c.k("residual", at(st, **{kind: y})), x,
                         DELTA * sc)
            check_fd(J, fd, F, sc, f"{name} {kern} along {block} vs d(residual)/d{kind} at "
                     f"{st.label}", res_rows(c), labels(kind, k))


@pytest.mark.parametrize("name", MODELS)
def test_vjp_kernels_are_the_transposed_jvp_kernels(name):
    """state_vjp, param_vjp and output_vjp apply the transposes of the matrices the jvp kernels
    apply (so the adjoint and tangent sweeps differentiate the same thing), to round-off."""
    c = case(name)
    n, m, ns, n_p = c.n, c.m, c.n_s, c.n_p
    rng = np.random.default_rng(3)
    for st in c.states:
        Jq = c.jvp_matrix("state_jvp", st, "dq", n)         # rows: dMa (n), dg (n), dC (m)
        Jv = c.jvp_matrix("state_jvp", st, "dv", n)
        Jl = c.jvp_matrix("state_jvp", st, "dlam", m)
        Jp = c.jvp_matrix("param_jvp", st, "dp", n_p)
        wM, wG, wC, wL = (rng.standard_normal(k) for k in (n, n, m, n))
        w3 = np.concatenate([wM, wG, wC])
        got = c.b("state_vjp", st, wM=wM, wG=wG, wC=wC, wL=wL)
        check_product(got["qbar"], Jq.T @ w3, np.abs(Jq).T @ np.abs(w3),
                      f"{name} state_vjp qbar vs state_jvp^T at {st.label}")
        check_product(got["vbar"], Jv.T @ w3, np.abs(Jv).T @ np.abs(w3),
                      f"{name} state_vjp vbar vs state_jvp^T at {st.label}")
        assert np.all(got["abar"] == 0)
        # lbar = C_q wL, and C_q^T is the dg/dlam block of state_jvp
        Cq_T = Jl[n:2 * n] if m else np.zeros((n, 0))
        check_product(got["lbar"], Cq_T.T @ wL, np.abs(Cq_T).T @ np.abs(wL),
                      f"{name} state_vjp lbar vs (dg/dlam)^T at {st.label}")
        check_product(c.b("param_vjp", st, wM=wM, wG=wG, wC=wC)["pbar"], Jp.T @ w3,
                      np.abs(Jp).T @ np.abs(w3), f"{name} param_vjp vs param_jvp^T at "
                      f"{st.label}")
        Sx = c.jvp_matrix("output_jvp", st, "dx", 3 * n + m)
        Sp = c.jvp_matrix("output_jvp", st, "dp", n_p)
        dphi = rng.standard_normal(ns)
        got = c.b("output_vjp", st, dphi=dphi)
        check_product(got["xbar"], Sx.T @ dphi, np.abs(Sx).T @ np.abs(dphi),
                      f"{name} output_vjp xbar vs output_jvp^T at {st.label}")
        check_product(got["pbar"], Sp.T @ dphi, np.abs(Sp).T @ np.abs(dphi),
                      f"{name} output_vjp pbar vs output_jvp^T at {st.label}")


@pytest.mark.parametrize("name", MODELS)
def test_initial_state_jacobian_matches_fd(name):
    """initial_state_jacobian = d(initial_state)/dp."""
    c = case(name)
    n = c.n
    for st in c.states:
        J = np.vstack(list(c.b("initial_state_jacobian", st).values()))
        sp_ = c.s("p", st)
        fp = central(lambda p, st=st: c.k("initial_state", at(st, p=p)), st.p, DELTA * sp_)
        check_fd(J, fp, c.mag("initial_state", st), sp_, f"{name} initial_state_jacobian vs "
                 f"FD at {st.label}", labels("q0_", n) + labels("v0_", n),
                 c.model.parameter_names)


def _time_scale(c: Case, st: State, with_a: bool) -> float:
    """Time over which the state moves by its scale (the FD step along the motion is DELTA
    times this)."""
    T = [1.0]
    T += list(c.s("q", st)[st.v != 0] / np.abs(st.v[st.v != 0]))
    if with_a:
        T += list(c.s("v", st)[st.a != 0] / np.abs(st.a[st.a != 0]))
    return min(T)


@pytest.mark.parametrize("name", CONSTRAINED)
def test_constraint_velocity_matches_fd_of_constraints(name):
    """constraint_velocity = d/dt C(t, q(t)) = C_q v + C_t along q' = v."""
    c = case(name)
    n, m = c.n, c.m
    assert m > 0
    for st in c.states:
        T = _time_scale(c, st, with_a=False)

        def C_along(x, st=st):
            tau = x[0]
            return c.k("residual", at(st, t=st.t + tau, q=st.q + tau * st.v))[2 * n:]

        fd = central(C_along, np.zeros(1), np.array([DELTA * T]))
        check_fd(c.k("constraint_velocity", st)[:, None], fd, c.mag("residual", st)[2 * n:],
                 np.array([T]), f"{name} constraint_velocity vs dC/dt at {st.label}",
                 labels("C", m), ["t"])


@pytest.mark.parametrize("name", CONSTRAINED)
def test_acceleration_constraint_matches_fd(name):
    """acceleration_constraint = [gamma, dRc/dq, dgamma/dv, dRc/dp], Rc = C_q a + gamma, and
    d/dt cdot(t, q(t), v(t)) = C_q a + gamma along q' = v, v' = a."""
    c = case(name)
    n, m = c.n, c.m
    assert m > 0
    for st in c.states:
        acc = c.b("acceleration_constraint", st)
        gamma, Rc_q, gamma_v, Rc_p = acc["gamma"], acc["Rc_q"], acc["gamma_v"], acc["Rc_p"]
        Cq = c.b("jacobians", st)["Cq"]
        Fg = c.mag("acceleration_constraint", st)[:m]
        FCq = split("jacobians", c.mag("jacobians", st), c.sizes)["Cq"]
        F = FCq @ np.abs(st.a) + Fg    # term sizes of Rc = C_q a + gamma

        def Rc(s):
            J = c.b("jacobians", s)["Cq"]
            return J @ s.a + c.k("acceleration_constraint", s)[:m]

        # gamma: time derivative of cdot along the motion
        T = _time_scale(c, st, with_a=True)

        def cdot_along(x, st=st):
            tau = x[0]
            return c.k("constraint_velocity",
                       at(st, t=st.t + tau, q=st.q + tau * st.v, v=st.v + tau * st.a))

        fd = central(cdot_along, np.zeros(1), np.array([DELTA * T]))
        check_fd((Cq @ st.a + gamma)[:, None], fd, c.mag("constraint_velocity", st),
                 np.array([T]), f"{name} acceleration_constraint C_q a + gamma vs d(cdot)/dt "
                 f"at {st.label}", labels("Rc", m), ["t"])
        sq, sv, sp_ = c.s("q", st), c.s("v", st), c.s("p", st)
        check_fd(Rc_q, central(lambda q, st=st: Rc(at(st, q=q)), st.q, DELTA * sq), F, sq,
                 f"{name} acceleration_constraint dRc/dq vs FD at {st.label}",
                 labels("Rc", m), labels("q", n))
        check_fd(gamma_v, central(lambda v, st=st: Rc(at(st, v=v)), st.v, DELTA * sv), F, sv,
                 f"{name} acceleration_constraint dgamma/dv vs FD at {st.label}",
                 labels("Rc", m), labels("v", n))
        check_fd(Rc_p, central(lambda p, st=st: Rc(at(st, p=p)), st.p, DELTA * sp_), F, sp_,
                 f"{name} acceleration_constraint dRc/dp vs FD at {st.label}",
                 labels("Rc", m), c.model.parameter_names)


# ---------------------------------------------------------------------------- exact identities
def check_product(got, want, size, what: str) -> None:
    """got == want to round-off; ``size`` bounds the terms of each entry."""
    tol = RTOL_REF * (np.abs(want) + size) + 1e-300
    bad = np.flatnonzero(np.abs(got - want) > tol)
    assert not len(bad), (f"{what}: entries {bad[:8].tolist()} differ: got "
                          f"{got[bad[:4]]}, want {want[bad[:4]]}")


@pytest.mark.parametrize("name", MODELS)
def test_param_vjp_is_param_jacobians_transposed_times_w(name):
    """param_vjp(w) = P_M^T wM + P_G^T wG + P_C^T wC (from zero)."""
    c = case(name)
    rng = np.random.default_rng(7)
    n, m = c.n, c.m
    for st in c.states:
        P = np.vstack(list(c.b("param_jacobians", st).values()))
        FP = np.vstack(list(split("param_jacobians", c.mag("param_jacobians", st),
                                  c.sizes).values()))
        w = rng.standard_normal(2 * n + m)
        got = c.k("param_vjp", st, w=w)
        check_product(got, P.T @ w, np.abs(P).T @ np.abs(w) + FP.T @ np.abs(w),
                      f"{name} param_vjp vs param_jacobians^T w at {st.label}")


@pytest.mark.parametrize("name", MODELS)
def test_newton_is_the_combination_of_jacobians(name):
    """newton(w) = [[c_m M + c_q (c_m J_M + J_G) + c_v G_V, C_q^T], [C_q, 0]] to round-off."""
    c = case(name)
    n, m = c.n, c.m
    for st in c.states:
        M = c.k("newton", st, w=np.array([1.0, 0.0, 0.0])).reshape(n + m, n + m)[:n, :n]
        J = c.b("jacobians", st)
        JM, JG, GV, Cq = J["JM"], J["JG"], J["GV"], J["Cq"]
        for wset, w in W_SETS.items():
            c_m, c_q, c_v = w
            want = np.block([[c_m * M + c_q * (c_m * JM + JG) + c_v * GV, Cq.T],
                             [Cq, np.zeros((m, m))]])
            absw = np.block([[c_m * abs(M) + c_q * (c_m * abs(JM) + abs(JG)) + c_v * abs(GV),
                              abs(Cq.T)], [abs(Cq), np.zeros((m, m))]])
            size = absw + c.mag("newton", st, w=w).reshape(n + m, n + m)
            check_product(c.k("newton", st, w=w).ravel(), want.ravel(), size.ravel(),
                          f"{name} newton (w = {wset}) vs M, J_M, J_G, G_V, C_q at {st.label}")


# ---------------------------------------------------------------------------- reference
def check_against_reference(c: Case, kernel: str, evaluate, what: str) -> None:
    """``evaluate(kernel, t, q, v, a, lam, p, u, w=w)`` equals the lambdified reference at
    every state of ``c`` (and every weight set for newton): |A - B| <= RTOL_REF (|B| + F)."""
    rng = np.random.default_rng(zlib.crc32(kernel.encode()))
    wlist = list(W_SETS.values()) if kernel == "newton" else [c.weights(kernel, rng)]
    for st in c.states:
        for w in wlist:
            A = evaluate(kernel, st.t, st.q, st.v, st.a, st.lam, st.p, st.u, w=w)
            B = c.ref.evaluate(kernel, st.t, st.q, st.v, st.a, st.lam, st.p, st.u, w=w)
            assert A.shape == B.shape == (len(c.table[kernel][0]),), \
                f"{c.name} {kernel}: shapes {A.shape} ({what}), {B.shape} (reference)"
            F = c.mag(kernel, st, w=w)
            tol = RTOL_REF * (np.abs(B) + F)
            bad = np.flatnonzero(~(np.abs(A - B) <= tol))
            assert not len(bad), (
                f"{c.name} {kernel} at {st.label}: {what} and reference differ at entries "
                f"{bad[:8].tolist()}: {what} {A[bad[:4]]}, reference {B[bad[:4]]}, "
                f"tol {tol[bad[:4]]}")


@pytest.mark.parametrize("kernel", [k.name for k in KERNELS if not k.internal])
@pytest.mark.parametrize("name", MODELS)
def test_compiled_kernel_equals_reference(name, kernel):
    """Compiled (Cython, CSE) and lambdified (NumPy) evaluation of the same expressions."""
    c = case(name)
    check_against_reference(c, kernel, c.kernels.evaluate, "compiled")


# ---------------------------------------------------------------------------- slider-crank
def test_slider_crank_initial_state_is_consistent_for_any_parameters():
    """Closed-form position analysis: C(q0) = 0 and C_q v0 = 0 to round-off."""
    c = case("slider_crank")
    n, m = c.n, c.m
    rng = np.random.default_rng(11)
    names = c.model.parameter_names
    p_nom = c.system.parameter_vector()
    for _ in range(25):
        p = p_nom * rng.uniform(0.5, 1.5, size=p_nom.shape)
        p[names.index("phi0")] = rng.uniform(-7.0, 7.0)
        p[names.index("omega0")] = rng.uniform(-60.0, 60.0)
        st = State(0.0, np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(m), p, np.zeros(0),
                   "initial")
        qv = c.b("initial_state", st)
        st = at(st, q=qv["q0"], v=qv["v0"])
        C = c.k("residual", st)[2 * n:]
        cdot = c.k("constraint_velocity", st)
        assert np.all(np.abs(C) <= 16 * EPS * c.mag("residual", st)[2 * n:]), (p, C)
        assert np.all(np.abs(cdot) <= 16 * EPS * c.mag("constraint_velocity", st)), (p, cdot)


def test_slider_crank_simulates_with_constraints_at_round_off():
    c = case("slider_crank")
    n = c.n
    tr = symdae.compile_model(c.model).simulate(t_end=1.0, h=1e-3, alpha=-0.3)
    assert tr.counters["steps"] == 1000
    p = c.system.parameter_vector()
    worst = 0.0
    for i in range(len(tr.t)):
        st = State(tr.t[i], tr.q[i], tr.v[i], tr.a[i], tr.lam[i], p, np.zeros(0), "")
        C = c.k("residual", st)[2 * n:]
        worst = max(worst, float(np.max(np.abs(C) / (EPS * c.mag("residual", st)[2 * n:]))))
    assert worst <= 32, f"constraint residual reached {worst:.1f} eps times its term size"
    # the crank turns (driven), the slider stays between its dead centres
    assert tr.outputs["phi"][-1] > 2 * np.pi
    x = tr.outputs["x_s"]
    r, l, e = (tr.params[k] for k in ("r", "l", "e"))
    assert np.all(x <= np.sqrt((l + r) ** 2 - e ** 2) + 1e-12)
    assert np.all(x >= np.sqrt((l - r) ** 2 - e ** 2) - 1e-12)


def test_slider_crank_agrees_with_minimal_coordinate_dynamics():
    """The consistent initial crank acceleration equals phi'' of the one-coordinate Lagrangian
    (derived here independently, with x2(phi) from the position analysis)."""
    c = case("slider_crank")
    names = c.model.parameter_names
    P = {name: sp.Symbol(name) for name in names}
    r, l, e, m1, m2, m3, Jf, k, d, s0, T0, Omega, g = (
        P[x] for x in ("r", "l", "e", "m1", "m2", "m3", "Jf", "k", "d", "s0", "T0", "Omega",
                       "g"))
    phi, omega = sp.symbols("phi omega")
    x1, y1 = r * sp.cos(phi), r * sp.sin(phi)
    x2 = x1 + sp.sqrt(l**2 - (e - y1)**2)
    J1, J2 = sp.Matrix([x1, y1]).diff(phi), sp.Matrix([x2.diff(phi), 0])
    mu = m1 * r**2 / 3 + Jf + m2 / 3 * (J1.dot(J1) + J1.dot(J2) + J2.dot(J2)) \
        + m3 * J2.dot(J2)                                     # T = mu(phi) omega^2 / 2
    V = g * (m1 * r / 2 * sp.sin(phi) + m2 * (y1 + e) / 2 + m3 * e)
    F = -k * (x2 - s0) - d * x2.diff(phi) * omega             # spring-damper on the slider
    Q = T0 * (1 - omega / Omega) + F * x2.diff(phi)
    phi_dd = (Q - V.diff(phi) - mu.diff(phi) * omega**2 / 2) / mu
    f = sp.lambdify([phi, omega] + [P[x] for x in names], phi_dd)
    rng = np.random.default_rng(5)
    p_nom = c.system.parameter_vector()
    for _ in range(5):
        params = dict(zip(names, p_nom * rng.uniform(0.8, 1.2, size=p_nom.shape)))
        tr = c.system.simulate(t_end=1e-3, h=1e-3, alpha=-0.3, params=params)
        want = f(params["phi0"], params["omega0"], *params.values())
        assert tr.a[0, 0] == pytest.approx(want, rel=1e-12), params
