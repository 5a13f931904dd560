"""Plots of an optimal input design, written straight to files (Agg canvas): the analogues of
the input-design paper's figures. Convergence (Figs. 3a, 7a), the inputs (3b, 7b), the end
conditions over time (4), the measured outputs for each input (5 right, 8) and E_RMS over one
parameter (5 left) or two (9, contours at equal levels for every input).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .base import axis_label, figure, save

__all__ = ["plot_design_convergence", "plot_design_inputs", "plot_end_conditions",
           "plot_design_outputs", "plot_rms_scans"]

_STYLE = {"start": ("C1--", 1.0), "optimal": ("C0-", 0.9), "sine": ("C2-.", 1.0)}


def _blank(height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _style(label: str, k: int):
    return _STYLE.get(label, (f"C{k + 3}:", 1.0))


def plot_design_convergence(design, path) -> Path:
    """Psi per iteration (top) and the information gain tr F~ / tr F~(start) with the
    penalties (bottom)."""
    it = [e["iteration"] for e in design.history]
    fig, (ax1, ax2) = figure(2)
    ax1.plot(it, [e["value"] for e in design.history], "o-", ms=2)
    ax1.set_ylabel("design cost Psi")
    ax1.set_title(f"{design.model}: {design.criterion} criterion, {design.optimizer}, "
                  f"{design.n_iterations} iterations, {design.n_evaluations} evaluations")
    ax1.grid(alpha=0.3)
    info = np.array([e["information"] for e in design.history])
    ax2.semilogy(it, np.maximum(np.abs(info / info[0]), 1e-300), "o-", ms=2,
                 label="|information term| / start")
    for name in design.history[0]["penalties"]:
        ax2.semilogy(it, [max(e["penalties"][name], 1e-300) for e in design.history], "-",
                     label=f"{name} penalty")
    ax2.set_xlabel("iteration")
    ax2.legend()
    ax2.grid(alpha=0.3, which="both")
    save(fig, path)
    return Path(path)


def plot_design_inputs(design, path) -> Path:
    """The designed inputs: start, optimum and comparisons, with the bounds."""
    names = design.inputs
    fig, axes = figure(len(names), 3.0)
    snaps = [design.start, *design.comparisons.values(), design.optimal]
    model_inputs = design.problem.system.model.input_names
    for ax, name in zip(axes, names):
        col = model_inputs.index(name)
        for k, s in enumerate(snaps):
            style, lw = _style(s.label, k)
            ax.plot(design.t, s.U[:, col], style, lw=lw, label=s.label)
        lo, hi = design.settings["bounds"][name]
        for b in (lo, hi):
            ax.axhline(b, color="k", lw=0.6, ls=":")
        ax.set_ylabel(name)
        ax.legend(ncol=len(snaps))
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("t [s]")
    save(fig, path)
    return Path(path)


def _trajectories(design):
    prob = design.problem
    snaps = [design.start, *design.comparisons.values(), design.optimal]
    return [(s.label, prob.simulate(s.U)) for s in snaps]


def plot_end_conditions(design, path) -> Path | None:
    """Every end-condition quantity over time for each input, with a zoom on the last tenth
    (None: the design has no end conditions)."""
    conds = design.problem.end
    if not conds:
        return None
    runs = _trajectories(design)
    from ..design.problem import constrained_series

    fig = _blank(2.6 * len(conds))
    grid = fig.add_gridspec(len(conds), 2, width_ratios=[3, 1])
    for r, c in enumerate(conds):
        ax, zoom = fig.add_subplot(grid[r, 0]), fig.add_subplot(grid[r, 1])
        for k, (label, traj) in enumerate(runs):
            y = constrained_series(c, traj)
            style, lw = _style(label, k)
            ax.plot(traj.t, y, style, lw=lw, label=label)
            tail = traj.t >= traj.t[0] + 0.9 * (traj.t[-1] - traj.t[0])
            zoom.plot(traj.t[tail], y[tail], style, lw=lw)
        for a in (ax, zoom):
            a.axhline(c.target, color="k", lw=0.6)
            a.grid(alpha=0.3)
        ax.set_ylabel(axis_label(c.name, design.problem.system.model.unit(c.name)))
        zoom.set_title("last 10 %", fontsize=8)
        if r == 0:
            ax.legend(ncol=len(runs))
        if r == len(conds) - 1:
            ax.set_xlabel("t [s]")
            zoom.set_xlabel("t [s]")
    save(fig, path)
    return Path(path)


def plot_design_outputs(design, path, outputs: Sequence[str] | None = None,
                        noise: float = 0.0, seed: int = 2024) -> Path:
    """The measured outputs for each input (optionally with N(0, noise^2) added)."""
    outputs = list(outputs or design.problem.outputs)
    runs = _trajectories(design)
    rng = np.random.default_rng(seed)
    fig, axes = figure(len(outputs), 2.8)
    for ax, o in zip(axes, outputs):
        for k, (label, traj) in enumerate(runs):
            y = traj.outputs[o] + (rng.normal(0.0, noise, traj.t.size) if noise else 0.0)
            style, lw = _style(label, k)
            ax.plot(traj.t, y, style, lw=lw, label=label)
        ax.set_ylabel(axis_label(o, design.problem.system.model.unit(o))
                      + (f" + noise {noise:g}" if noise else ""))
        ax.legend(ncol=len(runs))
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("t [s]")
    save(fig, path)
    return Path(path)


def plot_rms_scans(scans: Sequence, path) -> Path:
    """E_RMS over one parameter (one panel per scan, e.g. per noise level: Fig. 5 left) or
    contours over two (one row per scan, a column per input, equal levels: Fig. 9)."""
    scans = list(scans)
    two = len(scans[0].axes) == 2
    if not two:
        fig, axes = figure(len(scans), 2.8)
        for ax, scan in zip(axes, scans):
            (name, x), = scan.axes.items()
            for k, (label, E) in enumerate(scan.values.items()):
                style, lw = _style(label, k)
                # above its own minimum, on a log axis: the curvature (the Fisher information)
                # shows as an offset and the minimum's position (the estimate) as the dip
                j = int(np.argmin(E))
                rise = E - E[j]
                floor = max(float(np.max(rise)) * 1e-8, 1e-300)
                ax.semilogy(x, np.maximum(rise, floor), style, lw=lw,
                            label=f"{label} (min at {x[j]:.6g})")
            if scan.truth.get(name) is not None:
                ax.axvline(scan.truth[name], color="k", lw=0.6)
            ax.set_ylabel("E_RMS - min E_RMS")
            ax.set_title(f"noise sigma = {scan.noise:g}", fontsize=9)
            ax.legend()
            ax.grid(alpha=0.3)
        axes[-1].set_xlabel(name)
        save(fig, path)
        return Path(path)
    from matplotlib.colors import LogNorm

    labels = list(scans[0].values)
    fig = _blank(3.4 * len(scans))
    (nx, x), (ny, y) = scans[0].axes.items()
    for r, scan in enumerate(scans):
        top = max(float(np.max(E)) for E in scan.values.values())
        low = min(float(np.min(E)) for E in scan.values.values())
        levels = np.geomspace(max(low, top * 1e-6, 1e-300), top, 12) if top > 0 else None
        row = []
        for c, label in enumerate(labels):
            ax = fig.add_subplot(len(scans), len(labels), r * len(labels) + c + 1)
            norm = LogNorm(levels[0], levels[-1]) if levels is not None else None
            cs = ax.contour(x, y, scan.values[label].T, levels=levels, linewidths=0.8,
                            norm=norm, cmap="viridis")
            if scan.truth.get(nx) is not None:
                ax.plot(scan.truth[nx], scan.truth[ny], "k+", ms=8)
            ax.set_title(f"{label}, noise {scan.noise:g}", fontsize=9)
            ax.set_xlabel(nx)
            ax.set_ylabel(ny)
            row.append(ax)
        # the levels (equal across a row) on one colour bar: labels on the lines overlap
        # where the contours crowd near the minimum
        if levels is not None:
            fig.colorbar(cs, ax=row, label="E_RMS", format="%.2g")
    save(fig, path)
    return Path(path)
