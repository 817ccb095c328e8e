"""Diffs between an attempt's commit and another one, read from the migration's git repository,
and (`edits_diff`) of the edits an attempt without a commit recorded.

Runs `git` as a short-lived subprocess (no long-lived GitPython objects in the app), parses the
unified diff once into lines, a file list and, for each changed line, the line it replaces or
is replaced by, so a viewer can highlight the changed words of only the lines it shows.
Nothing here imports Textual or Rich.
"""

from __future__ import annotations

import difflib
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from domain.errors import WorkbenchError
from domain.transcript import Edit

if TYPE_CHECKING:
    from sqlite_utils import Database

GIT_TIMEOUT_S = 60
MAX_DIFF_BYTES = 256 << 20
"""A diff longer than this is cut (with a note): 256 MiB is millions of lines."""


@dataclass(frozen=True, slots=True)
class DiffFile:
    path: str
    """The new path (the old one for a deleted file)."""
    old_path: str
    status: str
    """`added`, `deleted`, `renamed`, `modified` or `binary`."""
    added: int
    removed: int
    start: int
    """Index in `Diff.lines` of the file's `diff --git` line."""


@dataclass(slots=True)
class Diff:
    old: str
    new: str
    lines: list[str] = field(default_factory=list)
    files: list[DiffFile] = field(default_factory=list)
    partner: dict[int, int] = field(default_factory=dict)
    """For a `-` line followed (in the same block) by `+` lines: the `+` line it became, and back."""
    cut: bool = False

    def file_at(self, line: int) -> DiffFile | None:
        """The file whose section holds diff line `line`."""
        found = None
        for f in self.files:
            if f.start > line:
                break
            found = f
        return found


