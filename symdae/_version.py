"""Versions. GENERATOR_VERSION is part of every cache key: bump it when emitted code changes."""
__version__ = "0.1.0"
GENERATOR_VERSION = "0.2.0"
ABI_VERSION = 2  # must equal SYMDAE_ABI_VERSION in symdae/core/symdae_kernels.h
