"""symdae against hand-written C and numba codes of the engine mount, timed in one interleaved run.

    python benchmarks/bench_reference.py [--quick] [--reps N] [--clock wall|cpu] [--no-breakdown]
                                         [--burst K]

The reference (benchmarks/reference/engine_mount.c) is the speed-of-light proxy: the
same discrete HHT equations, predictor, Newton policy and stopping test as symdae's core, the
same cost (least squares on a1, left rule) and its discrete adjoint, written by hand for this
one model (closed-form elimination of the symmetric 5 x 5 Newton matrix, two of whose entries
vary). It is compiled here with gcc into a temporary folder, with symdae's model flags (-O2 -g0)
and with the core's (-O3 -g0), and where the processor has AVX2 (symdae's kernel module is then
compiled for it: symdae.compilation.cache.VECTOR_FLAGS) at -O3 with the same vector flags too
("ref-O3-avx2", for comparison; the goals stay against plain -O3), and called through ctypes
with preallocated buffers. Its numba
port (benchmarks/reference/engine_mount_numba.py: the same algorithm statement for statement,
the same numbers bit for bit) is timed too where numba is installed (the test extra has it).

Scenario: the paper's (10 000 steps, h = 1e-4, alpha = -0.1, q0 = v0 = 0), parameters at the
paper's start values START, data = a1 simulated by symdae at the true (nominal) values.

1. Verification before timing: the reference's a1 against symdae's (relative to max |a1|), J,
   the gradient against symdae's adjoint_gradient and against central differences of the
   reference's J (steps FD_STEPS and half of them: the truncation error falls 4x), Newton
   iterations.
2. Interleaved timing, every contender once per round in a shuffled order, medians over the
   rounds: symdae J and J + gradient through Experiment.evaluate (the forward sweep keeps
   every step's time terms, which the adjoint reads, and the adjoint factorises each state's
   Newton matrix again), and J + gradient from simulate(store_factorizations=True) + cost +
   adjoint_gradient (the adjoint reads the stored factorisations); J and J + gradient again with the Newton matrix's LU in the core's
   sparse loops instead of the kernel module's written-out code (Kernels.model_lu = False),
   with every step in the core's generic step instead of the module's compiled steps
   (backend.use_compiled_steps = False; the bare forward and adjoint sweeps too), and with
   every forward sweep evaluating its time terms instead of reading them from the table that
   Experiment.evaluate keeps from its second call on (backend.use_time_tables = False; the
   bare forward sweeps with and without the table);
   the bare compiled sweeps (the core's forward on preallocated arrays, keeping the time
   terms or the factorisations, and through the compiled backend's forward, which takes its
   arrays from the system's pool and wraps the result; its adjoint); the Python pieces
   (initial_state, cost.evaluate, init_adjoint); each reference's J (storing the trajectory,
   and cost only) and J + gradient. With --burst K each turn is K calls in a row, timed as
   their mean: each call but the first finds its own arrays and code in the caches (back-to-
   back evaluations of one experiment, as an identification runs them), where a single call
   finds what the other contenders left (symdae's J + gradient touches about 2.5 MB, the C
   code's 1.1 MB: its states only, with no outputs, time-term table or dJ/dS arrays).
3. Ratios against the goals (GOALS): symdae J and J + gradient at most 1.3 times the C code's
   at -O3 and below the numba code's, symdae (J + grad) / J <= 1.3; and where symdae's time
   goes.

The bare-sweep and breakdown rows call symdae internals (they may move while the core is
refactored); if they fail, those rows are skipped and the public-API comparison still runs.
"""
from __future__ import annotations

import os
import platform
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from _common import (  # benchmarks/ is on sys.path
    CLOCKS,
    machine_line,
    shuffled_times as interleaved,
    timing_parser,
    with_core_lu,
    with_generic_step,
    without_time_tables,
)
from reference.engine_mount import (
    FD_STEPS,
    FLAGS_O2,
    FLAGS_O3,
    GRADIENT_NAMES,
    PARAMETER_NAMES,
    EngineMountReference,
    compile_library,
)

try:                         # the numba contender is timed where numba is installed
    from reference.engine_mount_numba import EngineMountNumba
except ImportError:
    EngineMountNumba = None

