"""The Textual user interface: the only package that imports Textual.

`screens.app.WorkbenchApp` is the entry point; `workbench open DB` runs it.

- `screens/*.py`: the Screen classes (study, migration, attempt, compare, file, help, export,
  brief, rerun, the forms), the effort-keys mixin (effort.py), review time (review_time.py),
  the attempt cursor the screens pass each other (navigation.py), worker reads (data.py),
  Rich Text from untrusted strings (text.py) and every message (messages.py).
- `screens/widgets/`: reusable widgets (tables, virtual line views, log, diff, curves, the
  effort panel, the verdict list).
- `screens/presenters/`: pure functions from domain objects to Rich Text and rows, and the
  theme's colours (palette.py).
"""
