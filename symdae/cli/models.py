"""``symdae models``: list the bundled models with the first line of their docstrings."""
from __future__ import annotations

from ..model.files import bundled_model_path, bundled_models

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    p = sub.add_parser("models", help="list the bundled models")
    p.set_defaults(func=run)


def run(args) -> int:

    for name in bundled_models():
        doc = bundled_model_path(name).read_text().split('"""')
        first = doc[1].strip().splitlines()[0] if len(doc) > 2 else ""
        print(f"{name:16s} {first}")
    return 0
