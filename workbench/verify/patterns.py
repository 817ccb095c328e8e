"""The metric patterns a log's lines are read with: the defaults (plain prints, Hugging Face
Trainer dicts, JSON lines, progress bars, summary lines), a study's own, compiled with their
gates, and the `name value` pairs (`_KV`) read from a matched line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from workbench.verify.markers import Markers

NUMBER = rb"[-+]?+(?:\d++\.?+\d*+|\.\d++)(?:[eE][-+]?+\d++)?+"
"""A number taken whole and never given back: a shorter one would be followed by a digit, a dot or
an exponent, which no pattern here accepts after a value."""
_KV = re.compile(rb"(?<![\w./-])[\d./-]*+([A-Za-z_][\w./-]*+)['\"]?\s*+(?:[=:]\s*+)?['\"]?(" + NUMBER + rb"|nan|inf)(?![\w.])")
"""`name value`, `name=value`, `'name': value` pairs. Linear on any line: a name is a whole run of
name characters (digits, dots, dashes and slashes before its first letter skipped), tried once
from the run's start, and no part gives back what it took, so nothing is read twice."""


@dataclass(frozen=True, slots=True)
class Pattern:
    """A metric pattern: `regex` finds a line's metrics; named groups say where they are.

    - `step`: the step number (else the last step seen, or for `sequential`, a counter per name);
    - `total`: the run's planned number of steps (`step 3/40`);
    - `epoch` with `total`: global step = epoch * total + step (progress bars);
    - `body`: where `name value` / `name=value` / `'name': value` pairs are read;
    - `name` and `value`: exactly one metric.
    """

    name: str
    regex: str
    sequential: bool = False
    json: bool = False
    """The match is a JSON object; its numeric fields are metrics, `step` its step."""
    gate: tuple[str, ...] = ()
    """Literals of which a piece must hold one for the regex to run on it (a cheap pre-check)."""


DEFAULT_PATTERNS: tuple[Pattern, ...] = (
    # plain prints: "step 3/40 loss 0.41 grad_norm 1.2", "Step: 3, loss=0.41"
    Pattern("plain", r"(?i)\bstep\b[ :=#]*(?P<step>\d+)(?:/(?P<total>\d+))?(?P<body>[^\n]*)"),
    # Hugging Face Trainer: {'loss': 0.69, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.1}
    Pattern("hf_trainer", r"\{'(?P<body>[^\n{}]*)\}", sequential=True, gate=("{'",)),
    # JSON lines: {"step": 3, "loss": 0.41}
    Pattern("json_lines", r'(?m)^\{"[^\n]*\}[ \t\r]*$', json=True, gate=('{"',)),
    # tqdm postfix and PyTorch Lightning bars: "Epoch 0:  50%|###  | 16/32 [00:01<00:00, 12.3it/s, loss=0.693, v_num=0]"
    Pattern(
        "tqdm",
        r"(?:Epoch (?P<epoch>\d++)(?:[^\r\n|E]|E(?!poch \d))*+)?\|[^\r\n|]*+\| *(?P<step>\d+)/(?P<total>\d+) \["
        r"(?>[^\r\n\]|]*?(?:it/s|s/it))\]?,? ?(?P<body>[^\r\n\]|]*+)\]",
        gate=("it/s", "s/it"),
    ),
    # bare summary lines: "eval_accuracy 0.9014", "test/acc: 0.91"
    Pattern(
        "summary",
        r"(?m)^(?P<name>(?:eval|val|valid|test|final)[_/][\w/.-]++)[ \t]*+(?:[=:][ \t]*+)?"
        r"(?P<value>" + NUMBER.decode() + r")[ \t\r]*$",
        gate=("eval", "val_", "val/", "test", "final"),
    ),
)


SKIP_NAMES = frozenset({"step", "epoch", "total", "it", "v_num", "global_step", "learning_rate", "lr"})
"""Numbers on a metric line that are not metrics of the run (kept out of comparisons)."""


_SKIP_BYTES = frozenset(n.encode() for n in SKIP_NAMES)
_NAMES: dict[bytes, str] = {}
"""Metric names as read (bytes) and decoded, shared by all scans (at most 4096): a log repeats
a few names."""


class _Compiled:
    def __init__(self, pattern: Pattern) -> None:
        self.pattern = pattern
        self.regex = re.compile(pattern.regex.encode())
        self.groups = self.regex.groupindex
        self.gate = tuple(g.encode() for g in pattern.gate)
        self._gate = _gate_markers(self.gate)

    def opens(self, piece: bytes) -> bool:
        """Whether one of the gate's literals is in the piece."""
        return self._gate is None or self._gate.found(piece)


_GATES: dict[tuple[bytes, ...], Markers | None] = {}


def _gate_markers(literals: tuple[bytes, ...]) -> Markers | None:
    """Gate literals found in one pass of the markers' engine rather than a `bytes.find` pass each
    (the default patterns' nine took 6 ms/MiB, a third of a plain log's extraction once its lines
    went by shape); None where there are none, or an empty one, found everywhere. Kept per set."""
    try:
        return _GATES[literals]
    except KeyError:  # read once: another thread may clear the dict meanwhile
        if len(_GATES) >= 256:
            _GATES.clear()
        gate = _GATES[literals] = Markers(literals) if literals and all(literals) else None
        return gate


def compile_patterns(extra: Iterable[dict[str, Any] | Pattern] = (), *, defaults: bool = True) -> list[_Compiled]:
    out = [_Compiled(p) for p in (DEFAULT_PATTERNS if defaults else ())]
    for spec in extra:
        pattern = spec if isinstance(spec, Pattern) else Pattern(
            name=str(spec.get("name", "custom")),
            regex=str(spec["regex"]),
            sequential=bool(spec.get("sequential", False)),
            json=bool(spec.get("json", False)),
            gate=tuple(spec.get("gate", ())),
        )
        out.append(_Compiled(pattern))
    return out
