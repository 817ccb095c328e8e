"""The parts of the build that pyproject.toml cannot declare.

The packages: the code's folders as found, and the top-level assets/ folder (the stylesheet and the
demo study) mapped to the `workbench_assets` package, whose data workbench/config.py finds with
importlib.resources, so `pip install .`, pipx and a wheel give a complete app (pyproject.toml's
package discovery cannot add a folder under another name). assets/demo/ also holds the script and
project that regenerate the bundle: only demo/bundle/ ships.

The log scan's C loops (issue 19), each optional: where no C compiler is found the build goes on
and the scan runs their pure-Python (workbench/verify/steplines.py, shapes.py), with the same results, more slowly.

- workbench/verify/_steplines.c: the plain pattern's step lines (steps, planned total, where each
  starts) for the steps-only scan; tests/test_steplines.py checks it against its twin;
- workbench/verify/_shapewalk.c: metric extraction's walk of a piece's lines against a step line's
  shape (about 10x the shape regex's `findall`); tests/test_shapewalk.py checks both paths agree."""

from setuptools import Extension, find_namespace_packages, setup

# The data folders are listed as (namespace) packages, as setuptools wants data folders to be.
ASSETS = ["workbench_assets", *("workbench_assets." + name for name in
                                find_namespace_packages(where="assets", include=["styles", "demo.bundle*"]))]

setup(
    packages=[*find_namespace_packages(include=["domain*", "storage*", "workbench", "workbench.*", "screens*", "cli*"]),
              *ASSETS],
    package_dir={"workbench_assets": "assets"},
    package_data={"workbench_assets.styles": ["*.tcss"], "workbench_assets.demo.bundle": ["*.toml"],
                  "workbench_assets.demo.bundle.migrations": ["**/*"]},
    ext_modules=[
        Extension("workbench.verify._steplines", ["workbench/verify/_steplines.c"], optional=True),
        Extension("workbench.verify._shapewalk", ["workbench/verify/_shapewalk.c"], optional=True),
    ],
)
