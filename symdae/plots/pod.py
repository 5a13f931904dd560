"""Plots of a POD and of POD-mode identification, written straight to files (Agg canvas)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from .base import figure, save

__all__ = ["plot_pod_ratios", "plot_pod_modes", "plot_pod_coefficients", "plot_pod_spectra",
           "plot_scan"]


def plot_pod_ratios(result, path, reference: Mapping | None = None) -> Path:
    """Contribution ratios r_i on a log scale; ``reference`` {mode: ratio} marks other values
    (e.g. the paper's Table 1)."""
    fig, (ax,) = figure(1, 3.5)
    i = np.arange(1, result.n_modes + 1)
    ax.bar(i, np.maximum(result.ratios, 1e-300), color="C0", label="this data")
    if reference:
        ax.plot(list(reference), list(reference.values()), "r_", ms=18, mew=2,
                label="reference")
        ax.legend()
    ax.set_yscale("log")
    ax.set_xticks(i)
    ax.set_xlabel("POM i")
    ax.set_ylabel("contribution ratio r_i")
    ax.grid(alpha=0.3, which="both", axis="y")
    save(fig, path)
    return Path(path)


def plot_pod_modes(result, path, modes: Sequence[int] = (1, 2, 3, 4), positions=None,
                   xlabel: str = "output") -> Path:
    """Mode shapes w_i against the outputs' positions (default their index)."""
    x = np.arange(len(result.outputs)) if positions is None else np.asarray(positions)
    fig, axes = figure(len(modes), 1.8)
    for ax, i in zip(axes, modes):
        ax.plot(x, result.mode(i), "o-", ms=3)
        ax.axhline(0.0, color="k", lw=0.5)
        ax.set_ylabel(f"w_{i} (r = {result.ratios[i - 1]:.2e})", fontsize=8)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel(xlabel)
    save(fig, path)
    return Path(path)


def plot_pod_coefficients(t, curves: Mapping[str, Mapping[str, np.ndarray]], path,
                          t_max: float | None = None) -> Path:
    """One panel per mode: {panel title: {label: a(t)}} (e.g. a_i against abar_i)."""
    fig, axes = figure(len(curves), 2.0)
    keep = slice(None) if t_max is None else np.asarray(t) <= t_max
    for ax, (title, lines) in zip(axes, curves.items()):
        for (label, a), style in zip(lines.items(), ["k-", "C1--", "C0-.", "C2:"]):
            ax.plot(np.asarray(t)[keep], np.asarray(a)[keep], style, lw=0.8, label=label)
        ax.set_ylabel(title, fontsize=8)
        ax.legend(fontsize=7, loc="upper right")
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("t [s]")
    save(fig, path)
    return Path(path)


def plot_pod_spectra(spectra: Sequence, path, natural_frequencies=None,
                     fmax: float | None = None) -> Path:
    """Amplitude spectra of modal coordinates, one panel each, with the natural frequencies
    as vertical lines."""
    fig, axes = figure(len(spectra), 1.8)
    for ax, sp in zip(axes, spectra):
        keep = sp.frequency <= (fmax or sp.frequency[-1])
        ax.semilogy(sp.frequency[keep], np.maximum(sp.amplitude[keep], 1e-300), lw=0.8)
        for f in (natural_frequencies if natural_frequencies is not None else []):
            if fmax is None or f <= fmax:
                ax.axvline(f, color="r", lw=0.5, ls="--")
        peak = sp.peak_frequency()
        ax.set_ylabel(f"|A_{sp.mode}| (peak {peak:.0f} Hz)", fontsize=8)
        top = float(np.max(sp.amplitude[keep]))
        ax.set_ylim(top * 1e-6, top * 3)
        ax.grid(alpha=0.3, which="both")
    axes[-1].set_xlabel("f [Hz] (red: natural frequencies of the linearised model)")
    save(fig, path)
    return Path(path)


def plot_scan(scan_result, labels: Sequence[str], path, truth: float | None = None,
              titles: Mapping | None = None) -> Path:
    """J(parameter) / max J of several costs of one scan, one panel each (log scale)."""
    fig, axes = figure(len(labels), 1.8)
    for ax, label in zip(axes, labels):
        J = scan_result.costs[label]
        ax.semilogy(scan_result.grid, J / np.nanmax(J), lw=0.9)
        if truth is not None:
            ax.axvline(truth, color="k", lw=0.6, ls="--")
        ax.set_ylabel((titles or {}).get(label, label), fontsize=8)
        ax.grid(alpha=0.3, which="both")
    axes[-1].set_xlabel(scan_result.name)
    save(fig, path)
    return Path(path)
