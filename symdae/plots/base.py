"""Plots of trajectories and identification runs, written straight to files.

Uses Matplotlib's object interface with the Agg canvas, so nothing touches pyplot's global
state or needs a display.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..atomic import atomic_path

__all__ = ["plot_outputs", "outputs_figure", "plot_convergence", "plot_fit", "fit_figure",
           "axis_label", "envelope", "figure", "save"]


def figure(rows: int, height: float = 3.0):
    """A Matplotlib figure (Agg canvas, no pyplot) with ``rows`` panels under each other, and
    their axes."""
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


def axis_label(name: str, unit: str = "") -> str:
    """``name [unit]``, or the bare name where no unit is declared."""
    return f"{name} [{unit}]" if unit else name


def envelope(t: np.ndarray, y: np.ndarray, points: int = 4000):
    """Min/max per bin: a long signal drawn with its envelope (425 000 samples do not fit in
    the pixels, and the envelope is what a plot of all of them shows, without the solid block
    Matplotlib draws from a line through all of them)."""
    if len(t) <= 2 * points:
        return t, y
    k = len(t) // points
    m = k * points
    tt = t[:m].reshape(points, k).mean(axis=1)
    yy = y[:m].reshape(points, k)
    return np.repeat(tt, 2), np.column_stack([yy.min(axis=1), yy.max(axis=1)]).ravel()


def plot_outputs(traj, path, units: Mapping | None = None) -> Path:
    """Every output of a trajectory over time, one panel each (``units``: {output: unit},
    e.g. ``model.units``); long records drawn as their min/max envelope."""
    return save(outputs_figure(traj, units), path)


def outputs_figure(traj, units: Mapping | None = None):
    """The figure of :func:`plot_outputs`."""
    units = dict(units or {})
    names = list(traj.outputs) or ["(no outputs)"]
    fig, axes = figure(len(names), 2.2)
    for ax, name in zip(axes, names):
        if name in traj.outputs:
            ax.plot(*envelope(traj.t, traj.outputs[name]), lw=0.8)
        ax.set_ylabel(axis_label(name, units.get(name, "")))
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("t [s]")
    return fig


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


def plot_fit(fits: Mapping, path, units: Mapping | None = None) -> Path:
    """Measured against simulated signals, one row per fitted output: the signals (left) and
    ``|simulated - measured|`` (right). ``fits``: {output: (t, measured, {label: simulated})}, the
    simulated values at the measured samples (e.g. {'start': s0, 'identified': s1});
    ``units``: {output: unit}. Long records are drawn as their min/max envelopes."""
    return save(fit_figure(fits, units), path)


def fit_figure(fits: Mapping, units: Mapping | None = None):
    """The figure of :func:`plot_fit`."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    units = dict(units or {})
    fig = Figure(figsize=(12, (2.8 if len(fits) <= 4 else 1.9) * len(fits)),
                 layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(fits), 2, squeeze=False)
    styles = ["C1--", "C0-", "C2-.", "C3:"]
    for (ax1, ax2), (output, (t, measured, curves)) in zip(axes, fits.items()):
        t, measured = np.asarray(t), np.asarray(measured)
        unit = units.get(output, "")
        few = len(t) <= 400          # a few samples are points, not a line
        ax1.plot(*envelope(t, measured), "k." if few else "k-", ms=3, lw=1.6,
                 label="measured")
        for (label, s), style in zip(curves.items(), styles):
            ax1.plot(*envelope(t, np.asarray(s)), style, lw=0.8, label=label)
        ax1.set_ylabel(axis_label(output, unit))
        ax1.legend(fontsize=8)
        ax1.grid(alpha=0.3)
        # bit-identical samples would plot at 1e-300: clip at the signal's round-off level
        floor = np.finfo(float).eps * max(float(np.max(np.abs(measured))), np.finfo(float).tiny)
        for (label, s), style in zip(curves.items(), styles):
            err = np.maximum(np.abs(np.asarray(s) - measured), floor)
            ax2.semilogy(*envelope(t, err), style, lw=0.6, label=label)
        ax2.set_ylabel(axis_label(f"|{output} - measured|", unit))
        ax2.grid(alpha=0.3, which="both")
    for ax in axes[-1]:
        ax.set_xlabel("t [s]")
    axes[0][1].set_title("residual (at least eps max |measured|)", fontsize=9)
    return fig
