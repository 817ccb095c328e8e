"""Hardware and topology a run states in its own log and command, each statement with its line.

torch_xla does not print its device count or world size by itself; programs do, as
`device_count=4 world_size=1` or `World size: 4`, once per process at start. Under SPMD one
process drives every device, so its world size is 1 by design and its devices show in the mesh
shape; under `torchrun --nproc_per_node N` each process should say world size N. A log also
shows its processes without saying so: `[rank N]:` prefixes, and every step line printed N
times. This module reads those from the head of the log (the first HEAD bytes: programs print
them when they start), and the launcher from the command. docs/verification.md lists the forms.

Every pattern is linear on any line: literal alternatives, bounded repeats, no nesting.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from workbench.verify.logfacts import Hit, LogFacts
from workbench.verify.markers import Expressions

HEAD = 4 << 20
"""Bytes of a log read for topology statements."""
STEP_SAMPLE = 256 << 10
"""Bytes of a log in which repeated step lines are counted."""

_KEYS = {
    b"global_runtime_device_count": "device_count", b"global_device_count": "device_count",
    b"device_count": "device_count", b"num_devices": "device_count", b"devices_used": "device_count",
    b"world_size": "world_size", b"local_world_size": "local_world_size",
    b"rank": "rank", b"global_rank": "rank", b"global_ordinal": "rank", b"local_rank": "local_rank",
    b"global_devices": "global_devices", b"mesh_shape": "mesh_shape",
    # Hugging Face Accelerate's state: "Num processes: 4", "Process index: 0"
    b"num_processes": "world_size", b"process_index": "rank", b"local_process_index": "local_rank",
    # the batch each replica reads and the global batch of a step, and the replicas (issue 35)
    b"per_replica_batch": "per_replica_batch", b"per_replica_batch_size": "per_replica_batch",
    b"per_device_batch": "per_replica_batch", b"per_device_batch_size": "per_replica_batch",
    b"per_device_train_batch_size": "per_replica_batch",
    b"global_batch": "global_batch", b"global_batch_size": "global_batch", b"total_batch_size": "global_batch",
    b"replicas": "replicas", b"num_replicas": "replicas", b"replica_count": "replicas",
    b"num_replicas_in_sync": "replicas",
}
_STATEMENT = re.compile(
    rb"(?i)(?<![A-Za-z_.])(global[ _]runtime[ _]device[ _]count|global[ _]device[ _]count|device[ _]count|"
    rb"num[ _]devices|devices[ _]used|local[ _]world[ _]size|world[ _]size|global[ _]rank|global[ _]ordinal|"
    rb"local[ _]rank|rank|global[ _]devices|mesh[ _]shape|num[ _]processes|local[ _]process[ _]index|"
    rb"process[ _]index|per[ _](?:replica|device)[ _](?:train[ _])?batch(?:[ _]size)?|global[ _]batch(?:[ _]size)?|"
    rb"total[ _]batch[ _]size|num[ _]replicas(?:[ _]in[ _]sync)?|replica[ _]count|replicas)"
    rb"['\"]?[ \t]{0,3}[=:][ \t]{0,3}"
    rb"(\[[0-9, ]{0,256}\]|\([0-9, ]{0,256}\)|[0-9]{1,6})(?![0-9.])"
)
"""A statement; a digit may touch it on either side (`device_count=4rank=2`: two processes'
start lines glued by interleaved output)."""
_KIND = re.compile(rb"(?i)(?<![A-Za-z_.])device[ _]kind['\"]?[ \t]{0,3}[=:][ \t]{0,3}['\"]?"
                   rb"([A-Za-z][A-Za-z0-9:_.-]{0,40})")
"""A device kind statement (`device_kind=XLA:CPU`, `device kind: TPU`): `xla:` is dropped, the
runtime's name, not the device's."""
_ERROR = re.compile(rb"(?i)error|exception|traceback|failed|abort|invalid|mismatch|expected|warn|stuck|"
                    rb"rendezvous|timed out|^[EFW][0-9]{4} |[0-9]: [EFW] ")
"""Lines that state nothing: errors, warnings and glog's E/F/W lines may quote devices (XLA's
`RendezvousKey{... global_devices=[0,1,2,3] ...}` when a collective is stuck)."""
_RANK_PREFIX = re.compile(rb"^\[(?:rank|default) ?([0-9]{1,5})\]:")
_RANKS = re.compile(rb"(?m)^\[(?:rank|default) ?([0-9]{1,5})\]:")
_RANK_CUE = re.compile(rb"\[(?:rank|default)")
"""Whether `_RANKS` is worth running: `b"[rank" in head or b"[default" in head` in one pass that
stops only at a `[` (three to four times faster on the bench's logs, which have none)."""
_STEP = re.compile(rb"step[ :=#]{1,3}([0-9]{1,9})")
_STEP_TITLE = re.compile(rb"Step[ :=#]{1,3}([0-9]{1,9})")
_CUES = Expressions([cue + rb"['\"]?[ \t]{0,3}[=:]" for cue in (
    b"size", b"ank", b"count", b"ices", b"used", b"shape", b"rdinal", b"rocesses", b"ndex", b"atch", b"licas",
    b"sync", b"kind")])
"""Every statement's name ends with one of these, then its separator: the lines that may hold a
statement are found in one pass for all nine (a search per cue was 0.4 ms of a verified attempt)."""
CARRY_MAX = 64 << 20
"""The longest line the untangler holds whole, as the log scanner does."""
MAX_LINES = 1000
"""Lines read per cue: programs state their topology once per process, at start."""
_GLUE = re.compile(rb"[0-9](?=(?:\[(?:rank|default) ?[0-9]{1,5}\]: ?)?(?:step[ =:]|(?:eval|val|valid|test|final)[_/]))")
"""A number running into another process's step line or evaluation line (`...=27.8eval_accuracy 0.66`)."""
_OTHER_RANK_STEP = re.compile(rb"(?m)^\[(?:rank|default) ?(?:[1-9][0-9]{0,4}|0[0-9]{1,4})\]:[^\n]*?(?i:step)[ :=#][^\n]*")
"""A step line written by a rank other than 0: blanked (its line kept) so rank 0's series counts."""


@dataclass(frozen=True, slots=True)
class Statement:
    """One log line's topology statements: canonical name -> number (lists and shapes counted)."""

    line: int
    text: str
    values: dict[str, int]
    rank: int | None = None
    """The `[rank N]:` prefix of the line, if any."""
    kind: str | None = None
    """The device kind the line states (`device_kind=XLA:CPU` gives `CPU`)."""


@dataclass
class Topology:
    statements: list[Statement] = field(default_factory=list)
    ranks: set[int] = field(default_factory=set)
    """Ranks named by `[rank N]:` prefixes."""
    repeats: int = 1
    """How many times each step line is printed (the most common count): N processes print N."""
    repeat_example: tuple[int, str] | None = None
    """(line, text) of a step line printed `repeats` times."""
    launcher: tuple[str, int] | None = None
    """The launcher in the command and the processes it starts (`torchrun --nproc_per_node`, 4)."""

    def values(self, key: str) -> list[tuple[int, Statement]]:
        return [(s.values[key], s) for s in self.statements if key in s.values]

    def device_kind(self) -> tuple[str, Statement] | None:
        """The first device kind the log states."""
        return next(((s.kind, s) for s in self.statements if s.kind), None)

    def device_count(self) -> tuple[int, Statement] | None:
        """The devices the run used: the largest mesh or global device list it states (a run
        sees every device but uses those in its mesh), else the most devices a device count or
        a world size above 1 (one device per process) names."""
        used = [(v, s) for key in ("mesh_shape", "global_devices") for v, s in self.values(key)]
        found = used or [(v, s) for v, s in self.values("device_count")]
        found += [(v, s) for v, s in self.values("world_size") if v > 1]
        return max(found, key=lambda item: item[0]) if found else None

    def processes(self) -> int:
        """How many processes wrote the log, by the most telling sign of them."""
        starts = len(self.values("world_size"))
        return max(starts, len(self.ranks), self.repeats, 1)

    @property
    def multi_process(self) -> bool:
        return self.processes() > 1 or (self.launcher is not None and self.launcher[1] > 1)


def launcher(argv: Iterable[str]) -> tuple[str, int] | None:
    """The multi-process launcher in a command and its process count, if any."""
    text = " ".join(argv)
    found = None
    if "torchrun" in text or "torch.distributed.run" in text or "torch.distributed.launch" in text:
        found = ("torchrun --nproc_per_node", re.search(r"--nproc[-_]per[-_]node[= ]([0-9]{1,5})", text))
    elif "accelerate launch" in text or "accelerate-launch" in text:
        found = ("accelerate launch --num_processes", re.search(r"--num[-_]processes[= ]([0-9]{1,5})", text))
    elif "xmp.spawn" in text:
        found = ("xmp.spawn nprocs", re.search(r"nprocs ?= ?([0-9]{1,5})", text))
    if found is None or found[1] is None:
        return None
    return found[0], int(found[1].group(1))


def _number(raw: bytes) -> int:
    if raw[:1] in (b"[", b"("):
        items = [x for x in re.split(rb"[, ]+", raw[1:-1]) if x]
        if raw[:1] == b"[":
            return len(items)
        product = 1
        for x in items:
            product *= int(x)
        return product
    return int(raw)


def _statements(line: bytes, number: int) -> list[Statement]:
    """A line's statements; a name said again starts another process's statement (glued lines)."""
    if _ERROR.search(line):
        return []  # an error message may quote devices; it states nothing about the run
    groups: list[dict[str, int]] = [{}]
    for m in _STATEMENT.finditer(line):
        key = _KEYS.get(m.group(1).lower().replace(b" ", b"_"))
        if key is None:
            continue
        if key in groups[-1]:
            groups.append({})
        groups[-1][key] = _number(m.group(2))
    prefix = _RANK_PREFIX.match(line)
    text = line.rstrip(b"\r").decode("utf-8", "replace")[:300]
    rank = int(prefix.group(1)) if prefix else None
    found = _KIND.search(line)
    kind = found.group(1).decode() if found else None
    if kind is not None and kind.lower().startswith("xla:"):
        kind = kind[4:]
    return [Statement(number, text, values, rank, kind if i == 0 else None)
            for i, values in enumerate(groups) if values or (i == 0 and kind)]


def _candidates(head: bytes) -> list[int]:
    """Starts of the lines that may hold a statement (at most MAX_LINES per cue): Python runs
    per such line, not per line of the log."""
    starts: set[int] = set()
    for ends in _CUES.ends(head):
        n, line_end = 0, -1
        for end in ends:
            if end <= line_end:
                continue  # the cue again on a line already taken
            if n == MAX_LINES:
                break
            starts.add(head.rfind(b"\n", 0, end) + 1)  # a cue holds no newline
            n += 1
            line_end = head.find(b"\n", end)
            if line_end == -1:
                break
    return sorted(starts)


def read(head: bytes, argv: Iterable[str] = ()) -> Topology:
    """The topology a log's head (its first bytes, whole lines) and its command state."""
    topo = Topology(launcher=launcher(argv))
    line, last = 1, 0
    for start in _candidates(head):
        line += head.count(b"\n", last, start)
        last = start
        end = head.find(b"\n", start)
        topo.statements += _statements(head[start : len(head) if end == -1 else end], line)
    if _RANK_CUE.search(head):
        topo.ranks = {int(r) for r in set(_RANKS.findall(head))}
    _repeats(head[:STEP_SAMPLE], topo)
    return topo


def _repeats(sample: bytes, topo: Topology) -> None:
    first = _STEP.search(sample) or _STEP_TITLE.search(sample)
    if first is None or sample.count(sample[first.start() : first.end() + 1]) < 2:
        return  # the first step line is printed once: one process (a cheap look before counting)
    found = _STEP.findall(sample) + (_STEP_TITLE.findall(sample) if b"Step" in sample else [])
    counts = Counter(found)
    if len(counts) < 3:
        return
    repeats = Counter(counts.values()).most_common(1)[0][0]
    if repeats > 1:
        step = next(s for s, n in counts.items() if n == repeats)
        m = re.search(rb"(?i)step[ :=#]{1,3}" + step + rb"(?![0-9])", sample)
        if m is None:
            return
        start = sample.rfind(b"\n", 0, m.start()) + 1
        end = sample.find(b"\n", m.start())
        text = sample[start : end if end != -1 else len(sample)].decode("utf-8", "replace")[:300]
        topo.repeats, topo.repeat_example = repeats, (sample.count(b"\n", 0, start) + 1, text)


def head_of(chunks: Iterable[bytes], limit: int = HEAD) -> tuple[bytes, Iterator[bytes]]:
    """The first `limit` bytes of a log cut at a line end, and the whole log's chunks again
    (those read for the head, then the rest), so the log is read from storage once."""
    it = iter(chunks)
    parts: list[bytes] = []
    size = 0
    for chunk in it:
        parts.append(bytes(chunk))
        size += len(chunk)
        if size >= limit:
            break
    data = b"".join(parts)
    if size >= limit:
        data = data[: data.rfind(b"\n", 0, limit) + 1]
    return data, itertools.chain(parts, it)


class Standing:
    """Where the processes of an interleaved log stand, from the copies of each step line: a
    process stands at step S when S was printed more often than the next step printed after it
    (N copies of step 10 and fewer of step 11: some stand at 10). Identical processes print the
    same evaluation after the same step, so an evaluation line is theirs at a step only when
    every process that printed a step stands at that one (`only`)."""

    def __init__(self) -> None:
        self._steps: list[int] = []
        self._copies: dict[int, int] = {}
        self._at: set[int] = set()

    def advance(self, step: int) -> None:
        copies = self._copies.get(step, 0)
        self._copies[step] = copies + 1
        i = bisect.bisect_left(self._steps, step)
        if not copies:
            self._steps.insert(i, step)
        for j in (i - 1, i):  # only this step's and the previous step's standing change
            if j >= 0:
                here = self._steps[j]
                nxt = self._copies[self._steps[j + 1]] if j + 1 < len(self._steps) else 0
                if self._copies[here] > nxt:
                    self._at.add(here)
                else:
                    self._at.discard(here)

    def only(self) -> int | None:
        """The step every process stands at, or None while they stand at different steps."""
        return next(iter(self._at)) if len(self._at) == 1 else None


class Untangler:
    """Several processes' output made readable as one: glued lines (`...=27.8step=60 loss=...`)
    are split, and step lines of ranks other than 0 (`[rank 2]: step ...`) are blanked so rank
    0's series is the one compared. `inserted` holds the output line numbers that a split
    created, so line numbers can be mapped back to the stored log's with `original_line`."""

    def __init__(self) -> None:
        self.standing = Standing()
        """Passed to the log scanner: step-less lines credited only where no process lags."""
        self.inserted: list[int] = []
        self._line = 1
        self._grown = 0
        """Bytes the untangled log has beyond the stored one (split lines add, blanking removes)."""

    def chunks(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        carry = b""
        for chunk in chunks:
            data = carry + bytes(chunk)
            cut = data.rfind(b"\n")
            if cut == -1:
                carry = data
                if len(carry) > CARRY_MAX:  # a monstrous line: untangle what there is
                    yield self._lines(carry)
                    carry = b""
                continue
            carry = data[cut + 1 :]
            yield self._lines(data[: cut + 1])
        if carry:
            yield self._lines(carry)

    def _lines(self, piece: bytes) -> bytes:
        size = len(piece)
        out: list[bytes] = []
        last = newlines = 0
        for m in _GLUE.finditer(piece):
            cut = m.end()
            newlines += piece.count(b"\n", last, cut)
            out += (piece[last:cut], b"\n")
            self.inserted.append(self._line + newlines + len(out) // 2)
            last = cut
        if out:
            out.append(piece[last:])
            piece = b"".join(out)
        if b"[rank" in piece or b"[default" in piece:
            piece = _OTHER_RANK_STEP.sub(b"", piece)
        self._line += piece.count(b"\n")
        self._grown += len(piece) - size
        return piece

    def original_line(self, line: int) -> int:
        return line - bisect.bisect_right(self.inserted, line)

    def remap(self, facts: LogFacts) -> LogFacts:
        """The facts of the untangled log with the stored log's line numbers."""
        facts.size -= self._grown
        if not self.inserted:
            return facts
        seen: set[int] = set()

        def fix(hit: Hit) -> None:
            if id(hit) not in seen:
                seen.add(id(hit))
                hit.line = self.original_line(hit.line)

        for hit in [*facts.tracebacks, *facts.exceptions, *facts.compile_causes, *facts.profiler, *facts.sharding,
                    *facts.batch_splits]:
            fix(hit)
        for _, hit in facts.fatal:
            fix(hit)
        for hit, _ in facts.probes:
            fix(hit)
        for hit in facts.counters.values():
            fix(hit)
        for hits in facts.counter_series.values():
            for hit in hits:
                fix(hit)
        for steps in facts.points.values():
            for step, (value, line) in steps.items():
                steps[step] = (value, self.original_line(line))
        facts.lines -= len(self.inserted)
        return facts
