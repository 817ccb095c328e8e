"""The documented rules of transcript import (docs/claude-code-import.md).

- which Bash calls are executions of the project's workload (`WorkloadRule`);
- which Bash calls wrote files (`bash_writes`);
- what ladder level the agent's own words expect (`expected_level`);

Pure functions on strings: no database, no git.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from domain.redact import redact

LAUNCHERS = ("python", "torchrun", "accelerate", "xla_run", "xla_dist")
"""Program names (basename, with `python3`, `python3.11` and the like folded into `python`)."""
WRAPPERS = {"env", "nohup", "time", "timeout", "stdbuf", "nice", "uv", "poetry", "exec", "sudo"}
"""Words skipped in front of the program (`timeout 600 python train.py`, `uv run python ...`)."""
EXCLUDED_MODULES = {
    "pip", "pytest", "venv", "ensurepip", "unittest", "doctest", "pydoc", "http.server",
    "json.tool", "torch.utils.collect_env", "site", "pip._internal", "build", "twine",
}
"""`python -m X` for these is environment work or a test, not the workload."""
KEPT_ENV = re.compile(r"^(PJRT_\w+|XLA_\w+|TPU_\w+|CUDA_VISIBLE_DEVICES|WORLD_SIZE|RANK|LOCAL_RANK"
                      r"|MASTER_ADDR|MASTER_PORT|NPROC\w*|PT_XLA_\w+|OMP_NUM_THREADS|PYTHONPATH)$")
"""Environment assignments in front of a command that are kept (only these, never others)."""

_SEGMENT_SPLIT = re.compile(r"(?:(?<!\s)\s*)?(?:&&|\|\||;|\|(?!\|)|\n)\s*")
"""A separator and the whitespace around it; leading whitespace is taken only from the start of
its run, so a long run of spaces is read once (linear), not once per space."""
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_PYTHON = re.compile(r"^(?:python|pypy)(?:\d+(?:\.\d+)?)?$")


def _words(segment: str) -> list[str] | None:
    try:
        return shlex.split(segment, comments=True)
    except ValueError:
        return None


def segments(command: str) -> list[str]:
    """The simple commands of a shell line, split on `&&`, `||`, `;`, `|` and newlines."""
    return [s for s in _SEGMENT_SPLIT.split(command) if s.strip()]


def first_program(command: str) -> str:
    """The program a shell line starts with (past assignments and wrappers), for counts of what ran.

    Reads only the line's first 512 characters: a heredoc of megabytes costs nothing more.
    """
    for segment in segments(command[:512])[:1]:
        _, rest = program_and_args(_words(segment) or [])
        if rest:
            return rest[0].rsplit("/", 1)[-1]
    return "?"


def program_and_args(words: list[str]) -> tuple[dict[str, str], list[str]]:
    """Leading VAR=value assignments and wrappers removed: (env, [program, *args])."""
    env: dict[str, str] = {}
    i = 0
    while i < len(words):
        word = words[i]
        match = _ASSIGNMENT.match(word)
        if match:
            env[match.group(1)] = match.group(2)
            i += 1
            continue
        base = word.rsplit("/", 1)[-1]
        if base in WRAPPERS:
            i += 1
            if base == "timeout":
                while i < len(words) and words[i].startswith("-"):
                    i += 1
                i += 1  # the duration
            elif base in ("uv", "poetry") and i < len(words) and words[i] == "run":
                i += 1
            while i < len(words) and words[i].startswith("-") and base not in ("uv", "poetry"):
                i += 1
            continue
        break
    return env, words[i:]


def _is_test_script(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.startswith("test_") or name.endswith("_test.py") or "/tests/" in f"/{path}" or name == "conftest.py"


def _runs_script(args: list[str]) -> bool:
    """Whether a launcher's arguments name a script of the project (not -c, not a test)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-c", "--version", "-V", "--help", "-h"):
            return False
        if arg == "-m":
            module = args[i + 1] if i + 1 < len(args) else ""
            if module in EXCLUDED_MODULES or module.split(".")[0] in ("pip", "pytest"):
                return False
            if module in ("torch.distributed.run", "torch.distributed.launch", "torch_xla.distributed.xla_dist",
                          "torch_xla.distributed.xla_multiprocessing"):
                i += 2
                continue
            return bool(module)
        if arg.endswith(".py") and not arg.startswith("-"):
            return not _is_test_script(arg)
        i += 1
    return False


