"""Importers that turn an agent's own records into attempts: Claude Code transcripts, git history.

Never imports Textual or Rich; GitPython is not used (git plumbing runs as a subprocess).
"""
