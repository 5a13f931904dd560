"""Instruction profile of symdae's compiled sweeps on the engine mount, against the C reference.

    python benchmarks/profile_sweeps.py [--reps 3] [--top 12]

Needs valgrind and a C compiler. Instruction counts (callgrind ``Ir``) do not depend on the
machine's load, unlike timings; they are a proxy for time (the IPC differs between code paths),
so read them next to bench_reference.py.

What it does, all in a temporary folder (nothing is kept):
1. copies the symdae package and builds its compiled core there with its setup.py, ``-g``
   in place of ``-g0`` (debug information does not change the generated code), so that callgrind can put
   the instructions of the inlined helpers (lu_factor, lu_solve, residual_noise, ...) on their
   lines in hht.pyx / dense.pxd (through the line comments Cython writes into the C file);
2. runs, under ``valgrind --tool=callgrind``, the bare forward sweep (with and without stored
   factorisations, evaluating its time terms and reading them from a table of the grid as
   Experiment.evaluate's sweeps do from its second call on), the adjoint sweep (over stored
   factorisations, and factorising each state's matrix again as a gradient run's does) and
   the tangent sweep of the Fisher information (the
   four free parameters' output sensitivities, time terms kept) of the engine-mount
   reference scenario at the paper's start values, collecting only inside that sweep (--toggle-collect), and the C reference
   (collecting inside the ctypes call);
3. prints instructions per step: per core function (inline helpers included, by the
   ``def``/``cdef`` that encloses the source line), the hottest source lines of the sweep
   bodies, and every other function (generated kernels, libm, libc) by name.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent('''
    import sys
    import time
    from pathlib import Path

    import numpy as np
    import symdae
    from symdae.costs.time_domain import LeastSquares
    from symdae.simulation.backends.base import scheme_code
    from symdae.simulation.sensitivity import tangent

    model, ns = symdae.load_model("engine_mount")
    s = symdae.compile_model(model)
    # the scheme of the C reference, eq. (15), as in bench_reference.py
    sc = symdae.Scenario.make(ns["SCENARIO"], q0=np.zeros(4), v0=np.zeros(4), scheme="hht-paper")
    data = s.simulate(sc).outputs["a1"].copy()
    cost = LeastSquares({"a1": data}, ["a1"])
    tr = s.simulate(sc, params=ns["START"], store_factorizations=True)
    # the Fisher information's: the time terms kept, the factorisations not
    trk = s.simulate(sc, params=ns["START"], keep_time_terms=True)
    _, dS = cost.evaluate(s, tr)
    backend = s.backend
    hht, k, sw, N = backend.hht, backend.kernels, tr.sweep.forward, sc.n_steps
    x0 = tr.sweep.x0
    n, m, nm = k.n, k.m, k.n + k.m
    Q, V, A = (np.empty((N + 1, n)) for _ in range(3))
    L, S = np.empty((N + 1, m)), np.zeros((N + 1, k.n_s))
    LU, PIV = np.empty((N + 1, nm, nm)), np.empty((N + 1, nm + 1), np.intc)
    TAU = np.empty((N + 1, k.n_tau))
    ST = np.empty((N + 1, k.n_st)) if k.n_st else None
    Q[0], V[0], A[0], L[0] = x0.q, x0.v, x0.a, x0.lam

    # the time terms over the grid, which Experiment.evaluate's sweeps read from its second
    # call on (symdae/simulation/backends/time_tables.py)
    table = backend.time_term_table(sc.t0, sc.h, sw.p, sw.U)

    def forward(store, read_table=False):
        noise, order = np.zeros(2 * nm + 1), np.zeros(2 * nm, np.intc)
        tau = None if read_table else TAU
        mats = (LU, PIV, tau, ST) if store else (None, None, None, None)
        rep = hht.forward(k, sc.t0, sc.h, N, sc.alpha, scheme_code(sc.scheme), sw.p, sw.U, Q,
                          V, A, A, L, S, *mats, sc.rtol, sc.max_iter, 0, 0, noise, order, False,
                          True, table if read_table else None)
        assert rep["status"] == 0, rep

    mode, reps, ready = sys.argv[1], int(sys.argv[2]), Path(sys.argv[5])
    if mode.startswith("ref"):
        sys.path.insert(0, sys.argv[3])
        from reference.engine_mount import EngineMountReference, compile_library
        ref = EngineMountReference(compile_library(folder=sys.argv[4]), t0=0.0, h=sc.h, N=N,
                                   alpha=sc.alpha, data=data)
        p = s.parameter_vector(ns["START"])
    # the parent switches callgrind's instrumentation on now (setup ran uninstrumented: fast)
    ready.write_text("ready")
    while ready.read_text() != "go":
        time.sleep(0.05)
    for _ in range(reps):
        if mode == "forward":
            forward(False)
        elif mode == "forward_store":
            forward(True)
        elif mode == "forward_table":
            forward(False, True)
        elif mode == "forward_store_table":
            forward(True, True)
        elif mode == "adjoint":
            backend.adjoint(tr.sweep.forward, dS)
        elif mode == "adjoint_refactor":
            # a gradient run's: no stored factorisations, each state's K factorised again
            backend.adjoint(trk.sweep.forward, dS)
        elif mode == "tangent":
            tangent(s, trk, list(ns["FREE"]), states=False)
        elif mode == "ref_J":
            ref.cost(p)
        elif mode == "ref_JG":
            ref.cost_and_gradient(p)
''')

# callgrind --toggle-collect patterns: the Python-callable wrapper Cython makes for the sweep's
# def (exactly one function, so collection is not toggled twice), or libffi's call for the
# ctypes reference
TOGGLE = {"forward": "__pyx_pw_*hht_*forward", "forward_store": "__pyx_pw_*hht_*forward",
          "forward_table": "__pyx_pw_*hht_*forward",
          "forward_store_table": "__pyx_pw_*hht_*forward",
          "adjoint": "__pyx_pw_*hht_*adjoint", "adjoint_refactor": "__pyx_pw_*hht_*adjoint",
          "tangent": "__pyx_pw_*hht_*tangent",
          "ref_J": "ffi_call*", "ref_JG": "ffi_call*"}


def build_core(tmp: Path) -> Path:
    """A copy of the package with its core built by its own setup.py (flags and directives)
    plus ``-g``; returns the folder to put on PYTHONPATH."""
    pkg = tmp / "pkg"
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.c", "*.html")
    shutil.copytree(ROOT / "symdae", pkg / "symdae", ignore=ignore)
    shutil.copytree(ROOT / "models", pkg / "models", ignore=ignore)
    # the same setup.py with -g for -g0: debug information does not change the generated code
    text = (ROOT / "setup.py").read_text()
    if '"-g0"' not in text:
        raise RuntimeError("setup.py no longer passes -g0: update profile_sweeps.build_core")
    (pkg / "setup.py").write_text(text.replace('"-g0"', '"-g"'))
    proc = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
                          cwd=pkg, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"building the debug core failed:\n{proc.stdout}{proc.stderr}")
    return pkg


def run_callgrind(tmp: Path, pkg: Path, mode: str, reps: int) -> str:
    script = tmp / "child.py"
    script.write_text(CHILD)
    out, ready = tmp / f"callgrind.{mode}.out", tmp / f"ready.{mode}"
    env = dict(os.environ, PYTHONPATH=str(pkg), SYMDAE_CACHE_DIR=str(tmp / "cache"))
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
           f"--callgrind-out-file={out}", f"--toggle-collect={TOGGLE[mode]}", sys.executable,
           str(script), mode, str(reps), str(ROOT / "benchmarks"), str(tmp), str(ready)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    while not (ready.exists() and ready.read_text() == "ready"):
        if proc.poll() is not None:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr.read()[-3000:]}")
        time.sleep(0.1)
    subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], capture_output=True,
                   check=True)
    ready.write_text("go")
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{err[-3000:]}")
    ann = subprocess.run(["callgrind_annotate", "--inclusive=no", "--auto=yes",
                          "--threshold=100", str(out)], capture_output=True, text=True,
                         check=True)
    return ann.stdout


def source_map(c_file: Path) -> tuple[dict, dict]:
    """C line -> (pyx/pxd file, line), from the comments Cython writes before each statement;
    and (file, line) -> name of the enclosing def/cdef function."""
    pat = re.compile(r'/\* "(?:[\w/]*/)?([\w.]+\.p(?:yx|xd))":(\d+)')
    cmap, cur = {}, None
    for i, line in enumerate(c_file.read_text().splitlines(), 1):
        m = pat.search(line)
        if m:
            cur = (m.group(1), int(m.group(2)))
        cmap[i] = cur
    owner = {}
    for src in c_file.parent.glob("*.p[yx][xd]"):
        name = "?"
        for j, line in enumerate(src.read_text().splitlines(), 1):
            m = re.match(r"(?:cdef|cpdef|def)\s+(?:inline\s+)?(?:[\w*]+\s+)*?(\w+)\s*\(", line)
            if m and not line.startswith(" "):
                name = m.group(1)
            owner[(src.name, j)] = name
    return cmap, owner


def parse(annotated: str, cmap: dict, owner: dict):
    """(per core function, per source line, per other function) instruction counts."""
    by_func, by_line, other = collections.Counter(), collections.Counter(), collections.Counter()
    in_summary, inside, ln = True, False, None
    for line in annotated.splitlines():
        if in_summary:
            m = re.match(r"\s*([\d,]+)\s+(?:\(\s*[\d.]+%\)\s+)?(\S+?):(\S+)", line)
            if m and "PROGRAM TOTALS" not in line and "hht.c" not in m.group(2):
                fn = m.group(3)
                fn = "kernel " + fn.split("__k_")[-1] if "__k_" in fn else fn
                other[fn] += int(m.group(1).replace(",", ""))
        if line.startswith("-- Auto-annotated source:"):
            in_summary = False
            inside, ln = line.strip().endswith("hht.c"), None
            continue
        if not inside:
            continue
        if "events annotated" in line:
            inside = False
            continue
        m = re.match(r"-- line (\d+) -+", line)
        if m:
            ln = int(m.group(1))
            continue
        if ln is None or re.match(r"\s*[\d,]+\s+(?:\(\s*[\d.]+%\)\s+)?=>", line):
            continue
        m = re.match(r"\s*([\d,]+|\.)\s", line)
        if m:
            if m.group(1) != ".":
                key = cmap.get(ln)
                n = int(m.group(1).replace(",", ""))
                by_func[owner.get(key, "?") if key else "?"] += n
                by_line[key] += n
            ln += 1
    return by_func, by_line, other


def report(mode: str, parsed, steps: float, top: int, c_file: Path) -> None:
    by_func, by_line, other = parsed
    total = sum(by_func.values()) + sum(other.values())
    print(f"{mode}: {total / steps:,.0f} instructions per step")
    rows = [(f"core  {k}", v) for k, v in by_func.items()] + \
           [(f"other {k}", v) for k, v in other.items()]
    for name, v in sorted(rows, key=lambda r: -r[1]):
        if v / steps >= 5:
            print(f"  {v / steps:8,.0f}  {100 * v / total:5.1f} %  {name}")
    if by_line and top:
        srcs = {p.name: p.read_text().splitlines() for p in c_file.parent.glob("*.p[yx][xd]")}
        print("  hottest source lines of the core:")
        for key, v in by_line.most_common(top):
            if key is None:
                continue
            text = srcs.get(key[0], [])[key[1] - 1].strip() if key[0] in srcs else ""
            print(f"    {v / steps:7,.0f}  {key[0]}:{key[1]:<4d} {text[:80]}")
    print()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3, help="sweeps per profile")
    ap.add_argument("--top", type=int, default=12, help="hottest source lines to list")
    args = ap.parse_args(argv)
    missing = [t for t in ("valgrind", "callgrind_annotate", "gcc") if not shutil.which(t)]
    if missing:
        print(f"needs {', '.join(missing)} on PATH")
        return 1
    with tempfile.TemporaryDirectory(prefix="symdae-profile-") as folder:
        tmp = Path(folder)
        pkg = build_core(tmp)
        c_file = pkg / "symdae" / "simulation" / "core" / "hht.c"
        cmap, owner = source_map(c_file)
        steps = 10_000 * args.reps
        results = {}
        symdae_modes = ("forward", "forward_store", "forward_table", "forward_store_table",
                        "adjoint", "adjoint_refactor", "tangent")
        for mode in symdae_modes + ("ref_J", "ref_JG"):
            results[mode] = parse(run_callgrind(tmp, pkg, mode, args.reps), cmap, owner)
        for mode in symdae_modes:
            report(f"symdae {mode.replace('_', ' ')}", results[mode], steps, args.top, c_file)
        tot = {m: (sum(r[0].values()) + sum(r[2].values())) / steps
               for m, r in results.items()}
        print(f"C reference (-O2): J {tot['ref_J']:,.0f} instructions per step, adjoint "
              f"{tot['ref_JG'] - tot['ref_J']:,.0f} (J + gradient - J)")
        print(f"symdae / reference: forward {tot['forward'] / tot['ref_J']:.1f}x, forward "
              f"storing LU {tot['forward_store'] / tot['ref_J']:.1f}x, adjoint "
              f"{tot['adjoint'] / (tot['ref_JG'] - tot['ref_J']):.1f}x (factorising again: "
              f"{tot['adjoint_refactor'] / (tot['ref_JG'] - tot['ref_J']):.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
