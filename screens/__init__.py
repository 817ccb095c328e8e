"""The Textual user interface: the only package that imports Textual.

`screens.app.WorkbenchApp` is the entry point; `workbench open DB` runs it.
"""
