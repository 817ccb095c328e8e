"""The one part of the build that pyproject.toml cannot declare: the log scan's C loops
(workbench/verify/_fastscan.c, issue 19). Optional: where no C compiler is found the build goes on
and the scan runs its pure-Python twins (workbench/verify/logscan.py), with the same results."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("workbench.verify._fastscan", ["workbench/verify/_fastscan.c"], optional=True)])
