"""What pyproject.toml cannot say without setuptools' experimental tables: the C kernels.

``heaprank._accel._kernels`` (see heaprank/_accel/__init__.py) is optional: without a C compiler the install
still succeeds and every pass runs in pure Python.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("heaprank._accel._kernels", ["heaprank/_accel/_kernels.c"], optional=True)])
