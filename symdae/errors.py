"""Exceptions raised by symdae.

Every error names what is wrong (the symbol, the time step, the residual, the file) so that a
user can act on it without a debugger.
"""
from __future__ import annotations


def _restore(cls: type, args: tuple, state: dict) -> BaseException:
    """An exception as pickled by :func:`_reduce`: made without calling its ``__init__``."""
    exc = cls.__new__(cls, *args)
    exc.args = args
    exc.__dict__.update(state)
    return exc


def _reduce(exc: BaseException):
    # Exception's own pickling calls cls(*args), which an __init__ with keyword-only or
    # composed arguments (NewtonError, UndeclaredSymbolError) cannot take: an error raised in
    # a process pool's worker could then not be unpickled, and the pool broke instead of
    # reporting it. This keeps the message, the class and every attribute.
    return _restore, (type(exc), exc.args, dict(exc.__dict__))


class SymdaeError(Exception):
    """Base class of all symdae errors; each pickles whole (message, class, attributes), so
    an error raised in a worker process reaches the caller as itself."""

    __reduce__ = _reduce


class ModelError(SymdaeError, ValueError):
    """The model definition is malformed (shapes, types, names, dependencies)."""


class UndeclaredSymbolError(ModelError):
    """An expression uses a symbol that is neither a coordinate, parameter, input nor multiplier."""

    def __init__(self, symbols, where: str):
        self.symbols = tuple(symbols)
        self.where = where
        names = ", ".join(sorted(str(s) for s in self.symbols))
        super().__init__(
            f"undeclared symbol(s) {names} in {where}: declare each as a coordinate, a parameter "
            f"(parameters={{symbol: nominal value}}), an input or a multiplier"
        )


class MechanicsError(ModelError):
    """A sympy.physics.mechanics object that cannot become a symdae model (names the part)."""


class InputError(SymdaeError, ValueError):
    """A run-time argument is invalid (time grid, alpha, parameter or input values)."""


class UnknownNameError(SymdaeError, KeyError):
    """A parameter, input, output or coordinate name that the model does not have."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


class BuildError(SymdaeError, RuntimeError):
    """Compiling a generated module failed; carries the compiler output and the log path."""

    def __init__(self, message: str, output: str = "", log_path: str | None = None):
        self.output = output
        self.log_path = log_path
        text = message
        if log_path:
            text += f" (full log: {log_path})"
        if output:
            tail = output[-6000:]
            text += "\n--- compiler output ---\n" + tail
        super().__init__(text)


class SimulationError(SymdaeError, RuntimeError):
    """Base class of failures during a simulation."""


class InconsistentInitialStateError(SimulationError, ValueError):
    """q0 or v0 violates the position or velocity constraints beyond the tolerance."""


class SingularMatrixError(SimulationError, ArithmeticError):
    """The augmented (Newton or initialisation) matrix is singular."""


class NewtonError(SimulationError, ArithmeticError):
    """Newton's method did not converge in a time step."""

    def __init__(self, message: str, *, time: float, step: int, iterations: int,
                 residual_norm: float, noise_ratio: float = float("nan")):
        self.time = time
        self.step = step
        self.iterations = iterations
        self.residual_norm = residual_norm
        self.noise_ratio = noise_ratio      # the last residual over its round-off level
        super().__init__(message)


class DataError(SymdaeError, ValueError):
    """Measured data are malformed (NaNs, unsorted or out-of-range times, length mismatch)."""


class NotIdentifiableError(SymdaeError, ArithmeticError):
    """The Fisher information is singular: a combination of the parameters (``directions``,
    each ``{parameter: coefficient}`` of relative changes) does not change the outputs."""

    def __init__(self, message: str, directions=()):
        self.directions = list(directions)
        super().__init__(message)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run (a KeyboardInterrupt, so ``except Exception`` does not swallow it).

    ``time`` and ``t_end``: where the interrupted sweep stood and where it would have ended
    (NaN when not known); ``best``: the best point an interrupted search had found
    (``{parameter: value}``, or None); ``best_cost``: its cost."""

    __reduce__ = _reduce      # pickles whole, as SymdaeError does

    def __init__(self, message: str = "interrupted", *, time: float = float("nan"),
                 t_end: float = float("nan"), best: dict | None = None,
                 best_cost: float = float("nan")):
        self.time = time
        self.t_end = t_end
        self.best = best
        self.best_cost = best_cost
        super().__init__(message)

    @classmethod
    def at(cls, time: float, t_end: float, sweep: str) -> Interrupted:
        """The interruption of a ``sweep`` at ``time`` of a run to ``t_end``."""
        return cls(f"interrupted at t = {time:.6g} of {t_end:.6g} s ({sweep} sweep)",
                   time=time, t_end=t_end)