@dataclass(frozen=True)
class WorkloadRule:
    """Which Bash commands are attempts. Default: a launcher running a script of the project.

    `all_bash` counts every Bash call; `patterns` (regular expressions searched in the whole
    command) replace the default rule when given.
    """

    all_bash: bool = False
    patterns: tuple[str, ...] = ()
    _compiled: tuple[re.Pattern[str], ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_compiled", tuple(re.compile(p) for p in self.patterns))

    def describe(self) -> str:
        """The rule in a few words, for an import that found no attempt."""
        if self.all_bash:
            return "every Bash call"
        if self.patterns:
            return ("the --workload pattern " if len(self.patterns) == 1 else "the --workload patterns ") + ", ".join(
                self.patterns)
        return "python/torchrun/accelerate launch/xla_run/xla_dist running a .py or -m module of the project"

    def matches(self, command: str) -> bool:
        if self.all_bash:
            return True
        if self._compiled:
            return any(p.search(command) for p in self._compiled)
        for segment in segments(command):
            words = _words(segment)
            if not words:
                continue
            _, rest = program_and_args(words)
            if not rest:
                continue
            program = rest[0].rsplit("/", 1)[-1]
            if _PYTHON.match(program):
                program = "python"
            if program not in LAUNCHERS:
                continue
            args = rest[1:]
            if program == "accelerate":
                if not args or args[0] != "launch":
                    continue
                args = args[1:]
            if _runs_script(args):
                return True
        return False


def command_parts(command: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """argv and the kept environment of a Bash command.

    A single simple command becomes its words; anything with shell syntax stays whole as
    `bash -c COMMAND`. Environment assignments are kept only when `KEPT_ENV` names them.
    """
    parts = segments(command)
    words = _words(command) if len(parts) == 1 else None
    if words and not any(ch in command for ch in "<>$`*?(){}") :
        env, rest = program_and_args(words)
        kept = {k: v for k, v in env.items() if KEPT_ENV.match(k)}
        if rest and len(env) == len(kept):
            # Only strip the prefix when nothing secret-looking would be lost from sight.
            lead = words[: len(words) - len(rest)]
            lead = [w for w in lead if not _ASSIGNMENT.match(w)]
            return tuple(lead + rest), kept
    return ("bash", "-c", redact(command)), {}


_WRITE_TARGET = re.compile(r"(?:^|[^0-9&>])>{1,2}\s*([^\s&|;<>]+)")
_WRITERS = re.compile(
    r"(?:^|[\s;&|(])(?:tee\b|sed\s+(?:-[a-zA-Z]*\s+)*-i|perl\s+-p?i|cp\s|mv\s|rm\s|touch\s|patch\b|truncate\s"
    r"|git\s+(?:apply|am|checkout|restore|reset|cherry-pick|revert|stash|merge|rebase|pull)\b)"
)


def bash_writes(command: str) -> list[str]:
    """The files a Bash command writes, as far as can be told; [''] when it writes unknown files.

    A heuristic (documented): redirections to a file, tee, sed -i, cp/mv/rm/touch, patch and
    git commands that change the working tree.
    """
    targets = [
        t for t in _WRITE_TARGET.findall(command)
        if not t.startswith("/dev/") and not t.startswith("&") and not t.startswith("/tmp/")
    ]
    if targets:
        return targets
    if _WRITERS.search(command):
        return [""]
    return []


# The agent's expectation, read from its own words after an attempt.
LEVEL_RULES: tuple[tuple[int, re.Pattern[str]], ...] = tuple(
    (level, re.compile(pattern, re.I))
    for level, pattern in (
        (5, r"\b(faster|speed-?up|cheaper|less expensive|lower cost|\d+(?:\.\d+)?\s*x\s+(?:faster|speed))\b"),
        (4, r"\b(reach(?:es|ed)?|hits?|meets?|achieves?|achieved|exceeds?)\b[^.]{0,40}\b(target|goal|accuracy|metric)\b"),
        (3, r"\b(runs?|running|ran|works?|working|executes?|trains?|training)\b[^.]{0,30}\bon\b[^.]{0,15}"
            r"\b(tpus?|xla devices?|\d+\s+(?:tpu\s+)?(?:chips?|cores?|devices?))\b"),
        (2, r"\b(match(?:es|ed|ing)?|agrees? with|consistent with|reproduces?)\b[^.]{0,40}"
            r"\b(gpu|cuda|reference|baseline|original|expected)\b"
            r"|\bsame (?:loss|losses|numbers|results|values|accuracy)\b|\bwithin (?:the )?tolerance\b"),
        (1, r"\b(runs?|ran|completes?|completed|finishe[sd]|works?|succeed(?:s|ed)?|passes)\b[^.]{0,30}"
            r"\b(successfully|without (?:any )?errors?|cleanly|end[- ]to[- ]end|now)\b"
            r"|\bno (?:more )?(?:errors|crash(?:es)?)\b|\b(?:is|are) (?:now )?fixed\b"),
    )
)
"""(level, pattern): a sentence matching the pattern states that level is expected."""
NEGATION = re.compile(
    r"\b(not|n't|never|fails?|failed|failing|still|wrong|mismatch\w*|cannot|unable|doesn't|didn't|isn't|"
    r"won't|diverge\w*|error:|however|but)\b",
    re.I,
)
"""A sentence with one of these words states no expectation (a hedge or a failure report)."""
_SENTENCE = re.compile(r"(?<=[.!?\n])\s+")


def expected_level(claim: str) -> int | None:
    """The highest ladder level a non-negated sentence of the claim states; None if none does.

    What a pattern finds in a sentence it finds in the whole claim (sentences are cut at
    whitespace, so word boundaries stay), so only the patterns the claim matches are tried, on
    each distinct sentence once: agents repeat sentences and the level is a maximum."""
    rules = [(level, pattern) for level, pattern in LEVEL_RULES if pattern.search(claim)]
    if not rules:
        return None
    best: int | None = None
    for sentence in dict.fromkeys(_SENTENCE.split(claim)):
        if not sentence.strip() or NEGATION.search(sentence):
            continue
        for level, pattern in rules:
            if best is not None and level <= best:
                break
            if pattern.search(sentence):
                best = level
                break
    return best
