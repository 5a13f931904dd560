"""Costs on the output trajectory: each returns J and dJ/dS, the adjoint's source term.

``base``: the interface and sums; ``time_domain``: least squares against
data and output integrals; ``windows``, ``fourier``, ``frequency``: window shapes, the Fourier
coefficients of outputs (a fixed linear map per grid) and costs on them; ``pod``: costs on
proper orthogonal mode coefficients; ``orders``: engine orders in a run-up.

May import: ``symdae.analysis``, ``symdae.data``, ``symdae.simulation`` and the layers below.
"""