import symdae
from symdae.compilation.cache import VECTOR_FLAGS, vector_extension
from symdae.costs.time_domain import LeastSquares
from symdae.simulation.sensitivity import adjoint_gradient

# against the C code at -O3 and the numba code: J and J + gradient at most 1.3 times the C
# code's and below the numba code's, (J + gradient) / J at most 1.3
GOALS = {"J": 1.3, "JG": 1.3, "JG/J": 1.3, "numba": 1.0}


@dataclass
class Setup:
    system: object
    scenario: object
    start: dict
    p_start: np.ndarray
    data: np.ndarray
    cost: LeastSquares
    refs: dict = field(default_factory=dict)    # "ref-O2", "ref-O3", "numba" -> its sweeps


def make_setup(folder: Path) -> Setup:
    model, ns = symdae.load_model("engine_mount")
    if tuple(model.parameter_names) != PARAMETER_NAMES:
        raise RuntimeError(f"engine_mount parameters {model.parameter_names} are not the ones "
                           f"the C reference hard-codes {PARAMETER_NAMES}")
    system = symdae.compile_model(model)
    # the hand-written reference implements eq. (15): symdae runs the same scheme
    sc = symdae.Scenario.make(ns["SCENARIO"], q0=np.zeros(4), v0=np.zeros(4), scheme="hht-paper")
    data = system.simulate(sc).outputs["a1"].copy()
    cost = LeastSquares({"a1": data}, ["a1"], quadrature="left")
    start = dict(ns["START"])
    su = Setup(system, sc, start, system.parameter_vector(start), data, cost)
    grid = dict(t0=sc.t0, h=sc.h, N=sc.n_steps, alpha=sc.alpha, data=data, rtol=sc.rtol,
                max_iter=sc.max_iter)
    builds = [("-O2", FLAGS_O2), ("-O3", FLAGS_O3)]
    # symdae compiles its kernel module for AVX2 where the processor has it: the C code
    # with the same vector flags too, for comparison (the goals stay against plain -O3)
    vector = vector_extension()
    if VECTOR_FLAGS[vector]:
        builds.append((f"-O3-{vector}", FLAGS_O3 + VECTOR_FLAGS[vector]))
    for label, flags in builds:
        lib = compile_library(flags, folder)
        su.refs[f"ref{label}"] = EngineMountReference(lib, **grid)
    if EngineMountNumba is not None:
        su.refs["numba"] = EngineMountNumba(**grid)       # compiles (not timed)
    return su


# ------------------------------------------------------------------ verification

def verify(su: Setup) -> dict:
    """Agreement of the reference with symdae at the start values (asserted loosely here;
    tests/simulation/test_reference_engine_mount.py holds the tolerances)."""
    system, ref = su.system, su.refs["ref-O2"]
    tr = system.simulate(su.scenario, params=su.start, store_factorizations=True)
    J, dS = su.cost.evaluate(system, tr)
    idx = [system.model.parameter_names.index(k) for k in GRADIENT_NAMES]
    g = adjoint_gradient(system, tr, dS)[idx]
    fw = ref.forward(su.p_start)
    a1_err = np.max(np.abs(ref.A[:, 0] - tr.a[:, 0])) / np.max(np.abs(tr.a[:, 0]))
    lam_err = np.max(np.abs(ref.L - tr.lam[:, 0])) / np.max(np.abs(tr.lam[:, 0]))
    Jr, gr = ref.cost_and_gradient(su.p_start)
    steps = np.array(FD_STEPS)
    fd = {1: ref.central_differences(su.p_start, steps),
          0.5: ref.central_differences(su.p_start, steps / 2)}
    out = {
        "a1": a1_err, "lam": lam_err, "J": J, "Jr": Jr, "g": g, "gr": gr,
        "g_err": np.max(np.abs(gr - g) / np.abs(g)),
        "fd_err": {d: np.abs(gr - f) / np.abs(gr) for d, f in fd.items()},
        "init_term": ref.init_term.copy(),
        "iters": (tr.counters["newton_iterations"], fw.newton_iterations),
        "refreshes": (tr.counters["jacobian_refreshes"], fw.refreshes),
        "noise_stops": fw.noise_stops, "steps": tr.counters["steps"],
    }
    for label, r in su.refs.items():
        _, gx = r.cost_and_gradient(su.p_start)
        out[f"g_err{label}"] = np.max(np.abs(gx - g) / np.abs(g))
    if not (a1_err < 1e-9 and abs(Jr - J) <= 1e-9 * J and out["g_err"] < 1e-8):
        raise RuntimeError(f"the reference does not reproduce symdae: {out}")
    return out


