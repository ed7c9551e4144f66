"""What pyproject.toml cannot say without setuptools' experimental tables: the C kernels.

One optional extension module per stage that has kernels (candidates and features),
``heaprank._accel._<stage>`` from ``heaprank/_accel/_<stage>.c`` (see
heaprank/_accel/__init__.py): without a C compiler the install still succeeds and every stage
runs its Python passes.
"""

from setuptools import Extension, setup

STAGES = ("candidates", "features")

setup(ext_modules=[
    Extension(f"heaprank._accel._{stage}", [f"heaprank/_accel/_{stage}.c"],
              depends=["heaprank/_accel/_kernels.h"], optional=True)
    for stage in STAGES
])
