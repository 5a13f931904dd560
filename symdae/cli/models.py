"""``symdae models``: list the bundled models with the first sentence of their docstrings."""
from __future__ import annotations

import ast
import re
import shutil
import textwrap

from ..model.files import bundled_model_path, bundled_models

__all__ = ["add_parser", "run", "first_sentence"]


def add_parser(sub) -> None:
    p = sub.add_parser("models", help="list the bundled models")
    p.set_defaults(func=run)


def first_sentence(doc: str) -> str:
    """The first sentence of a docstring's first paragraph (its lines joined), whole."""
    para = " ".join(doc.strip().split("\n\n")[0].split())
    m = re.search(r"(?<!\be\.g)(?<!\bi\.e)(?<!\bcf)(?<!\bet al)(?<!\b[A-Z])\.(\s|$)", para)
    return para[:m.start() + 1] if m else para


def run(args) -> int:
    names = bundled_models()
    width = max(len(n) for n in names) + 2
    text_width = max(40, shutil.get_terminal_size((100, 20)).columns - width)
    for name in names:
        # the docstring without executing the file (which imports SymPy and builds the model)
        doc = ast.get_docstring(ast.parse(bundled_model_path(name).read_text())) or ""
        lines = textwrap.wrap(first_sentence(doc), text_width) or [""]
        print(f"{name:{width}s}{lines[0]}")
        for line in lines[1:]:
            print(" " * width + line)
    return 0
