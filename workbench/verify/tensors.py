"""Level 2's checkpoint comparison: relative L2 per tensor against the reference run's checkpoint.

torch is optional (the `tensors` extra) and imported only when both runs saved a checkpoint.
Checkpoints are read with `torch.load(..., map_location="cpu", weights_only=True)`, which refuses
arbitrary pickled objects; `.safetensors` files are read with the safetensors package when it is
installed. docs/verification.md (level 2) is the specification.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import math
import warnings
from pathlib import Path
from typing import Any

from domain.models import Evidence, FailureCause, Outcome
from workbench.verify.ladder import LevelResult

WORST = 5
"""How many of the worst tensors the evidence lists."""

TINY = 1e-30
"""The smallest reference norm divided by: an all-zero reference tensor compares absolutely."""


def backend() -> str | None:
    """torch's version when it is installed (found without importing it), else None."""
    try:
        if importlib.util.find_spec("torch") is None:
            return None
    except (ImportError, ValueError):
        return None
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _flatten(value: Any, prefix: str, out: dict[str, Any], torch: Any) -> None:
    """Tensors of a (possibly nested) dict or list, by dotted name; other values are not compared."""
    if isinstance(value, torch.Tensor):
        out[prefix or "<tensor>"] = value
    elif isinstance(value, dict):
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), out, torch)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _flatten(item, f"{prefix}.{index}" if prefix else str(index), out, torch)


class Unreadable(Exception):
    """A checkpoint that cannot be read as tensors, in words."""


def load(path: str | Path, name: str | None = None) -> dict[str, Any]:
    """The checkpoint's tensors by name. Raises ImportError without torch (or safetensors for a
    `.safetensors` file) and Unreadable for a file that is not a checkpoint of tensors. `name` is
    the file's name in the bundle (the stored copy is named by its hash)."""
    import torch

    path = Path(path)
    name = name or path.name
    try:
        if name.endswith(".safetensors") or _is_safetensors(path):
            from safetensors.torch import load_file

            data = load_file(str(path), device="cpu")
        else:
            with warnings.catch_warnings():  # e.g. "pickle protocol 4": the load decides, not a warning
                warnings.simplefilter("ignore")
                data = torch.load(str(path), map_location="cpu", weights_only=True)
    except ImportError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure to read is reported, never raised
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise Unreadable(f"{name!r} ({type(exc).__name__}: {first})") from None
    out: dict[str, Any] = {}
    _flatten(data, "", out, torch)
    if not out:
        raise Unreadable(f"{name!r} (it holds no tensors)")
    return out


def _is_safetensors(path: Path) -> bool:
    """A safetensors file starts with an 8-byte header length and then `{`; torch.save's zip
    files start with `PK` and legacy pickles with 0x80."""
    try:
        with path.open("rb") as fh:
            head = fh.read(9)
    except OSError:
        return False
    return len(head) == 9 and head[8:9] == b"{" and int.from_bytes(head[:8], "little") < (100 << 20)


def relative_l2(a: Any, b: Any) -> float:
    """||a - b|| / max(||b||, TINY), computed in float64 (complex128 for complex tensors)."""
    import torch

    wide = torch.complex128 if (a.is_complex() or b.is_complex()) else torch.float64
    a, b = a.detach().to(wide), b.detach().to(wide)
    diff = torch.linalg.vector_norm(a - b).item()
    ref = torch.linalg.vector_norm(b).item()
    if diff == 0.0:
        return 0.0
    return diff / max(ref, TINY)


def _shape(t: Any) -> str:
    return "(" + ", ".join(str(d) for d in t.shape) + ")"


def _names(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def compare(mine: dict[str, Any], reference: dict[str, Any], rtol: float,
            what: str = "the checkpoint") -> LevelResult:
    """Level 2 on tensors alone: the same names and shapes, each within `rtol` relative L2."""
    missing = sorted(set(reference) - set(mine))
    extra = sorted(set(mine) - set(reference))
    shapes = sorted(n for n in set(mine) & set(reference) if tuple(mine[n].shape) != tuple(reference[n].shape))
    problems: list[str] = []
    evidence: list[Evidence] = []
    if missing:
        problems.append(f"missing tensor(s) the reference has: {_names(missing)}")
        evidence += [Evidence("tensor", n, f"{n}: missing (reference shape {_shape(reference[n])})")
                     for n in missing[:WORST]]
    if extra:
        problems.append(f"tensor(s) the reference does not have: {_names(extra)}")
        evidence += [Evidence("tensor", n, f"{n}: not in the reference (shape {_shape(mine[n])})")
                     for n in extra[:WORST]]
    if shapes:
        problems.append("shape mismatch: " + ", ".join(
            f"{n} {_shape(mine[n])} vs the reference's {_shape(reference[n])}" for n in shapes[:WORST])
            + (f" and {len(shapes) - WORST} more" if len(shapes) > WORST else ""))
        evidence += [Evidence("tensor", n, f"{n}: shape {_shape(mine[n])}, reference {_shape(reference[n])}")
                     for n in shapes[:WORST]]
    shared = sorted(n for n in set(mine) & set(reference) if n not in shapes)
    rel = {n: relative_l2(mine[n], reference[n]) for n in shared}
    worst = sorted(shared, key=lambda n: (-(rel[n] if not math.isnan(rel[n]) else math.inf), n))
    bad = [n for n in worst if not rel[n] <= rtol]  # NaN is never within tolerance
    if bad:
        problems.append(f"{len(bad)} of {len(shared)} tensor(s) beyond relative L2 {rtol:g}: "
                        + ", ".join(f"{n} {rel[n]:.3g}" for n in bad[:WORST])
                        + (f" and {len(bad) - WORST} more" if len(bad) > WORST else ""))
    tensor_ev = [Evidence("tensor", n, f"{n}: relative L2 {rel[n]:.3g} (tensor_rtol {rtol:g}), shape {_shape(mine[n])}")
                 for n in worst[:WORST]]
    if problems:
        ev = evidence + [e for e in tensor_ev if e.ref in bad]
        ev = ev or tensor_ev
        return LevelResult(2, Outcome.FAIL, f"{what} differs from the reference's: " + "; ".join(problems), ev,
                           [(FailureCause.NUMERICAL_MISMATCH, ev)])
    top = f" (worst {worst[0]} {rel[worst[0]]:.3g})" if worst else ""
    return LevelResult(2, Outcome.PASS, f"{what}'s {len(shared)} tensors within relative L2 {rtol:g}{top}",
                       tensor_ev)


def compare_files(mine: str | Path, reference: str | Path, rtol: float, *, mine_name: str | None = None,
                  reference_name: str | None = None,
                  cache: dict[str, dict[str, Any]] | None = None) -> LevelResult:
    """Load both checkpoints and compare them; `unknown` with the reason when torch (or
    safetensors) is not installed or a file cannot be read. `cache` keeps loaded reference
    checkpoints by path across the attempts of one migration."""
    try:
        ref = cache.get(str(reference)) if cache is not None else None
        if ref is None:
            ref = load(reference, reference_name)
            if cache is not None:
                cache[str(reference)] = ref
        own = load(mine, mine_name)
    except ImportError as exc:
        package = "safetensors" if "safetensors" in str(exc) else "torch"
        return LevelResult(2, Outcome.UNKNOWN, f"checkpoint comparison skipped: {package} is not installed"
                           " (pip install 'workbench[tensors]')")
    except Unreadable as exc:
        return LevelResult(2, Outcome.UNKNOWN, f"checkpoint comparison skipped: cannot read {exc}")
    return compare(own, ref, rtol)
