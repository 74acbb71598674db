"""Build configuration that pyproject.toml cannot express: the optional C extension.

``nvmath._fastcall`` (nvmath/_fastcall.c) is the compiled hot path of the library calls. It needs only
Python's headers (no CUDA), and it is optional: without a C compiler, or on a platform other than
64-bit Linux on x86-64 / aarch64, the build of the extension fails with a warning, the install still
succeeds and nvmath uses its pure-Python path (``python -m nvmath`` says which one is active).

Build it in a source checkout with ``python setup.py build_ext --inplace`` (or ``make ext``). Its blocks
are in ``nvmath/_fastcall.d/`` (included by ``_fastcall.c``: one translation unit).
"""

from glob import glob

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "nvmath._fastcall",
            sources=["nvmath/_fastcall.c"],
            depends=sorted(glob("nvmath/_fastcall.d/*.c")),  # (rebuilt when a block changes; in the sdist)
            optional=True,
            extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        )
    ]
)
