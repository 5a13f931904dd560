"""Dense LU in the HHT core: symdae's own LU vs LAPACK dgetrf/dgetrs, per matrix size.

symdae/simulation/core/dense.pxd factorises systems of size <= SMALL_LU with a hand-written LU (partial
pivoting) and hands larger ones to LAPACK (scipy.linalg.cython_lapack dgetrf/dgetrs). This
script measures both paths so that threshold rests on figures:

* A throwaway Cython extension is written and compiled into a temporary folder at run time
  (with symdae.compilation.cache.compile_module, the same child-process build the generated model modules
  use, but with the core's -O3 flags); nothing is written into the repository.
* It cimports ``symdae.simulation.core.dense`` as shipped (the own LU for N <= SMALL_LU is timed there,
  exactly as the core compiles it) and copies of that same file, made at run time in the
  temporary folder with only the SMALL_LU value changed: ``dense_lapack`` (SMALL_LU = 0: the
  LAPACK branch of lu_factor/lu_solve for every N, i.e. what the core pays above the threshold:
  dgetrf/dgetrs plus the max|A| scan and the pivot check), ``dense_own<N>`` for every measured
  N above the shipped threshold (SMALL_LU = N: the own LU as the core would compile it if the
  threshold were raised to N) and ``dense_unbounded`` (SMALL_LU = 2^30). Both matter because
  the C compiler uses the bound: inside ``N <= SMALL_LU`` it knows the trip counts of the loops
  and generates different code, so the same LU runs measurably faster or slower depending on
  the constant. It also calls dgetrf/dgetrs directly ("bare").
* Matrices: random, well conditioned (U diag(s) V^T with s in [1, 10], so pivoting happens),
  a pool of them cycled through so that neither branch prediction nor one matrix's pattern
  dominates. Each timed loop copies the matrix (factorisation is in place) or the right-hand
  side into a work buffer first; the cost of that copy alone is measured and subtracted.
* Figures are ns per call: median over several repeats, with the paths interleaved within a
  repeat so that noise from other processes hits all paths alike. "step" is one factorisation
  plus three solves, the mix of one HHT step with its adjoint step (about 2 Newton
  iterations per step with one factorisation at their start value, and the adjoint's
  factorisation at the accepted state and its solve).

    python benchmarks/bench_linalg.py [--quick] [--sizes 3,5,8,12,16,20,24,32,40]
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import cpu_model  # benchmarks/_common.py (the script folder is on sys.path)

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SIZES = (3, 5, 8, 12, 16, 24, 40)
SOLVES_PER_STEP = 3

BARE = ("dgetrf(&N, &N, a, &N, piv, &info)",
        "dgetrs(&trans, &N, &one, <double*>lu, &N, <int*>piv, b, &N, &info)")
COPY = ("pass", "pass")  # baseline: the memcpy alone

HEADER = '''\
# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, nonecheck=False
# Throwaway benchmark module written by benchmarks/bench_linalg.py.
from libc.string cimport memcpy
from scipy.linalg.cython_lapack cimport dgetrf, dgetrs
cimport symdae.simulation.core.dense as shipped

SMALL_LU_SHIPPED = shipped.SMALL_LU
'''


TEMPLATE = '''
def factor_{name}(double[:, ::1] pool, double[::1] work, int[::1] pivw, long reps):
    """Factorise pool[r % P] (copied into work) reps times; returns a checksum."""
    cdef int N = pivw.shape[0], info = 0, one = 1
    cdef Py_ssize_t P = pool.shape[0], NN = pool.shape[1], r
    cdef double* a = &work[0]
    cdef int* piv = &pivw[0]
    cdef double sink = 0.0
    with nogil:
        for r in range(reps):
            memcpy(a, &pool[r % P, 0], NN * sizeof(double))
            {factor}
            sink += a[NN - 1] + info
    return sink


def solve_{name}(double[:, ::1] lus, int[:, ::1] pivs, double[:, ::1] rhs, double[::1] bw,
                 long reps):
    """Solve with factorisation r % P and right-hand side r % P reps times; checksum."""
    cdef int N = bw.shape[0], info = 0, one = 1
    cdef char trans = b'T'
    cdef Py_ssize_t P = lus.shape[0], r
    cdef double* b = &bw[0]
    cdef const double* lu
    cdef const int* piv
    cdef double sink = 0.0
    with nogil:
        for r in range(reps):
            memcpy(b, &rhs[r % P, 0], N * sizeof(double))
            lu = &lus[r % P, 0]
            piv = &pivs[r % P, 0]
            {solve}
            sink += b[0]
    return sink
'''

CHECK = '''
def prepare_{name}(double[:, ::1] pool, double[:, ::1] lus, int[:, ::1] pivs):
    """Factorise every pool matrix into lus/pivs; returns the status codes."""
    cdef int N = pivs.shape[1], info = 0, one = 1
    cdef Py_ssize_t k
    cdef double* a
    cdef int* piv
    out = []
    for k in range(pool.shape[0]):
        lus[k, :] = pool[k, :]
        a = &lus[k, 0]
        piv = &pivs[k, 0]
        {factor}
        out.append(info)
    return out


def solve_all_{name}(double[:, ::1] lus, int[:, ::1] pivs, double[:, ::1] rhs):
    """Solve every right-hand side in place (for the accuracy check)."""
    cdef int N = pivs.shape[1], info = 0, one = 1
    cdef char trans = b'T'
    cdef Py_ssize_t k
    cdef const double* lu
    cdef const int* piv
    cdef double* b
    for k in range(rhs.shape[0]):
        lu = &lus[k, 0]
        piv = &pivs[k, 0]
        b = &rhs[k, 0]
        {solve}
'''


def module_source(paths: dict) -> str:
    """Cython text: a timed factor loop, a timed solve loop and two helpers per path."""
    parts = [HEADER]
    for alias in paths.values():
        if alias not in ("shipped", "copy", "bare"):
            parts.append(f"cimport dense_{alias} as {alias}\n")
    for name, alias in paths.items():
        if alias == "copy":
            factor, solve = COPY
        elif alias == "bare":
            factor, solve = BARE
        else:
            factor = f"info = {alias}.lu_factor(a, piv, N)"
            solve = f"{alias}.lu_solve(lu, piv, b, N)"
        parts.append(TEMPLATE.format(name=name, factor=factor, solve=solve))
        if alias != "copy":
            parts.append(CHECK.format(name=name, factor=factor, solve=solve))
    return "".join(parts)


def variant(text: str, value: int) -> str:
    """dense.pxd with SMALL_LU set to ``value`` (everything else unchanged)."""
    new, count = re.subn(r"(\bSMALL_LU\s*=\s*)\d+", rf"\g<1>{value}", text, count=1)
    if count != 1:
        raise SystemExit("could not find 'SMALL_LU = <int>' in symdae/simulation/core/dense.pxd")
    return new


def build(tmp: Path, sizes):
    """Write and compile the benchmark module into ``tmp``.

    Returns (module, shipped SMALL_LU, {path name: module alias}, build seconds).
    """
    from symdae.compilation.cache import compile_module, load_module
    dense = (REPO / "symdae" / "simulation" / "core" / "dense.pxd").read_text()
    shipped = int(re.search(r"\bSMALL_LU\s*=\s*(\d+)", dense).group(1))
    paths = {"copy": "copy", "bare": "bare", "lapack": "lapack", "unbounded": "unbounded",
             "shipped": "shipped"}
    bounds = {"lapack": 0, "unbounded": 1 << 30}
    for N in sizes:
        if N > shipped:
            paths[f"own{N}"] = f"own{N}"
            bounds[f"own{N}"] = N
    for alias, value in bounds.items():
        (tmp / f"dense_{alias}.pxd").write_text(variant(dense, value))
    modname = "symdae_bench_linalg"
    (tmp / f"{modname}.pyx").write_text(module_source(paths))
    t0 = time.perf_counter()
    # Same flags as the core (setup.py): dense.pxd is inlined into symdae/simulation/core/hht.pyx.
    so = compile_module(tmp, modname, flags=("-O3", "-g0"))
    build_s = time.perf_counter() - t0
    mod = load_module(so, modname)
    assert mod.SMALL_LU_SHIPPED == shipped
    return mod, shipped, paths, build_s


def matrices(N: int, P: int, rng) -> np.ndarray:
    """P row-major N x N matrices U diag(s) V^T, singular values in [1, 10] (cond <= 10)."""
    out = np.empty((P, N * N))
    for k in range(P):
        U, _ = np.linalg.qr(rng.standard_normal((N, N)))
        V, _ = np.linalg.qr(rng.standard_normal((N, N)))
        s = rng.permutation(np.logspace(0.0, 1.0, N))
        out[k] = ((U * s) @ V.T).ravel()
    return out


def check(mod, N, pool, rhs, roles: dict) -> dict:
    """Max relative residual |K x - b| / (|K| |x|) of every path over the pool."""
    P = pool.shape[0]
    worst = {}
    for role, path in roles.items():
        if role == "copy":
            continue
        lus = np.empty_like(pool)
        pivs = np.zeros((P, N), dtype=np.intc)
        infos = getattr(mod, f"prepare_{path}")(pool, lus, pivs)
        if any(infos):
            raise SystemExit(f"N = {N}: factorisation by {path} reported {infos}")
        x = rhs.copy()
        getattr(mod, f"solve_all_{path}")(lus, pivs, x)
        r = 0.0
        for k in range(P):
            K = pool[k].reshape(N, N)
            r = max(r, np.abs(K @ x[k] - rhs[k]).max() / (np.abs(K).max() * np.abs(x[k]).max()))
        worst[role] = r
    return worst


def calibrate(fn, target: float) -> int:
    reps = 1000
    while True:
        t0 = time.perf_counter()
        fn(reps)
        dt = time.perf_counter() - t0
        if dt >= target / 4 or reps >= 1 << 28:
            return max(1000, int(reps * target / max(dt, 1e-9)))
        reps *= 8


def measure(mod, N: int, shipped: int, repeats: int, target: float, rng) -> dict:
    """ns per factorisation and per solve of each role at size N (copy-in subtracted)."""
    roles = {"own": "shipped" if N <= shipped else f"own{N}", "unbounded": "unbounded",
             "lapack": "lapack", "bare": "bare", "copy": "copy"}
    P = int(min(64, max(8, 32768 // (N * N))))  # pool stays in L1/L2 (<= 256 KiB)
    pool = matrices(N, P, rng)
    rhs = rng.standard_normal((P, N))
    residual = check(mod, N, pool, rhs, roles)
    work = np.empty(N * N)
    pivw = np.zeros(N, dtype=np.intc)
    bw = np.empty(N)
    fact, solv = {}, {}
    for role, path in roles.items():
        fact[role] = (lambda f: lambda reps: f(pool, work, pivw, reps))(
            getattr(mod, f"factor_{path}"))
        prep = roles["own"] if path == "copy" else path
        lus = np.empty_like(pool)
        pivs = np.zeros((P, N), dtype=np.intc)
        getattr(mod, f"prepare_{prep}")(pool, lus, pivs)
        solv[role] = (lambda f, lu, piv: lambda reps: f(lu, piv, rhs, bw, reps))(
            getattr(mod, f"solve_{path}"), lus, pivs)
    reps_f = calibrate(fact["own"], target)
    reps_s = calibrate(solv["own"], target)
    samples = {(kind, role): [] for kind in ("f", "s") for role in roles}
    for _ in range(repeats):
        for role in roles:  # interleaved: every path sees the same background load
            for kind, fn, reps in (("f", fact[role], reps_f), ("s", solv[role], reps_s)):
                t0 = time.perf_counter()
                fn(reps)
                samples[kind, role].append((time.perf_counter() - t0) / reps * 1e9)
    med = {key: statistics.median(v) for key, v in samples.items()}
    res = {"N": N, "pool": P, "residual": residual, "own_bound": max(N, shipped),
           "copy_f": med["f", "copy"], "copy_s": med["s", "copy"]}
    for role in roles:
        if role == "copy":
            continue
        res[f"{role}_f"] = max(med["f", role] - med["f", "copy"], 0.0)
        res[f"{role}_s"] = max(med["s", role] - med["s", "copy"], 0.0)
        res[f"{role}_step"] = res[f"{role}_f"] + SOLVES_PER_STEP * res[f"{role}_s"]
    return res


def crossover(rows, key_own: str, key_other: str) -> str:
    """Which path wins at which N, and between which measured sizes the lead changes."""
    own = [r["N"] for r in rows if r[key_own] <= r[key_other]]
    other = [r["N"] for r in rows if r[key_other] < r[key_own]]
    text = f"own faster at N = {own or '-'}, LAPACK faster at N = {other or '-'}"
    switches = [(a["N"], b["N"]) for a, b in zip(rows, rows[1:])
                if (a[key_own] <= a[key_other]) != (b[key_own] <= b[key_other])]
    if switches:
        text += "; lead changes between " + ", ".join(f"{a} and {b}" for a, b in switches)
    return text



def lapack_name() -> str:
    try:
        import scipy
        cfg = scipy.show_config(mode="dicts")
        lap = cfg["Build Dependencies"]["lapack"]
        return f"{lap.get('name')} {lap.get('version')}"
    except Exception:  # noqa: BLE001 - informational only
        return "unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer, shorter repeats")
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)),
                    help="comma-separated matrix sizes (default %(default)s)")
    ap.add_argument("--repeats", type=int, default=None, help="repeats per figure (median)")
    ap.add_argument("--seed", type=int, default=20240601)
    args = ap.parse_args(argv)
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    repeats = args.repeats or (3 if args.quick else 11)
    target = 0.01 if args.quick else 0.04  # seconds per timed loop

    import scipy
    print(f"machine : {cpu_model()}, nproc {os.cpu_count()}, Python {platform.python_version()}"
          f", NumPy {np.__version__}, SciPy {scipy.__version__}, LAPACK {lapack_name()}")
    with tempfile.TemporaryDirectory(prefix="symdae-bench-linalg-") as tmpdir:
        mod, shipped, paths, build_s = build(Path(tmpdir), sizes)
        print(f"build   : throwaway extension ({len(paths)} variants) compiled in {build_s:.1f} s "
              f"(-O3, like the core) in a temporary folder; SMALL_LU as shipped = {shipped}")
        print(f"timing  : ns per call, median of {repeats} repeats, ~{target * 1e3:.0f} ms per "
              "timed loop, copy-in cost subtracted; step = 1 factor + "
              f"{SOLVES_PER_STEP} solves (one HHT step)")
        print(f"own LU  : for N <= {shipped} the shipped dense.pxd; above, a copy compiled with "
              "SMALL_LU = N (as if the threshold were raised to N)")
        rng = np.random.default_rng(args.seed)
        rows = [measure(mod, N, shipped, repeats, target, rng) for N in sizes]
        del mod

    print()
    print("              own LU (dense.pxd)   LAPACK via lu_factor   bare dgetrf/dgetrs"
          "      LAPACK / own      core uses")
    print("   N  pool    factor   solve     factor   solve     factor   solve      "
          "fac   sol  step     (shipped)")
    for r in rows:
        path = "own" if r["N"] <= shipped else "LAPACK"
        print(f"{r['N']:4d}  {r['pool']:4d}  {r['own_f']:8.0f} {r['own_s']:7.0f}   "
              f"{r['lapack_f']:8.0f} {r['lapack_s']:7.0f}   {r['bare_f']:8.0f} {r['bare_s']:7.0f}"
              f"   {r['lapack_f'] / max(r['own_f'], 1e-9):5.2f} "
              f"{r['lapack_s'] / max(r['own_s'], 1e-9):5.2f} "
              f"{r['lapack_step'] / max(r['own_step'], 1e-9):5.2f}     {path}")
    print()
    print("        ---------- step ns ----------   own LU     copy-in ns      max rel. residual")
    print("   N    own  LAPACK    bare unbounded  compiled   matrix  rhs      own / LAPACK / bare")
    print("                              own LU   SMALL_LU")
    for r in rows:
        res = r["residual"]
        print(f"{r['N']:4d} {r['own_step']:6.0f} {r['lapack_step']:7.0f} {r['bare_step']:7.0f}"
              f" {r['unbounded_step']:9.0f} {r['own_bound']:9d}   {r['copy_f']:6.1f} "
              f"{r['copy_s']:4.1f}   {res['own']:.1e} / {res['lapack']:.1e} / {res['bare']:.1e}")
    print()
    print("crossover (own LU vs the LAPACK branch of lu_factor/lu_solve):")
    for label, suffix in (("factor", "_f"), ("solve", "_s"), ("step", "_step")):
        print(f"  {label:7s}: {crossover(rows, 'own' + suffix, 'lapack' + suffix)}")
    print("crossover (own LU vs bare dgetrf/dgetrs):")
    for label, suffix in (("factor", "_f"), ("solve", "_s"), ("step", "_step")):
        print(f"  {label:7s}: {crossover(rows, 'own' + suffix, 'bare' + suffix)}")

    # Verdict on the threshold, on the step mix (what one HHT step pays).
    def gain(r):  # how much faster the own LU is than the LAPACK branch (negative: slower)
        return r["lapack_step"] / r["own_step"] - 1.0

    below = [r for r in rows if r["N"] <= shipped]
    above = [r for r in rows if r["N"] > shipped]
    wrong_below = [r for r in below if gain(r) < 0]
    wrong_above = [r for r in above if gain(r) > 0]
    fmt = lambda rs: ", ".join(f"N = {r['N']} ({abs(gain(r)) * 100:.0f} %)" for r in rs)  # noqa
    print()
    if not wrong_below and not wrong_above:
        print(f"verdict : SMALL_LU = {shipped} fits these figures: the own LU wins the step mix at "
              f"every measured N <= {shipped} and LAPACK at every measured N > {shipped}.")
    else:
        if wrong_above:
            print(f"verdict : SMALL_LU = {shipped} is conservative: compiled with a higher "
                  f"threshold, the own LU would beat the LAPACK branch above it, at "
                  f"{fmt(wrong_above)}.")
        if wrong_below:
            print(f"verdict : SMALL_LU = {shipped} is too high: LAPACK is faster below it, at "
                  f"{fmt(wrong_below)}.")
    if below:
        print("          own LU advantage at and below the threshold: "
              + ", ".join(f"N = {r['N']}: {r['lapack_step'] / r['own_step']:.2f}x"
                          for r in below))
    return 0


if __name__ == "__main__":
    sys.exit(main())
