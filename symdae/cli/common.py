"""The argument parsers every command shares and the common start of a command: load the
model file, make the scenario, compile, make the output folder."""
from __future__ import annotations

import argparse
import math
from pathlib import Path

from ..atomic import remove_outputs
from ..errors import DataError, InputError, UnknownNameError
from ..simulation.backends.base import SCHEMES
from .inputs import parse_input

__all__ = ["number", "number_range", "assignment", "bound", "names", "scenario_args", "load",
           "check_names", "OUTPUT_FILES", "identify_estimate"]

# the files each command writes into its output folder (every --domain of identify): a rerun
# removes its command's old ones first, so a folder never mixes two runs' outputs
OUTPUT_FILES = {
    "simulate": ("trajectory.csv", "trajectory.npz", "summary.txt", "outputs.png"),
    "identify": ("report.json", "data.csv", "convergence.png", "fit.png", "spectra.png",
                 "time.png", "contour.png", "window.png", "order.png", "orders.png", "scan.png",
                 "ratios.png", "modes.png", "coefficients.png"),
    "design": ("input.csv", "report.json", "convergence.png", "inputs.png", "outputs.png",
               "end_conditions.png", "rms.png"),
}


def number(text: str, what: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what}: {text!r} is not a number") from None
    if not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"{what}: {text!r} is not finite")
    return x


def assignment(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name.strip(), number(value, name)


def bound(text: str) -> tuple[str, tuple]:
    name, sep, rng = text.partition("=")
    lo, sep2, hi = rng.partition(":")
    if not sep or not sep2 or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=LOWER:UPPER (either may be empty), "
                                         f"got {text!r}")
    return name.strip(), (None if not lo.strip() else number(lo, name),
                          None if not hi.strip() else number(hi, name))


