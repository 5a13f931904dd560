"""Which POD modes identify a flexible beam's stiffness
====================================================

The POD-cost study on the flexible beam (spec pod.md section 5): which proper
orthogonal modes identify the flexural rigidity EI when the supports are uncertain, and why.

    python examples/pod_flexible_beam.py [--out results/pod-beam] [--step 2.5] [--workers 2]

1. Synthetic data from the "true joints" beam (k_s = 2000 N/m, c_s = 2 N s/m, EI = 500 N m^2);
   their POD: contribution ratios against the paper's Table 1.
2. Natural frequencies of the linearised model and the Fourier analysis of every POM
   coefficient (the paper's announced study): FFT peak, best-MAC natural mode.
3. Twin experiment with uncertain joints (k_s = 2400, c_s = 1.0): J_i^POD(EI) scanned on
   [250, 1000], the best grid point refined with the exact gradient, for POMs 1..11, both
   bases, and plain least squares on all 11 outputs. A Table-1-style result.
4. Plain local runs from EI0 = 400 (the documented failure mode of a local optimiser).
5. Control with matched supports: every POM and least squares give 500.
6. How the spectra move between the start EI and the identified EI.

Writes report.md (tables, verdicts against the spec's bands), report.json and PNG plots.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import symdae
from symdae import Experiment, Measurement, PODCost, natural_modes, pod
from symdae.analysis.pod import PODWarning, mac
from symdae.costs.time_domain import LeastSquares
from symdae.identification.gridsearch import refine, scan
from symdae.plots.pod import (
    plot_pod_coefficients,
    plot_pod_modes,
    plot_pod_ratios,
    plot_pod_spectra,
    plot_scan,
)

TRUE_EI = 500.0
PAPER = {1: (9.96e-1, "–"), 2: (2.05e-3, "–"), 3: (1.77e-3, "502"), 4: (3.81e-4, "500"),
         7: (1.40e-5, "500"), 11: (9.46e-7, "500")}
SPEC_FREQS = [6.35, 11.31, 53.54, 143.66, 280.95]
BETA_L = [4.7300, 7.8532, 10.9956, 14.1372]      # free-free Euler-Bernoulli beam


def label(i, basis):
    return f"POM {i} ({basis})"


def fail_mark(value, at_edge):
    """'–' as in Table 1: an estimate at the scan edge or more than 10 % off (spec 6, #12)."""
    return at_edge or abs(value - TRUE_EI) / TRUE_EI > 0.10


def fmt_ei(value, at_edge):
    return "–" if fail_mark(value, at_edge) else f"{value:.4f}"


def scan_and_refine(system, scenario, costs, grid, params, workers):
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PODWarning)
        ex = ThreadPoolExecutor(workers) if workers > 1 else None
        try:
            s = scan(system, scenario, costs, "EI", grid, params=params, executor=ex)
        finally:
            if ex is not None:
                ex.shutdown()
    scan_s = time.perf_counter() - t0
    rows = {}
    for name, cost in costs.items():
        m = s.minimum(name)
        k = m.index
        lo, hi = s.grid[max(k - 1, 0)], s.grid[min(k + 1, len(s.grid) - 1)]
        res = refine(Experiment(system, cost, scenario, params=params), "EI", m.value, lo, hi)
        value = res.values["EI"]
        rows[name] = dict(grid_min=m.value, at_edge=m.at_edge, basin=m.basin,
                          refined=value, rel_error=(value - TRUE_EI) / TRUE_EI,
                          simulations=res.n_simulations, failed_points=len(s.failures[name]),
                          first_failure=next(iter(s.failures[name].items()), None))
    warned = sorted({str(w.message).split(":")[0] for w in caught})
    return s, rows, scan_s, warned


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("results/pod-beam"))
    ap.add_argument("--step", type=float, default=2.5, help="scan step in N m^2 (spec: 2.5)")
    ap.add_argument("--workers", type=int, default=1, help="threads for the scans")
    args = ap.parse_args(argv)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()

    def stage(text):            # the study takes minutes: say where it is
        print(f"[{time.perf_counter() - t_start:6.1f} s] {text}", file=sys.stderr, flush=True)

    stage("compiling the flexible beam (cached after the first run)")
    model, ns = symdae.load_model("flexible_beam")
    system = symdae.compile_model(model)
    sc, outs, mis = ns["SCENARIO"], ns["OUTPUTS"], ns["UNCERTAIN_JOINTS"]
    x_sensor = np.linspace(0.0, 1.0, len(outs))
    report = {"scenario": {"t_end": sc.t_end, "h": sc.h, "alpha": sc.alpha, "rtol": sc.rtol},
              "uncertain_joints": mis}
    md = ["# POD-mode identification of EI on the flexible beam", "",
          f"Model `flexible_beam` (10 Hermite elements, 11 sensors w0..w10), h = {sc.h:g} s, "
          f"T = {sc.t_end:g} s, alpha = {sc.alpha:g}. Data: EI = 500, k_s = 2000, c_s = 2.0. "
          f"Identification model: k_s = {mis['ks']:g}, c_s = {mis['cs']:g} (uncertain joints).",
          ""]
    verdicts = []

    def verdict(name, ok, detail):
        verdicts.append((name, bool(ok), detail))

    # ---- 1. data and their POD
    stage("1. data and their POD")
    truth = system.simulate(sc)
    data = Measurement.from_trajectory(truth, outs)
    P = pod(data, outs)
    r = P.ratios
    report["ratios"] = r.tolist()
    md += ["## 1. Contribution ratios of the data", "",
           "| POM | " + " | ".join(str(i) for i in range(1, 12)) + " |",
           "|---" * 12 + "|",
           "| r_i | " + " | ".join(f"{x:.3e}" for x in r) + " |",
           "| paper (Table 1) | " + " | ".join(f"{PAPER[i][0]:.2e}" if i in PAPER else ""
                                              for i in range(1, 12)) + " |", ""]
    verdict("r_1 in [0.90, 0.96]", 0.90 <= r[0] <= 0.96, f"{r[0]:.4f}")
    verdict("r_3, r_4 in [3e-4, 3e-3]", all(3e-4 <= r[k] <= 3e-3 for k in (2, 3)),
            f"{r[2]:.3e}, {r[3]:.3e}")
    verdict("ratios strictly decreasing, sum 1", bool(np.all(np.diff(r) < 0))
            and abs(r.sum() - 1) < 1e-14, f"sum - 1 = {r.sum() - 1:.1e}")
    plot_pod_ratios(P, out / "ratios.png", {i: v[0] for i, v in PAPER.items()})
    plot_pod_modes(P, out / "modes.png", modes=(1, 2, 3, 4, 7, 11), positions=x_sensor,
                   xlabel="sensor position x [m]")

    # ---- 2. natural frequencies and the Fourier analysis of the POM coefficients
    stage("2. natural frequencies and the Fourier analysis of the POM coefficients")
    nm_true = natural_modes(system)
    f_true = nm_true.frequencies
    shapes = nm_true.at_outputs(outs)
    M = mac(P.modes, shapes)
    rhoA, EI = 2.355, 500.0
    f_ff = [(b ** 2) / (2 * math.pi) * math.sqrt(EI / rhoA) for b in BETA_L]
    spectra = [P.spectrum(i) for i in range(1, 12)]
    md += ["## 2. POM coefficients against natural frequencies (the paper's announced study)",
           "",
           "Undamped natural frequencies of the linearised true model [Hz]: "
           + ", ".join(f"{f:.2f}" for f in f_true[:10]) + ". Damping ratios: "
           + ", ".join(f"{z:.4f}" for z in nm_true.damping_ratios[:8]) + ". Free-free "
           "Euler-Bernoulli sanity line (no supports): "
           + ", ".join(f"{f:.1f}" for f in f_ff) + " Hz.", "",
           "Hann window (amplitude-corrected), zero-padded x8, whole record. MAC between the "
           "data's w_i and the natural modes at the 11 sensors.", "",
           "| POM | r_i | FFT peak of abar_i [Hz] | 2nd/3rd peaks [Hz] | best-MAC mode (f_n) | MAC |",
           "|---|---|---|---|---|---|"]
    rows2 = []
    for i, sp in enumerate(spectra, start=1):
        pk = sp.peaks(3)
        j = int(np.argmax(M[i - 1]))
        rows2.append(dict(mode=i, ratio=float(r[i - 1]), peak=float(pk[0]),
                          peaks=pk.tolist(), mac_mode=j + 1, f_mac=float(f_true[j]),
                          mac=float(M[i - 1, j])))
        md.append(f"| {i} | {r[i - 1]:.2e} | {pk[0]:.1f} | "
                  + ", ".join(f"{x:.1f}" for x in pk[1:]) + f" | {j + 1} ({f_true[j]:.2f} Hz) | "
                  f"{M[i - 1, j]:.3f} |")
    md.append("")
    report["natural_frequencies"] = f_true.tolist()
    report["fourier"] = rows2
    verdict("f_1..5 = 6.35, 11.31, 53.54, 143.66, 280.95 Hz +- 0.01",
            all(abs(a - b) <= 0.01 for a, b in zip(f_true, SPEC_FREQS)),
            ", ".join(f"{x:.3f}" for x in f_true[:5]))
    verdict("FFT peak of abar_i within 2 Hz of f_i, i = 1..5",
            all(abs(rows2[k]["peak"] - f_true[k]) <= 2.0 for k in range(5)),
            ", ".join(f"{rows2[k]['peak']:.1f}" for k in range(5)))
    plot_pod_spectra(spectra[:8], out / "spectra_data.png", f_true, fmax=1200)

    # ---- 3. twin experiment with uncertain joints: scan + refine
    stage("3. twin experiment with uncertain joints: scan + refine")
    costs = {label(i, b): PODCost(data, outs, mode=i, basis=b)
             for i in range(1, 12) for b in ("measured", "simulated")}
    costs["least squares"] = LeastSquares(data, outs)
    grid = np.arange(250.0, 1000.0 + 1e-9, args.step)
    s_mis, rows3, scan_s, warned = scan_and_refine(system, sc, costs, grid, mis, args.workers)
    report["mismatch"] = rows3
    md += ["## 3. Uncertain joints: scan EI on [250, 1000] (step "
           f"{args.step:g}), refine the best grid point", "",
           f"{len(grid)} simulations for all {len(costs)} costs ({scan_s:.1f} s). '–': the "
           "grid minimum lies on the scan edge or the refined EI is > 10 % off (spec 6, #12). "
           "Basin: grid interval around the minimum on which J decreases monotonically "
           "towards it.", "",
           "| POM i | r_i | measured basis: grid min / refined EI | basin | simulated basis: "
           "grid min / refined EI | basin | paper |", "|---|---|---|---|---|---|---|"]
    for i in range(1, 12):
        a, b = rows3[label(i, "measured")], rows3[label(i, "simulated")]
        fails = f" ({b['failed_points']} grid points without matching mode)" \
            if b["failed_points"] else ""
        md.append(f"| {i} | {r[i - 1]:.2e} | {a['grid_min']:g} / "
                  f"{fmt_ei(a['refined'], a['at_edge'])} | [{a['basin'][0]:g}, "
                  f"{a['basin'][1]:g}] | {b['grid_min']:g} / {fmt_ei(b['refined'], b['at_edge'])}"
                  f" | [{b['basin'][0]:g}, {b['basin'][1]:g}]{fails} | "
                  f"{PAPER[i][1] if i in PAPER else ''} |")
    ls = rows3["least squares"]
    md += [f"| full LS | – | {ls['grid_min']:g} / {fmt_ei(ls['refined'], ls['at_edge'])} | "
           f"[{ls['basin'][0]:g}, {ls['basin'][1]:g}] | | | |", ""]
    if warned:
        md += ["Near-degenerate warnings during the scan (simulated basis): "
               + "; ".join(warned) + ".", ""]
    md += ["Table 1 style (simulated basis, as the paper's eq. 2):", "",
           "| POM i | " + " | ".join(str(i) for i in PAPER) + " | full LS |",
           "|---" * (len(PAPER) + 2) + "|",
           "| contribution ratio | " + " | ".join(f"{r[i - 1]:.2e}" for i in PAPER) + " | |",
           "| EI (this study, simulated) | " + " | ".join(
               fmt_ei(rows3[label(i, 'simulated')]["refined"],
                      rows3[label(i, 'simulated')]["at_edge"]) for i in PAPER)
           + f" | {fmt_ei(ls['refined'], ls['at_edge'])} |",
           "| EI (this study, measured) | " + " | ".join(
               fmt_ei(rows3[label(i, 'measured')]["refined"],
                      rows3[label(i, 'measured')]["at_edge"]) for i in PAPER) + " | |",
           "| paper's ratio | " + " | ".join(f"{PAPER[i][0]:.2e}" for i in PAPER) + " | |",
           "| paper's EI | " + " | ".join(PAPER[i][1] for i in PAPER) + " | |", ""]

    def rel(name):
        return abs(rows3[name]["refined"] - TRUE_EI) / TRUE_EI

    p1 = [rows3[label(1, b)] for b in ("measured", "simulated")] + [ls]
    verdict("POM 1 and full LS fail (edge or EI < 300)",
            all(x["at_edge"] or x["refined"] < 300 for x in p1),
            ", ".join(f"{x['refined']:.1f}{' (edge)' if x['at_edge'] else ''}" for x in p1))
    p2 = [rows3[label(2, b)] for b in ("measured", "simulated")]
    verdict("POM 2 at the upper scan edge", all(x["at_edge"] and x["grid_min"] == grid[-1]
                                                for x in p2),
            ", ".join(f"{x['grid_min']:g}" for x in p2))
    for i, band, src in ((3, 0.02, "spec/issue"), (4, 0.002, "spec"), (4, 0.003, "issue"),
                         (7, 0.002, "spec"), (7, 0.003, "issue")):
        vals = [rel(label(i, b)) for b in ("measured", "simulated")]
        verdict(f"POM {i} within {band:.1%} ({src})", max(vals) <= band,
                ", ".join(f"{v:.2e}" for v in vals))
    for band, src in ((0.002, "spec"), (0.01, "issue")):
        v = rel(label(11, "simulated"))
        verdict(f"POM 11 simulated within {band:.1%} ({src})", v <= band, f"{v:.2e}")
    m11 = rows3[label(11, "measured")]
    md += [f"POM 11 with the measured basis (reported, not asserted): refined EI "
           f"{m11['refined']:.4f}.", ""]
    plot_scan(s_mis, [label(i, "simulated") for i in (1, 2, 3, 4, 7, 11)] + ["least squares"],
              out / "scan_mismatch.png", TRUE_EI)
    plot_scan(s_mis, [label(i, "measured") for i in (1, 2, 3, 4, 7, 11)],
              out / "scan_mismatch_measured.png", TRUE_EI)

    # ---- 4. plain local runs from EI0 = 400
    stage("4. plain local runs from EI0 = 400")
    md += ["## 4. Plain local runs from EI0 = 400 (L-BFGS-B, bounds [100, 2000], w = EI / 400)",
           "", "| cost | EI found | J / J0 | simulations |", "|---|---|---|---|"]
    local = {}
    for name in [label(i, b) for i in (1, 2, 3, 4, 7, 11) for b in ("measured", "simulated")] \
            + ["least squares"]:
        exp = Experiment(system, costs[name], sc, params=mis)
        try:
            res = refine(exp, "EI", 400.0, 100.0, 2000.0)
            local[name] = dict(EI=res.values["EI"], J_rel=res.cost,
                               simulations=res.n_simulations)
            md.append(f"| {name} | {res.values['EI']:.2f} | {res.cost:.3g} | "
                      f"{res.n_simulations} |")
        except symdae.SymdaeError as exc:
            local[name] = dict(error=str(exc).splitlines()[0])
            md.append(f"| {name} | error: {str(exc).splitlines()[0][:80]} | | |")
    report["local_from_400"] = local
    md.append("")

    # ---- 5. control: matched supports
    stage("5. control: matched supports")
    grid_c = grid + args.step / 2                       # 500 is not a grid point
    grid_c = grid_c[grid_c <= 1000.0]
    _, rows5, scan_c, _ = scan_and_refine(system, sc, costs, grid_c, {}, args.workers)
    report["control"] = rows5
    worst = max(abs(x["rel_error"]) for x in rows5.values())
    md += ["## 5. Control: matched supports (k_s = 2000, c_s = 2.0)", "",
           f"Scan on {grid_c[0]:g} ... {grid_c[-1]:g} (step {args.step:g}; 500 is not a grid "
           f"point), refine between the neighbours of the grid minimum ({scan_c:.1f} s).", "",
           "| cost | grid min | refined EI | relative error |", "|---|---|---|---|"]
    for name, x in rows5.items():
        md.append(f"| {name} | {x['grid_min']:g} | {x['refined']:.10g} | "
                  f"{x['rel_error']:.1e} |")
    md.append("")
    verdict("control: every POM and LS give 500 to 1e-6", worst <= 1e-6, f"worst {worst:.1e}")

    # ---- 6. spectra of the identification model at the start and at the identified EI
    stage("6. spectra of the identification model at the start and at the identified EI")
    ei_id = rows3[label(4, "simulated")]["refined"]
    md += ["## 6. Why the higher modes work", "",
           f"Natural frequencies [Hz] of the true model, of the identification model at the "
           f"start EI = 400 and at EI = {ei_id:.2f} (identified from POM 4), and the FFT peaks "
           "of the corresponding POM coefficients (data; simulation at 400; simulation at the "
           "identified EI).", "",
           "| mode | f_n true | f_n model @400 | f_n model @id | peak abar_i | peak a_i @400 | "
           "peak a_i @id |", "|---|---|---|---|---|---|---|"]
    nm400 = natural_modes(system, params={**mis, "EI": 400.0}).frequencies
    nmid = natural_modes(system, params={**mis, "EI": ei_id}).frequencies
    P400 = pod(system.simulate(sc, params={**mis, "EI": 400.0}), outs)
    Pid = pod(system.simulate(sc, params={**mis, "EI": ei_id}), outs)
    for i in range(1, 9):
        md.append(f"| {i} | {f_true[i - 1]:.2f} | {nm400[i - 1]:.2f} | {nmid[i - 1]:.2f} | "
                  f"{spectra[i - 1].peak_frequency():.1f} | "
                  f"{P400.spectrum(i).peak_frequency():.1f} | "
                  f"{Pid.spectrum(i).peak_frequency():.1f} |")
    md += ["", "Reading: POMs 1 and 2 are bounce and pitch on the end springs; their "
           "frequencies are set by k_s (and c_s), hardly by EI, so with uncertain joints their "
           "coefficients cannot be matched by any EI and the fit drives EI to an edge. POMs "
           ">= 3 are bending modes: their frequencies scale with sqrt(EI) and depend only "
           "weakly on the supports, so even a tiny contribution ratio carries a clean, "
           "EI-dominated signal, and the phase drift 2 pi df T over the 1 s record makes the "
           "cost minimum sharp. Full least squares is dominated by the rigid-body motion (r_1 "
           "= 0.93) and fails like POM 1.", ""]
    curves = {f"a_{i}": {"data": P.coefficient(i), "model @400": P400.coefficient(i),
                         f"model @{ei_id:.1f}": Pid.coefficient(i)} for i in (1, 3, 7)}
    plot_pod_coefficients(P.t, curves, out / "coefficients.png", t_max=0.1)
    plot_pod_spectra([Pid.spectrum(i) for i in range(1, 9)], out / "spectra_identified.png",
                     nmid, fmax=1200)

    md += ["## Verdicts against the spec's bands (section 7.3) and the issue's", "",
           "| check | result | value |", "|---|---|---|"]
    md += [f"| {n} | {'PASS' if ok else 'MISS'} | {d} |" for n, ok, d in verdicts]
    total = time.perf_counter() - t_start
    md += ["", f"Total run time {total:.0f} s. Plots: ratios.png, modes.png, spectra_data.png, "
           "scan_mismatch.png, scan_mismatch_measured.png, coefficients.png, "
           "spectra_identified.png.", ""]
    report["verdicts"] = [dict(check=n, ok=ok, value=d) for n, ok, d in verdicts]
    (out / "report.md").write_text("\n".join(md))
    (out / "report.json").write_text(json.dumps(report, indent=1, default=float))
    print("\n".join(md))
    return 0 if all(ok for _, ok, _ in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
