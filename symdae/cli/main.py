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
import sys

from .._version import __version__
from ..errors import SymdaeError
from . import design, identify, models, simulate

__all__ = ["main", "build_parser", "COMMANDS"]

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


def main(argv=None) -> int:

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (SymdaeError, KeyError, ValueError, OSError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"symdae {args.command}: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
