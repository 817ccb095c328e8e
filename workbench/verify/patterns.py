"""The metric patterns a log's lines are read with: the defaults (plain prints, Hugging Face
Trainer dicts, JSON lines, progress bars, summary lines), a study's own, compiled with their
gates, and the `name value` pairs (`_KV`) read from a matched line.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from workbench.verify.markers import Markers

NUMBER = rb"[-+]?+(?:\d++\.?+\d*+|\.\d++)(?:[eE][-+]?+\d++)?+"
"""A number taken whole and never given back: a shorter one would be followed by a digit, a dot or
an exponent, which no pattern here accepts after a value."""
QUALIFIERS = rb"(?:train|training|val|valid|validation|eval|test|dev)"
"""Words that qualify the metric name after them: `train loss 2.56, val loss 2.51` is `train_loss`
and `val_loss` (issue 38), not two values of `loss`."""
_KV = re.compile(rb"(?<![\w./-])[\d./-]*+((?:" + QUALIFIERS + rb" (?=[A-Za-z_]))?+[A-Za-z_][\w./-]*+)['\"]?\s*+"
                 rb"(?:[=:]\s*+)?['\"]?(" + NUMBER + rb"|nan|inf)(?![\w.])")
"""`name value`, `name=value`, `'name': value` pairs, a name after a qualifier word joined to it
(`train loss`: `metric_name` writes `train_loss`). Linear on any line: a name is a whole run of
name characters (digits, dots, dashes and slashes before its first letter skipped, a qualifier
literal and one space before it), tried once from the run's start, and no part gives back what it
took, so nothing is read twice."""


def metric_name(key: bytes) -> str:
    """A name as `_KV` read it, as a metric's: `train loss` is `train_loss`."""
    return key.decode("utf-8", "replace").replace(" ", "_")


def skipped(key: bytes) -> bool:
    """Whether a `_KV` name is not a metric of the run (`step`, `lr`, `train epoch`)."""
    return key in _SKIP_BYTES or (b" " in key and key.rsplit(b" ", 1)[1] in _SKIP_BYTES)


SETTING_WORDS = frozenset({"interval", "iters", "iter", "every", "freq", "frequency", "steps", "epochs", "size",
                           "seed", "workers", "batches", "only", "init", "period", "patience", "dir", "path"})
"""Last words of configuration names: `eval_interval = 50`, `eval_iters = 200` echo settings."""


def is_setting(name: str) -> bool:
    """A summary-like name that is a configuration echo, not a metric (`eval_interval`)."""
    return re.split(r"[_/.-]", name)[-1].lower() in SETTING_WORDS


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
    compute: str = ""
    """An arithmetic expression over the regex's named groups giving the value (`correct / n`
    reads `991/1000` as 0.991); the metric is then the pattern's `name`."""


