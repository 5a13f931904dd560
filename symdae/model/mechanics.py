"""Models from ``sympy.physics.mechanics``: a ``System``, ``KanesMethod`` or ``LagrangesMethod``
becomes a symdae :class:`~symdae.model.Model`.

symdae integrates the descriptor form in *all* coordinates,

    M(q) q'' + C_q^T lam = Q(q, q', t, p, u),    C(q, t, p) = 0,

so the conversion keeps every coordinate the object declares, independent and dependent, and
keeps the holonomic constraints (loop closures) as index-3 constraints instead of eliminating
them. How each object becomes that form:

* ``System`` with u = q' (the joints' default): Kane's equations with every speed independent
  and no constraint, that is the unconstrained motion in all coordinates (the constraint
  forces then enter as C_q^T lam, which is exactly what symdae adds), formed in inertial
  components: the frames' rotations are built joint by joint from the fixed frame with the
  angle sums collapsed at each step, the mass centers' positions from the fixed point, and

      M = sum m J^T J + Jw^T I_N Jw,  Q = loads - sum m J^T a_rest - Jw^T (d/dt I_N w)_rest

  (J = dr/dq, Jw = dw/dq', "rest" with q'' = 0). Nothing multiplies a chain of rotations out,
  so long chains stay small.
* ``KanesMethod`` (or a System whose points or frames cannot be placed that way): Kane's
  equations formed by SymPy with every speed independent and no constraint. The kinematic
  differential equations must be linear, u = A(q, t) q' + b(q, t) with A invertible; Kane's
  equations in u (M_u u' = f_u) become, with the partial velocities in q' being A^T times
  those in u,

      A^T M_u A q'' = A^T (f_u - M_u (A' q' + b'))        (u, u' replaced by A q' + b)

  and, for u = q', simply M_u q'' = f_u with u -> q'.
* ``LagrangesMethod``: its Lagrangian goes to symdae's ``lagrangian=`` path, its loads become
  generalized forces sum F . dv/dq' (+ T . dw/dq'), its ``hol_coneqs`` the constraints.

Nonholonomic constraints (and velocity constraints that are not the time derivatives of the
holonomic ones) are refused with a :class:`~symdae.errors.MechanicsError` (a ModelError):
symdae has no place for them, and dropping them would give another mechanism.
"""
from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sympy as sp
from sympy.physics.mechanics import (
    KanesMethod,
    LagrangesMethod,
    Point,
    ReferenceFrame,
    System,
    dynamicsymbols,
)
from sympy.physics.mechanics.joint import Joint
from sympy.physics.vector import Vector

from ..errors import MechanicsError, UndeclaredSymbolError
from .definition import Model

__all__ = ["SpeedMap", "from_mechanics", "simplify_trig", "speed_map"]


# ---------------------------------------------------------------------------- the object
@dataclass
class Mechanics:
    """What the conversion needs from a mechanics object, in one shape for all three kinds."""

    kind: str                                  # "System", "KanesMethod", "LagrangesMethod"
    frame: ReferenceFrame | None
    q: tuple                                   # all coordinates, independent then dependent
    u: tuple = ()                              # all speeds (empty for LagrangesMethod)
    kdes: tuple = ()                           # kinematic differential equations (= 0)
    bodies: tuple = ()
    loads: tuple = ()
    holonomic: tuple = ()                      # C(q, t) = 0
    lagrangian: sp.Expr | None = None          # LagrangesMethod only
    extra: dict = field(default_factory=dict)


def _as_tuple(x) -> tuple:
    if x is None:
        return ()
    if isinstance(x, sp.MatrixBase):
        return tuple(x)
    return tuple(x)


