"""Versions. GENERATOR_VERSION is part of every cache key: bump it when emitted code changes."""
__version__ = "0.1.0"
GENERATOR_VERSION = "0.3.0"
ABI_VERSION = 3  # must equal SYMDAE_ABI_VERSION in symdae/core/symdae_kernels.h
