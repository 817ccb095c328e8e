"""sqlite-utils, imported here and only here.

sqlite-utils imports pandas and numpy when they are installed, at its own import, only to map
their scalar types when it guesses column types (sqlite_utils/db.py). That costs 280-350 ms at
every command and app start on the reference machine (numpy comes with krippendorff, pandas with
the test extra), and the workbench writes neither type: its tables are made by storage/schema.py.
So they are kept out while sqlite-utils loads; anything that imports them later gets them whole.
"""

from __future__ import annotations

import sys

_KEPT_OUT = [name for name in ("pandas", "numpy") if name not in sys.modules]
for _name in _KEPT_OUT:
    sys.modules[_name] = None  # type: ignore[assignment]  # `import` of it raises ImportError
try:
    from sqlite_utils import Database, Migrations
finally:
    for _name in _KEPT_OUT:
        del sys.modules[_name]

__all__ = ["Database", "Migrations"]
