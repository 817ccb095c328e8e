"""The transcript reader parses with orjson and falls back to json.loads line by line (issue 19):
every line gives the record, or the bad-line message, that json.loads alone gave."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.importers.claude_code import FileReport, read_records

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class Recording(FileReport):
    """A FileReport that keeps every bad line's message, not only the first."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.messages: list[str] = []

    def bad(self, line: int, why: str) -> None:
        super().bad(line, why)
        self.messages.append(f"line {line}: {why}")


def json_only(path: Path) -> tuple[list[str], list[str]]:
    """The reader as it was before orjson (json.loads on every line), kept as the reference."""
    records, bad = [], []
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except UnicodeDecodeError:
                bad.append(f"line {number}: not valid UTF-8")
                continue
            except ValueError as exc:
                msg = getattr(exc, "msg", str(exc)).removesuffix(" at")
                col = getattr(exc, "colno", None)
                truncated = not raw.endswith(b"\n")
                bad.append(f"line {number}: {'truncated, ' if truncated else ''}not valid JSON"
                           f" ({msg}{f', column {col}' if col else ''})")
                continue
            except RecursionError:
                bad.append(f"line {number}: JSON nested too deeply")
                continue
            if not isinstance(record, dict):
                bad.append(f"line {number}: JSON {type(record).__name__}, not an object")
                continue
            if _SURROGATE_ESCAPE.search(raw):
                try:
                    json.dumps(record, ensure_ascii=False).encode("utf-8")
                except UnicodeEncodeError:
                    bad.append(f"line {number}: lone surrogate in a string")
                    continue
            records.append(repr(record))  # repr: NaN equals NaN, 1 differs from 1.0
    return records, bad


def both(path: Path) -> tuple[tuple[list[str], list[str]], tuple[list[str], list[str]]]:
    report = Recording(path)
    records = [repr(r) for r in read_records(path, report)]
    return (records, report.messages), json_only(path)


EDGE_LINES = [
    b'{"a": NaN}\n', b'{"a": [Infinity, -Infinity]}\n',  # orjson refuses these: json.loads reads them
    b'{"a": "\\ud800"}\n', b'{"a": "\\udc00\\ud800"}\n', b'{"a": "x\\uDBFFy"}\n',  # lone surrogates
    b'{"a": "\\ud83d\\ude00"}\n',  # a pair is fine
    b'{"a": "\xed\xa0\x80"}\n',  # a surrogate encoded in the bytes (json.loads accepts it)
    b'\xef\xbb\xbf{"a": 1}\n',  # a byte order mark
    b'{"a": 99999999999999999999999}\n', b'{"a": [-9223372036854775809, 1]}\n',  # beyond 64 bits
    b'{"a": 18446744073709551615, "b": -9223372036854775808}\n', b'{"a": 1e19, "b": 1e400, "c": 1e-400}\n',
    b'{"a": 1, "a": 2}\n', b'{"a": -0, "b": -0.0, "c": 1E2}\n',
    b"[" * 3000 + b"]" * 3000 + b"\n", b'{"a": ' + b"[" * 3000 + b"]" * 3000 + b"}\n",
    b"[1, 2]\n", b'"text"\n', b"3\n", b"null\n",
    b"{not json\n", b'{"a": "x\x01y"}\n', b"\x00\xff\xfe binary\n", b'{"a": 1} trailing\n',
    b" \t\r\n", b"\x0b\x0c\n", b"\n", b'{"a": "crlf"}\r\n',
    b'{"type": "assistant", "trunc',
]


def test_edge_lines_read_as_json_loads_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "edge.jsonl"
    path.write_bytes(b"".join(EDGE_LINES))
    new, old = both(path)
    assert new == old
    records, bad = new
    assert "{'a': nan}" in records and "{'a': [inf, -inf]}" in records  # the fallback read them
    assert "{'a': 99999999999999999999999}" in records  # exact, not 1e+23
    assert sum("lone surrogate" in m for m in bad) == 3


values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=4), values, max_size=5), min_size=1, max_size=6),
       st.booleans())
def test_random_objects_read_as_json_loads_reads_them(tmp_path_factory: Any, objects: list[dict], ascii_: bool) -> None:
    """Random objects as json.dumps writes them: NaN, Infinity, huge integers and (escaped or
    not) lone surrogates included."""
    path = tmp_path_factory.mktemp("fuzz") / "t.jsonl"
    path.write_bytes(b"".join(
        json.dumps(o, ensure_ascii=ascii_).encode("utf-8", errors="surrogatepass") + b"\n" for o in objects))
    new, old = both(path)
    assert new == old