def _from_system(obj: System) -> Mechanics:
    if len(obj.nonholonomic_constraints):
        raise MechanicsError(
            f"the System has nonholonomic constraints {list(obj.nonholonomic_constraints)}; "
            "symdae integrates holonomic constraints C(q, t) = 0 only: model a rolling or "
            "knife-edge contact by a holonomic constraint or a contact force")
    if len(obj.u_aux):
        raise MechanicsError(f"the System has auxiliary speeds {list(obj.u_aux)}: remove them "
                             "(they only serve to compute noncontributing forces)")
    if not len(obj.u):
        raise MechanicsError("the System has no generalized speeds: add speeds and kinematic "
                             "differential equations (joints do), or pass a LagrangesMethod")
    try:
        obj.validate_system(KanesMethod)
    except ValueError as exc:
        raise MechanicsError(f"the System's equations cannot be formed: {exc}") from exc
    loads = tuple(obj.loads) + tuple(load for act in obj.actuators for load in act.to_loads())
    mech = Mechanics("System", obj.frame, tuple(obj.q), tuple(obj.u), tuple(obj.kdes),
                     tuple(obj.bodies), loads, tuple(obj.holonomic_constraints),
                     extra={"fixed_point": obj.fixed_point})
    _check_velocity_constraints(mech, tuple(obj.velocity_constraints), "System")
    return mech


def _from_kane(obj: KanesMethod) -> Mechanics:
    # KanesMethod exposes neither its configuration constraints nor its dependent or auxiliary
    # speeds publicly; its (stable since SymPy 1.0) attributes are the only source.
    holonomic = _as_tuple(getattr(obj, "_f_h", None))
    velocity = _as_tuple(getattr(obj, "_f_nh", None))
    k_nh = getattr(obj, "_k_nh", None)
    if k_nh is not None and len(k_nh):
        velocity = tuple(sp.Matrix(k_nh) * sp.Matrix(obj.u) + sp.Matrix(velocity))
    if len(_as_tuple(getattr(obj, "_uaux", None))):
        raise MechanicsError("the KanesMethod has auxiliary speeds: form it without "
                             "u_auxiliary (they only serve to compute noncontributing forces)")
    try:
        qdot_map = obj.kindiffdict()
    except AttributeError as exc:
        raise MechanicsError("the KanesMethod has no kinematic differential equations "
                             "(kd_eqs)") from exc
    kdes = tuple(qd - expr for qd, expr in qdot_map.items())
    bodies = _as_tuple(obj.bodies)
    loads = _as_tuple(obj.loads)
    if not bodies:
        raise MechanicsError("the KanesMethod has no bodies: pass bodies= when forming it")
    mech = Mechanics("KanesMethod", getattr(obj, "_inertial", None), tuple(obj.q),
                     tuple(obj.u), kdes, bodies, loads, holonomic)
    _check_velocity_constraints(mech, velocity, "KanesMethod")
    return mech


def _from_lagrange(obj: LagrangesMethod) -> Mechanics:
    # LagrangesMethod keeps its Lagrangian and holonomic constraints in (stable) private
    # attributes; coneqs holds their time derivatives followed by the nonholonomic ones.
    holonomic = _as_tuple(getattr(obj, "_hol_coneqs", None))
    coneqs = _as_tuple(obj.coneqs)
    if len(coneqs) > len(holonomic):
        raise MechanicsError(
            f"the LagrangesMethod has nonholonomic constraints {list(coneqs[len(holonomic):])};"
            " symdae integrates holonomic constraints C(q, t) = 0 only")
    loads = _as_tuple(obj.loads)
    if loads and obj.inertial is None:
        raise MechanicsError("the LagrangesMethod has loads but no inertial frame: pass "
                             "frame= so that their generalized forces can be formed")
    return Mechanics("LagrangesMethod", obj.inertial, tuple(obj.q), loads=loads,
                     holonomic=holonomic, lagrangian=obj._L[0])


def extract(obj) -> Mechanics:
    """The parts of a System, KanesMethod or LagrangesMethod the conversion uses."""
    if isinstance(obj, System):
        return _from_system(obj)
    if isinstance(obj, KanesMethod):
        return _from_kane(obj)
    if isinstance(obj, LagrangesMethod):
        return _from_lagrange(obj)
    raise MechanicsError(
        f"from_mechanics takes a sympy.physics.mechanics System, KanesMethod or "
        f"LagrangesMethod, got {type(obj).__name__}")


