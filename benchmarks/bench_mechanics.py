"""Models from sympy.physics.mechanics: what the conversion costs in build time, kernel size and
per-step time.

    python benchmarks/bench_mechanics.py [--sizes 5,10,20] [--steps 2000] [--reps 3]

1. The bundled four-bar (models/four_bar_joints.py: a System of three bars on PinJoints, two
   loop-closure constraints, gravity, a motor torque, a spring-damper) against a hand-written
   Lagrangian of the same mechanism in the same joint angles: conversion, derive, emit and
   compile time (cold, into a fresh cache), the generated kernel source's size, per-step time.
   The two models' M, Q and constraints are checked equal at a random state first.
2. The n-link pendulum on a cart (PyDy's benchmark) built from a System (a cart on a
   PrismaticJoint, n uniform rods on PinJoints in relative joint angles, gravity), n from
   --sizes: conversion + derive + emit + compile time and per-step time (alpha = -0.1,
   h = 1e-3, CPU time of the calling thread, minimum over --reps runs).
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import sympy as sp
from sympy.physics.mechanics import (
    PinJoint,
    Point,
    PrismaticJoint,
    ReferenceFrame,
    RigidBody,
    System,
    dynamicsymbols,
    inertia,
)

import symdae
from _common import machine_line

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
import four_bar_joints as fb  # noqa: E402  (the bundled model file)

t = dynamicsymbols._t


# ---------------------------------------------------------------------------- four-bar by hand
def hand_four_bar() -> symdae.Model:
    """The bundled four-bar as a hand-written Lagrangian in the same joint angles: absolute
    angles q1, q1 + q2, q1 + q2 + q3, T of the three bars, V of gravity and the spring, the
    damper's and the motor's generalized forces, the rocker tip at D."""
    q1, q2, q3 = fb.q1, fb.q2, fb.q3
    a, b, c, d, m1, m2, m3, g = fb.a, fb.b, fb.c, fb.d, fb.m1, fb.m2, fb.m3, fb.g
    th = (q1, q1 + q2, q1 + q2 + q3)

    def e(x):
        return sp.Matrix([sp.cos(x), sp.sin(x)])

    A = a * e(th[0])
    B = A + b * e(th[1])
    centers = (a / 2 * e(th[0]), A + b / 2 * e(th[1]), B + c / 2 * e(th[2]))
    T = sum(m / 2 * r.diff(t).dot(r.diff(t)) + m * L**2 / 24 * w.diff(t)**2
            for m, L, r, w in zip((m1, m2, m3), (a, b, c), centers, th))
    spring = centers[1] - sp.Matrix([fb.xE, fb.yE])
    length = sp.sqrt(spring.dot(spring))
    V = g * sum(m * r[1] for m, r in zip((m1, m2, m3), centers)) \
        + fb.k / 2 * (length - fb.s0)**2
    qs = (q1, q2, q3)
    rate = sum(length.diff(x) * x.diff(t) for x in qs)
    Q = [-fb.dk * rate * length.diff(x) for x in qs]
    Q[0] += fb.T0 * (1 - q1.diff(t) / fb.Omega)
    closure = B + c * e(th[2]) - sp.Matrix([d, 0])
    model = fb.model
    return symdae.Model(
        "four_bar_hand", list(qs), lagrangian=T - V, forces=Q, constraints=list(closure),
        multipliers=list(model.multipliers), parameters=dict(model.parameters),
        outputs=dict(model.outputs),
        initial_state={**dict(zip(model.coordinates, model.initial_positions)),
                       **dict(zip(model.velocities, model.initial_velocities))})


def check_same(converted: symdae.Model, hand: symdae.Model) -> float:
    """max |difference| of M q'' - Q and C of the two models at a random state."""
    from symdae.model.derivation import derive

    rng = random.Random(3)
    point = {s: rng.uniform(0.2, 1.2) for s in converted.symbols.q + converted.symbols.v
             + converted.symbols.a}
    point.update({s: v for s, v in zip(converted.symbols.p, converted.nominal_values)})
    point[converted.symbols.t] = 0.0
    worst = 0.0
    one, two = derive(converted), derive(hand)
    for name in ("M", "Q", "C"):
        diff = getattr(one, name).xreplace(point) - getattr(two, name).xreplace(point)
        worst = max(worst, max(abs(float(v)) for v in diff))
    return worst


# ---------------------------------------------------------------------------- n-link pendulum
def pendulum_on_cart(n: int) -> symdae.Model:
    """PyDy's n-link pendulum on a cart from a System: cart (mass mc) on a PrismaticJoint,
    n uniform rods (mass m, length l) on PinJoints, relative joint angles, gravity."""
    x, v = dynamicsymbols("x v")
    qs, us = dynamicsymbols(f"q1:{n + 1}"), dynamicsymbols(f"u1:{n + 1}")
    mc, m, l, g = sp.symbols("mc m l g")
    rail = RigidBody("rail")
    cart = RigidBody("cart", mass=mc)
    joints = [PrismaticJoint("slider", rail, cart, x, v, joint_axis=rail.frame.x)]
    parent, parent_point = cart, None
    rods = []
    for i in range(n):
        frame = ReferenceFrame(f"rod{i}_frame")
        center = Point(f"rod{i}_center")
        rod = RigidBody(f"rod{i}", masscenter=center, frame=frame, mass=m,
                        inertia=(inertia(frame, 0, 0, m * l**2 / 12), center))
        kw = {"parent_point": parent_point} if parent_point is not None else {}
        joints.append(PinJoint(f"pin{i}", parent, rod, qs[i], us[i],
                               child_point=l / 2 * frame.y, joint_axis=parent.frame.z, **kw))
        parent, parent_point = rod, -l / 2 * frame.y
        rods.append(rod)
    system = System.from_newtonian(rail)
    system.add_joints(*joints)
    system.apply_uniform_gravity(-g * rail.frame.y)
    init = {q: 0.3 / (i + 1) for i, q in enumerate(qs)}
    return symdae.from_mechanics(system, name=f"cart_pendulum_mech_{n}",
                                 parameters={mc: 1.0, m: 0.5, l: 1.0 / n, g: 9.81},
                                 outputs={"x": x, "q1": qs[0]}, initial_state=init)


# ---------------------------------------------------------------------------- measuring
def source_size(info: dict) -> tuple[int, int, int]:
    """(lines, characters) of the generated kernel source and the compiled module's bytes."""
    folder = Path(info["folder"])
    text = (folder / "kernels.pyx").read_text()
    so = sum(p.stat().st_size for p in folder.glob("*.so"))
    return text.count("\n"), len(text), so


