# Cython view of symdae_kernels.h (the kernel interface); see the header for the layouts.
cdef extern from "symdae_kernels.h":
    enum: SYMDAE_ABI_VERSION

    ctypedef struct symdae_args:
        double t
        const double* q
        const double* v
        const double* a
        const double* lam
        const double* p
        const double* u
        const double* tau

    ctypedef void (*symdae_kernel)(const symdae_args* x, const double* w, double* out) noexcept nogil

    ctypedef struct symdae_model:
        int abi_version
        int n, m, n_p, n_u, n_s, n_tau
        symdae_kernel residual
        symdae_kernel newton
        symdae_kernel jacobians
        symdae_kernel param_jacobians
        symdae_kernel param_vjp
        symdae_kernel state_vjp
        symdae_kernel outputs
        symdae_kernel output_jacobians
        symdae_kernel output_vjp
        symdae_kernel initial_state
        symdae_kernel initial_state_jacobian
        symdae_kernel constraint_velocity
        symdae_kernel acceleration_constraint
        symdae_kernel time_terms
        symdae_kernel time_terms_sensitivity
