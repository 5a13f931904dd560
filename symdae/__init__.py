"""symdae: SymPy multibody models -> exact derivation -> Cython kernels -> compiled HHT,
tangent-linear and discrete-adjoint sweeps -> parameter identification and input design.

The public API, grouped by stage (each subpackage's docstring says what it holds and what it
may import). Names load on first use (PEP 562), so ``import symdae`` costs only what a user
touches: a simulation or a time-domain identification never imports SciPy's signal
processing or matplotlib.
"""
from __future__ import annotations

import importlib

from ._version import __version__

# public name -> module that owns it
_API: dict[str, str] = {}


def _export(module: str, *names: str) -> None:
    for name in names:
        _API[name] = module


# errors: one hierarchy
_export("symdae.errors", "SymdaeError", "ModelError", "UndeclaredSymbolError", "BuildError",
        "SimulationError", "InconsistentInitialStateError", "SingularMatrixError",
        "NewtonError", "DataError", "InputError", "UnknownNameError", "NotIdentifiableError",
        "MechanicsError")
# model: definition, derivation, code generation, model files
_export("symdae.model.definition", "Model")
_export("symdae.model.derivation", "derive", "DerivedSystem")
_export("symdae.model.emit", "emit_cython")
_export("symdae.model.files", "load_model", "bundled_models")
_export("symdae.model.mechanics", "from_mechanics")
# build: the content-hashed compile cache
_export("symdae.compilation.cache", "default_cache_dir")
# simulation: compile, run, differentiate
_export("symdae.simulation.compile", "compile_model")
_export("symdae.simulation.system", "System")
_export("symdae.simulation.scenario", "Scenario")
_export("symdae.simulation.trajectory", "Trajectory")
_export("symdae.simulation.memory", "MemoryEstimate", "MemoryLimitError", "available_memory",
        "free_memory")
_export("symdae.simulation.sensitivity", "adjoint_gradient", "tangent", "TangentResult")
# data: measurements, test-bench recordings (file formats and dialects), channel maps with
# units, alignment with the simulation grid
_export("symdae.data.measurement", "Measurement")
_export("symdae.data.readers", "Channel", "Recording", "read_recording")
_export("symdae.data.units", "ChannelMap", "ChannelSpec", "unit_factor")
_export("symdae.data.alignment", "Alignment", "AlignmentWarning", "OffsetEstimate",
        "align_channel", "align_recording", "estimate_offset")
# analysis: POD, linearisation and natural modes
_export("symdae.analysis.pod", "pod", "PODResult", "ModeSpectrum", "PODModeError", "PODWarning")
_export("symdae.analysis.linear", "linearise", "natural_modes", "NaturalModes")
# costs: (J, dJ/dS) on outputs in the time domain, the frequency domain, engine orders, POD
_export("symdae.costs.base", "Cost", "CostSum")
_export("symdae.costs.time_domain", "LeastSquares", "OutputIntegral")
_export("symdae.costs.fourier", "Window", "Line", "Spectrum", "fourier_coefficients")
_export("symdae.costs.frequency", "FourierCost")
_export("symdae.costs.orders", "RunUp", "OrderAnalysis", "OrderCost", "OrderCurves")
_export("symdae.costs.order_tracking", "SpeedTrace", "AngleWindow")
_export("symdae.costs.pod", "PODCost")
# identification: experiments, optimisers, multiple shooting, grid search, statistics, Monte Carlo
_export("symdae.identification.experiment", "Experiment", "Evaluation", "evaluate_many")
_export("symdae.identification.identify", "identify", "choose_method", "IdentificationResult",
        "identification_estimate")
_export("symdae.identification.shooting", "MultipleShooting", "ShootingReport")
_export("symdae.identification.verdict", "fit_verdict", "FitVerdict", "OutputVerdict")
_export("symdae.identification.gridsearch", "scan", "refine", "scan_refine", "ScanResult")
_export("symdae.identification.fisher", "output_sensitivities", "OutputSensitivities",
        "fisher_information", "FisherInformation", "ParameterStatistics")
_export("symdae.identification.statistics", "identification_statistics",
        "IdentificationStatistics")
_export("symdae.identification.hac", "hac_covariance", "HACCovariance", "long_run_covariance",
        "bartlett_bandwidth", "lag_one_autocorrelation")
_export("symdae.identification.montecarlo", "monte_carlo", "MonteCarloResult",
        "monte_carlo_estimate")
# design: optimal input design
_export("symdae.design.driver", "design_input", "InputDesign", "design_estimate")
_export("symdae.design.criteria", "CRITERIA", "EigenvalueGapWarning")
_export("symdae.design.problem", "DesignProblem", "DesignEvaluation")
_export("symdae.design.gradients", "design_gradient", "input_gradient")
_export("symdae.design.study", "model_design", "study_inputs", "rms_error_scan",
        "compare_monte_carlo")

__all__ = ["__version__"] + list(_API)


def __getattr__(name: str):
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'symdae' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value          # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
