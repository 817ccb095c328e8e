"""The workbench's probe: put this folder on PYTHONPATH of a run and it prints, at exit, one line

    workbench-probe {"device_kind": "CPU", "global_device_count": 4, "world_size": 1, ...}

with what torch_xla's runtime says about the devices the process had, read by the verifier
(level 3). It does nothing when the run never imported torch_xla, and it never raises.
"""

import atexit
import json
import os
import sys


def _report() -> None:
    if "torch_xla" not in sys.modules:
        return
    try:
        import torch_xla.core.xla_model as xm
        import torch_xla.runtime as xr

        record = {
            "device_kind": xm.xla_device_hw(xm.xla_device()),
            "global_device_count": xr.global_runtime_device_count(),
            "world_size": xr.world_size(),
            "rank": xr.global_ordinal(),
            "pid": os.getpid(),
        }
        if os.environ.get("WORLD_SIZE"):
            record["launcher_world_size"] = int(os.environ["WORLD_SIZE"])
        print("workbench-probe " + json.dumps(record, sort_keys=True), flush=True)
    except Exception as exc:  # noqa: BLE001 - a probe must never fail the run
        print(f"workbench-probe-error {type(exc).__name__}: {exc}", flush=True)


atexit.register(_report)