# ---------------------------------------------------------------------------- velocity checks
def _random_point(symbols: Iterable, seed: int = 7) -> dict:
    rng = random.Random(seed)
    return {s: sp.Float(rng.uniform(0.3, 1.7)) for s in symbols}


def _check_velocity_constraints(mech: Mechanics, velocity: tuple, kind: str) -> None:
    """Refuse velocity constraints that are not implied by the holonomic ones.

    Each must be a combination of the time derivatives of the holonomic constraints (a
    nonholonomic one is not); checked by ranks at a random configuration, which is exact with
    probability one and costs no symbolic elimination.
    """
    if not velocity:
        return
    t = dynamicsymbols._t
    qd = [q.diff(t) for q in mech.q]
    smap = speed_map(mech.q, mech.u, mech.kdes) if mech.u else None
    dh = [sp.diff(c, t) for c in mech.holonomic]
    vel = list(velocity)
    if smap is not None:
        vel = [smap.to_qdot(e) for e in vel]
    variables = list(qd) + [sp.S.One]
    def rows(exprs):
        out = []
        for e in exprs:
            e = sp.expand(e)
            out.append([e.coeff(v) if v is not sp.S.One else e.subs({x: 0 for x in qd})
                        for v in variables])
        return sp.Matrix(out) if out else sp.zeros(0, len(variables))
    H, V = rows(dh), rows(vel)
    free = (H.free_symbols | V.free_symbols) - {t}
    funcs = set().union(*(m.atoms(sp.Function) for m in (H, V)))
    point = _random_point(sorted(free | {f for f in funcs if f.args == (t,)}, key=str))
    point[t] = sp.Float(0.37)
    Hn = H.xreplace(point).evalf() if H.rows else H
    Vn = V.xreplace(point).evalf()
    rank_h = Hn.rank(iszerofunc=lambda x: abs(x) < 1e-9) if H.rows else 0
    both = Hn.col_join(Vn) if H.rows else Vn
    if both.rank(iszerofunc=lambda x: abs(x) < 1e-9) > rank_h:
        raise MechanicsError(
            f"the {kind}'s velocity constraints {list(velocity)} are not the time derivatives "
            "of its holonomic constraints: nonholonomic constraints cannot be integrated by "
            "symdae (holonomic constraints C(q, t) = 0 only)")


# ---------------------------------------------------------------------------- speeds
@dataclass
class SpeedMap:
    """u = A(q, t) q' + b(q, t), from linear kinematic differential equations."""

    q: tuple
    u: tuple
    A: sp.Matrix
    b: sp.Matrix

    @property
    def is_identity(self) -> bool:
        """True for the joints' default u_i = q_i' in the coordinates' order (a permutation
        goes through the general transformation, which reorders Kane's rows)."""
        return self.b.is_zero_matrix and self.A == sp.eye(self.A.rows)

    def speeds(self) -> dict:
        """{u_i: its expression in q, q', t}."""
        t = dynamicsymbols._t
        qd = sp.Matrix([q.diff(t) for q in self.q])
        return dict(zip(self.u, self.A * qd + self.b))

    def to_qdot(self, expr):
        """expr with u' and u replaced by their expressions in q, q', q'' (u' first: replacing
        u inside Derivative(u, t) would leave a derivative of an expression)."""
        t = dynamicsymbols._t
        sp_ = self.speeds()
        dot = {u.diff(t): e.diff(t) for u, e in sp_.items()}
        return sp.sympify(expr).xreplace(dot).xreplace(sp_)


