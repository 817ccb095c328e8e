"""The probe's remote hand-back: `python3 handback.py FOLDER`, run after the program on a remote host.

Standard library only, shipped beside the probe (workbench/rerun/backends.py).
"""

import base64
import os
import sys


def dump(folder: str, width: int = 3000) -> None:
    """Print every probe file of `folder` as `@@workbench-probe-file NAME PART PARTS B64` lines.

    Remote backends append this to the run's output so probe files come back over the same
    stream as the log, whatever the transport; the runner takes these lines out of the log.
    """
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    except OSError:
        return
    for name in names:
        with open(os.path.join(folder, name), "rb") as fh:
            data = base64.b64encode(fh.read()).decode()
        parts = [data[i:i + width] for i in range(0, len(data), width)] or [""]
        for i, part in enumerate(parts):
            sys.stdout.write(f"@@workbench-probe-file {name} {i} {len(parts)} {part}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    if len(sys.argv) == 2:
        dump(sys.argv[1])
