"""``symdae identify``: identify parameters from data (or synthetic data from the model's
nominal values) in the time domain, the frequency domain, on POD modes or on engine orders;
write report.json, convergence.png, fit.png."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ..atomic import write_text
from . import frequency, measurement, orders, pod as cli_pod
from .common import assignment, bound, identify_estimate, load, names, scenario_args

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    p = sub.add_parser(
        "identify", help="identify parameters from data (or synthetic data from the "
        "model's nominal values); write report.json, convergence.png, fit.png")
    scenario_args(p)
    p.add_argument("--data", type=Path, help="CSV file with a header row: a time column and "
                   "one column per fitted output. Without it, synthetic data are simulated "
                   "from the model's nominal parameter values (the 'true' values)")
    p.add_argument("--time-column", default="t", help="name of the time column (default t)")
    p.add_argument("--data-h", type=float, help="step of the synthetic data (default: --h; "
                   "a finer step shows the discretisation bias)")
    p.add_argument("--outputs", type=names, help="comma-separated outputs to fit (default: "
                   "the model file's OUTPUTS, else the data's columns that are outputs)")
    p.add_argument("--free", type=names, help="comma-separated parameters to identify "
                   "(default: the model file's FREE)")
    p.add_argument("--start", action="append", type=assignment, default=[],
                   metavar="NAME=VALUE", help="start value of a free parameter (default: the "
                   "model file's START, else the nominal value)")
    p.add_argument("--bound", action="append", type=bound, default=[],
                   metavar="NAME=LOWER:UPPER", help="bounds of a free parameter")
    p.add_argument("--method", default="auto",
                   choices=["auto", "L-BFGS-B", "BFGS", "trust-constr", "least_squares", "lm",
                            "gauss-newton-plain"],
                   help="auto (default): least_squares for least-squares costs with up to 20 "
                   "free parameters, else L-BFGS-B; L-BFGS-B, BFGS, trust-constr: "
                   "scipy.optimize.minimize with the adjoint gradient; least_squares "
                   "(trust-region Gauss-Newton, bounds), lm (Levenberg-Marquardt), "
                   "gauss-newton-plain: on the residuals with the exact tangent Jacobian")
    p.add_argument("--noise", action="append", default=[],
                   metavar="[NAME=]SIGMA", help="noise standard deviation of a fitted output "
                   "(repeatable), or one for all, for the standard errors in the report "
                   "(default: estimated from the residual)")
    p.add_argument("--data-noise", action="append", default=[], metavar="[NAME=]SIGMA",
                   help="synthetic data only: add Gaussian noise of this standard deviation "
                   "to a fitted output (repeatable), or one for all (noise-free twin data "
                   "have no noise level to estimate standard errors from)")
    p.add_argument("--seed", type=int, default=0, help="seed of --data-noise (default 0)")
    p.add_argument("--max-iterations", type=int, default=500, help="iteration limit")
    p.add_argument("--segment-length", type=float, metavar="SECONDS",
                   help="multiple shooting (time domain): fit segments of this length, each "
                   "from its own start state, with their continuity gaps driven to zero, "
                   "then polish by single shooting; reaches the fit of a long record from "
                   "start values far off (about half a period of the slowest motion)")
    p.add_argument("--quadrature", default="left", choices=["left", "trapezoid", "sum"],
                   help="quadrature weights of the least-squares cost (default: left, the "
                   "paper's eta_i = h for i < N)")
    p.add_argument("--quiet", action="store_true", help="no progress line per iteration")
    p.add_argument("--domain", choices=["time", "frequency", "pod", "orders"], default="time",
                   help="time: least squares on the outputs (default); frequency: Fourier "
                   "amplitudes in a band (the frequency-domain paper's eq. 5; BFGS unless "
                   "--method is given); pod: least squares on the coefficients of proper "
                   "orthogonal modes of the outputs; orders: engine orders against speed in "
                   "a run-up (eq. 5 over speed points)")
    cli_pod.add_arguments(p)
    frequency.add_frequency_options(p, time_domain=run)
    orders.add_order_options(p)
    measurement.add_measurement_options(p)      # --channels, --offset, --tacho, ...
    domains = p.get_default("func")

    def checked(args):
        # the frequency and order domains run their own commands: refused before any of them
        if args.segment_length is not None and args.domain != "time":
            from ..errors import InputError
            raise InputError(f"--segment-length (multiple shooting) fits least squares in the "
                             f"time domain; it does not work with --domain {args.domain}")
        return domains(args)

    p.set_defaults(func=checked)


def run(args) -> int:
    import numpy as np

    from ..data.measurement import Measurement
    from ..errors import InputError, UnknownNameError
    from ..identification.experiment import Experiment
    from ..identification.identify import identify
    from ..identification.shooting import MultipleShooting
    from ..identification.statistics import noise_from_text
    from ..plots.base import plot_convergence, plot_fit
    from .measurement import load_data

    model, ns, system, scenario, out = load(args)
    fixed = dict(args.param)
    free = args.free or list(ns.get("FREE", []))
    if not free:
        raise InputError("no free parameters: pass --free (or define FREE in the model file)")
    start = {k: v for k, v in dict(ns.get("START", {})).items() if k in free}
    start.update(dict(args.start))
    nominal = dict(zip(model.parameter_names, model.nominal_values))
    for k in free:
        if k not in nominal:
            raise UnknownNameError(f"unknown parameter {k!r}; parameters: "
                                   f"{model.parameter_names}")
        start.setdefault(k, nominal[k])

    truth = None
    if args.data is not None:
        data = load_data(args, scenario, lambda: system.simulate(scenario, params={**fixed,
                                                                                 **start}))
        outputs = args.outputs or list(ns.get("OUTPUTS", [])) or \
            [c for c in data.values if c in model.output_names]
        _check_memory(args, system, scenario, outputs, free, model.name)
        data_info = {"source": str(args.data), "synthetic": False}
    else:
        outputs = args.outputs or list(ns.get("OUTPUTS", [])) or model.output_names
        _check_memory(args, system, scenario, outputs, free, model.name)
        true_params = {**fixed, **dict(args.data_param)}
        truth = {k: true_params.get(k, nominal[k]) for k in free}
        data_sc = scenario.replace(h=args.data_h or scenario.h)
        true_run = system.simulate(data_sc, params=true_params)
        data = Measurement.from_trajectory(true_run, outputs)
        del true_run        # its states are not needed beside the data
        data_noise = noise_from_text(args.data_noise, outputs) or {}
        rng = np.random.default_rng(args.seed)
        for name, sigma in data_noise.items():
            if name not in data.values:
                raise InputError(f"--data-noise {name}: not a fitted output ({outputs})")
            data.values[name] = data.values[name] + sigma * rng.standard_normal(data.t.size)
        data.to_csv(out / "data.csv")
        data_info = {"source": str(out / "data.csv"), "synthetic": True, "data_h": data_sc.h,
                     "true_values": truth, "noise": data_noise, "seed": args.seed}
    cost = cli_pod.make_cost(args, data, outputs)
    data_info["compared"] = compared = _coverage(cost, scenario)
    for name, c in compared.items():
        lo, hi = c["span"]
        if lo > scenario.t0 + scenario.h or hi < scenario.t_end - scenario.h:
            print(f"note: the data of {name!r} cover [{lo:g}, {hi:g}] s of [{scenario.t0:g}, "
                  f"{scenario.t_end:g}] s; the cost compares there ({c['samples']} samples)",
                  file=sys.stderr)
    exp = Experiment(system, cost, scenario, params=fixed, name=model.name)
    start, bounds, scan_info = cli_pod.search(args, exp, free, start, dict(args.bound), out)
    print(f"identifying {free} of {model.name} from {data_info['source']} "
          f"(outputs {outputs}, h = {scenario.h:g}, t_end = {scenario.t_end:g}, "
          f"alpha = {scenario.alpha:g})",
          file=sys.stderr)
    noise = noise_from_text(args.noise, outputs)
    result = identify(exp, free, start, bounds=bounds or None, method=args.method,
                      max_iterations=args.max_iterations, progress=not args.quiet,
                      noise=noise, shooting=None if args.segment_length is None
                      else MultipleShooting(args.segment_length))

    report = {"model": model.name,
              "scenario": {"t_end": scenario.t_end, "h": scenario.h, "alpha": scenario.alpha,
                           "t0": scenario.t0, "fixed_parameters": fixed},
              "data": data_info, "outputs": outputs, "result": result.to_dict(),
              "cost": {"domain": args.domain, "scan": scan_info,
                       **cli_pod.write_extras(args, cost, data, outputs, out,
                                              ns.get("SENSOR_POSITIONS"))}}
    if truth is not None:
        report["relative_error"] = result.relative_error(truth)
        report["verdict"] = _verdict(result, report["relative_error"], truth)
    write_text(out / "report.json", json.dumps(report, indent=1, default=float))
    plot_convergence(result, out / "convergence.png", reference=truth)
    t0 = time.perf_counter()
    runs = {"start": exp.simulate(start), "identified": exp.simulate(result.values)}
    fits = {}
    for output in outputs:                   # every fitted output, at its measured samples
        where = data.align(runs["start"].t, output)
        fits[output] = (where.t, where.values,
                        {k: where.at(tr.outputs[output]) for k, tr in runs.items()})
    written = [out / "report.json", out / "convergence.png", out / "fit.png"]
    if args.domain == "pod":
        written.append(_pod_figures(system, cost, runs, fits, out, model.units))
    else:
        plot_fit(fits, out / "fit.png", model.units)
    print(result.summary())
    if truth is not None:
        worst = max(report["relative_error"].values())
        print(f"largest relative error against the true values: {worst:.3e}")
        print(report["verdict"])
    print(f"wrote {', '.join(str(w) for w in written)} "
          f"({time.perf_counter() - t0:.2f} s for the plots)")
    return 0


def _check_memory(args, system, scenario, outputs, free, name) -> None:
    """Refuse at once a run that cannot fit: the cost of this --domain with stand-in data
    (what it allocates does not depend on the data)."""
    stand_in = cli_pod.make_cost(args, {o: None for o in outputs}, outputs)
    identify_estimate(system, scenario, [stand_in], free, args.method, signals=len(outputs),
                      data_h=args.data_h if args.data is None else None, name=name).check()


def _pod_figures(system, cost, runs, fits, out, units):
    """--domain pod: what the cost fits, the POD coefficients a_i(t) of the data, the start
    and the identified model (coefficients.png), and the outputs (fit.png) titled as what
    they are: with uncertain joints the signals need not match where the modes do."""
    from ..plots.base import fit_figure, save
    from ..plots.pod import plot_pod_coefficients

    curves = {}
    for label, tr in runs.items():
        cost.evaluate(system, tr)
        rec = cost.last
        for j, i in enumerate(rec.modes):
            panel = curves.setdefault(f"a_{i}", {"data": rec.data_coefficients[:, j]})
            panel[label] = rec.coefficients[:, j]
    where, _ = cost.data_pod(next(iter(runs.values())).t)
    # the first tenth of the run: a mode's coefficient oscillates too fast to show over all
    plot_pod_coefficients(where.t, curves, out / "coefficients.png",
                          t_max=where.t[0] + 0.1 * (where.t[-1] - where.t[0]))
    fig = fit_figure(fits, units)
    fig.suptitle(f"the outputs; the cost fits POD modes {list(cost.modes)} "
                 "(coefficients.png), so these need not match", fontsize=9)
    save(fig, out / "fit.png")
    return out / "coefficients.png"


# synthetic data: a converged fit this far from the true values is not the answer
FAR_FROM_TRUTH = 0.01


def _verdict(result, errors: dict, truth: dict) -> str:
    """What a run on synthetic data shows: the optimiser's "success" says only that it
    converged; against the true values it may have converged to the wrong point. With noise,
    the distance is measured in standard errors."""
    worst = max(errors, key=lambda k: errors[k])
    if result.verdict is not None and result.verdict.local_minimum:
        return f"{result.verdict.message}; {worst} is {errors[worst]:.1%} off"
    if not result.success:
        return f"not converged ({result.message}); {worst} is {errors[worst]:.1%} off"
    se = result.statistics.standard_errors if result.statistics is not None else None
    if se:
        far = {k: abs(result.values[k] - truth[k]) / se[k] for k in errors if se.get(k)}
        k = max(far, key=lambda name: far[name])
        if far[k] <= 3.0:
            return "converged to the true values within 3 standard errors"
        return (f"converged, but {k} lies {far[k]:.1f} standard errors from its true value: "
                "a local minimum or a biased fit; try other --start values")
    if errors[worst] <= FAR_FROM_TRUTH:
        return "converged to the true values"
    return (f"converged, but {worst} is {errors[worst]:.1%} from its true value: a local "
            "minimum or a direction the data do not determine; try other --start values (or "
            "a scan) and check the statistics' warnings")


def _coverage(cost, scenario) -> dict:
    """{output: samples compared, the interval they cover, how} of the least-squares terms."""
    from ..identification.residuals import least_squares_terms

    out = {}
    for term in least_squares_terms(cost)[0]:
        out.update(term.coverage(scenario.times))
    return out