def speed_map(q: tuple, u: tuple, kdes: tuple) -> SpeedMap:
    """Solve the kinematic differential equations for the speeds: u = A(q, t) q' + b(q, t).

    Raises MechanicsError naming the equation when one is not linear in u and q', involves
    speeds and q' in a product, or when the speeds cannot be solved for (A singular).
    """
    t = dynamicsymbols._t
    qd = [x.diff(t) for x in q]
    if len(kdes) != len(u):
        raise MechanicsError(f"{len(kdes)} kinematic differential equations for {len(u)} "
                             f"speeds {list(u)}: give one per speed")
    K = sp.Matrix(kdes)
    Ku, Kq = K.jacobian(u), K.jacobian(qd)
    rest = sp.expand(K - Ku * sp.Matrix(u) - Kq * sp.Matrix(qd))
    moving = set(u) | set(qd)
    for i in range(K.rows):
        bad = [x for x in (list(Ku.row(i)) + list(Kq.row(i)) + [rest[i]])
               if x.has(*moving)]
        if bad:
            raise MechanicsError(
                f"kinematic differential equation {i}: {kdes[i]} = 0 is not linear in the "
                "speeds and q' (u = A(q) q' + b): symdae cannot express the speeds through q'; "
                "use speeds u = q' (the joints' default) or a linear definition")
    if Ku.det() == 0:
        raise MechanicsError(
            f"the kinematic differential equations {list(kdes)} do not determine the speeds "
            f"{list(u)} (their matrix in u is singular): each speed must be expressible "
            "through q'")
    inv = Ku.inv()
    A = sp.simplify(-inv * Kq)
    b = sp.simplify(-inv * rest)
    return SpeedMap(tuple(q), tuple(u), A, b)


# ---------------------------------------------------------------------------- simplification
def _is_trig_polynomial(x: sp.Expr) -> bool:
    """An Add whose powers are all non-negative integer ones: expanding it cannot spread a
    denominator or a root over its terms."""
    return x.is_Add and all(p.exp.is_Integer and p.exp >= 0 for p in x.atoms(sp.Pow))


def _collapse(x: sp.Expr) -> sp.Expr:
    from sympy.simplify.fu import TR10i

    if not (_is_trig_polynomial(x) and x.has(sp.sin, sp.cos)):
        return x
    out = TR10i(sp.expand(x))
    return out if sp.count_ops(out) <= sp.count_ops(x) else x


def simplify_trig(expr: sp.Expr) -> sp.Expr:
    """Collapse the angle-sum products that chains of joint frames produce
    (cos(a)cos(b) - sin(a)sin(b) -> cos(a + b)), cheaply.

    Direction cosine products grow with every joint; ``trigsimp`` on them is thorough but far
    too slow for long chains. Here ``fu``'s TR10i (sum of products -> sum of angles) runs
    bottom-up on every polynomial sub-sum after expanding it; sums under a root or in a
    denominator (a spring's length) stay whole, so expanding never multiplies them out.
    """
    if not isinstance(expr, sp.Basic) or not expr.has(sp.sin, sp.cos):
        return expr
    return sp.bottom_up(expr, _collapse)


# ---------------------------------------------------------------------------- equations
def _kane_unconstrained(mech: Mechanics):
    """Kane's M_u, f_u (M_u u' = f_u) with every speed independent and no constraint."""
    kane = KanesMethod(mech.frame, q_ind=list(mech.q), u_ind=list(mech.u),
                       kd_eqs=list(mech.kdes))
    try:
        kane.kanes_equations(list(mech.bodies), list(mech.loads) or None)
    except (ValueError, TypeError, AttributeError) as exc:
        raise MechanicsError(f"Kane's equations of the {mech.kind} cannot be formed: "
                             f"{exc}") from exc
    return kane.mass_matrix, kane.forcing


def _second_order(mech: Mechanics, smap: SpeedMap, simplify: bool):
    """(M, Q) in q, q', q'' from Kane's equations in the speeds."""
    t = dynamicsymbols._t
    Mu, fu = _kane_unconstrained(mech)
    if smap.is_identity:
        M, Q = Mu, fu
        M, Q = M.xreplace(smap.speeds()), smap.to_qdot(Q)
    else:
        qd = sp.Matrix([q.diff(t) for q in mech.q])
        A, b = smap.A, smap.b
        Mu_q = smap.to_qdot(Mu)
        M = A.T * Mu_q * A
        Q = A.T * (smap.to_qdot(fu) - Mu_q * (A.diff(t) * qd + b.diff(t)))
    if simplify:
        M = M.applyfunc(simplify_trig)
        Q = Q.applyfunc(simplify_trig)
    return M, Q


