"""Command line: ``symdae simulate``, ``symdae identify``, ``symdae design`` and ``symdae models``.

A model is a bundled model's name (``symdae models`` lists them) or the path of a Python file
that defines ``model``. The file may also define ``START`` and ``FREE`` (start values and free
parameters for identification), ``OUTPUTS`` (outputs to fit) and ``SCENARIO`` (a
:class:`symdae.Scenario`, or a dict of its fields); command-line options override them.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from . import cli_pod
from ._version import __version__


__all__ = ["main", "build_parser"]


def _number(text: str, what: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what}: {text!r} is not a number") from None
    if not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"{what}: {text!r} is not finite")
    return x


def _assignment(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name.strip(), _number(value, name)


def _bound(text: str) -> tuple[str, tuple]:
    name, sep, rng = text.partition("=")
    lo, sep2, hi = rng.partition(":")
    if not sep or not sep2 or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=LOWER:UPPER (either may be empty), "
                                         f"got {text!r}")
    return name.strip(), (None if not lo.strip() else _number(lo, name),
                          None if not hi.strip() else _number(hi, name))


def _names(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def _scenario_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="bundled model name (see 'symdae models') or path to a .py "
                                 "file defining `model`")
    p.add_argument("--t-end", type=float, help="end time in s (default: the model file's "
                                               "SCENARIO, else 1.0)")
    p.add_argument("--h", type=float, help="fixed time step in s (default: SCENARIO, else 1e-3)")
    p.add_argument("--alpha", type=float, help="HHT alpha in [-1/3, 0] (default: SCENARIO, "
                                               "else -0.1)")
    p.add_argument("--param", "-p", action="append", type=_assignment, default=[],
                   metavar="NAME=VALUE", help="override a parameter value (repeatable)")
    p.add_argument("--out-dir", type=Path, help="folder for the written files (default: "
                                                "results/<command>-<model>)")
    p.add_argument("--cache-dir", type=Path, help="compile cache (default: generated/ of a "
                                                  "source checkout, else ~/.cache/symdae)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="symdae", description="Simulate and identify SymPy multibody models with a "
        "compiled HHT integrator and exact discrete-adjoint gradients.")
    parser.add_argument("--version", action="version", version=f"symdae {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("models", help="list the bundled models")
    p.set_defaults(func=_cmd_models)

    p = sub.add_parser("simulate", help="simulate a model; write a CSV, a plot and a summary")
    _scenario_args(p)
    p.add_argument("--no-plot", action="store_true", help="do not write outputs.png")
    p.set_defaults(func=_cmd_simulate)

    p = sub.add_parser(
        "identify", help="identify parameters from data (or synthetic data from the "
        "model's nominal values); write report.json, convergence.png, fit.png")
    _scenario_args(p)
    p.add_argument("--data", type=Path, help="CSV file with a header row: a time column and "
                   "one column per fitted output. Without it, synthetic data are simulated "
                   "from the model's nominal parameter values (the 'true' values)")
    p.add_argument("--time-column", default="t", help="name of the time column (default t)")
    p.add_argument("--data-h", type=float, help="step of the synthetic data (default: --h; "
                   "a finer step shows the discretisation bias)")
    p.add_argument("--outputs", type=_names, help="comma-separated outputs to fit (default: "
                   "the model file's OUTPUTS, else the data's columns that are outputs)")
    p.add_argument("--free", type=_names, help="comma-separated parameters to identify "
                   "(default: the model file's FREE)")
    p.add_argument("--start", action="append", type=_assignment, default=[],
                   metavar="NAME=VALUE", help="start value of a free parameter (default: the "
                   "model file's START, else the nominal value)")
    p.add_argument("--bound", action="append", type=_bound, default=[],
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
    p.add_argument("--max-iterations", type=int, default=500, help="iteration limit")
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
    cli_pod.add_arguments(p, _assignment)
    from .frequency_report import add_frequency_options   # the frequency-domain options
    add_frequency_options(p, time_domain=_cmd_identify)
    from . import cli_design                               # optimal input design
    cli_design.add_parser(sub, _scenario_args, _assignment, _bound, _names)
    from .order_report import add_order_options           # engine orders (--domain orders)
    add_order_options(p)
    from .measurement_cli import add_measurement_options  # --channels, --offset, --tacho, ...
    add_measurement_options(p)
    return parser


def _load(args):
    from .modelfiles import load_model

    model, ns = load_model(args.model)
    from .scenario import Scenario

    given = {k: v for k, v in (("t_end", args.t_end), ("h", args.h), ("alpha", args.alpha))
             if v is not None}
    base = ns.get("SCENARIO") or {"t_end": 1.0, "h": 1e-3}
    scenario = Scenario.make(base, **given)
    out = args.out_dir or Path("results") / f"{args.command}-{model.name}"
    out.mkdir(parents=True, exist_ok=True)
    system = model.compile(cache_dir=args.cache_dir)
    return model, ns, system, scenario, out


def _cmd_models(args) -> int:
    from .modelfiles import bundled_model_path, bundled_models

    for name in bundled_models():
        doc = bundled_model_path(name).read_text().split('"""')
        first = doc[1].strip().splitlines()[0] if len(doc) > 2 else ""
        print(f"{name:16s} {first}")
    return 0


