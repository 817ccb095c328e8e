"""Every pattern run on untrusted text takes linear time (issue 20), and the scanners still find
what a log holds when its lines are huge, binary or built to make backtracking explode.

No timing thresholds: each pattern runs on lines of 10k and 40k characters of shapes that make
backtracking patterns quadratic (long runs of one class, repeated prefixes that never complete),
and the 40k run must take less than 8 times the 10k run plus a margin for a busy machine; a
quadratic pattern takes 16 times as long, a cubic one 64 times.
"""

from __future__ import annotations

import importlib
import pkgutil
import random
import re
from collections.abc import Iterator

import pytest
from linearity import grows_linearly

from workbench.logsearch import ERROR, WARNING, matching_lines
from workbench.verify.logscan import LogScanner
from workbench.verify.patterns import DEFAULT_PATTERNS, compile_patterns

PACKAGES = ("domain", "storage", "workbench", "screens")


def _found(value: object, label: str, depth: int = 0) -> Iterator[tuple[str, re.Pattern]]:
    if hasattr(value, "finditer") and hasattr(value, "pattern"):  # `re`, and RE2 (linear: checked all the same)
        yield label, value
    elif isinstance(value, (list, tuple)) and depth < 2:
        for i, item in enumerate(value):
            yield from _found(item, f"{label}[{i}]", depth + 1)
    elif isinstance(value, dict) and depth < 2:
        for key, item in value.items():
            yield from _found(item, f"{label}[{key!r}]", depth + 1)


def project_patterns() -> dict[str, re.Pattern]:
    """The compiled patterns held at module level in the project's packages (as
    /work/shared/tools/check_patterns.py collects them) and the metric patterns of the log scan."""
    out: dict[str, re.Pattern] = {}
    for top in PACKAGES:
        package = importlib.import_module(top)
        names = [top] + [m.name for m in pkgutil.walk_packages(package.__path__, top + ".")]
        for name in names:
            if name.endswith("__main__"):
                continue
            module = importlib.import_module(name)
            for attr, value in list(vars(module).items()):
                for label, pattern in _found(value, f"{name}.{attr}"):
                    out.setdefault(label, pattern)
    for pattern in DEFAULT_PATTERNS:
        out[f"logscan metric pattern {pattern.name}"] = re.compile(pattern.regex.encode())
    return out


def shapes(n: int) -> dict[str, str]:
    """Lines of about n characters on which a backtracking pattern can go quadratic."""
    return {
        "letters": "A" * n, "words": "a " * (n // 2), "warning": "W" * n + "arning", "dotted": "1." * (n // 2),
        "equals": "=" * n, "newline": "x" * (n - 1) + "\n", "spaces": "a" + " " * n + "x", "a1": "a1" * (n // 2),
        "a-": "a-" * (n // 2), "path": "a/" * (n // 2), "tokens": "token" * (n // 5) + "x",
        "torch_xla": "torch_xla" * (n // 9), "torch_xla_word": "torch_xla" + "a" * n,
        "torch_xla_words": "torch_xla " * (n // 10), "eval_digits": "eval_" + "1" * n + "x",
        "eval_spaces": "eval_a" + " " * n + "x", "epochs": "Epoch 1 " * (n // 8) + "|",
        "its": "|x| 1/2 [" + "it/s" * (n // 4), "bars": "|a| 1/2 [" * (n // 9), "newlines": "\n" * n + "x",
        "digits_x": "a" + "1" * n + "x", "step_spaces": "step" + " " * n + "x", "kv_digits": "a=" + "1" * n + "x",
        "quotes": "'" * n, "secret_spaces": "my_token" + " " * n + "x", "digits": "1" * n, "1e": "1e" * (n // 2),
        "braces": "{'" * (n // 2), "json": '{"' + "} " * (n // 2) + "x", "counters": "Counter: " * (n // 9),
        "bearer": "bearer " * (n // 7), "sk": "sk-" * (n // 3), "pem": "-----BEGIN A " * (n // 13),
        "qualifiers": "train " * (n // 6) + "1", "val_words": "val val_" * (n // 8) + "=1",
        "test_set": "Test set: Accuracy: 1" * (n // 21) + "/x", "train_epoch": "Train Epoch: 1 [1/2 (" * (n // 20),
    }


def _finds(pattern: re.Pattern, line: str) -> None:
    data = line.encode() if isinstance(pattern.pattern, bytes) else line
    for _match in pattern.finditer(data):
        pass


def test_every_pattern_on_untrusted_text_is_linear() -> None:
    patterns = project_patterns()
    assert len(patterns) > 40 and any("logsearch.WARNING" in k for k in patterns)
    slow = [
        f"{label} on {shape!r}"
        for label, pattern in patterns.items()
        for shape in shapes(10)
        if not grows_linearly(lambda n, p=pattern, s=shape: _finds(p, shapes(n)[s]), 10_000)
    ]
    assert not slow, "\n".join(slow)


# ----------------------------------------------------------------------------- whole logs

MEGA = 1 << 20


def _scan(data: bytes, chunk: int = 1 << 16):
    scanner = LogScanner(compile_patterns())
    for start in range(0, len(data), chunk):
        scanner.feed(data[start : start + chunk])
    return scanner.finish()


@pytest.mark.parametrize("filler", ["A", "1.", "a1", "torch_xla ", "=", "{'", "step "])
def test_a_one_megabyte_line_between_step_lines(filler: str) -> None:
    line = (filler * (MEGA // len(filler))).encode()
    log = (b"step 1/3 loss 0.5 grad_norm 1.0\n" + b"step 2/3 loss 0.4 " + line + b"\n"
           + b"UserWarning: torch_xla is slow\nstep 3/3 loss 0.3 grad_norm 0.8\nKilled\n")
    facts = _scan(log)
    assert facts.lines == 5 and facts.total_steps == 3 and facts.last_step == 3
    assert facts.points["loss"] == {1: (0.5, 1), 2: (0.4, 2), 3: (0.3, 4)}
    assert [(kind, hit.line) for kind, hit in facts.fatal] == [("killed", 5)]
    assert list(matching_lines([log], WARNING)) == [2]
    assert list(matching_lines([log], ERROR)) == [4]


def test_binary_and_pathological_logs() -> None:
    noise = random.Random(20).randbytes(2 * MEGA)
    hostile = b"".join(s.encode() for s in shapes(50_000).values())
    log = noise + b"\nstep 7/9 loss 0.25\n" + hostile + b"\nTraceback (most recent call last):\nValueError: x\n"
    facts = _scan(log)
    assert facts.size == len(log) and facts.lines == log.count(b"\n") + (not log.endswith(b"\n"))
    assert facts.points["loss"][7][0] == 0.25 and facts.total_steps == 9
    assert [h.text for h in facts.exceptions] == ["ValueError: x"]
    assert list(matching_lines([log], ERROR))[-2:] == [log.count(b"\n") - 2, log.count(b"\n") - 1]
