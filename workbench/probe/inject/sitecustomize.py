"""Loaded by Python at start-up when this folder is on PYTHONPATH: starts the workbench probe.

It then loads the sitecustomize this one shadows, if there is one further along sys.path.
"""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
try:
    if _here not in sys.path:
        sys.path.insert(0, _here)
    import workbench_probe

    workbench_probe.install()
except Exception as _exc:  # never stop the program from starting
    sys.stderr.write(f"workbench-probe-error install: {_exc}\n")


def _chain() -> None:
    import importlib.machinery
    import importlib.util

    rest = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.origin and os.path.dirname(os.path.abspath(spec.origin)) != _here:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


try:
    _chain()
except Exception as _exc:
    sys.stderr.write(f"workbench-probe-error chained sitecustomize: {_exc}\n")
