"""The written LU in two parts (lu_plan.split_factor_lines): the part on K's fixed entries
once, then the rest for each K that keeps them, against the whole factorisation
(written_lu_factor), both compiled by the C compiler from the generated text: the same factors
bit for bit and the same status, on saddle points, dense and random structures with every
kind of fixed set, and when the factorisation fails (an entry not finite, a pivot refused in
either part). The compiled sweeps' steps (tests/simulation/test_compiled_steps.py) run the two
parts on real models."""
from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

from symdae.model.lu_plan import factor_lines, plan_lu, split_factor_lines

CC = shutil.which("gcc") or shutil.which("cc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler (gcc/cc)")
TOL = 1e-3          # the core's pivot tolerance (sparse.pxd)
DBL = ctypes.POINTER(ctypes.c_double)


def structure(rows: list) -> tuple:
    N = len(rows)
    return [i * N + j for i, r in enumerate(rows) for j, c in enumerate(r) if c == "x"], N


KKT = ["xx..x.", "xx..xx", "..x..x", "...x..", "xx....", ".xx..."]
ENGINE_MOUNT = ["xx...", "xx..x", "..x.x", "...xx", ".xxx."]


def random_structure(N: int, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    S = rng.random((N, N)) < 0.3
    S |= S.T
    np.fill_diagonal(S, True)
    return [int(f) for f in np.flatnonzero(S)], N


# the static functions, callable from ctypes
EXPORTS = """
int full(const double *K, double *B, double tol) { return written_lu_factor(K, B, tol); }
int first(const double *K, double *B, double *c, double tol)
{ return written_lu_factor_fixed(K, B, c, tol); }
int rest(const double *K, const double *c, double *B, double tol)
{ return written_lu_factor_rest(K, c, B, tol); }
"""


def build(plan, fixed, folder):
    """The three functions compiled into a library of their own."""
    split, n_stash = split_factor_lines(plan, fixed)
    src = folder / "lu.c"
    src.write_text("\n".join(["#include <math.h>", "#define SYMDAE_LU_UNSTABLE (-2)"]
                             + factor_lines(plan) + split) + EXPORTS)
    so = folder / "lu.so"
    proc = subprocess.run([CC, "-O2", "-fPIC", "-shared", "-o", str(so), str(src), "-lm"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    lib = ctypes.CDLL(str(so))
    for name in ("full", "first", "rest"):
        getattr(lib, name).restype = ctypes.c_int
    return lib, n_stash


def ptr(a: np.ndarray):
    return a.ctypes.data_as(DBL)


def matrix(nz, N, rng, scale=1.0):
    """A K of the structure, diagonally weighted so that the order's pivots pass."""
    K = np.zeros(N * N)
    K[nz] = rng.standard_normal(len(nz)) * scale
    for k in range(N):
        if k * N + k in nz:
            K[k * N + k] += 4.0 * np.sign(K[k * N + k] or 1.0)
    return K


def draw(lib, nz, N, fixed, K0, rng, count=5, tries=100):
    """``count`` matrices of the structure with K0's fixed entries that the whole
    factorisation accepts, and those it refused on the way."""
    accepted, refused = [], []
    for _ in range(tries):
        K = matrix(nz, N, rng)
        K[fixed] = K0[fixed]
        B = np.empty(N * N)
        (refused if lib.full(ptr(K), ptr(B), ctypes.c_double(TOL)) else accepted).append(K)
        if len(accepted) == count:
            return accepted, refused
    raise AssertionError(f"only {len(accepted)} of {tries} random matrices factorise")


def compare(lib, n_stash, K0, Ks, N):
    """Fixed part on K0, then each K of Ks with the rest and with the whole factorisation."""
    B = np.full(N * N, np.nan)
    c = np.full(max(n_stash, 1), np.nan)
    status = lib.first(ptr(K0), ptr(B), ptr(c), ctypes.c_double(TOL))
    if status != 0:
        return status, []
    out = []
    for K in Ks:
        B2 = np.full(N * N, np.nan)
        s1 = lib.rest(ptr(K), ptr(c), ptr(B), ctypes.c_double(TOL))
        s2 = lib.full(ptr(K), ptr(B2), ctypes.c_double(TOL))
        assert s1 == s2
        if s1 == 0:
            assert np.array_equal(B, B2, equal_nan=True)
        out.append(s1)
    return 0, out


CASES = [("kkt", structure(KKT)), ("engine_mount", structure(ENGINE_MOUNT)),
         ("dense", structure(["xxxx"] * 4))] + [
    (f"random{seed}", random_structure(7 + seed % 4, seed)) for seed in range(4)]


@pytest.mark.parametrize("name, nzN", CASES, ids=[c[0] for c in CASES])
def test_the_two_parts_give_the_whole_factorisation_bit_for_bit(name, nzN, tmp_path):
    nz, N = nzN
    plan = plan_lu(nz, N)
    rng = np.random.default_rng(len(nz))
    nz_set = sorted(nz)
    subsets = [[], nz_set, [f for f in nz_set if f // N == f % N],
               [f for f in nz_set if f // N != f % N]]
    subsets += [[f for f in nz_set if rng.random() < 0.5] for _ in range(3)]
    for k, fixed in enumerate(subsets):
        folder = tmp_path / str(k)
        folder.mkdir()
        lib, n_stash = build(plan, fixed, folder)
        K0 = matrix(nz, N, rng)
        # five K the whole factorisation accepts (a random one may fail a pivot check: those
        # it refuses are compared too, for the same status from both parts)
        accepted, refused = draw(lib, nz, N, fixed, K0, rng)
        status, statuses = compare(lib, n_stash, K0, accepted + refused, N)
        assert status == 0 and statuses[:5] == [0] * 5, (name, fixed, statuses)
        varying = [f for f in nz_set if f not in set(fixed)]
        if not varying:
            continue
        # a varying entry not finite: -1 from both
        K = accepted[0].copy()
        K[varying[0]] = np.inf
        assert compare(lib, n_stash, K0, [K], N)[1] == [-1]
        # a varying diagonal entry tiny: refused (or not) alike, in the same pivot
        diag = [f for f in varying if f // N == f % N]
        if diag:
            K = accepted[1].copy()
            K[diag[0]] = 1e-12
            compare(lib, n_stash, K0, [K], N)


def test_a_fixed_pivot_refused_fails_the_first_part(tmp_path):
    nz, N = structure(ENGINE_MOUNT)
    plan = plan_lu(nz, N)
    # everything but K[0, 0] and K[3, 3] fixed (the engine mount's split); K[2, 2] is a fixed
    # pivot with a fixed entry below it
    fixed = [f for f in nz if f not in (0, 18)]
    lib, n_stash = build(plan, fixed, tmp_path)
    rng = np.random.default_rng(3)
    K = matrix(nz, N, rng)
    K[12] = 1e-9 * abs(K[22])
    B = np.zeros(N * N)
    c = np.zeros(max(n_stash, 1))
    assert lib.first(ptr(K), ptr(B), ptr(c), ctypes.c_double(TOL)) == -2
    assert lib.full(ptr(K), ptr(np.zeros(N * N)), ctypes.c_double(TOL)) == -2
    K[12] = np.nan
    assert lib.first(ptr(K), ptr(B), ptr(c), ctypes.c_double(TOL)) == -1


def test_the_split_keeps_every_statement_once():
    nz, N = structure(KKT)
    plan = plan_lu(nz, N)
    fixed = [f for f in nz if f // N != f % N]
    split, _ = split_factor_lines(plan, fixed)
    text = "\n".join(split)
    first, rest = text.split("written_lu_factor_rest")
    updates = [ln for ln in text.splitlines() if " -= " in ln]
    assert len(updates) == plan.updates
    # every fixed entry is read in the first part, every other in the rest
    for f, k in zip(plan.nonzeros, plan.k_positions()):
        load = f"B[{f}] = K[{k}]; fin"
        assert (load in first) == (k in fixed) and (load in rest) == (k not in fixed)
    # nothing fixed: the first part does nothing, the rest is the whole factorisation
    split, n_stash = split_factor_lines(plan, [])
    first, rest = "\n".join(split).split("written_lu_factor_rest")
    assert n_stash == 0 and " B[" not in first
    assert "return written_lu_factor(K, B, tol);" in rest