# ------------------------------------------------------------------ contenders

def public_contenders(su: Setup) -> dict:
    system, sc, cost, start = su.system, su.scenario, su.cost, su.start
    idx = [system.model.parameter_names.index(k) for k in GRADIENT_NAMES]

    experiment = symdae.Experiment(system, cost, sc)

    def sym_J():
        return experiment.evaluate(start).cost

    def sym_JG():            # the default: small factorisations and the time terms kept
        ev = experiment.evaluate(start, gradient=True)
        return ev.cost, ev.gradient

    def sym_JG_stored():
        tr = system.simulate(sc, params=start, store_factorizations=True)
        J, dS = cost.evaluate(system, tr)
        return J, adjoint_gradient(system, tr, dS)[idx]

    c = {"symdae J": sym_J, "symdae J+grad": sym_JG,
         "symdae J+grad, LU stored": sym_JG_stored}
    p = su.p_start
    for label, ref in su.refs.items():
        c[f"{label} J"] = lambda ref=ref: ref.cost(p)
        c[f"{label} J, no storage"] = lambda ref=ref: ref.cost_streaming(p)
        c[f"{label} J+grad"] = lambda ref=ref: ref.cost_and_gradient(p)
    return c


def internal_contenders(su: Setup) -> dict:
    """The bare compiled sweeps and the Python pieces, called as System.simulate and
    adjoint_gradient call them (symdae internals: the compiled backend's core calls)."""
    from symdae.simulation.backends.base import scheme_code
    from symdae.simulation.initial import init_adjoint, initial_state

    system, sc, cost = su.system, su.scenario, su.cost
    backend, model = system.backend, system.model
    hht, k = backend.hht, backend.kernels
    sz = system.sizes
    n, m, nm, N = sz.n, sz.m, sz.nm, sc.n_steps
    tr = system.simulate(sc, params=su.start, store_factorizations=True)
    fwd = tr.sweep.forward
    x0 = tr.sweep.x0
    p, U = fwd.p, fwd.U
    _, dS = cost.evaluate(system, tr)
    grid = sc.grid()
    Q, V, A = (np.empty((N + 1, n)) for _ in range(3))
    L, S = np.empty((N + 1, m)), np.zeros((N + 1, sz.n_s))
    LU, PIV, TAU = np.empty((N + 1, nm, nm)), np.empty((N + 1, nm + 1), np.intc), \
        np.empty((N + 1, sz.n_tau))
    ST = np.empty((N + 1, sz.n_st)) if sz.n_st else None
    Q[0], V[0], A[0], L[0] = x0.q, x0.v, x0.a, x0.lam

    # the time terms over the grid, as Experiment.evaluate's sweeps read them from the second
    # evaluation on (backends/time_tables.py)
    table = backend.time_term_table(sc.t0, sc.h, p, U)

    def forward(store, time_terms=False, compiled=True, read_table=False):
        noise, order = np.zeros(2 * nm + 1), np.zeros(2 * nm, np.intc)
        tau = None if read_table else TAU
        mats = (LU, PIV, tau, ST) if store else (None, None) + ((tau, ST) if time_terms
                                                                else (None, None))
        rep = hht.forward(k, sc.t0, sc.h, N, sc.alpha, scheme_code(sc.scheme), p, U, Q, V, A,
                          A, L, S, *mats, sc.rtol, sc.max_iter, 0, 0, noise, order, False,
                          compiled, table if read_table else None)
        if rep["status"] != 0:
            raise RuntimeError(f"bare forward sweep failed: {rep}")

    def forward_fresh(store):
        backend.forward(grid, p, U, (x0.q, x0.v, x0.a, x0.lam), sc.rtol, sc.max_iter, store)

    experiment = symdae.Experiment(system, cost, sc)
    kept = system.simulate(sc, params=su.start, keep_time_terms=True).sweep.forward

    def sym_J():
        return experiment.evaluate(su.start).cost

    def sym_JG():
        return experiment.evaluate(su.start, gradient=True)

    forward(False)
    if not np.array_equal(Q, tr.q):
        raise RuntimeError("the bare forward sweep does not reproduce System.simulate")
    return {
        "symdae J, core LU loops": with_core_lu(k, sym_J),
        "symdae J+grad, core LU loops": with_core_lu(k, sym_JG),
        "symdae J, generic step": with_generic_step(backend, sym_J),
        "symdae J+grad, generic step": with_generic_step(backend, sym_JG),
        "symdae J, no time-term tables": without_time_tables(backend, sym_J),
        "symdae J+grad, no time-term tables": without_time_tables(backend, sym_JG),
        "bare forward, reading the time terms": lambda: forward(False, read_table=True),
        "bare forward, storing LU, reading the time terms":
            lambda: forward(True, read_table=True),
        "bare forward": lambda: forward(False),
        "bare forward, generic step": lambda: forward(False, compiled=False),
        "bare forward, keeping time terms": lambda: forward(False, True),
        "bare forward, storing LU": lambda: forward(True),
        "bare forward, fresh arrays": lambda: forward_fresh(False),
        "bare forward, storing LU, fresh arrays": lambda: forward_fresh(True),
        "bare adjoint": lambda: backend.adjoint(fwd, dS),
        "bare adjoint, generic step": with_generic_step(backend, lambda: backend.adjoint(fwd, dS)),
        "bare adjoint, refactorising": lambda: backend.adjoint(kept, dS),
        "initial_state": lambda: initial_state(backend, model, p, sc.t0, U[0], sc.q0, sc.v0,
                                               tol=sc.init_tol, project=sc.project),
        "cost.evaluate": lambda: cost.evaluate(system, tr),
        "init_adjoint": lambda: init_adjoint(backend, x0, p, sc.t0, U[0],
                                             np.zeros(3 * n + m)),
    }


