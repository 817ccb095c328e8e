"""What a run ran with (interpreter, runtime, packages) and how two runs differ: the library
factor of a deviation, apart from the hardware (issue 36; docs/explain.md)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class RanWith:
    """One run's environment, as its own interpreter reported it (the probe's `ran_with`)."""

    python: str | None = None
    runtime: str | None = None
    """The accelerator runtime the program imported, else `torch`."""
    runtime_version: str | None = None
    launcher: str | None = None
    device_count: int | None = None
    packages: dict[str, str] = field(default_factory=dict)
    """Installed distributions, names normalised as pip does, to their versions."""
    imported: frozenset[str] = frozenset()
    """The distributions the program imported (directly or through another)."""

    def describe(self) -> str:
        parts = [f"{self.runtime} {self.runtime_version or ''}".strip() if self.runtime else None,
                 f"python {self.python}" if self.python else None,
                 f"{self.device_count} device{'s' if self.device_count != 1 else ''}" if self.device_count else None,
                 f"via {self.launcher}" if self.launcher else None]
        return ", ".join(p for p in parts if p)


@dataclass(frozen=True, slots=True)
class PackageChange:
    """A distribution that differs between the reference's environment and a run's."""

    name: str
    reference: str | None
    """Its version in the reference's environment; None where the run added it."""
    run: str | None
    """Its version in the run's environment; None where the run removed it."""
    imported: bool
    """The program imported it in either run: a difference that can change its numbers."""

    @property
    def kind(self) -> str:
        return "added" if self.reference is None else "removed" if self.run is None else "changed"

    def describe(self) -> str:
        mark = " (imported)" if self.imported else ""
        if self.kind == "added":
            return f"+{self.name} {self.run}{mark}"
        if self.kind == "removed":
            return f"-{self.name} {self.reference}{mark}"
        return f"{self.name} {self.reference} → {self.run}{mark}"


def differences(reference: RanWith, run: RanWith) -> list[PackageChange]:
    """Added, removed and changed distributions; the imported ones first, then by name."""
    names = set(reference.packages) | set(run.packages)
    changes = [PackageChange(n, reference.packages.get(n), run.packages.get(n),
                             n in reference.imported or n in run.imported)
               for n in names if reference.packages.get(n) != run.packages.get(n)]
    return sorted(changes, key=lambda c: (not c.imported, c.name))
