"""The model stage: what the user writes and everything derived from it without a compiler.

``definition`` (Model: checked symbols and shapes), ``derivation`` (pure SymPy: M, Q, C, C_q, the
Jacobian blocks, d/dp), ``kernels`` (the one kernel spec: blocks, sizes, layouts), ``graph`` and
``graph_kernels`` (a large model's derivative kernels by the chain rule on its common-
subexpression graph), ``walk`` (one visit per distinct subexpression), ``printer``
and ``emit`` (the Cython text), ``roundoff`` (round-off models of expressions), ``files``
(model files and the bundled models).

May import: ``symdae.errors``, ``symdae._version`` and this package only.
"""
