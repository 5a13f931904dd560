"""Plots of a frequency-domain identification, written straight to files (Agg canvas).

The analogues of the frequency-domain paper's figures: amplitude spectra with the fitted band
highlighted (Figs. 2-3) and the cost J over two parameters with the optimiser's path (Fig. 5b).
Time histories and convergence use :mod:`symdae.plots.base`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from .base import figure, save

__all__ = ["plot_spectra", "plot_cost_contour"]


def plot_spectra(frequency: np.ndarray, amplitudes: Mapping, band: tuple, path,
                 output: str = "output", band_lines: np.ndarray | None = None) -> Path:
    """Amplitude spectra ({label: amplitudes on ``frequency``}) with the band highlighted: the
    whole range (top) and a zoom on the band (bottom)."""
    fig, (ax1, ax2) = figure(2, 3.2)
    styles = {"measured": ("k-", 1.6), "start": ("C1--", 1.0), "identified": ("C0-", 1.0)}
    lo, hi = band
    pad = 0.5 * (hi - lo) + 1e-12
    zoom = (frequency >= lo - pad) & (frequency <= hi + pad)
    for ax, mask in ((ax1, slice(None)), (ax2, zoom)):
        for k, (label, amp) in enumerate(amplitudes.items()):
            style, lw = styles.get(label, (f"C{k + 2}-.", 1.0))
            ax.plot(frequency[mask], np.maximum(np.asarray(amp)[mask], 1e-300), style, lw=lw,
                    label=label)
        ax.axvspan(lo, hi, color="C2", alpha=0.15, label=f"band [{lo:g}, {hi:g}] Hz")
        ax.set_ylabel(f"amplitude of {output}")
        ax.grid(alpha=0.3)
    ax1.set_yscale("log")     # the whole range on a log axis; the band zoom linear (Fig. 3)
    if band_lines is not None:
        for f in band_lines:
            ax2.axvline(f, color="C2", lw=0.4, alpha=0.6)
    ax1.set_title("amplitude spectra (the cost uses the lines inside the band)")
    ax1.legend(fontsize=8)
    ax2.set_xlabel("frequency [Hz]")
    save(fig, path)
    return Path(path)


def plot_cost_contour(grids: Sequence, path, paths: Mapping | None = None,
                      points: Mapping | None = None) -> Path:
    """log10 J over grids of two parameters, one panel each (objects with ``names``, ``x``,
    ``y``, ``J[i, j]`` at (x[j], y[i]) and ``log_y``, e.g. an overview and a zoom on the
    minimum), with optimiser paths ({label: (xs, ys)}) and marked points ({label: (x, y)})."""
    fig, axes = figure(len(grids), 4.6)
    for ax, g in zip(axes, grids):
        J = np.asarray(g.J, dtype=float)
        finite = np.isfinite(J) & (J > 0)
        Z = np.where(finite, np.log10(np.where(finite, J, 1.0)), np.nan)
        levels = np.linspace(np.nanmin(Z), np.nanmax(Z), 25)
        cs = ax.contourf(g.x, g.y, Z, levels=levels, cmap="viridis")
        ax.contour(g.x, g.y, Z, levels=levels, colors="k", linewidths=0.3, alpha=0.5)
        fig.colorbar(cs, ax=ax, label="log10 J")
        ax.set_xlim(g.x[0], g.x[-1])
        ax.set_ylim(g.y[0], g.y[-1])
        for k, (label, (xs, ys)) in enumerate((paths or {}).items()):
            ax.plot(xs, ys, "o-", color="w" if k == 0 else f"C{k}", ms=3.5, lw=1.0,
                    label=label)
        for k, (label, (px, py)) in enumerate((points or {}).items()):
            ax.plot([px], [py], "*P^Xd"[k % 5], color=f"C{k + 4}", ms=10, mec="k",
                    label=label)
        if g.log_y:
            from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

            ax.set_yscale("log")
            # plain labels at 1, 2, 5 x 10^k: mathtext minor labels make the layout slow
            ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
            ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(g.names[0])
        ax.set_ylabel(g.names[1])
    axes[0].legend(fontsize=8, loc="best")
    axes[0].set_title("cost J over the two free parameters, with the optimiser's path")
    if len(axes) > 1:
        axes[1].set_title("zoom on the minimum")
    save(fig, path)
    return Path(path)