# ------------------------------------------------------------------ report

def med(x):
    return float(np.median(x))


def ratio(t, a, b):
    """(ratio of medians, median of the per-round ratios, ratio of minima)"""
    return med(t[a]) / med(t[b]), med(t[a] / t[b]), float(np.min(t[a]) / np.min(t[b]))


def goal_text(value, goal):
    if goal is None:
        return ""
    return f"goal <= {goal:g}: " + ("met" if value <= goal else f"missed by x{value / goal:.2f}")


def report(su: Setup, ver: dict, t: dict, N: int) -> None:
    print("verification (start values; reference -O2 vs symdae):")
    print(f"  a1: max |ref - symdae| / max |a1| = {ver['a1']:.1e}; lambda: {ver['lam']:.1e}")
    print(f"  J: symdae {ver['J']:.15g}, ref {ver['Jr']:.15g} "
          f"(rel. diff {abs(ver['Jr'] - ver['J']) / ver['J']:.1e})")
    print(f"  gradient dJ/d({', '.join(GRADIENT_NAMES)}):")
    print(f"    symdae adjoint_gradient {np.array2string(ver['g'], precision=10)}")
    print(f"    reference               {np.array2string(ver['gr'], precision=10)}")
    print(f"    max rel. diff {ver['g_err']:.1e} ("
          + ", ".join(f"{k[len('g_err'):]}: {v:.1e}" for k, v in ver.items()
                      if k.startswith("g_err") and k != "g_err") + ")")
    for d, e in ver["fd_err"].items():
        print(f"    ref vs central FD of ref J, steps {d:g} x {FD_STEPS}: rel. error "
              f"{np.array2string(e, precision=1)}")
    print(f"    initial-state term of the reference gradient: "
          f"{np.array2string(ver['init_term'], precision=3)} (q0 = v0 = 0: dQ/dp = 0 there)")
    it_s, it_r = ver["iters"]
    print(f"  Newton iterations: symdae {it_s}, ref {it_r} ({it_r / ver['steps']:.3f} per "
          f"step; refreshes {ver['refreshes'][0]} / {ver['refreshes'][1]}; {ver['noise_stops']} "
          "steps stopped by the round-off test (b))\n")

    print(f"timings ({N} steps; median over rounds, min in brackets; ns per step):")
    w = max(len(k) for k in t)
    for k, v in t.items():
        print(f"  {k:{w}s} {med(v) * 1e3:8.3f} ms  [{np.min(v) * 1e3:7.3f}]  "
              f"{med(v) / N * 1e9:7.1f} ns/step")
    print()
    print("ratios (ratio of medians; [median of per-round ratios, ratio of minima]):")
    pad = max(7, *(len(lab) for lab in su.refs))     # the labels' column, as wide as the longest
    for lab in su.refs:
        r_j = ratio(t, "symdae J", f"{lab} J")
        r_jg = ratio(t, "symdae J+grad", f"{lab} J+grad")
        r_js = ratio(t, "symdae J", f"{lab} J, no storage")
        goal_j, goal_jg = {"ref-O3": (GOALS["J"], GOALS["JG"]),
                           "numba": (GOALS["numba"], GOALS["numba"])}.get(lab, (None, None))
        print(f"  symdae J / {lab} J{'':{pad - len(lab)}s}               {r_j[0]:6.2f}  "
              f"[{r_j[1]:.2f}, {r_j[2]:.2f}]   {goal_text(r_j[0], goal_j)}")
        print(f"  symdae J / {lab} J (no storage){'':{pad - len(lab)}s}  {r_js[0]:6.2f}  "
              f"[{r_js[1]:.2f}, {r_js[2]:.2f}]")
        print(f"  symdae (J+grad) / {lab} (J+grad){'':{pad - len(lab)}s} {r_jg[0]:6.2f}  "
              f"[{r_jg[1]:.2f}, {r_jg[2]:.2f}]   {goal_text(r_jg[0], goal_jg)}")
    r = ratio(t, "symdae J+grad", "symdae J")
    print(f"  symdae (J+grad) / J                  {r[0]:6.2f}  [{r[1]:.2f}, {r[2]:.2f}]   "
          f"{goal_text(r[0], GOALS['JG/J'])}")
    r = ratio(t, "symdae J+grad, LU stored", "symdae J")
    print(f"  symdae (J+grad, LU stored) / J       {r[0]:6.2f}  [{r[1]:.2f}, {r[2]:.2f}]")
    for lab in su.refs:
        r = ratio(t, f"{lab} J+grad", f"{lab} J")
        print(f"  {lab} (J+grad) / J{'':{pad - len(lab)}s}                {r[0]:6.2f}  "
              f"[{r[1]:.2f}, {r[2]:.2f}]")
    if "symdae J, core LU loops" in t:
        for a, b in (("symdae J", "symdae J, core LU loops"),
                     ("symdae J+grad", "symdae J+grad, core LU loops")):
            r = ratio(t, a, b)
            print(f"  {a} with the written-out LU / core loops  {r[0]:6.2f}  "
                  f"[{r[1]:.2f}, {r[2]:.2f}]")
        for a, b in (("symdae J", "symdae J, no time-term tables"),
                     ("symdae J+grad", "symdae J+grad, no time-term tables"),
                     ("bare forward, reading the time terms", "bare forward"),
                     ("bare forward, storing LU, reading the time terms",
                      "bare forward, storing LU")):
            r = ratio(t, a, b)
            print(f"  {a} / {b}: {r[0]:6.2f}  [{r[1]:.2f}, {r[2]:.2f}]")
        for a, b in (("symdae J", "symdae J, generic step"),
                     ("symdae J+grad", "symdae J+grad, generic step"),
                     ("bare forward", "bare forward, generic step"),
                     ("bare adjoint", "bare adjoint, generic step")):
            r = ratio(t, a, b)
            print(f"  {a} with the compiled steps / generic step  {r[0]:6.2f}  "
                  f"[{r[1]:.2f}, {r[2]:.2f}]")
    if "bare forward" in t:
        print()
        breakdown(t, N)


