"""The package's import contract, read from the source by an AST walk (every import, also those
inside functions): layers import downward only, no module imports itself back through others,
and no name private to a module is imported by another."""
from __future__ import annotations

import ast
from pathlib import Path

import symdae

PKG = Path(symdae.__file__).resolve().parent

# lowest first; a module may import from its own layer and the layers before it. The bundled
# models (symdae/models/ once installed) are user files on top of the public API.
LAYERS = ["foundation", "model", "compilation", "data", "simulation", "analysis", "costs",
          "identification", "design", "plots", "cli", "api", "models"]
FOUNDATION = {"symdae.errors", "symdae._version", "symdae.threads", "symdae.progress",
              "symdae.atomic"}


def module_name(path: Path) -> str:
    parts = ["symdae", *path.relative_to(PKG).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    if module == "symdae":
        return "api"
    if module in FOUNDATION:
        return "foundation"
    return module.split(".")[1]


def is_module(name: str) -> bool:
    """Is the dotted name a module or package of symdae (source or compiled)?"""
    base = PKG.joinpath(*name.split(".")[1:])
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file() or \
        base.with_suffix(".pyx").is_file()


def imports(path: Path):
    """(line, imported module, imported name or None) of every symdae import in the file."""
    mod = module_name(path)
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "symdae":
                    yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "symdae":
                continue
            for alias in node.names:
                full = f"{target}.{alias.name}"
                if is_module(full):
                    yield node.lineno, full, None
                else:
                    yield node.lineno, target, alias.name


def graph():
    edges = {}
    for path in sorted(PKG.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        edges[module_name(path)] = [(path, line, target, name)
                                    for line, target, name in imports(path)]
    return edges


def test_every_module_belongs_to_a_layer():
    for mod in graph():
        assert layer(mod) in LAYERS, f"{mod} is in no layer of {LAYERS}"


def test_layers_import_downward_only():
    upward = []
    for mod, edges in graph().items():
        for path, line, target, _ in edges:
            if LAYERS.index(layer(target)) > LAYERS.index(layer(mod)):
                upward.append(f"{path.relative_to(PKG.parent)}:{line}: {mod} ({layer(mod)}) "
                              f"imports {target} ({layer(target)})")
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_no_import_cycles():
    edges = {mod: {t for _, _, t, _ in e} for mod, e in graph().items()}
    state, stack, cycles = {}, [], []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for t in sorted(edges.get(m, ())):
            if t == m:
                continue
            if state.get(t) == "open":
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = "done"

    for m in sorted(edges):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_private_name_is_imported_across_modules():
    private = []
    for mod, edges in graph().items():
        for path, line, target, name in edges:
            if name is not None and name.startswith("_") and name != "__version__":
                private.append(f"{path.relative_to(PKG.parent)}:{line}: {name} from {target}")
            last = target.rsplit(".", 1)[-1]
            # a private module (a compiled extension, the version file) serves its own package
            if name is None and last.startswith("_") and target != "symdae._version" and \
                    target.rsplit(".", 1)[0] != mod.rsplit(".", 1)[0] and \
                    target.rsplit(".", 2)[0] != mod.rsplit(".", 2)[0]:
                private.append(f"{path.relative_to(PKG.parent)}:{line}: module {target}")
    assert not private, "private names imported across modules:\n" + "\n".join(private)


def test_the_walk_sees_imports_inside_functions_and_relative_levels(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from ..costs.base import Cost\n    from . import hht\n")
    found = set()
    for node in ast.walk(ast.parse(probe.read_text())):
        if isinstance(node, ast.ImportFrom):
            found.add((node.level, node.module))
    assert found == {(2, "costs.base"), (1, None)}
    edges = {(t, n) for _, t, n in imports(PKG / "simulation" / "backends" / "compiled.py")}
    assert ("symdae.simulation.core.hht", None) in edges       # a module, resolved two up
    assert layer("symdae.cli.main") == "cli" and layer("symdae.errors") == "foundation"


def test_public_api_names_resolve():
    for name in symdae.__all__:
        assert getattr(symdae, name) is not None, name
