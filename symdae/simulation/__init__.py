"""Running a compiled model: ``compile`` (model -> derive -> emit -> build -> System),
``system`` (System), ``scenario`` (the one record of a run), ``trajectory``, ``initial``
(consistent initial state and its derivatives), ``sensitivity`` (tangent-linear and adjoint
sweeps), ``checkpoint`` (memory-bounded gradients), ``backends/`` (the written sweep contract
and its compiled and NumPy implementations) and ``core/`` (the model-agnostic Cython core).

May import: ``symdae.model``, ``symdae.compilation``, the foundation modules (``errors``,
``threads``, ``progress``, ``_version``) and this package.
"""
