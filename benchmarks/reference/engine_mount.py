"""Hand-written C reference of the engine mount (engine_mount.c), compiled and loaded at run time.

The C file is compiled with gcc into a temporary folder (nothing compiled is kept) and called
through ctypes. :class:`EngineMountReference` holds the preallocated trajectory buffers for one
time grid, as a hand-written identification code would, so that a timed call is the sweep
itself plus one ctypes call (a few microseconds).
"""
from __future__ import annotations

import ctypes
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SOURCE = Path(__file__).with_name("engine_mount.c")
FLAGS_O2 = ("-O2", "-g0")       # the optimisation level of the model kernels (COMPILE_FLAGS)
FLAGS_O3 = ("-O3", "-g0")       # the optimisation level of symdae's compiled core (setup.py)
PARAMETER_NAMES = ("cE1", "cE2", "dE", "dH2", "mL", "mH", "mM", "cH", "dH1", "cM", "dM", "a",
                   "b", "g", "A", "omega0", "C")
GRADIENT_NAMES = PARAMETER_NAMES[:4]
# Relative central-difference steps for dJ/d(GRADIENT_NAMES) at the paper's start values where
# the truncation error dominates at step delta and delta/2 (it falls 4x when halved): J is
# nearly linear in dE and dH2, so their quotients reach round-off noise below ~1e-2.
FD_STEPS = (1e-4, 1e-4, 1.6e-2, 3.2e-2)
STATUS = {0: "OK", 1: "NEWTON_FAILED", 2: "SINGULAR", 3: "NOT_FINITE"}

_dp = ctypes.POINTER(ctypes.c_double)


class ReferenceError(RuntimeError):
    """The reference sweep failed or could not be compiled."""


def compiler() -> str | None:
    """Path of gcc (or cc), None if there is none."""
    return shutil.which("gcc") or shutil.which("cc")


