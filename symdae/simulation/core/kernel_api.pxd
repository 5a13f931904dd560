# Cython view of symdae_kernels.h (the kernel interface); the kernels themselves, their weights
# and output blocks are defined in symdae/model/kernels.py. The enum must list them in that order
# (tests/model/test_kernel_spec.py checks the header, this file and the ABI number against the spec).
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
        const double* st

    ctypedef void (*symdae_kernel)(const symdae_args* x, const double* w, double* out) noexcept nogil

    enum:   # symdae_kernel_id: plain int constants, so that they index kernel[]
        SYMDAE_RESIDUAL
        SYMDAE_NEWTON
        SYMDAE_OUTPUTS
        SYMDAE_RESIDUAL_MAGNITUDE
        SYMDAE_JACOBIANS
        SYMDAE_PARAM_JACOBIANS
        SYMDAE_OUTPUT_JACOBIANS
        SYMDAE_STATE_JVP
        SYMDAE_PARAM_JVP
        SYMDAE_OUTPUT_JVP
        SYMDAE_STATE_VJP
        SYMDAE_PARAM_VJP
        SYMDAE_OUTPUT_VJP
        SYMDAE_INITIAL_STATE
        SYMDAE_INITIAL_STATE_JACOBIAN
        SYMDAE_CONSTRAINT_VELOCITY
        SYMDAE_ACCELERATION_CONSTRAINT
        SYMDAE_INPUT_VJP
        SYMDAE_STATE_HVP
        SYMDAE_MASSLESS_ROWS
        SYMDAE_TIME_TERMS
        SYMDAE_TIME_TERMS_SENSITIVITY
        SYMDAE_STATE_TERMS
        SYMDAE_N_KERNELS

    ctypedef struct symdae_kernel_entry:
        symdae_kernel fn
        int out_size
        int w_size
        int accumulate
        int tau             # the time terms it reads: 1 forward, 2 sensitivity (bits)

    enum: SYMDAE_LU_UNSTABLE
    ctypedef int (*symdae_lu_factor)(const double* K, double* B, double tol) noexcept nogil
    ctypedef void (*symdae_lu_solve)(const double* B, double* b) noexcept nogil
    ctypedef void (*symdae_lu_solve_rows)(const double* B, double* b, int nd) noexcept nogil

    enum: SYMDAE_TANGENT_ND
    ctypedef void (*symdae_tangent_product)(const double* vals, const double* x, double* y,
                                            const double* coef) noexcept nogil
    ctypedef struct symdae_tangent_products:
        int nnz[3]
        symdae_tangent_product fn[5][3]     # [nd][product] for nd <= SYMDAE_TANGENT_ND = 4

    ctypedef struct symdae_run:
        double t0, h
        long offset
        double cM, ap, s, gh, ca, cv1, cq, cvq, ry, rp
        double kw[3]
        const double* p
        const double* u
        double* q
        double* v
        double* a
        double* w
        double* lam

    ctypedef struct symdae_steps:
        symdae_run run
        double rtol, pivot_tol
        int max_iter, refresh_horizon
        double* s_out
        const int* noise_row
        const int* noise_idx
        int noise_nn
        double* nu
        double* fq
        double* gprev
        double* K
        double* LU
        double* Ks
        double* lu_out
        double* tau_out
        double* st_out
        int* piv_out
        int piv_sparse
        const double* tau_in
        long iterations, factorizations

    ctypedef long (*symdae_forward_steps)(symdae_steps* r, long i, long last) noexcept nogil

    ctypedef struct symdae_adjoint_steps:
        symdae_run run
        const double* lu
        const double* tau
        const double* st
        const double* dphi
        const int* piv
        int piv_sparse
        double pivot_tol
        double* K
        double* LUw
        double* xb
        double* gacc
        double* wb
        double* rd_next
        double* hat

    ctypedef long (*symdae_backward_steps)(symdae_adjoint_steps* r, long i, long stop) noexcept nogil

    ctypedef struct symdae_tangent_steps:
        symdae_run run
        int nd
        const double* tau_in
        const double* st_in
        int tau_reads
        const double* lu
        const int* piv
        int piv_sparse
        double pivot_tol
        double* K
        double* LUw
        double** T
        double** J
        double** P
        double* S
        double* xnew
        double* rhs
        const double* D
        symdae_tangent_product state_product[3]
        const double* coef
        const int* prow[3]
        const int* pcol[3]
        const int* pat[3]
        const double* pcoef[3]
        int pnnz[3]
        double* ds
        long ds_stride, rows, N
        double* dq
        double* dv
        double* da
        double* dw
        double* dl
        int sn, sm

    ctypedef long (*symdae_forward_tangent_steps)(symdae_tangent_steps* r, long i,
                                                  long last) noexcept nogil

    ctypedef struct symdae_model:
        int abi_version
        int n, m, n_p, n_u, n_s, n_tau
        int n_st            # state terms (SYMDAE_STATE_TERMS; symdae_kernels.h)
        int jumps           # the residual has terms that jump (newton.pxd, switch_search)
        int refresh_horizon # newton.pxd: refresh when more iterations than this are predicted
        symdae_kernel_entry kernel[SYMDAE_N_KERNELS]
        const int* lu_order     # the written-out LU (symdae_kernels.h), or lu_factor NULL
        const int* lu_kpos
        int lu_nk
        symdae_lu_factor lu_factor
        symdae_lu_solve lu_solve
        symdae_lu_solve lu_solve_t
        symdae_lu_solve_rows lu_solve_rows
        symdae_forward_steps forward_steps  # compiled_steps.h, or NULL
        symdae_backward_steps adjoint_steps  # compiled_steps.h, or NULL
        symdae_forward_tangent_steps tangent_steps  # compiled_steps.h, or NULL
        symdae_tangent_products tangent     # tangent_products.py's written-out products
