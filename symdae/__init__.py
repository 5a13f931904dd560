"""symdae: SymPy multibody models -> exact derivation -> Cython kernels -> compiled HHT,
tangent-linear and discrete-adjoint sweeps -> parameter identification.

Stages (each a function returning data):
    Model -> derive() -> DerivedSystem -> (kernel spec) -> emit_cython() -> source text
          -> build.write_source() / build.compile_module() / build.load_module() -> System
``Model.compile()`` chains them through the content-hashed cache (``symdae.pipeline``); the
System runs its sweeps on a backend (compiled Cython core, or NumPy where no compiler
exists). On top: exact gradients (``adjoint_gradient``, ``tangent``), costs on outputs in the
time domain, the frequency domain and on POD modes, measured data, ``identify`` (scipy
optimisers, Gauss-Newton) and the statistics of an identification (Fisher information).
"""
from ._version import __version__
from .build import default_cache_dir
from .derivation import DerivedSystem, derive
from .emit import emit_cython
from .errors import (BuildError, DataError, InconsistentInitialStateError, InputError,
                     ModelError, NewtonError, SimulationError, SingularMatrixError, SymdaeError,
                     UndeclaredSymbolError, UnknownNameError)
from .costs import (Cost, CostSum, FourierCost, LeastSquares, Line, OutputIntegral, Spectrum,
                    Window, fourier_coefficients)
from .data import Measurement
from .experiment import Evaluation, Experiment, evaluate_many
from .identification import IdentificationResult, choose_method, identify
from .scenario import Scenario
from .model import Model
from .pipeline import compile_model
from .modelfiles import bundled_models, load_model
from .sensitivity import TangentResult, adjoint_gradient, tangent
from .system import System
from .trajectory import Trajectory

__all__ = [
    "__version__", "Model", "derive", "DerivedSystem", "emit_cython", "compile_model",
    "default_cache_dir", "System", "Trajectory", "load_model", "bundled_models",
    "adjoint_gradient", "tangent", "TangentResult", "Cost", "CostSum", "LeastSquares",
    "OutputIntegral", "Measurement", "Scenario", "Experiment", "Evaluation", "evaluate_many",
    "identify", "choose_method", "IdentificationResult", "FourierCost", "Window", "Line", "Spectrum",
    "fourier_coefficients",
    "SymdaeError", "ModelError", "UndeclaredSymbolError", "BuildError", "SimulationError",
    "InconsistentInitialStateError", "SingularMatrixError", "NewtonError", "DataError",
    "InputError", "UnknownNameError",
]

# POD-mode costs (issue 11): snapshot POD, costs on mode coefficients, the linearised model's
# natural modes, and a scan-then-refine search for one parameter
from .costs import PODCost  # noqa: E402
from .decomposition import ModeSpectrum, PODModeError, PODResult, PODWarning, pod  # noqa: E402
from .linear import NaturalModes, linearise, natural_modes  # noqa: E402
from .gridsearch import ScanResult, refine, scan, scan_refine  # noqa: E402

__all__ += ["pod", "PODResult", "ModeSpectrum", "PODCost", "PODModeError", "PODWarning",
            "linearise", "natural_modes", "NaturalModes", "scan", "refine", "scan_refine",
            "ScanResult"]

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

# optimal input design (issue 10): exact input gradients (reverse over tangent), criteria,
# bounded inputs, end conditions, the design driver and the paper's studies
from .design import InputDesign, design_input  # noqa: E402
from .design_criteria import CRITERIA, EigenvalueGapWarning  # noqa: E402
from .design_problem import DesignEvaluation, DesignProblem  # noqa: E402
from .design_study import (compare_monte_carlo, model_design, rms_error_scan,  # noqa: E402
                           study_inputs)
from .input_adjoint import design_gradient, input_gradient  # noqa: E402

__all__ += [
    "design_input", "InputDesign", "DesignProblem", "DesignEvaluation", "CRITERIA",
    "EigenvalueGapWarning", "design_gradient", "input_gradient", "model_design",
    "study_inputs", "rms_error_scan", "compare_monte_carlo",
]

# engine orders in a run-up (issue 9): speed ramp, order analysis (a Hann window of two cycles
# per speed point) and the order cost (a FourierCost over those windows)
from .costs.orders import OrderAnalysis, OrderCost, OrderCurves, RunUp  # noqa: E402

__all__ += ["RunUp", "OrderAnalysis", "OrderCost", "OrderCurves"]

# models from sympy.physics.mechanics: System, KanesMethod, LagrangesMethod -> Model
from .errors import MechanicsError  # noqa: E402
from .mechanics import from_mechanics  # noqa: E402

__all__ += ["from_mechanics", "MechanicsError"]
