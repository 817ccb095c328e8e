"""Every free text on its way into a report: secrets redacted, people pseudonymised.

With `--pseudonymise`, each reviewer becomes `Reviewer N` wherever they appear: their name as
recorded, each word of it, the usual logins made from it (`bcarter`, `ben.carter`), their
e-mail address and its local part, in any case, with possessives ("BEN's" becomes
"Reviewer 1's") and inside file names (`runs/ben_v2.log`). Any other e-mail address becomes
`[email]`. Patterns are linear-time on a
1 MB line (tests/test_report_privacy.py measures it).
"""

from __future__ import annotations

import re
from functools import lru_cache

from domain.redact import redact

EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
"""An e-mail address. The look-behind lets a match start only where a run of address
characters starts, so no position is scanned twice: linear on any line."""

_PUNCT = re.compile(r"[<>()\[\]\"',;:]")
_LOCAL_PARTS = re.compile(r"[._+-]")


def aliases(name: str) -> set[str]:
    """Lower-cased strings that name the person recorded as `name`."""
    name = name.strip()
    if not name:
        return set()
    out = {name.lower()}
    for email in EMAIL.findall(name):
        local = email.split("@")[0].lower()
        out |= {email.lower(), local}
        out |= {p for p in _LOCAL_PARTS.split(local) if len(p) >= 3}
    words = [w.lower() for w in _PUNCT.sub(" ", EMAIL.sub(" ", name)).split()]
    out |= {w for w in words if len(w) >= 3}
    if words:
        out.add(" ".join(words))
    if len(words) >= 2:
        first, last = words[0], words[-1]
        out |= {first + last, first[0] + last, f"{first}.{last}", f"{first}_{last}", f"{first}-{last}"}
    return out


class Scrub:
    """Redacts every text; with `pseudonymise`, replaces every reviewer alias and e-mail."""

    def __init__(self, pseudonymise: bool) -> None:
        self.pseudonymise = pseudonymise
        self.pseudonyms: dict[str, str] = {}
        """Lower-cased alias -> pseudonym; every alias of one person maps to the same one."""
        self.people = 0
        self._pattern: re.Pattern[str] | None = None
        self.text = lru_cache(maxsize=65536)(self._text)

    def add_reviewer(self, name: str) -> None:
        """Registers a person. A name that is itself an alias of a known person ("ben",
        "bcarter", their e-mail) is that person; two people may share a first name, so a shared
        word alone does not merge them (the word keeps the first one's pseudonym)."""
        names = aliases(name or "")
        if not names or names <= self.pseudonyms.keys():
            return
        full = name.strip().lower()
        keys = (full, *EMAIL.findall(full), *(e.split("@")[0] for e in EMAIL.findall(full)))
        known = next((self.pseudonyms[k] for k in keys if k in self.pseudonyms), None)
        if known is None:
            self.people += 1
            known = f"Reviewer {self.people}"
        for a in names:
            self.pseudonyms.setdefault(a, known)
        self._pattern = None
        self.text.cache_clear()

    def reviewer(self, name: str) -> str:
        if not self.pseudonymise:
            return self.text(name)
        self.add_reviewer(name)
        return self.pseudonyms.get((name or "").strip().lower(), "")

    def _email(self, match: re.Match[str]) -> str:
        email = match.group().lower()
        local = email.split("@")[0]
        for key in (email, local, *_LOCAL_PARTS.split(local)):
            if key in self.pseudonyms:
                return self.pseudonyms[key]
        return "[email]"

    def _text(self, value: str | None) -> str:
        out = redact(value or "")
        if not self.pseudonymise:
            return out
        out = EMAIL.sub(self._email, out)
        if self.pseudonyms:
            if self._pattern is None:
                alternatives = sorted(self.pseudonyms, key=len, reverse=True)
                # Bounded by anything but a letter or digit: "_" too, so file names like ben_v2.log match.
                self._pattern = re.compile(r"(?<![^\W_])(?:" + "|".join(map(re.escape, alternatives))
                                           + r")(?![^\W_])", re.IGNORECASE)
            out = self._pattern.sub(lambda m: self.pseudonyms[m.group().lower()], out)
        return out