def compile_library(flags=FLAGS_O2, folder: Path | None = None) -> ctypes.CDLL:
    """Compile engine_mount.c with ``flags`` into ``folder`` (a fresh temporary one by default)
    and load it. The folder may be deleted once loaded (the mapping stays valid)."""
    cc = compiler()
    if cc is None:
        raise ReferenceError("no C compiler (gcc or cc) on PATH")
    folder = Path(folder) if folder is not None else Path(tempfile.mkdtemp(prefix="em-ref-"))
    tag = "".join(f.strip("-") for f in flags)
    so = folder / f"libem_{tag}.so"
    cmd = [cc, *flags, "-fPIC", "-shared", "-o", str(so), str(SOURCE), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ReferenceError(f"{' '.join(cmd)} failed:\n{proc.stdout}{proc.stderr}")
    lib = ctypes.CDLL(str(so))
    lib.em_forward.restype = ctypes.c_int
    lib.em_forward.argtypes = [_dp, ctypes.c_double, ctypes.c_double, ctypes.c_long,
                               ctypes.c_double, _dp, _dp, ctypes.c_double, ctypes.c_int, _dp,
                               _dp, _dp, _dp, _dp, _dp]
    lib.em_adjoint.restype = ctypes.c_int
    lib.em_adjoint.argtypes = [_dp, ctypes.c_double, ctypes.c_double, ctypes.c_long,
                               ctypes.c_double, _dp, _dp, _dp, _dp, _dp, _dp, _dp]
    return lib


def _ptr(x: np.ndarray | None):
    return None if x is None else x.ctypes.data_as(_dp)


@dataclass
class ForwardResult:
    J: float
    newton_iterations: int
    refreshes: int
    noise_stops: int


class ReferenceSweeps:
    """A hand-written sweep pair (forward with the cost, adjoint) on one grid (t0, h, N,
    alpha) with a fixed data signal for a1, and preallocated trajectory buffers, as a
    hand-written identification code would hold them. Subclasses supply the sweeps
    (``_forward``, ``_adjoint``): the C library here, numba in engine_mount_numba.py.

    ``params`` arguments are the model's 17 parameter values in model order (PARAMETER_NAMES).
    """

    def __init__(self, *, t0: float, h: float, N: int, alpha: float, data: np.ndarray,
                 q0=None, v0=None, rtol: float = 1e-12, max_iter: int = 20):
        self.t0, self.h, self.N, self.alpha = float(t0), float(h), int(N), float(alpha)
        self.rtol, self.max_iter = float(rtol), int(max_iter)
        self.data = np.ascontiguousarray(data, dtype=float)
        if self.data.shape != (self.N + 1,):
            raise ValueError(f"data has shape {self.data.shape}, expected ({self.N + 1},)")
        self.q0 = np.zeros(4) if q0 is None else np.ascontiguousarray(q0, dtype=float)
        self.v0 = np.zeros(4) if v0 is None else np.ascontiguousarray(v0, dtype=float)
        self.Q = np.zeros((self.N + 1, 4))
        self.V = np.zeros((self.N + 1, 4))
        self.A = np.zeros((self.N + 1, 4))
        self.L = np.zeros(self.N + 1)
        self.out = np.zeros(5)
        self.grad = np.zeros(4)
        self.init_term = np.zeros(4)
        self._p = np.zeros(len(PARAMETER_NAMES))

    def _forward(self, store: bool) -> ForwardResult:
        """The forward sweep at self._p (trajectory into Q, V, A, L with ``store``)."""
        raise NotImplementedError

    def _adjoint(self) -> None:
        """The adjoint sweep on the stored trajectory: dJ/dp into grad, init_term."""
        raise NotImplementedError

    def _result(self, status: int, what: str) -> ForwardResult:
        if status != 0:
            raise ReferenceError(f"{what} forward sweep: {STATUS.get(status, status)} at "
                                 f"t = {self.out[4]:g}")
        o = self.out
        return ForwardResult(float(o[0]), int(o[1]), int(o[2]), int(o[3]))

    def forward(self, params, store: bool = True) -> ForwardResult:
        """J at ``params``; with ``store`` the trajectory is left in Q, V, A, L."""
        self._p[:] = params
        return self._forward(store)

    def cost(self, params) -> float:
        """J (the trajectory is stored, as for a gradient)."""
        return self.forward(params, True).J

    def cost_streaming(self, params) -> float:
        """J without storing the trajectory (only the cost is accumulated)."""
        return self.forward(params, False).J

    def central_differences(self, params, steps=FD_STEPS) -> np.ndarray:
        """Central differences of J along GRADIENT_NAMES with relative ``steps``."""
        p = np.array(params, dtype=float)
        fd = np.empty(len(GRADIENT_NAMES))
        for k, rel in enumerate(steps):
            e = rel * abs(p[k])
            pp, pm = p.copy(), p.copy()
            pp[k] += e
            pm[k] -= e
            fd[k] = (self.cost_streaming(pp) - self.cost_streaming(pm)) / (2 * e)
        return fd

    def cost_and_gradient(self, params) -> tuple[float, np.ndarray]:
        """J and dJ/d(cE1, cE2, dE, dH2)."""
        J = self.forward(params, True).J
        self._adjoint()
        return J, self.grad.copy()


class EngineMountReference(ReferenceSweeps):
    """The C sweeps (engine_mount.c, loaded from ``lib``): see :class:`ReferenceSweeps`."""

    def __init__(self, lib: ctypes.CDLL, **grid):
        super().__init__(**grid)
        self.lib = lib
        # pointers made once: a timed call is then the sweep plus one ctypes call
        self._args = [_ptr(x) for x in (self.q0, self.v0, self.data, self.Q, self.V, self.A,
                                        self.L, self.out, self.grad, self.init_term, self._p)]

    def _forward(self, store: bool) -> ForwardResult:
        q0, v0, data, Q, V, A, L, out, _, _, p = self._args
        st = self.lib.em_forward(p, self.t0, self.h, self.N, self.alpha, q0, v0, self.rtol,
                                 self.max_iter, data, *((Q, V, A, L) if store else
                                                        (None, None, None, None)), out)
        return self._result(st, "reference")

    def _adjoint(self) -> None:
        _, _, data, Q, V, A, L, _, grad, init, p = self._args
        st = self.lib.em_adjoint(p, self.t0, self.h, self.N, self.alpha, Q, V, A, L, data,
                                 grad, init)
        if st != 0:
            raise ReferenceError(f"reference adjoint sweep: {STATUS.get(st, st)}")
