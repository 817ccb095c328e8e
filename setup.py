"""The one part of the build that pyproject.toml cannot declare: the log scan's C loops (issue 19),
each optional: where no C compiler is found the build goes on and the scan runs their pure-Python
twins (workbench/verify/steplines.py, shapes.py), with the same results, more slowly.

- workbench/verify/_steplines.c: the plain pattern's step lines (steps, planned total, where each
  starts) for the steps-only scan; tests/test_steplines.py checks it against its twin;
- workbench/verify/_shapewalk.c: metric extraction's walk of a piece's lines against a step line's
  shape (about 10x the shape regex's `findall`); tests/test_shapewalk.py checks both paths agree."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("workbench.verify._steplines", ["workbench/verify/_steplines.c"], optional=True),
    Extension("workbench.verify._shapewalk", ["workbench/verify/_shapewalk.c"], optional=True),
])
