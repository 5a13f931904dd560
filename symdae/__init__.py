"""symdae: SymPy multibody models -> exact derivation -> Cython kernels -> compiled HHT,
tangent-linear and discrete-adjoint sweeps -> parameter identification.

Stages (each a function returning data):
    Model -> derive() -> DerivedSystem -> emit_cython() -> source text
          -> build.write_source() / build.compile_module() / build.load_module() -> System
``Model.compile()`` chains them through the content-hashed cache. On top: exact gradients
(``adjoint_gradient``, ``tangent``), costs on outputs, measured data and ``identify``.
"""
from ._version import __version__
from .build import compile_model, default_cache_dir
from .derivation import DerivedSystem, derive
from .emit import emit_cython
from .errors import (BuildError, DataError, InconsistentInitialStateError, InputError,
                     ModelError, NewtonError, SimulationError, SingularMatrixError, SymdaeError,
                     UndeclaredSymbolError, UnknownNameError)
from .costs import Cost, CostSum, LeastSquares, OutputIntegral
from .data import Measurement
from .experiment import Evaluation, Experiment, evaluate_many
from .identification import IdentificationResult, identify
from .scenario import Scenario
from .model import Model
from .modelfiles import bundled_models, load_model
from .sensitivity import TangentResult, adjoint_gradient, tangent
from .system import System
from .trajectory import Trajectory

__all__ = [
    "__version__", "Model", "derive", "DerivedSystem", "emit_cython", "compile_model",
    "default_cache_dir", "System", "Trajectory", "load_model", "bundled_models",
    "adjoint_gradient", "tangent", "TangentResult", "Cost", "CostSum", "LeastSquares",
    "OutputIntegral", "Measurement", "Scenario", "Experiment", "Evaluation", "evaluate_many",
    "identify", "IdentificationResult",
    "SymdaeError", "ModelError", "UndeclaredSymbolError", "BuildError", "SimulationError",
    "InconsistentInitialStateError", "SingularMatrixError", "NewtonError", "DataError",
    "InputError", "UnknownNameError",
]

# statistics and Gauss-Newton identification (issue 10)
from .errors import NotIdentifiableError
from .fisher import (FisherInformation, OutputSensitivities, ParameterStatistics,
                     fisher_information, output_sensitivities)
from .montecarlo import MonteCarloResult, monte_carlo
from .statistics import IdentificationStatistics, identification_statistics

__all__ += [
    "NotIdentifiableError", "OutputSensitivities", "output_sensitivities", "FisherInformation",
    "fisher_information", "ParameterStatistics", "IdentificationStatistics",
    "identification_statistics", "MonteCarloResult", "monte_carlo",
]