class _NoPath(LookupError):
    """A frame or point that the inertial-components route cannot place (falls back to Kane)."""


def _neighbours(obj, attr: str):
    # ReferenceFrame and Point keep their direct relations in these (stable) private dicts;
    # no public accessor lists them
    return list(getattr(obj, attr, {}).keys())


def _frame_rotations(N: ReferenceFrame) -> dict:
    """{frame: N.dcm(frame)} for every frame connected to N, built along the orientation tree
    one joint at a time with the angle sums collapsed at each step: a chain of k frames then
    costs k small simplifications instead of one product of k rotations."""
    R = {N: sp.eye(3)}
    todo = [N]
    while todo:
        F = todo.pop()
        for G in _neighbours(F, "_dcm_dict"):
            if G not in R:
                R[G] = (R[F] * F.dcm(G)).applyfunc(simplify_trig)
                todo.append(G)
    return R


def _components(vec: Vector, R: dict) -> sp.Matrix:
    """A vector's components in N, through the collapsed rotations."""
    out = sp.zeros(3, 1)
    for comps, frame in vec.args:
        if frame not in R:
            raise _NoPath(frame)
        out += R[frame] * comps
    return out.applyfunc(simplify_trig)


def _point_positions(O: Point, R: dict) -> dict:
    """{point: its position from O in N components} along the position tree."""
    pos = {O: sp.zeros(3, 1)}
    todo = [O]
    while todo:
        P = todo.pop()
        for X in _neighbours(P, "_pos_dict"):
            if X not in pos:
                pos[X] = pos[P] + _components(X.pos_from(P), R)
                todo.append(X)
    return pos


class _Jacobians:
    """dx/dq and dx/dq' of expressions in q(t), q'(t) and other functions of t, taken on plain
    symbols for q and q': SymPy differentiates by a function of t or by a Derivative through
    substitutions, which took most of a 20-link chain's conversion. An expression holding a
    higher derivative of q goes to SymPy's jacobian."""

    def __init__(self, q: tuple):
        t = dynamicsymbols._t
        self.q = list(q)
        self.qd = [x.diff(t) for x in q]
        self.qs = [sp.Dummy(f"q{i}", real=True) for i in range(len(q))]
        self.qds = [sp.Dummy(f"qd{i}", real=True) for i in range(len(q))]
        self.to_sym = {**dict(zip(self.qd, self.qds)), **dict(zip(q, self.qs))}
        self.to_fun = {**dict(zip(self.qds, self.qd)), **dict(zip(self.qs, q))}

    def _jacobian(self, x: sp.Matrix, symbols: list, functions: list) -> sp.Matrix:
        if any(d not in self.to_sym and d.expr.has(*self.q) for d in x.atoms(sp.Derivative)):
            return x.jacobian(functions)       # q'' or a derivative of an expression in q
        return x.xreplace(self.to_sym).jacobian(symbols).xreplace(self.to_fun)

    def of_position(self, r: sp.Matrix) -> sp.Matrix:
        """dr/dq (= dr'/dq')."""
        return self._jacobian(r, self.qs, self.q)

    def of_rate(self, w: sp.Matrix) -> sp.Matrix:
        """dw/dq'."""
        return self._jacobian(w, self.qds, self.qd)