LOGGING_PREFIX = r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.-]*+:[ \t]*+)?+"
"""The `logging` module's default format before a message (`basicConfig`: `LEVEL:logger:`), taken
whole or not at all (possessive: a line is tried once from its start)."""


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
    # pytorch/examples' MNIST: "Train Epoch: 1 [0/3072 (0%)]\tLoss: 0.30", counted per line printed,
    # and "Test set: Average loss: 0.3307, Accuracy: 991/1000 (99%)", counted per evaluation
    Pattern("loss", r"Train Epoch: \d++ \[\d++/\d++ \([^)\n]{0,12}\)\][ \t]*+Loss: (?P<value>" + NUMBER.decode() + ")",
            sequential=True, gate=("Train Epoch: ",)),
    Pattern("test_loss", r"Test set: Average loss: (?P<value>" + NUMBER.decode() + ")", sequential=True,
            gate=("Test set: ",)),
    Pattern("test_accuracy", r"Test set: [^\n]{0,80}?Accuracy: (?P<correct>\d{1,12})/(?P<count>\d{1,12})",
            sequential=True, gate=("Test set: ",), compute="correct / count"),
    # bare summary lines: "eval_accuracy 0.9014", "test/acc: 0.91", behind the logging module's
    # default prefix too: "INFO:train:final_eval_accuracy: 0.9355"
    Pattern(
        "summary",
        r"(?m)^" + LOGGING_PREFIX + r"(?P<name>(?:eval|val|valid|test|final)[_/][\w/.-]++)[ \t]*+(?:[=:][ \t]*+)?"
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
        self.own: bytes | None = None
        """The metric's name when the pattern names it (a regex with a `value` group, or one group,
        or a `compute`, and no `name` group): the pattern's `name`."""
        self.value_of: Callable[[re.Match[bytes]], bytes | float | None] | None = None
        if "name" not in self.groups and not pattern.json:
            if pattern.compute:
                self.value_of = arithmetic(pattern.compute, set(self.groups))
            elif "value" in self.groups:
                self.value_of = operator_group("value")
            elif self.regex.groups == 1 and not self.groups:
                self.value_of = operator_group(1)
            if self.value_of is not None:
                self.own = pattern.name.encode()

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


def operator_group(group: str | int) -> Callable[[re.Match[bytes]], bytes | None]:
    return lambda m: m.group(group)


_OPS: dict[type, Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b if b else float("nan"),
}


def arithmetic(text: str, groups: set[str]) -> Callable[[re.Match[bytes]], float | None]:
    """A pattern's `value` expression (`correct / count`, `100 - err`): numbers, the regex's named
    groups, + - * / and parentheses; anything else is refused here, once, by name. A group that did
    not match or is not a number gives no value."""
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise ValueError(f"pattern value {text!r}: not an arithmetic expression") from None

    def build(node: ast.AST) -> Callable[[re.Match[bytes]], float]:
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            op, left, right = _OPS[type(node.op)], build(node.left), build(node.right)
            return lambda m: op(left(m), right(m))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = build(node.operand)
            return lambda m: -inner(m)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            number = float(node.value)
            return lambda m: number
        if isinstance(node, ast.Name) and node.id in groups:
            name = node.id
            return lambda m: float(m.group(name))
        raise ValueError(f"pattern value {text!r}: only numbers, the regex's named groups "
                         f"({', '.join(sorted(groups)) or 'none'}), + - * / and parentheses")

    run = build(tree)

    def value(m: re.Match[bytes]) -> float | None:
        try:
            return run(m)
        except (TypeError, ValueError):
            return None

    return value


def migration_patterns(settings: dict[str, Any]) -> list[_Compiled]:
    """The patterns a migration's logs are read with, from its verify settings: the defaults
    (unless `default_patterns` is false), its own `patterns`, then one per `metric_names` entry
    (`name_pattern`). Every reading of a log (verify, re-runs, the reference run) uses these."""
    extra = [*(settings.get("patterns") or ()),
             *(name_pattern(words, name) for words, name in (settings.get("metric_names") or {}).items())]
    return compile_patterns(extra, defaults=settings.get("default_patterns", True))


METRIC_NAME = re.compile(r"[A-Za-z_][\w./-]{0,99}")
"""What a metric may be called (a goal, a `metric_names` target)."""


def name_pattern(words: str, name: str) -> Pattern:
    """A `metric_names` entry as a pattern: the log's words as written (`val loss`, `Top-1 acc`),
    then a number, optionally after `:` or `=`, read as the metric `name` (issue 38). The words are
    a literal (also the pattern's gate), so the regex is linear on any line. ValueError names what
    is wrong with either."""
    if not isinstance(words, str) or not words.strip() or len(words) > 100 or not words.isprintable():
        raise ValueError(f"metric_names: {str(words)[:40]!r}: the log's words must be 1 to 100 printable characters")
    if not isinstance(name, str) or not METRIC_NAME.fullmatch(name):
        raise ValueError(f"metric_names: {words[:40]!r} = {str(name)[:40]!r}: not a metric name"
                         " (letters, digits, '_', '.', '/', '-')")
    return Pattern(name, r"(?<![\w])" + re.escape(words) + r"[ \t]*+(?:[=:][ \t]*+)?(?P<value>" + NUMBER.decode()
                   + r")(?![\w.])", gate=(words,))


def compile_patterns(extra: Iterable[dict[str, Any] | Pattern] = (), *, defaults: bool = True) -> list[_Compiled]:
    """The default patterns (unless `defaults` is false), then a migration's own (`patterns`
    setting: tables of `name`, `regex` and optionally `value`, `sequential`, `json`, `gate`)."""
    out = [_Compiled(p) for p in (DEFAULT_PATTERNS if defaults else ())]
    for spec in extra:
        pattern = spec if isinstance(spec, Pattern) else Pattern(
            name=str(spec.get("name", "custom")),
            regex=str(spec["regex"]),
            sequential=bool(spec.get("sequential", False)),
            json=bool(spec.get("json", False)),
            gate=tuple(spec.get("gate", ())),
            compute=str(spec.get("value", "")),
        )
        out.append(_Compiled(pattern))
    return out
