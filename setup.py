"""Build of symdae's compiled HHT core (the per-model kernels are compiled at run time)."""
from Cython.Build import cythonize
from setuptools import Extension, setup

core = Extension(
    "symdae.core._hht",
    ["symdae/core/_hht.pyx"],
    include_dirs=["symdae/core"],
    extra_compile_args=["-O3", "-g0"],
)
# the reverse-over-tangent sweep of optimal input design (symdae/core/design.pxd)
design = Extension(
    "symdae.core._design",
    ["symdae/core/_design.pyx"],
    include_dirs=["symdae/core"],
    extra_compile_args=["-O3", "-g0"],
)

setup(
    packages=["symdae", "symdae.core", "symdae.models"],
    package_dir={"symdae.models": "models"},
    package_data={"symdae.core": ["*.pxd", "*.h"], "symdae.models": ["*.py"]},
    ext_modules=cythonize([core, design], compiler_directives={"language_level": 3}),
    zip_safe=False,
)