def breakdown(t: dict, N: int) -> None:
    m = {k: med(v) * 1e3 for k, v in t.items()}
    J, JG = m["symdae J"], m["symdae J+grad"]
    # what Experiment.evaluate's sweeps do from its second call on: read the time terms
    fw = m["bare forward, reading the time terms"]
    pf = m["bare forward, fresh arrays"] - fw
    py_J = J - fw - pf - m["initial_state"] - m["cost.evaluate"]
    # a gradient's forward sweep keeps the time terms, which it reads from the table: no
    # more than J's; its adjoint factorises each state's Newton matrix again
    fwt, adj = fw, m["bare adjoint, refactorising"]
    py_JG = JG - fwt - pf - m["initial_state"] - m["cost.evaluate"] - adj - m["init_adjoint"]
    print("where symdae's time goes (medians of the pieces timed separately in the same run; "
          "'rest' = total - pieces):")
    rows_J = [("compiled forward sweep (preallocated arrays, time-term table)", fw),
              ("the backend's Python around the sweep (pool arrays, result)", pf),
              ("initial_state (consistent a0, lam0; Python + NumPy)", m["initial_state"]),
              ("cost.evaluate (LeastSquares)", m["cost.evaluate"]),
              ("rest of simulate (scenario, grid, checks, Trajectory)", py_J)]
    rows_JG = [("compiled forward sweep (preallocated arrays, time-term table)", fwt),
               ("the backend's Python around the sweep", pf),
               ("initial_state", m["initial_state"]),
               ("cost.evaluate", m["cost.evaluate"]),
               ("compiled adjoint sweep (factorising at each state)", adj),
               ("init_adjoint (initial-state term; Python + NumPy)", m["init_adjoint"]),
               ("rest (simulate and adjoint_gradient Python)", py_JG)]
    for title, total, rows in (("J", J, rows_J), ("J + gradient", JG, rows_JG)):
        print(f"  {title}: {total:.3f} ms")
        for name, x in rows:
            print(f"    {name:60s} {x:7.3f} ms  {100 * x / total:5.1f} %")
    ref, ref_jg = m["ref-O2 J"], m["ref-O2 J+grad"]
    print(f"  compiled forward / ref-O2 J: {fw / ref:.2f}; compiled adjoint / ref-O2 adjoint "
          f"(ref J+grad - ref J = {ref_jg - ref:.3f} ms): {adj / (ref_jg - ref):.2f}")
    print(f"  outside the compiled sweeps: J {J - fw:.3f} ms ({100 * (J - fw) / J:.0f} %), "
          f"J + gradient {JG - fwt - adj:.3f} ms ({100 * (JG - fwt - adj) / JG:.0f} %)")


