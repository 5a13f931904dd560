"""Output sensitivities, Fisher information and the parameter statistics that follow from it.

For outputs s_i = s(t_i; b) measured with Gaussian noise of covariance R (one R per sample,
independent samples), the Fisher information of the parameters b is (input-design paper,
eq. 6; spec section 3.1)

    F = sum_i eta_i S_i^T R^-1 S_i,     S_i = ds_i/db  (outputs x parameters)

with eta_i = 1 (``quadrature="sum"``, the default: the Fisher matrix of per-sample noise, so
cov(b_hat) >= F^-1, the Cramer-Rao bound) or the quadrature weights of a cost (``"left"``,
``"trapezoid"``: eq. 7's integral). S comes from the tangent-linear sweep: exact for the
discrete scheme, one back-substitution per parameter and step. Scaled parameters
w_j = b_j / scale_j (default scale_j = |b_j|) give F_scaled = W F W, the Fisher matrix of
ln b, whose eigen-directions and condition number do not depend on units.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import linalg

from ..analysis.quadrature import quadrature_weights
from ..errors import InputError, NotIdentifiableError, UnknownNameError
from ..model.definition import parameter_name
from ..simulation.sensitivity import tangent

__all__ = ["OutputSensitivities", "output_sensitivities", "noise_covariance",
           "fisher_matrix", "FisherInformation", "fisher_information", "ParameterStatistics",
           "parameter_statistics", "parameter_scales", "noise_levels", "RCOND", "COND_WARNING",
           "CORRELATION_WARNING", "RELATIVE_ERROR_WARNING"]

# lambda_min / lambda_max of the scaled F below this: singular, a direction is not identifiable
# (spec 3.1). Round-off in S alone leaves about 1e-16 of lambda_max in every direction.
RCOND = 1e-14
# practical identifiability: warn above these (condition number of the scaled F, |correlation|,
# standard error relative to the value)
COND_WARNING = 1e8
CORRELATION_WARNING = 0.99
RELATIVE_ERROR_WARNING = 0.5


# ---------------------------------------------------------------------------- sensitivities
@dataclass(frozen=True)
class OutputSensitivities:
    """ds/db of chosen outputs along chosen parameters on the time grid.

    ``S[i, k, j]`` = d(output k at t_i)/d(parameter j), shape (N+1, n_outputs, n_parameters),
    evaluated at ``values`` (the parameters' values).
    """

    t: np.ndarray
    outputs: tuple
    parameters: tuple
    values: np.ndarray
    S: np.ndarray

    def of(self, output: str, parameter: str | None = None) -> np.ndarray:
        """(N+1, n_parameters) sensitivities of one output, or (N+1,) along one parameter."""
        k = _index(self.outputs, output, "output")
        if parameter is None:
            return self.S[:, k, :]
        return self.S[:, k, _index(self.parameters, parameter, "parameter")]

    def relative(self) -> np.ndarray:
        """ds/d(ln b) = S * b: the change of each output per relative parameter change."""
        return self.S * self.values


def _index(names: Sequence[str], name: str, what: str) -> int:
    if name not in names:
        raise UnknownNameError(f"no {what} {name!r} here; the {what}s are {list(names)}")
    return list(names).index(name)


def output_sensitivities(system, traj, parameters: Sequence[str] | str,
                         outputs: Sequence[str] | None = None) -> OutputSensitivities:
    """Exact discrete sensitivities of ``outputs`` (default: all) of ``traj`` with respect to
    ``parameters``, by the tangent-linear sweep.

    The sweep reuses the factorisations a trajectory simulated with
    ``store_factorizations=True`` carries, and refactorises otherwise (the same numbers).
    """
    model = system.model
    params = [parameters] if isinstance(parameters, str) or hasattr(parameters, "name") \
        else list(parameters)
    params = [parameter_name(k) for k in params]
    if not params or len(set(params)) != len(params):
        raise InputError(f"parameters must be a non-empty list of distinct names: {params}")
    unknown = [p for p in params if p not in model.parameter_names]
    if unknown:
        raise UnknownNameError(f"model {model.name!r} has no parameter(s) {unknown}; its "
                               f"parameters are {model.parameter_names}")
    outs = list(model.output_names) if outputs is None else (
        [outputs] if isinstance(outputs, str) else list(outputs))
    unknown = [o for o in outs if o not in model.output_names]
    if unknown:
        raise UnknownNameError(f"model {model.name!r} has no output(s) {unknown}; its outputs "
                               f"are {model.output_names}")
    ds = tangent(system, traj, params, states=False).ds
    cols = [model.output_names.index(o) for o in outs]
    values = np.array([traj.params[p] for p in params])
    if cols and cols == list(range(cols[0], cols[0] + len(cols))):
        S = ds[:, cols[0]:cols[0] + len(cols)]   # outputs side by side: a view, no copy
    else:
        # np.take copies the chosen outputs' rows several times faster than fancy indexing
        S = np.take(ds, cols, axis=1)
    return OutputSensitivities(traj.t.copy(), tuple(outs), tuple(params), values, S)


# ---------------------------------------------------------------------------- noise
def _sigma(name: str, x) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x) \
            or not float(x) > 0:
        raise InputError(f"noise level (standard deviation) of output {name!r} must be a "
                         f"positive finite number, got {x!r}")
    return float(x)


def noise_levels(noise, outputs: Sequence[str]) -> dict:
    """{output: standard deviation} from one number for every output or a mapping that
    covers ``outputs`` exactly."""
    outputs = list(outputs)
    if isinstance(noise, numbers.Real):       # bool included: refused by _sigma
        return {k: _sigma(k, noise) for k in outputs}
    if not isinstance(noise, Mapping):
        raise InputError("noise must be one standard deviation or {output: standard "
                         f"deviation}} for the outputs {outputs}; got {type(noise).__name__}")
    unknown = [k for k in noise if k not in outputs]
    if unknown:
        raise UnknownNameError(f"noise given for {unknown}, which are not among the "
                               f"outputs {outputs}")
    missing = [k for k in outputs if k not in noise]
    if missing:
        raise InputError(f"no noise level for output(s) {missing}; give one for each of "
                         f"{outputs}")
    return {k: _sigma(k, noise[k]) for k in outputs}


def noise_covariance(outputs: Sequence[str], noise=None) -> np.ndarray:
    """R (n_outputs x n_outputs), the noise covariance of one sample, from ``noise``:

    None (R = I, the paper's choice), one standard deviation for every output, ``{output:
    standard deviation}`` covering every output (:func:`noise_levels`), a 1-D array of
    standard deviations or a full covariance matrix in the order of ``outputs``.
    """
    outputs = list(outputs)
    n = len(outputs)
    if noise is None:
        return np.eye(n)
    if isinstance(noise, (Mapping, numbers.Real)):
        return np.diag([s * s for s in noise_levels(noise, outputs).values()])
    R = np.asarray(noise, dtype=float)
    if R.ndim == 1 and R.shape == (n,):
        return np.diag([_sigma(k, x) ** 2 for k, x in zip(outputs, R)])
    if R.shape != (n, n):
        raise InputError(f"noise must be a standard deviation, {{output: standard "
                         f"deviation}}, {n} standard deviations or a {n} x {n} covariance "
                         f"matrix for the outputs {outputs}; got shape {R.shape}")
    if not np.all(np.isfinite(R)):
        raise InputError("the noise covariance matrix contains NaN or infinity")
    if np.max(np.abs(R - R.T)) > 1e-12 * np.max(np.abs(R)):
        raise InputError("the noise covariance matrix is not symmetric")
    try:
        linalg.cholesky(R, lower=True)
    except linalg.LinAlgError:
        w = np.linalg.eigvalsh(R)
        raise InputError(f"the noise covariance matrix is not positive definite (smallest "
                         f"eigenvalue {w[0]:.3e}) for the outputs {outputs}") from None
    return R


def fisher_matrix(S: np.ndarray, R: np.ndarray, eta: np.ndarray) -> np.ndarray:
    """sum_i eta_i S_i^T R^-1 S_i for S of shape (samples, outputs, parameters)."""
    ns, n_out, nb = S.shape
    # whiten: Z_i = L^-1 S_i, then F = sum_i eta_i Z_i^T Z_i, one product of a tall matrix.
    # L^-1 is n_out x n_out (tiny); applying it by matmul is far cheaper than a triangular
    # solve with (samples x parameters) right-hand sides.
    # One product for all samples (a batched matmul of ns tiny matrices costs far more):
    # Z[k, i, j] = sum_l Linv[k, l] S[i, l, j], rows of A ordered by output, then sample.
    # R = I (the default) needs no whitening: Z = S, the same numbers (1 x + 0 y = x) without
    # the product's (samples x outputs x parameters) temporary
    if np.array_equal(R, np.eye(n_out)):
        Z = S.transpose(1, 0, 2)
    else:
        L = linalg.cholesky(R, lower=True)
        Linv = linalg.solve_triangular(L, np.eye(n_out), lower=True)
        Z = (Linv @ S.transpose(1, 0, 2).reshape(n_out, ns * nb)).reshape(n_out, ns, nb)
    eta = np.asarray(eta, dtype=float)
    # weights of 1 (the default "sum") leave Z as it is: x * 1 = x, without the temporary,
    # which for one output costs more than the product
    A = (Z if np.all(eta == 1.0) else Z * np.sqrt(eta)[None, :, None]).reshape(n_out * ns, nb)
    return A.T @ A


def parameter_scales(parameters: Sequence[str], values: Sequence[float] | np.ndarray,
                     scaling="relative") -> np.ndarray:
    """Scales w_j of the scaled parameters b_j / w_j: ``"relative"`` (|b_j|, or 1 where
    b_j = 0), ``None``/``"none"`` (1), ``{name: scale}`` or an array."""
    parameters = list(parameters)
    values = np.asarray(values, dtype=float)
    if isinstance(scaling, str) and scaling in ("relative", "start"):
        return np.where(values != 0, np.abs(values), 1.0)
    if scaling is None or (isinstance(scaling, str) and scaling == "none"):
        return np.ones(len(parameters))
    if isinstance(scaling, Mapping):
        unknown = [k for k in scaling if k not in parameters]
        if unknown:
            raise UnknownNameError(f"scales given for {unknown}, which are not among the "
                                   f"parameters {parameters}")
        s = np.array([float(scaling.get(k, abs(v) or 1.0)) for k, v in zip(parameters, values)])
    elif isinstance(scaling, str):
        raise InputError(f"scaling must be 'relative' (or 'start'), 'none', {{name: scale}} or "
                         "an array, "
                         f"got {scaling!r}")
    else:
        s = np.asarray(scaling, dtype=float)
        if s.shape != (len(parameters),):
            raise InputError(f"{s.size} scales for {len(parameters)} parameters")
    if np.any(~np.isfinite(s)) or np.any(s <= 0):
        raise InputError(f"scales must be positive and finite: {dict(zip(parameters, s))}")
    return s


# ---------------------------------------------------------------------------- Fisher record
@dataclass(frozen=True)
class FisherInformation:
    """F = sum_i eta_i S_i^T R^-1 S_i at ``values`` of ``parameters``.

    ``matrix`` is in physical units (1 / (unit of b_j * unit of b_k)); ``scaled`` is
    W F W with W = diag(``scales``). ``noise`` is R per sample (outputs in ``outputs``
    order); ``quadrature`` says which eta was used; ``n_samples`` counts the sample times.
    """

    matrix: np.ndarray
    parameters: tuple
    values: np.ndarray
    scales: np.ndarray
    outputs: tuple
    noise: np.ndarray
    quadrature: str
    n_samples: int

    @property
    def scaled(self) -> np.ndarray:
        """W F W with W = diag(scales): the Fisher matrix of the scaled parameters."""
        return self.matrix * np.outer(self.scales, self.scales)

    def statistics(self, **thresholds) -> ParameterStatistics:
        """Covariance F^-1, standard errors, correlations, eigen-directions and warnings
        (see :func:`parameter_statistics`). Never raises on a singular F: it says so."""
        return parameter_statistics(self, **thresholds)

    def covariance(self, scaled: bool = False) -> np.ndarray:
        """F^-1 (the Cramer-Rao bound of the covariance), in physical or scaled parameters.

        Raises :class:`NotIdentifiableError`, naming the parameter combination the outputs do
        not determine, when F is singular."""
        st = self.statistics()
        if not st.identifiable or st.covariance is None:     # (identifiable: it has one)
            raise NotIdentifiableError(st.singular_message(), st.unidentifiable)
        return st.covariance / np.outer(self.scales, self.scales) if scaled \
            else st.covariance

    def to_dict(self) -> dict:
        """The matrix, its scaling and its settings as plain values (for JSON reports)."""
        return {"parameters": list(self.parameters), "values": self.values.tolist(),
                "scales": self.scales.tolist(), "matrix": self.matrix.tolist(),
                "scaled": self.scaled.tolist(), "outputs": list(self.outputs),
                "noise_covariance": self.noise.tolist(), "quadrature": self.quadrature,
                "samples": self.n_samples}


def fisher_information(sensitivities: OutputSensitivities, noise=None, *, quadrature="sum",
                       scaling="relative") -> FisherInformation:
    """The Fisher information of the parameters of ``sensitivities`` for output noise
    ``noise`` (see :func:`noise_covariance`; default R = I).

    ``quadrature``: eta_i, ``"sum"`` (default, per-sample noise), ``"left"``, ``"trapezoid"``
    or an array over the grid (zeros leave samples out). ``scaling``: the scales of the
    scaled matrix (see :func:`parameter_scales`; default ``|b|``).
    """
    sens = sensitivities
    R = noise_covariance(sens.outputs, noise)
    eta = quadrature_weights(sens.t, quadrature)
    # "sum"'s weights are ones; the others' are checked (an array, or times out of order)
    if not (isinstance(quadrature, str) and quadrature == "sum") and (
            np.any(~np.isfinite(eta)) or np.any(eta < 0)):
        raise InputError("quadrature weights must be finite and >= 0")
    F = fisher_matrix(sens.S, R, eta)
    scales = parameter_scales(sens.parameters, sens.values, scaling)
    label = quadrature if isinstance(quadrature, str) else "custom weights"
    return FisherInformation(F, sens.parameters, sens.values.copy(), scales, sens.outputs, R,
                             label, int(np.count_nonzero(eta)))


# ---------------------------------------------------------------------------- statistics
@dataclass(frozen=True)
class ParameterStatistics:
    """What the Fisher information says about the parameters.

    ``covariance`` = F^-1 (physical units), ``standard_errors`` = sqrt(diag), relative ones
    divided by ``|b|`` (NaN where b = 0), ``correlation`` = C_jk / sqrt(C_jj C_kk). Eigenvalues
    (ascending) and eigenvectors (columns) are those of the scaled F; ``condition`` =
    lambda_max / lambda_min. When F is singular (lambda_min <= RCOND lambda_max),
    ``identifiable`` is False, the covariance-derived fields are None and ``unidentifiable``
    lists the null directions as ``{parameter: coefficient}`` of scaled changes.
    """

    parameters: tuple
    values: np.ndarray
    scales: np.ndarray
    covariance: np.ndarray | None
    standard_errors: np.ndarray | None
    relative_standard_errors: np.ndarray | None
    correlation: np.ndarray | None
    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    condition: float
    identifiable: bool
    unidentifiable: tuple
    warnings: tuple

    def standard_error(self, name: str) -> float:
        """The standard error of parameter ``name`` (``NotIdentifiableError`` when F is
        singular)."""
        if self.standard_errors is None:
            raise NotIdentifiableError(self.singular_message(), self.unidentifiable)
        return float(self.standard_errors[_index(self.parameters, name, "parameter")])

    def singular_message(self) -> str:
        """The message that names the parameter directions that are not identifiable."""
        return _singular_message(self.unidentifiable, self.parameters, self.scales,
                                 self.values)

    def to_dict(self) -> dict:
        """The statistics as plain values (for JSON reports)."""
        names = list(self.parameters)

        def vec(x):
            return None if x is None else {k: _num(v) for k, v in zip(names, x)}

        return {
            "identifiable": self.identifiable,
            "standard_errors": vec(self.standard_errors),
            "relative_standard_errors": vec(self.relative_standard_errors),
            "covariance": None if self.covariance is None else self.covariance.tolist(),
            "correlation": None if self.correlation is None else self.correlation.tolist(),
            "eigenvalues_scaled": [_num(x) for x in self.eigenvalues],
            "eigenvectors_scaled": [vec(self.eigenvectors[:, k])
                                    for k in range(len(names))],
            "condition_scaled": _num(self.condition),
            "unidentifiable": [dict(d) for d in self.unidentifiable],
            "warnings": list(self.warnings),
        }

    def summary(self) -> str:
        """A readable report: values with standard errors, correlations, condition, warnings."""
        lines = []
        se, rse, corr = self.standard_errors, self.relative_standard_errors, self.correlation
        if se is not None and rse is not None and corr is not None:   # (all three or none)
            for k, name in enumerate(self.parameters):
                rel = rse[k]
                rel_txt = f" ({100 * rel:.3g} %)" if math.isfinite(rel) else ""
                lines.append(f"  {name:>12s}: {self.values[k]:.10g} +- "
                             f"{se[k]:.3g}{rel_txt}")
            if len(self.parameters) > 1:
                lines.append("  correlation: " + ", ".join(
                    f"{a}-{b} {corr[i, j]:+.3f}"
                    for i, a in enumerate(self.parameters)
                    for j, b in enumerate(self.parameters) if j > i))
        lines.append(f"  condition number of the scaled Fisher information: "
                     f"{self.condition:.3g}")
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def _num(x):
    x = float(x)
    return x if math.isfinite(x) else None


def _combination(direction: Mapping, names, scales, values) -> str:
    """'0.707 Δc/c - 0.707 Δd/d': a direction in scaled parameters, readable (Δc alone for
    a scale of 1, Δc/c for a relative one, Δc/1000 for another scale)."""
    terms = []
    for name, coef in sorted(direction.items(), key=lambda kv: -abs(kv[1])):
        k = list(names).index(name)
        if scales[k] == 1.0:
            change = f"Δ{name}"
        elif values[k] != 0 and scales[k] == abs(values[k]):
            change = f"Δ{name}/{name}"
        else:
            change = f"Δ{name}/{scales[k]:.4g}"
        sign = "-" if coef < 0 else "+"
        terms.append(f"{sign} {abs(coef):.3g} {change}")
    text = " ".join(terms)
    return text[2:] if text.startswith("+ ") else "-" + text[1:]


def _singular_message(directions, names, scales, values) -> str:
    combos = "; ".join(_combination(d, names, scales, values) for d in directions)
    return (f"the Fisher information is singular: {combos} is not identifiable from these "
            "outputs (it does not change them to first order); fix one of the parameters "
            "involved, measure more outputs or use a richer input")


def _direction(v: np.ndarray, names) -> dict:
    """{name: coefficient} of a unit vector, sign fixed (largest entry positive), tiny entries
    dropped."""
    v = v * (1.0 if v[np.argmax(np.abs(v))] >= 0 else -1.0)
    return {n: float(c) for n, c in zip(names, v) if abs(c) >= 1e-3}


def parameter_statistics(fisher: FisherInformation, *, rcond: float = RCOND,
                         cond_warning: float = COND_WARNING,
                         correlation_warning: float = CORRELATION_WARNING,
                         relative_error_warning: float = RELATIVE_ERROR_WARNING
                         ) -> ParameterStatistics:
    """Covariance, standard errors, correlations, eigen-analysis and identifiability
    warnings from a Fisher information (thresholds: see the module constants)."""
    names = list(fisher.parameters)
    Fs = fisher.scaled
    if not np.all(np.isfinite(Fs)):
        raise InputError("the Fisher information contains NaN or infinity (a noise level of "
                         "zero, or sensitivities that overflowed)")
    Fs = 0.5 * (Fs + Fs.T)
    lam, V = np.linalg.eigh(Fs)
    lam_max = lam[-1]
    null = [k for k in range(len(lam)) if not lam[k] > rcond * max(lam_max, 0.0)] \
        if lam_max > 0 else list(range(len(lam)))
    condition = lam_max / lam[0] if lam[0] > 0 else math.inf
    warnings: list[str] = []
    scales, values = fisher.scales, fisher.values
    if null:
        dirs = tuple(_direction(V[:, k], names) for k in null)
        return ParameterStatistics(tuple(names), values, scales, None, None, None, None, lam,
                                   V, condition, False, dirs,
                                   (_singular_message(dirs, names, scales, values),))
    # F^-1 from the eigen-decomposition we already have: exactly symmetric
    Cs = (V / lam) @ V.T
    Cs = 0.5 * (Cs + Cs.T)
    C = Cs * np.outer(scales, scales)
    se = np.sqrt(np.diag(C))
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(values != 0, se / np.abs(values), np.nan)
    d = np.sqrt(np.diag(Cs))
    corr = Cs / np.outer(d, d)
    np.fill_diagonal(corr, 1.0)
    if condition > cond_warning:
        weak = _direction(V[:, 0], names)
        warnings.append(
            f"ill-conditioned (condition number {condition:.3g} of the scaled Fisher "
            f"information): the combination {_combination(weak, names, scales, values)} is "
            f"determined {math.sqrt(condition):.3g} times less precisely than the best one")
    for i, a in enumerate(names):
        for j in range(i + 1, len(names)):
            if abs(corr[i, j]) > correlation_warning:
                warnings.append(f"{a} and {names[j]} are strongly correlated "
                                f"({corr[i, j]:+.4f}): the data determine a combination of "
                                "them better than either one")
    for k, name in enumerate(names):
        if rel[k] > relative_error_warning:
            warnings.append(f"{name} is practically not identifiable: its standard error is "
                            f"{100 * rel[k]:.3g} % of its value")
    return ParameterStatistics(tuple(names), values, scales, C, se, rel, corr, lam, V,
                               condition, True, (), tuple(warnings))
