"""Plots of trajectories and identification runs, written straight to files.

Uses Matplotlib's object interface with the Agg canvas, so nothing touches pyplot's global
state or needs a display.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np

from ..atomic import atomic_path

__all__ = ["plot_outputs", "plot_convergence", "plot_fit"]


def figure(rows: int, height: float = 3.0):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, height * rows), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, [fig.add_subplot(rows, 1, k + 1) for k in range(rows)]


def save(fig, path) -> Path:
    """Write the figure to ``path`` (format from its suffix), atomically (symdae.atomic)."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120)
    return Path(path)


def plot_outputs(traj, path) -> Path:
    """Every output of a trajectory over time, one panel each."""
    names = list(traj.outputs) or ["(no outputs)"]
    fig, axes = figure(len(names), 2.2)
    for ax, name in zip(axes, names):
        if name in traj.outputs:
            ax.plot(traj.t, traj.outputs[name], lw=0.8)
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("t [s]")
    save(fig, path)
    return Path(path)


def plot_convergence(result, path, reference: Mapping | None = None) -> Path:
    """Cost per iteration and the free parameters scaled by ``reference`` (default: the
    identified values) per iteration."""
    ref = dict(reference or result.values)
    it = [e["iteration"] for e in result.history]
    fig, (ax1, ax2) = figure(2)
    ax1.semilogy(it, [max(e["cost"], 1e-300) for e in result.history], "o-", ms=3)
    ax1.set_ylabel("cost J")
    ax1.set_title(f"{result.method}: {len(it) - 1} iterations, "
                  f"{result.n_simulations} simulations + gradients")
    ax1.grid(alpha=0.3, which="both")
    for name in result.free:
        ax2.plot(it, [e["values"][name] / ref[name] for e in result.history], "o-", ms=3,
                 label=name)
    ax2.axhline(1.0, color="k", lw=0.6)
    ax2.set_ylabel("parameter / " + ("true value" if reference is not None else "identified"))
    ax2.set_xlabel("iteration")
    ax2.legend(ncol=min(4, len(result.free)))
    ax2.grid(alpha=0.3)
    save(fig, path)
    return Path(path)


def plot_fit(t: np.ndarray, measured: np.ndarray, curves: Mapping, path,
             output: str = "output") -> Path:
    """Measured signal against simulated ones (e.g. {'start': s0, 'identified': s1})."""
    fig, (ax1, ax2) = figure(2)
    ax1.plot(t, measured, "k", lw=1.6, label="measured")
    styles = ["C1--", "C0-", "C2-.", "C3:"]
    for (label, s), style in zip(curves.items(), styles):
        ax1.plot(t, s, style, lw=0.8, label=label)
    ax1.set_ylabel(output)
    ax1.legend()
    ax1.grid(alpha=0.3)
    # bit-identical samples would plot at 1e-300: clip at the signal's round-off level
    floor = np.finfo(float).eps * max(float(np.max(np.abs(measured))), np.finfo(float).tiny)
    for (label, s), style in zip(curves.items(), styles):
        ax2.semilogy(t, np.maximum(np.abs(s - measured), floor), style, lw=0.6, label=label)
    ax2.set_ylabel(f"|{output} - measured| (>= eps max|measured|)")
    ax2.set_xlabel("t [s]")
    ax2.legend()
    ax2.grid(alpha=0.3, which="both")
    save(fig, path)
    return Path(path)
