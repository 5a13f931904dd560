"""Command line: ``symdae models``, ``symdae simulate``, ``symdae identify`` and ``symdae design``.

A model is a bundled model's name (``symdae models`` lists them) or the path of a Python file
that defines ``model``. The file may also define ``START`` and ``FREE`` (start values and free
parameters for identification), ``OUTPUTS`` (outputs to fit) and ``SCENARIO`` (a
:class:`symdae.Scenario`, or a dict of its fields); command-line options override them.

Each command is a module with ``add_parser(subparsers)``, which registers its options and sets
``func`` to its ``run(args)``; ``COMMANDS`` is the table. A new command is one module and one
entry here.
"""
from __future__ import annotations

import argparse
import re
import sys

from .._version import __version__
from ..errors import Interrupted, SymdaeError
from . import design, identify, models, simulate

__all__ = ["main", "build_parser", "COMMANDS", "EXIT_INTERRUPTED", "interrupted_message"]

COMMANDS = (models, simulate, identify, design)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="symdae", description="Simulate and identify SymPy multibody models with a "
        "compiled HHT integrator and exact discrete-adjoint gradients.")
    parser.add_argument("--version", action="version", version=f"symdae {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


EXIT_INTERRUPTED = 130    # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C


def interrupted_message(exc: KeyboardInterrupt) -> str:
    """One line for Ctrl-C: where the sweep stood, and the best point of a search if any."""
    text = str(exc) if isinstance(exc, Interrupted) else "interrupted"
    best = getattr(exc, "best", None)
    if best:
        text += "; best so far: " + ", ".join(f"{k} = {v:.10g}" for k, v in best.items())
        cost = getattr(exc, "best_cost", None)
        if cost is not None and cost == cost:         # given, and not NaN
            text += f" (cost {cost:.6g})"
    return text


# a negative number as an option's value; argparse takes "-1e-3" for an option (it knows only
# "-1" and "-.5" as numbers) and answers "expected one argument"
_NEGATIVE = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def join_negative_values(argv: list[str]) -> list[str]:
    """``--h -1e-3`` -> ``--h=-1e-3``: a negative number after a long option is its value."""
    out: list[str] = []
    for tok in argv:
        if out and _NEGATIVE.match(tok) and out[-1].startswith("--") and "=" not in out[-1]:
            out[-1] = f"{out[-1]}={tok}"
        else:
            out.append(tok)
    return out


def main(argv=None) -> int:

    argv = join_negative_values(list(sys.argv[1:] if argv is None else argv))
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (SymdaeError, KeyError, ValueError, OSError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"symdae {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:      # Ctrl-C: one line, not a traceback
        print(f"symdae {args.command}: {interrupted_message(exc)}", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