def _inertial_equations(mech: Mechanics, smap: SpeedMap, O: Point):
    """M and Q (q, q'; u = q' assumed by the caller) from positions, angular velocities and
    inertias in inertial components:

        M = sum m J^T J + Jw^T I_N Jw,
        Q = sum_loads (J_P^T F + Jw^T T) - sum m J^T a_rest - Jw^T (d/dt I_N w)_rest,

    J = dr/dq, Jw = dw/dq', "rest" = with q'' = 0. Kane's equations in the same quantities,
    but nothing multiplies a chain of rotations out, so long chains stay small.
    """
    from sympy.physics.mechanics import Particle

    t = dynamicsymbols._t
    no_qdd = {q.diff(t, 2): 0 for q in mech.q}
    R = _frame_rotations(mech.frame)
    pos = _point_positions(O, R)
    jac = _Jacobians(tuple(mech.q))
    n = len(mech.q)
    M, Q = sp.zeros(n, n), sp.zeros(n, 1)

    def place(P):
        if P not in pos:
            raise _NoPath(P)
        return pos[P]

    def omega(F):
        return _components(F.ang_vel_in(mech.frame), R).applyfunc(smap.to_qdot)

    for body in mech.bodies:
        r = place(body.masscenter)
        J = jac.of_position(r)
        M += body.mass * J.T * J
        Q -= body.mass * J.T * r.diff(t, 2).xreplace(no_qdd)
        if isinstance(body, Particle):
            continue
        F = body.frame
        if F not in R:
            raise _NoPath(F)
        w = omega(F)
        Jw = jac.of_rate(w)
        I_N = (R[F] * body.central_inertia.to_matrix(F) * R[F].T).applyfunc(simplify_trig)
        M += Jw.T * I_N * Jw
        Q -= Jw.T * (I_N * w).diff(t).xreplace(no_qdd)
    for where, vec in ((load[0], load[1]) for load in mech.loads):
        force = _components(vec, R).applyfunc(smap.to_qdot)
        if isinstance(where, Point):
            Q += jac.of_position(place(where)).T * force
        elif isinstance(where, ReferenceFrame):
            Q += jac.of_rate(omega(where)).T * force
        else:
            raise MechanicsError(f"a load acts on {where!r}, neither a Point nor a "
                                 "ReferenceFrame")
    return M, Q


def _equations(mech: Mechanics, smap: SpeedMap, simplify: bool):
    """M, Q of a System or KanesMethod: in inertial components where every body and load can
    be placed from the System's fixed point (u = q'), by Kane's method otherwise."""
    O = mech.extra.get("fixed_point")
    if O is not None and smap.is_identity and simplify:
        try:
            return _inertial_equations(mech, smap, O)
        except _NoPath:
            pass
    return _second_order(mech, smap, simplify)


def generalized_forces(frame: ReferenceFrame, q: tuple, loads: tuple) -> list:
    """Q_i = sum F . dv/dq'_i + T . dw/dq'_i over the loads (forces at points, torques on
    frames), the velocities in q' (as LagrangesMethod forms them)."""
    t = dynamicsymbols._t
    qd = [x.diff(t) for x in q]
    Q = [sp.S.Zero] * len(q)
    for k, load in enumerate(loads):
        where, vec = load[0], load[1]
        if isinstance(where, Point):
            vel = where.vel(frame)
        elif isinstance(where, ReferenceFrame):
            vel = where.ang_vel_in(frame)
        else:
            raise MechanicsError(f"load {k} acts on {where!r}, neither a Point nor a "
                                 "ReferenceFrame")
        for i, x in enumerate(qd):
            Q[i] += vec.dot(vel.diff(x, frame))
    return Q


# ---------------------------------------------------------------------------- outputs
def _output_expr(value, smap: SpeedMap | None, what: str):
    """An output or initial-state value as an expression in q, q', q'' (speeds replaced)."""
    if isinstance(value, Vector):
        raise MechanicsError(f"{what} is a Vector ({value}); give one component, e.g. "
                             "P.pos_from(O).dot(N.x) or P.vel(N).dot(N.y)")
    if isinstance(value, Joint):
        coords = list(value.coordinates)
        if len(coords) != 1:
            raise MechanicsError(f"{what} is joint {value.name} with coordinates {coords}; "
                                 "give one of them")
        value = coords[0]
    try:
        expr = sp.sympify(value)
    except (sp.SympifyError, TypeError) as exc:
        raise MechanicsError(f"{what} is not a SymPy expression: {value!r}") from exc
    return smap.to_qdot(expr) if smap is not None else expr


