"""Analyses of trajectories and models: ``pod`` (snapshot proper orthogonal decomposition),
``linear`` (linearisation and natural modes), ``quadrature`` (weights of integrals over a time
grid). Sits below the costs, which build on these.

May import: ``symdae.simulation``, ``symdae.data``, ``symdae.model`` and the layers below.
"""