def main(argv=None) -> int:
    ap = timing_parser(__doc__.splitlines()[0], 21, 201, "wall")
    ap.add_argument("--no-breakdown", action="store_true",
                    help="time only the public API and the reference (no symdae internals)")
    ap.add_argument("--burst", type=int, default=1,
                    help="calls of a contender in a row per turn, timed as their mean (default "
                         "1: each call finds the caches as the other contenders left them; "
                         "more: warm, as back-to-back evaluations of one experiment)")
    args = ap.parse_args(argv)
    reps = args.reps or (21 if args.quick else 201)
    if args.burst < 1:
        ap.error(f"--burst must be at least 1, got {args.burst}")
    print(machine_line())
    print(f"software: Python {platform.python_version()}, NumPy {np.__version__}, symdae "
          f"{symdae.__version__}; OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}; {reps} interleaved rounds, "
          f"{args.clock} clock" + (f", {args.burst} calls in a row per turn"
                                   if args.burst > 1 else ""))
    with tempfile.TemporaryDirectory(prefix="em-ref-") as folder:
        su = make_setup(Path(folder))
        # the libraries stay mapped after the folder is deleted
    sc = su.scenario
    print(f"scenario: engine mount, {sc.n_steps} steps, h = {sc.h:g}, alpha = {sc.alpha:g}, "
          f"q0 = v0 = 0, START = {su.start}; data: a1 at the true values\n")
    ver = verify(su)
    funcs = public_contenders(su)
    if not args.no_breakdown:
        try:
            funcs.update(internal_contenders(su))
        except (ImportError, AttributeError, TypeError, ValueError, RuntimeError) as exc:
            # internals moved: keep the public comparison
            print(f"(breakdown skipped: {type(exc).__name__}: {exc})")
    t = interleaved(funcs, reps, clock=CLOCKS[args.clock], burst=args.burst)
    report(su, ver, t, sc.n_steps)
    print(f"\nload avg at the end: {'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