def _initial_key(key, mech: Mechanics, smap: SpeedMap | None):
    """A coordinate, its derivative, or a speed that is (a multiple-free copy of) some q'."""
    if isinstance(key, Joint):
        key = _output_expr(key, None, "initial_state key")
    if key in mech.u and smap is not None:
        expr = smap.speeds()[key]
        t = dynamicsymbols._t
        qd = [q.diff(t) for q in mech.q]
        if expr in qd:
            return expr
        raise MechanicsError(f"initial_state key {key} is a speed equal to {expr}, not one "
                             "coordinate's derivative: give the coordinates' derivatives")
    return key


# ---------------------------------------------------------------------------- the entry point
def from_mechanics(obj, *, name: str | None = None, parameters: Mapping | None = None,
                   inputs: Iterable = (), outputs: Mapping | None = None,
                   initial_state: Mapping | None = None, multipliers: Iterable | None = None,
                   simplify: bool = True, units: Mapping | None = None) -> Model:
    """A symdae Model from a sympy.physics.mechanics ``System``, ``KanesMethod`` or
    ``LagrangesMethod``.

    Coordinates are all of the object's q (independent and dependent, in its order); the
    holonomic constraints are the model's constraints C(q, t) = 0 (index 3, with one
    multiplier each). Every load, actuator and gravity load enters the generalized forces.

    Parameters
    ----------
    obj:
        The mechanics object. A System needs no ``form_eoms`` call; a KanesMethod or
        LagrangesMethod needs its bodies (and loads) given to its constructor.
    parameters, inputs, multipliers:
        As for :class:`~symdae.model.Model`; every symbol of the bodies and loads (masses,
        lengths, g, spring constants) must be a parameter or an input.
    outputs:
        ``{name: expression}`` in q, q', q'', the speeds u and u', multipliers, t, p, inputs;
        a Joint with one coordinate stands for that coordinate. Vectors are refused (give a
        component, ``P.vel(N).dot(N.x)``).
    initial_state:
        ``{q or q' or speed or Joint: expression in the parameters}``; a speed key must be
        some coordinate's derivative (the joints' default).
    simplify:
        Collapse angle-sum products of the joint frames in M and Q (smaller kernels).
    """
    mech = extract(obj)
    smap = speed_map(mech.q, mech.u, mech.kdes) if mech.u else None
    holonomic = [_output_expr(c, smap, f"holonomic constraint {k}")
                 for k, c in enumerate(mech.holonomic)]
    if simplify:
        holonomic = [simplify_trig(c) for c in holonomic]
    outs = {key: _output_expr(v, smap, f"output {key!r}") for key, v in (outputs or {}).items()}
    init = {_initial_key(k, mech, smap): _output_expr(v, smap, f"initial value of {k}")
            for k, v in (initial_state or {}).items()}
    common: dict[str, Any] = {"constraints": holonomic, "parameters": parameters,
                              "inputs": inputs, "outputs": outs, "initial_state": init,
                              "multipliers": multipliers, "units": units}
    label = name or "mechanics"
    try:
        if mech.lagrangian is not None:
            Q = generalized_forces(mech.frame, mech.q, mech.loads) if mech.loads else None
            return Model(label, mech.q, lagrangian=mech.lagrangian, forces=Q, **common)
        assert smap is not None      # a System or KanesMethod has speeds (extract checks)
        M, Q = _equations(mech, smap, simplify)
        return Model(label, mech.q, mass_matrix=M, forces=Q, **common)
    except UndeclaredSymbolError as exc:
        raise UndeclaredSymbolError(exc.symbols, f"{exc.where} of the model formed from the "
                                    f"{mech.kind}") from exc

