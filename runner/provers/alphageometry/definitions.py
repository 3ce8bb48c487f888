"""AlphaGeometry's construction definitions (defs.txt), read for the kit's own DSL validator.

defs.txt holds one definition per six lines:
1. the construction with its argument names;
2. the points each new point relies on;
3. the preconditions;
4. the basic facts it adds, grouped by the points they define;
5. the numeric sketch;
6. a blank line.
Only what the validator needs is kept.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

# In sandbox/: the engine reads the same bytes in the sandbox that the validator reads here.
DATA = files(__package__).joinpath("sandbox")
DEFS_FILE = "defs.txt"
RULES_FILE = "rules.txt"
# The files are AlphaGeometry's own, copied unchanged (see DATA_LICENSE.txt beside them).
SHA256 = {
    DEFS_FILE: "fbe184abc18448a2e0de498ea90be5f31215759df176c3699fbbf4bfc16b9d42",
    RULES_FILE: "e53ad983b45973e3fa27abac59350dc4be3aad27260910542a725cdf9831fe16",
}


@dataclass(frozen=True)
class Statement:
    name: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class Definition:
    """One construction: `name args...`; `defines` are the args that the clause creates."""

    name: str
    args: tuple[str, ...]
    defines: tuple[str, ...]
    basics: tuple[tuple[tuple[str, ...], tuple[Statement, ...]], ...]
    requires: tuple[Statement, ...] = ()  # the preconditions, on points that exist before it

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(a for a in self.args if a not in self.defines)

    def form(self) -> str:
        """The clause form a user writes, e.g. `x = reflect a b c`."""
        return " ".join([*self.defines, "=", self.name, *self.inputs])


def data_bytes(name: str) -> bytes:
    data = DATA.joinpath(name).read_bytes()
    if hashlib.sha256(data).hexdigest() != SHA256[name]:
        raise RuntimeError(
            f"{name} in the prooflock package is not AlphaGeometry's (sha256 differs)"
        )
    return data


@cache
def load() -> dict[str, Definition]:
    return parse(data_bytes(DEFS_FILE).decode())


def parse(text: str) -> dict[str, Definition]:
    lines = text.split("\n")
    found: dict[str, Definition] = {}
    for start in range(0, len(lines) - 5, 6):
        head, _rely, preconditions, basics, numerics = lines[start : start + 5]
        name, *args = head.split(" ")
        sketched = {a for sketch in numerics.split(", ") if sketch for a in sketch.split(" ")[1:]}
        found[name] = Definition(
            name=name,
            args=tuple(args),
            defines=tuple(a for a in args if a not in sketched),
            basics=_basics(basics),
            requires=_statements(preconditions.partition(" = ")[2]),
        )
    return found


def _basics(line: str) -> tuple[tuple[tuple[str, ...], tuple[Statement, ...]], ...]:
    """`x : cong x a x b, coll x a b; y : ...` as ((points, statements), ...), like problem.py."""
    levels = []
    for level in (part.strip() for part in line.split(";")) if line else ():
        points: tuple[str, ...] = ()
        if ":" in level:
            head, level = level.split(":")
            points = tuple(head.strip().split())
        levels.append((points, _statements(level)))
    return tuple(levels)


def _statements(text: str) -> tuple[Statement, ...]:
    """`cong x a x b, coll x a b` as Statements."""
    return tuple(
        Statement(name, tuple(args))
        for name, *args in (s.strip().split(" ") for s in text.strip().split(",") if text.strip())
    )
