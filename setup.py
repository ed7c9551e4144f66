"""What pyproject.toml cannot say without setuptools' experimental tables: the C kernels.

``heaprank._speedups`` (see heaprank/_accel.py) is optional: without a C compiler the install
still succeeds and every pass runs in pure Python.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("heaprank._speedups", ["heaprank/_speedups.c"], optional=True)])