def per_step(system, steps: int, reps: int) -> float:
    h = 1e-3
    best = float("inf")
    for _ in range(reps):
        t0 = time.thread_time()
        system.simulate(t_end=steps * h, h=h, alpha=-0.1)
        long = time.thread_time() - t0
        t0 = time.thread_time()
        system.simulate(t_end=h, h=h, alpha=-0.1)
        fixed = time.thread_time() - t0
        best = min(best, (long - fixed) / (steps - 1))
    return best


def build(make, cache: str):
    t0 = time.perf_counter()
    model = make()
    convert = time.perf_counter() - t0
    system = symdae.compile_model(model, cache_dir=cache)
    info = system.build_info
    lines, chars, so = source_size(info)
    return system, {"convert_s": convert, "derive_s": info.get("derive_s", float("nan")),
                    "emit_s": info.get("emit_s", float("nan")),
                    "compile_s": info.get("compile_s", float("nan")),
                    "total_s": convert + info.get("total_s", float("nan")),
                    "lines": lines, "chars": chars, "so": so}


def row(label: str, r: dict, step: float) -> str:
    return (f"{label:26s} convert {r['convert_s']:6.2f} s  derive {r['derive_s']:6.2f} s  "
            f"emit {r['emit_s']:6.2f} s  compile {r['compile_s']:6.2f} s  total "
            f"{r['total_s']:6.2f} s  source {r['lines']:6d} lines {r['chars'] / 1e3:8.1f} kB  .so {r['so'] / 1e3:7.0f} kB  "
            f"step {step * 1e6:7.2f} us")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="5,10,20")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--skip-four-bar", action="store_true")
    args = ap.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory() as cache:
        if not args.skip_four_bar:
            hand = hand_four_bar()
            print(f"four-bar: converted vs hand-written, max |difference| of M, Q, C at a "
                  f"random state: {check_same(fb.model, hand):.1e}")
            results = {}
            for label, make in (("four-bar from System", lambda: symdae.load_model(
                    "four_bar_joints")[0]), ("four-bar hand Lagrangian", hand_four_bar)):
                system, r = build(make, cache)
                results[label] = r
                print(row(label, r, per_step(system, args.steps, args.reps)), flush=True)
            a, b = results.values()
            print("ratio converted / hand: " + ", ".join(
                f"{k} {a[k] / b[k]:.2f}" for k in ("derive_s", "emit_s", "compile_s",
                                                   "total_s", "chars", "so")))
        for n in (int(s) for s in args.sizes.split(",")):
            system, r = build(lambda n=n: pendulum_on_cart(n), cache)
            print(row(f"{n}-link pendulum on cart", r, per_step(system, args.steps, args.reps)),
                  flush=True)


if __name__ == "__main__":
    main()
