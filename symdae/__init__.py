"""symdae: SymPy multibody models -> exact derivation -> Cython kernels -> compiled HHT,
tangent-linear and discrete-adjoint sweeps -> parameter identification.

Stages (each a function returning data):
    Model -> derive() -> DerivedSystem -> emit_cython() -> source text
          -> build.write_source() / build.compile_module() / build.load_module() -> System
``Model.compile()`` chains them through the content-hashed cache.
"""
from ._version import __version__
from .build import compile_model, default_cache_dir
from .derive import DerivedSystem, derive
from .emit import emit_cython
from .errors import (BuildError, DataError, InconsistentInitialStateError, ModelError,
                     NewtonError, SimulationError, SingularMatrixError, SymdaeError,
                     UndeclaredSymbolError)
from .model import Model
from .modelfiles import bundled_models, load_model
from .system import System
from .trajectory import Trajectory

__all__ = [
    "__version__", "Model", "derive", "DerivedSystem", "emit_cython", "compile_model",
    "default_cache_dir", "System", "Trajectory", "load_model", "bundled_models",
    "SymdaeError", "ModelError", "UndeclaredSymbolError", "BuildError", "SimulationError",
    "InconsistentInitialStateError", "SingularMatrixError", "NewtonError", "DataError",
]
