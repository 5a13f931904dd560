"""Identification: ``experiment`` (a system, a cost and a scenario; evaluated on any executor),
``identify`` (scipy.optimize with exact gradients), ``least_squares`` and ``residuals``
(Gauss-Newton), ``shooting`` and ``segments`` (multiple shooting), ``gridsearch``, ``fisher``
(output sensitivities and Fisher information), ``statistics``, ``hac`` (Newey-West standard
errors for correlated residuals) and ``montecarlo``.

May import: ``symdae.costs``, ``symdae.analysis`` and the layers below.
"""
