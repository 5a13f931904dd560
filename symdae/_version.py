"""Versions. The kernel ABI number must equal SYMDAE_ABI_VERSION in
symdae/simulation/core/symdae_kernels.h (tests/model/test_kernel_spec.py checks it); the cache key hashes the
generator's sources, so no generator version needs bumping by hand."""
__version__ = "0.1.0"
ABI_VERSION = 21
