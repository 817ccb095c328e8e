"""The package's one compiled part (issue 19): the metric extraction's walk of a log's lines in C,
`workbench.verify._shapewalk`, built where a C compiler is found. It is optional: without it the
app installs and runs the same, reading step lines with the shape's regex instead (`findall`,
about 10x slower); tests/test_shapewalk.py checks that both paths give the same facts."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("workbench.verify._shapewalk", ["workbench/verify/_shapewalk.c"], optional=True)])