def _git(repo: str | Path, *args: str, max_bytes: int = MAX_DIFF_BYTES) -> tuple[bytes, bool]:
    path = Path(repo)
    if not path.exists():
        raise WorkbenchError(f"{repo}: the migration's repository is not there")
    try:
        proc = subprocess.Popen(
            ["git", "-C", str(path), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
    except OSError as exc:
        raise WorkbenchError(f"cannot run git: {exc}") from None
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read(max_bytes + 1)
    cut = len(out) > max_bytes
    if cut:
        proc.kill()
        out = out[:max_bytes]
    try:
        _, err = proc.communicate(timeout=GIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise WorkbenchError(f"git {args[0]} took over {GIT_TIMEOUT_S} s") from None
    if proc.returncode and not cut:
        message = err.decode("utf-8", "replace").strip().splitlines()
        raise WorkbenchError(f"git {args[0]}: {message[-1] if message else 'failed'}")
    return out, cut


def git_diff(repo: str | Path, old: str, new: str) -> Diff:
    """The unified diff from commit `old` to commit `new` (renames found, no colour)."""
    out, cut = _git(repo, "diff", "--no-color", "--no-ext-diff", "-M", "--unified=3", old, new, "--")
    diff = parse(out.decode("utf-8", "replace"), old=old, new=new)
    diff.cut = cut
    return diff


_PATHS = re.compile(r"^diff --git a/(.*) b/(.*)$")


def parse(text: str, *, old: str = "", new: str = "") -> Diff:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    diff = Diff(old=old, new=new, lines=lines)
    current: dict | None = None
    minus: list[int] = []
    plus: list[int] = []

    def pair_block() -> None:
        for a, b in zip(minus, plus):
            diff.partner[a] = b
            diff.partner[b] = a
        minus.clear()
        plus.clear()

    def close() -> None:
        if current is not None:
            diff.files.append(DiffFile(**current))

    in_hunk = False
    for index, line in enumerate(lines):
        if line.startswith("diff --git "):
            pair_block()
            close()
            match = _PATHS.match(line)
            a, b = (match.group(1), match.group(2)) if match else (line[11:], line[11:])
            current = {"path": b, "old_path": a, "status": "modified", "added": 0, "removed": 0,
                       "start": index}
            in_hunk = False
            continue
        if current is None:
            continue
        if not in_hunk:
            if line.startswith("new file mode"):
                current["status"] = "added"
            elif line.startswith("deleted file mode"):
                current["status"] = "deleted"
                current["path"] = current["old_path"]
            elif line.startswith("rename from"):
                current["status"] = "renamed"
            elif line.startswith("Binary files"):
                current["status"] = "binary"
        if line.startswith("@@"):
            pair_block()
            in_hunk = True
            continue
        if not in_hunk:
            continue
        if line.startswith("-"):
            if plus:
                pair_block()
            minus.append(index)
            current["removed"] += 1
        elif line.startswith("+"):
            plus.append(index)
            current["added"] += 1
        else:
            pair_block()
    pair_block()
    close()
    return diff


def show_file(repo: str | Path, commit: str, path: str, *, max_bytes: int = 64 << 20) -> list[str]:
    """A whole file as it is at `commit`, as lines."""
    out, cut = _git(repo, "show", f"{commit}:{path}", max_bytes=max_bytes)
    lines = out.decode("utf-8", "replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if cut:
        lines.append(f"… [cut at {max_bytes} bytes]")
    return lines


def commit_subject(repo: str | Path, commit: str) -> str:
    """The commit message's first line ('' when git cannot say)."""
    try:
        out, _ = _git(repo, "log", "-1", "--format=%s", commit, "--", max_bytes=64 << 10)
    except WorkbenchError:
        return ""
    return out.decode("utf-8", "replace").strip()


_WORD = re.compile(r"\w+|\s+|[^\w\s]")


def changed_words(old: str, new: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Character ranges that differ between two versions of a line, word by word."""
    a = _WORD.findall(old)
    b = _WORD.findall(new)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    spans_a: list[tuple[int, int]] = []
    spans_b: list[tuple[int, int]] = []
    pos_a = [0]
    for token in a:
        pos_a.append(pos_a[-1] + len(token))
    pos_b = [0]
    for token in b:
        pos_b.append(pos_b[-1] + len(token))
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if i2 > i1:
            spans_a.append((pos_a[i1], pos_a[i2]))
        if j2 > j1:
            spans_b.append((pos_b[j1], pos_b[j2]))
    return spans_a, spans_b


def attempt_diff(db: Database, repo: str | Path, old: str, new: str, attempt_id: int) -> Diff:
    """What the Diff pane shows for an attempt: `git_diff` from `old` to its commit `new`, or,
    when it has no commit (git would say `bad revision ''`), its recorded edits."""
    return git_diff(repo, old, new) if new else edits_diff(db, attempt_id)


def edits_diff(db: Database, attempt_id: int) -> Diff:
    """The attempt's recorded edits (since the previous attempt) as one unified diff, file by file.

    For attempts without a commit (a transcript's edits that could not be built into one): the
    same shape as `git_diff`, so the Diff pane shows them. Edits of one file are kept together,
    in the order made; each hunk is as the transcript gave it (its line numbers are those of the
    file at that moment).
    """
    from storage.imports import attempt_edits

    by_file: dict[str, list[str]] = {}
    for edit in attempt_edits(db, attempt_id):
        by_file.setdefault(edit.file_path.replace("\n", " ") or "?", []).extend(_edit_lines(edit))
    lines = []
    for path, body in by_file.items():
        lines += [f"diff --git a/{path} b/{path}", f"--- a/{path}", f"+++ b/{path}", *body]
    return parse("\n".join(lines), old="", new="edits")


def _edit_lines(edit: Edit) -> list[str]:
    """One edit's hunks: its stored patch, else a diff of its old and new text, else a note."""
    if edit.tool == "Bash":
        return ["@@ changed by a shell command @@", *(f" $ {line}" for line in edit.patch.splitlines())]
    if edit.patch.startswith("--- "):
        body = edit.patch.splitlines()[2:]
        if body:
            return body
    if edit.old_text is None and edit.new_text is not None:  # Write: the whole file as written
        new = edit.new_text.splitlines()
        return [f"@@ -0,0 +1,{len(new)} @@ {edit.tool}: the whole file", *(f"+{line}" for line in new)]
    if edit.old_text is not None and edit.new_text is not None:
        return list(difflib.unified_diff(edit.old_text.splitlines(), edit.new_text.splitlines(),
                                         lineterm="", n=3))[2:]
    return []