def names(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def scenario_args(p: argparse.ArgumentParser, measured_inputs: bool = True) -> None:
    """The options of the model, its scenario and the output folder (``measured_inputs``:
    with ``--input NAME=FILE[:CHANNEL]``)."""
    p.add_argument("model", help="bundled model name (see 'symdae models') or path to a .py "
                                 "file defining `model`")
    p.add_argument("--t-end", type=float, help="end time in s (default: the model file's "
                                               "SCENARIO, else 1.0)")
    p.add_argument("--t0", type=float, help="start time in s, where the model's initial state "
                                            "holds (default: SCENARIO, else 0); measured data "
                                            "are compared on [t0, t_end]")
    p.add_argument("--h", type=float, help="fixed time step in s (default: SCENARIO, else 1e-3)")
    p.add_argument("--alpha", type=float, help="HHT alpha in [-1/3, 0] (default: SCENARIO, "
                                               "else -0.1)")
    p.add_argument("--scheme", choices=sorted(SCHEMES),
                   help="integration scheme (default: SCENARIO, else hht-ga): hht-ga, the "
                   "generalized-alpha form with HHT's parameters, is second order also when "
                   "the mass matrix depends on q; hht-paper is the paper's eq. (15)")
    if measured_inputs:
        p.add_argument("--input", dest="input_files", action="append", type=parse_input,
                       default=[], metavar="NAME=FILE[:CHANNEL]",
                       help="a model input measured in a file (CSV, .mat, MDF4, TDMS; CHANNEL "
                       "may carry [unit->unit]), put on the grid like measured outputs (model "
                       "time = file time - --offset); repeatable")
    p.add_argument("--param", "-p", action="append", type=assignment, default=[],
                   metavar="NAME=VALUE", help="override a parameter value (repeatable)")
    p.add_argument("--out-dir", type=Path, help="folder for the written files (default: "
                                                "results/<command>-<model>)")
    p.add_argument("--cache-dir", type=Path, help="compile cache (default: generated/ of a "
                                                  "source checkout, else the user cache folder)")


def measured_inputs_option(args) -> bool:
    """Whether the command takes ``--input NAME=FILE`` (not ``design``, whose inputs are
    designed)."""
    return hasattr(args, "input_files")


def number_range(text: str) -> tuple[float, float]:
    lo, sep, hi = text.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected LOWER:UPPER, got {text!r}")
    return number(lo, "lower"), number(hi, "upper")


def _known(option: str, given, valid, what: str) -> None:
    """Refuse a name ``option`` gave that is not among ``valid`` (naming both)."""
    for name in given:
        if name not in valid:
            raise UnknownNameError(f"{option} {name!r}: not {what}; valid: "
                                   f"{', '.join(valid) or '(none)'}")


def check_names(args, model, ns) -> None:
    """Check every name an option gives (parameters, free parameters, start values, bounds,
    outputs, inputs) against the model, before anything is built or run."""
    params, outputs, inputs = model.parameter_names, model.output_names, model.input_names
    _known("--param", [k for k, _ in args.param], params, "a parameter of " + model.name)
    free = getattr(args, "free", None)
    _known("--free", free or (), params, "a parameter of " + model.name)
    _known("--outputs", getattr(args, "outputs", None) or (), outputs,
           "an output of " + model.name)
    _known("--truth", [k for k, _ in getattr(args, "truth", ())], params,
           "a parameter of " + model.name)
    for option in ("input", "start_input"):
        _known(f"--{option.replace('_', '-')}", [k for k, _ in getattr(args, option, ())],
               inputs, "an input of " + model.name)
    start = [k for k, _ in getattr(args, "start", ())]
    if args.command != "identify":     # design: the parameter values to design at
        _known("--start", start, params, "a parameter of " + model.name)
        return
    free = free or list(ns.get("FREE", []))
    if free:                           # (no free parameters at all is refused later)
        _known("--start", start, free, "a free parameter")
        _known("--bound", [k for k, _ in getattr(args, "bound", ())], free, "a free parameter")


def load(args):
    """Model, model-file namespace, System, Scenario and output folder of a command; the
    options' names are checked before anything is compiled or run."""
    # imported here, not above: building the parsers (--help) must not wait for SymPy,
    # SciPy and the compiler stage
    from ..model.files import load_model
    from ..simulation.compile import compile_model
    from ..simulation.scenario import Scenario
    from .inputs import measured_inputs

    model, ns = load_model(args.model)
    check_names(args, model, ns)
    data = getattr(args, "data", None)
    if data is not None and not Path(data).is_file():
        raise DataError(f"--data: data file {str(data)!r} does not exist")
    given = {k: v for k, v in (("t_end", args.t_end), ("t0", args.t0), ("h", args.h),
                               ("alpha", args.alpha), ("scheme", args.scheme)) if v is not None}
    base = ns.get("SCENARIO") or {"t_end": 1.0, "h": 1e-3}
    scenario = Scenario.make(base, **given)
    files = args.input_files if measured_inputs_option(args) else None
    if files:
        offset = getattr(args, "offset", 0.0)
        if offset == "estimate":
            raise InputError("--offset estimate cannot be used with --input: the estimate "
                             "needs a simulation, which needs the measured inputs; give "
                             "--offset SECONDS")
        measured = measured_inputs(files, model, scenario, offset)
        scenario = scenario.replace(inputs={**dict(scenario.inputs or {}), **measured})
    if measured_inputs_option(args):
        missing = [u for u in model.input_names if u not in (scenario.inputs or {})]
        if missing:
            raise InputError(f"the model's input(s) {missing} have no values: give --input "
                             f"{missing[0]}=FILE[:CHANNEL] (or inputs in the model file's "
                             "SCENARIO)")
    out = args.out_dir or Path("results") / f"{args.command}-{model.name}"
    out.mkdir(parents=True, exist_ok=True)
    remove_outputs(out, OUTPUT_FILES.get(args.command, ()))
    # verbose: a cold build says what it does (derive, generate, compile); a cached one is quiet
    system = compile_model(model, cache_dir=args.cache_dir, verbose=True)
    return model, ns, system, scenario, out


def identify_estimate(system, scenario, costs, free, method: str, *, signals: int,
                      statistics: bool = True, data_h: float | None = None,
                      name: str = "experiment"):
    """The memory of an ``identify`` command, checkable before its synthetic data are made:
    the largest of the data's run (at ``data_h``) with its samples, each identification (one
    per cost; the costs may hold stand-in data: what they allocate does not depend on it) and
    the two runs (start, identified) its fit plot draws, with a cost evaluated on one; the
    data (times and ``signals`` signals) are kept throughout."""
    from dataclasses import replace

    from ..identification.experiment import Experiment
    from ..identification.identify import choose_method, identification_estimate
    from ..simulation.memory import MemoryEstimate, forward_bytes, largest

    sz, points = system.sizes, scenario.n_steps + 1
    shrink = "a larger --h or a shorter --t-end"
    data_sc = scenario.replace(h=data_h) if data_h else scenario
    data = 8 * (1 + signals) * (data_sc.n_steps + 1) // points      # per grid point
    phases = [MemoryEstimate("the synthetic data", data_sc.n_steps + 1,
                             forward_bytes(sz, scenario.scheme) + 8 * (1 + signals), 0, shrink),
              MemoryEstimate("the runs of the fit plot", points,
                             data + 2 * forward_bytes(sz, scenario.scheme)
                             + max(c.memory(sz, scenario)[0] for c in costs), 0, shrink)]
    for cost in costs:
        exp = Experiment(system, cost, scenario, name=name)
        chosen = choose_method(exp, free)[0] if method == "auto" else method
        est = identification_estimate(exp, len(free), chosen, statistics)
        phases.append(replace(est, per_step=est.per_step + data))
    return largest(*phases)