def _cmd_simulate(args) -> int:
    from .plot import plot_outputs

    model, ns, system, scenario, out = _load(args)
    traj = system.simulate(scenario, params=dict(args.param))
    csv_path = traj.to_csv(out / "trajectory.csv")
    summary = traj.summary()
    (out / "summary.txt").write_text(summary + "\n")
    print(summary)
    print(f"wrote {csv_path}")
    if not args.no_plot:
        print(f"wrote {plot_outputs(traj, out / 'outputs.png')}")
    return 0


def _cmd_identify(args) -> int:
    from .errors import InputError, UnknownNameError
    from .data import Measurement
    from .experiment import Experiment
    from .identification import identify
    from .measurement_cli import load_data
    from .plot import plot_convergence, plot_fit

    model, ns, system, scenario, out = _load(args)
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
        data_info = {"source": str(args.data), "synthetic": False}
    else:
        outputs = args.outputs or list(ns.get("OUTPUTS", [])) or model.output_names
        true_params = {**fixed, **dict(args.data_param)}
        truth = {k: true_params.get(k, nominal[k]) for k in free}
        true_run = system.simulate(scenario.replace(h=args.data_h or scenario.h),
                                   params=true_params)
        data = Measurement.from_trajectory(true_run, outputs)
        data.to_csv(out / "data.csv")
        data_info = {"source": str(out / "data.csv"), "synthetic": True, "data_h": true_run.h,
                     "true_values": truth}
    cost = cli_pod.make_cost(args, data, outputs)
    exp = Experiment(system, cost, scenario, params=fixed, name=model.name)
    start, bounds, scan_info = cli_pod.search(args, exp, free, start, dict(args.bound), out)
    print(f"identifying {free} of {model.name} from {data_info['source']} "
          f"(outputs {outputs}, h = {scenario.h:g}, t_end = {scenario.t_end:g}, "
          f"alpha = {scenario.alpha:g})",
          file=sys.stderr)
    from .statistics import noise_from_text

    noise = noise_from_text(args.noise, outputs)
    result = identify(exp, free, start, bounds=bounds or None, method=args.method,
                      max_iterations=args.max_iterations, progress=not args.quiet,
                      noise=noise)

    report = {"model": model.name,
              "scenario": {"t_end": scenario.t_end, "h": scenario.h, "alpha": scenario.alpha,
                           "t0": scenario.t0, "fixed_parameters": fixed},
              "data": data_info, "outputs": outputs, "result": result.to_dict(),
              "cost": {"domain": args.domain, "scan": scan_info,
                       **cli_pod.write_extras(args, cost, data, outputs, out)}}
    if truth is not None:
        report["relative_error"] = result.relative_error(truth)
    (out / "report.json").write_text(json.dumps(report, indent=1, default=float))
    plot_convergence(result, out / "convergence.png", reference=truth)
    first = outputs[0]
    t0 = time.perf_counter()
    runs = {"start": exp.simulate(start), "identified": exp.simulate(result.values)}
    idx, measured = data.align(runs["start"].t, first)
    plot_fit(runs["start"].t[idx], measured,
             {k: tr.outputs[first][idx] for k, tr in runs.items()}, out / "fit.png", first)
    print(result.summary())
    if truth is not None:
        worst = max(report["relative_error"].values())
        print(f"largest relative error against the true values: {worst:.3e}")
    print(f"wrote {out / 'report.json'}, {out / 'convergence.png'}, {out / 'fit.png'} "
          f"({time.perf_counter() - t0:.2f} s for the plots)")
    return 0


def main(argv=None) -> int:
    from .errors import SymdaeError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (SymdaeError, KeyError, ValueError, OSError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"symdae {args.command}: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
