"""Loading model files: a bundled model by name or any ``.py`` file that defines ``model``."""
from __future__ import annotations

import runpy
from pathlib import Path

from ..errors import ModelError

__all__ = ["load_model", "bundled_models", "bundled_model_path"]


def _bundled_dir() -> Path:
    """The bundled models: ``symdae/models`` once installed (setup.py maps the top-level
    ``models/`` there), the checkout's ``models/`` beside the package otherwise."""
    here = Path(__file__).resolve().parents[1]       # the symdae package
    for folder in (here / "models", here.parent / "models"):
        if (folder / "__init__.py").is_file():
            return folder
    raise ModelError(f"the bundled models are missing: neither {here / 'models'} nor "
                     f"{here.parent / 'models'} exists")


def bundled_models() -> list[str]:
    """Names of the models shipped in ``models/``."""
    return sorted(p.stem for p in _bundled_dir().glob("*.py") if not p.stem.startswith("_"))


def bundled_model_path(name: str) -> Path:
    """The file of the bundled model ``name`` (a ``ModelError`` lists the bundled ones)."""
    path = _bundled_dir() / f"{name}.py"
    if not path.is_file():
        raise ModelError(f"no bundled model {name!r}; bundled models: {bundled_models()}")
    return path


def load_model(source: str | Path, attribute: str = "model"):
    """Run a model file (or a bundled model's name) and return its ``model`` attribute and
    the file's namespace (for extras such as ``START``)."""
    path = Path(source)
    if not path.suffix:
        path = bundled_model_path(str(source))
    if not path.is_file():
        raise ModelError(f"model file {str(path)!r} does not exist")
    try:
        namespace = runpy.run_path(str(path))
    except SyntaxError as exc:
        # one line with the file and line, not a traceback into runpy
        raise ModelError(f"model file {exc.filename or path}, line {exc.lineno}: {exc.msg}"
                         + (f": {exc.text.strip()}" if exc.text else "")) from None
    except ImportError as exc:
        # an import the file needs but this installation lacks: name the file and the module,
        # not only the module (a traceback into runpy tells a user nothing)
        what = f"module {exc.name!r}" if exc.name else "a module"
        raise ModelError(f"model file {path} imports {what} that is not installed here: "
                         f"{exc}") from exc
    if attribute not in namespace:
        raise ModelError(f"model file {path} defines no {attribute!r}")
    return namespace[attribute], namespace

