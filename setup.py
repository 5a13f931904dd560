"""Build of symdae's compiled HHT core (the per-model kernels are compiled at run time).

Packages are found, not listed, so a new subpackage cannot be left out of the wheel; the
bundled models (top-level ``models/``) install as ``symdae.models``, and the core's Cython
headers ship as package data because every per-model build cimports them.
"""
from Cython.Build import cythonize
from setuptools import Extension, find_packages, setup

CORE = "symdae/simulation/core"
# -fvect-cost-model=cheap: GCC's -O3 default ("dynamic") vectorizes the core's short loops over
# n or n + m behind run-time alias checks between the work arrays, and for small models the
# checks cost more than the loop saves; the cheap model still vectorizes the loops of the
# large ones (measured with benchmarks/bench_reference.py).
# -fopenmp-simd: honours the `omp simd` pragmas of vector_ops.h (no OpenMP runtime), which let
# the Newton loop's max-norms run in vector lanes (see there).
FLAGS = ["-O3", "-fvect-cost-model=cheap", "-fopenmp-simd", "-g0"]
# Every module's header sets these too; given here they also reach the inline functions of
# the .pxd files (a directive comment there is not read), whose divisions would otherwise test
# for a zero divisor and raise ZeroDivisionError from nogil code (IEEE division is meant: a
# zero pivot or round-off level is tested for where it matters).
DIRECTIVES = {"language_level": 3, "boundscheck": False, "wraparound": False,
              "cdivision": True, "initializedcheck": False, "nonecheck": False}
extensions = [
    Extension("symdae.simulation.core.hht", [f"{CORE}/hht.pyx"], include_dirs=[CORE],
              extra_compile_args=FLAGS),
    # the reverse-over-tangent sweep of optimal input design (its recursion: the header comment)
    Extension("symdae.simulation.core.design_sweep", [f"{CORE}/design_sweep.pyx"], include_dirs=[CORE],
              extra_compile_args=FLAGS),
    # sums that reproduce NumPy's bit for bit: no product fused into an addition
    Extension("symdae.simulation.core.reductions", [f"{CORE}/reductions.pyx"],
              extra_compile_args=FLAGS + ["-ffp-contract=off"]),
]

setup(
    packages=find_packages(include=["symdae", "symdae.*"]) + ["symdae.models"],
    package_dir={"symdae.models": "models"},
    package_data={"symdae.simulation.core": ["*.pxd", "*.h"], "symdae.models": ["*.py"]},
    ext_modules=cythonize(extensions, compiler_directives=DIRECTIVES),
    zip_safe=False,
)
