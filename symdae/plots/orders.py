"""Plots of an engine-order identification in a run-up, written straight to files (Agg canvas).

The analogues of the frequency-domain paper's Figs. 11-13: the twist over the run with one
analysis window (the signal, the Hann window and their product), the fitted order against
speed (start, data, identified, band), and other orders before and after the identification.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .base import envelope, figure, save

__all__ = ["plot_window", "plot_order_curve", "plot_orders"]

_STYLES = {"data": ("C2-.", 1.6), "measured": ("C2-.", 1.6), "start": ("C1--", 1.2),
           "identified": ("k^-", 1.0)}


def plot_window(t: np.ndarray, y: np.ndarray, window, path, output: str = "twist",
                speed: float | None = None) -> Path:
    """Fig. 11: y(t) over the run with the window's interval marked (top), and the zoom on the
    window: y, the window eta(t) (right axis) and eta y (bottom)."""
    fig, (ax1, ax2) = figure(2, 3.2)
    te, ye = envelope(t, y)
    ax1.plot(te, ye, "k-", lw=0.5)
    ax1.axvspan(window.start, window.end, color="C0", alpha=0.3,
                label=f"window [{window.start:.4f}, {window.end:.4f}] s"
                + (f" ({speed:g} rpm)" if speed else ""))
    ax1.set_ylabel(f"{output} [rad]")
    ax1.set_xlabel("t [s]")
    ax1.legend(fontsize=8)
    ax1.grid(alpha=0.3)
    ax1.set_title("system output over the run-up and one analysis window")
    sel = (t >= window.start) & (t <= window.end)
    ts, ys = t[sel], y[sel]
    eta = window.eta(ts)
    ax2.plot(ts, ys, "k-", lw=1.0, label=output)
    ax2.plot(ts, eta * ys, "C0-", lw=1.0, label=f"eta {output}")
    ax2.set_ylabel(f"{output} [rad]")
    ax2.set_xlabel("t [s]")
    ax2.grid(alpha=0.3)
    right = ax2.twinx()
    right.plot(ts, eta, "k--", lw=0.8, label=f"{window.shape_name} window (g_c = "
               f"{window.gain:g})")
    right.set_ylabel("window eta(t)")
    right.set_ylim(0, 1.05 * window.gain)
    lines = ax2.get_legend_handles_labels()
    more = right.get_legend_handles_labels()
    ax2.legend(lines[0] + more[0], lines[1] + more[1], fontsize=8, loc="lower right")
    save(fig, path)
    return Path(path)


def plot_order_curve(speeds: np.ndarray, curves: Mapping, band: tuple, path,
                     order: float = 6, output: str = "twist") -> Path:
    """Fig. 12: the amplitude of ``order`` against speed ({label: curve}) with the band."""
    fig, (ax,) = figure(1, 4.0)
    for k, (label, c) in enumerate(curves.items()):
        style, lw = _STYLES.get(label, (f"C{k + 3}-", 1.0))
        ax.plot(speeds, np.asarray(c) * 1e3, style, lw=lw, ms=4, label=label)
    ax.axvspan(band[0], band[1], color="C0", alpha=0.12,
               label=f"band [{band[0]:g}, {band[1]:g}] rpm")
    ax.set_xlabel("speed [rpm]")
    ax.set_ylabel(f"order {order:g} of {output} [mrad]")
    ax.set_title(f"vibration angle of the {order:g}th engine order")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    save(fig, path)
    return Path(path)


def plot_orders(speeds: np.ndarray, curves: Mapping, path, output: str = "twist") -> Path:
    """Fig. 13: other orders before and after ({order: {label: curve}}), one panel each."""
    fig, axes = figure(len(curves), 2.6)
    for ax, (order, byl) in zip(axes, curves.items()):
        for k, (label, c) in enumerate(byl.items()):
            style, lw = _STYLES.get(label, (f"C{k + 3}-", 1.0))
            ax.plot(speeds, np.asarray(c) * 1e3, style, lw=lw, ms=3, label=label)
        ax.set_ylabel(f"order {order:g} [mrad]")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_title(f"engine orders of {output} before and after the identification")
    axes[-1].set_xlabel("speed [rpm]")
    save(fig, path)
    return Path(path)
