"""The kit's own DSL validator: AlphaGeometry's front end replayed on defs.txt, without the engine.

AlphaGeometry reads a problem in three steps before it draws anything. This is in its
`alphageometry` mode, the one NL2AGBench runs:
1. parse the text (`Problem.from_txt`);
2. rename the points to a, b, c, ... (`Problem.translate`);
3. build the language-model prompt (`setup_str_from_problem`).

Every syntax error the paper classifies comes from one of them, as an AssertionError, KeyError or
ValueError. This module walks the same steps in the same order. It predicts the same exception class
at the same clause, then says in words what is wrong.

It also predicts the one drawing error that depends on the text alone. That is a construction given
a point not drawn yet: its own new point, written where an existing point belongs.
`Graph.add_clause` rejects it with ValueError. Other drawing errors depend on the figure, and the
engine finds those. (If an earlier clause never draws, AlphaGeometry never reaches this one.)
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from runner.core import deadline
from runner.provers.alphageometry import definitions
from runner.provers.alphageometry.definitions import Definition

# Goal predicates whose arguments AlphaGeometry's pretty-printer unpacks, with the counts it
# accepts (pretty.py); any other count raises ValueError while the setup string is built.
GOAL_ARITY: dict[str, tuple[int, ...]] = {
    "acompute": (4,),
    "rcompute": (4,),
    "aconst": (5,),
    "rconst": (5,),
    "midp": (3,),
    "midpoint": (3,),
    "eqangle": (8,),
    "eqratio": (8,),
    "eqratio3": (6,),
    "cong": (4,),
    "perp": (2, 4),
    "para": (2, 4),
    "simtri": (6,),
    "simtri2": (6,),
    "simtri*": (6,),
    "contri": (6,),
    "contri2": (6,),
    "contri*": (6,),
    "circle": (4,),
    "foot": (4,),
}
# Basic facts that AlphaGeometry turns into constant angles, reading the last argument as degrees.
ANGLE_FACTS = ("s_angle", "aconst")


@dataclass(frozen=True)
class Fault:
    """A syntax error: what AlphaGeometry raises, where, and why in words."""

    syntax_class: str  # AssertionError, KeyError or ValueError
    stage: str  # parse, rename or setup: the AlphaGeometry step that raises
    index: int  # clause index; the goal is index len(clauses)
    text: str  # the clause as written; the goal as `? goal`
    reason: str

    def clause(self) -> dict[str, object]:
        return {"index": self.index, "text": self.text}


@dataclass
class _Clause:
    index: int
    text: str
    points: list[str]
    constructions: list[tuple[str, list[str]]]


class _Found(Exception):
    def __init__(self, fault: Fault):
        self.fault = fault


def validate(line: str, defs: dict[str, Definition] | None = None) -> Fault | None:
    """The first syntax error AlphaGeometry would raise on `clauses ? goal`, or None."""
    defs = definitions.load() if defs is None else defs
    try:
        clauses, goal, goal_index = _parse(line)
        _rename(clauses, goal, goal_index)
        _setup(clauses, goal, goal_index, defs)
        _draw(clauses, defs)
    except _Found as found:
        return found.fault
    return None


T = TypeVar("T")


def _paced(items: Sequence[T], stage: str) -> Iterator[tuple[int, T]]:
    """(index, item), looking at the check's clock now and then.

    A problem of a million clauses takes seconds to validate, and the check's time covers that.
    """
    return deadline.paced(
        items, lambda index: f"validated clause {index} of {len(items)} ({stage})"
    )


def _fault(cls: str, stage: str, index: int, text: str, reason: str) -> _Found:
    return _Found(Fault(cls, stage, index, text, reason))


def _parse(line: str) -> tuple[list[_Clause], tuple[str, list[str]] | None, int]:
    parts = line.split(" ? ")
    texts = parts[0].split("; ")
    goal_index = len(texts)
    if len(parts) > 2:
        raise _fault(
            "ValueError",
            "parse",
            goal_index,
            "? " + " ? ".join(parts[1:]),
            "the problem has more than one ` ? `: AlphaGeometry takes exactly one goal after "
            "a single ` ? `",
        )
    clauses = [_parse_clause(i, text) for i, text in _paced(texts, "parse")]
    goal = None
    if len(parts) == 2:
        name, *args = parts[1].split(" ")
        goal = (name, args)
    return clauses, goal, goal_index


def _parse_clause(index: int, text: str) -> _Clause:
    if text == " =":
        return _Clause(index, text, [], [])
    sides = text.split(" = ")
    if len(sides) != 2:
        if not text.strip(" "):
            reason = "the clause is empty: two `; ` separators follow each other"
        elif len(sides) == 1:
            reason = (
                "the clause has no ` = `: write the new points, ` = `, then the constructions "
                "(e.g. `d = midpoint d a b`); separate clauses with `; ` and constructions "
                "with `, `"
            )
        else:
            reason = (
                f"the clause has {len(sides) - 1} ` = ` signs: one clause defines its points "
                "once; start a new clause with `; `"
            )
        raise _fault("ValueError", "parse", index, text, reason)
    points_text, constructions_text = sides
    points = []
    for point in points_text.split(" "):
        if "@" in point:  # `p@x_y` pins a point's coordinates
            parts = point.split("@")
            coords = parts[1].split("_") if len(parts) == 2 else []
            if len(coords) != 2 or not all(_is_float(c) for c in coords):
                raise _fault(
                    "ValueError",
                    "parse",
                    index,
                    text,
                    f"`{point}` is not a point with coordinates: write `name@x_y` with two numbers",
                )
            point = parts[0]
        points.append(point)
    constructions = []
    for construction in constructions_text.split(", "):
        name, *args = construction.split(" ")
        constructions.append((name, args))
    return _Clause(index, text, points, constructions)


def _rename(clauses: list[_Clause], goal: tuple[str, list[str]] | None, goal_index: int) -> None:
    """AlphaGeometry renames points in order: an argument naming no earlier point is a KeyError."""
    defined: set[str] = set()
    for _, clause in _paced(clauses, "rename"):
        defined.update(clause.points)
        for name, args in clause.constructions:
            for arg in args:
                if not _is_int(arg) and arg not in defined:
                    raise _fault(
                        "KeyError", "rename", clause.index, clause.text, _unknown_point(arg, name)
                    )
    if goal is not None:
        name, args = goal
        for arg in args:
            if not _is_int(arg) and arg not in defined:
                raise _fault(
                    "KeyError",
                    "rename",
                    goal_index,
                    _goal_text(goal),
                    _unknown_point(arg, name, goal=True),
                )


def _unknown_point(arg: str, construction: str, goal: bool = False) -> str:
    where = f"the goal `{construction}`" if goal else f"`{construction}`"
    if arg == "":
        return f"an empty argument in {where}: two spaces in a row"
    if arg.endswith(";"):
        return (
            f"`{arg}` is not a point: a `;` is glued to it, as happens when a `;` precedes ` ? `; "
            "the last clause must end directly before ` ? `"
        )
    if arg.endswith(","):
        return f"`{arg}` is not a point: separate constructions with `, ` (a comma and a space)"
    if arg in {"=", "?"}:
        return f"`{arg}` appears among the arguments of {where}: separate clauses with `; `"
    return f"point `{arg}` in {where} is used before any clause defines it"


def _setup(
    clauses: list[_Clause],
    goal: tuple[str, list[str]] | None,
    goal_index: int,
    defs: dict[str, Definition],
) -> None:
    for _, clause in _paced(clauses, "setup"):
        _setup_clause(clause, defs)
    if goal is None:
        return
    name, args = goal
    arities = GOAL_ARITY.get(name)
    if arities is not None and len(args) not in arities:
        wanted = " or ".join(str(n) for n in arities)
        raise _fault(
            "ValueError",
            "setup",
            goal_index,
            _goal_text(goal),
            f"`{name}` takes {wanted} points, not {len(args)}",
        )


def _setup_clause(clause: _Clause, defs: dict[str, Definition]) -> None:
    group: dict[str, tuple[str, ...]] = {}
    for name, args in clause.constructions:
        definition = defs.get(name)
        if definition is None:
            raise _fault(
                "KeyError", "setup", clause.index, clause.text, _unknown_construction(name, defs)
            )
        # A written argument that is a number stays a number when AlphaGeometry renames the points.
        # So it is never the clause's (renamed) point; points put first by the setup are.
        named = [not _is_int(a) for a in args]
        if len(args) != len(definition.args):
            if len(args) + len(clause.points) != len(definition.args):
                raise _fault(
                    "AssertionError",
                    "setup",
                    clause.index,
                    clause.text,
                    _wrong_count(definition, args, clause.points),
                )
            args = clause.points + args
            named = [True] * len(clause.points) + named
        mapping = dict(zip(definition.args, args, strict=True))
        is_point = dict(zip(definition.args, named, strict=True))
        for points, statements in definition.basics:
            level = tuple(mapping[p] for p in points)
            for point in (mapping[p] for p in points if is_point[p]):
                group[point] = level
            for statement in statements:
                missing = [a for a in statement.args if a not in mapping]
                if missing:
                    raise _fault(
                        "KeyError",
                        "setup",
                        clause.index,
                        clause.text,
                        f"`{name}` cannot be used in AlphaGeometry's alphageometry mode: its "
                        f"definition's fact `{statement.name} {' '.join(statement.args)}` has "
                        f"constants ({', '.join(missing)}) that the setup-string builder looks up "
                        "as point names",
                    )
                if statement.name in ANGLE_FACTS and not _is_int(mapping[statement.args[-1]]):
                    raise _fault(
                        "ValueError",
                        "setup",
                        clause.index,
                        clause.text,
                        f"the angle of `{name}` must be a whole number of degrees, "
                        f"not `{mapping[statement.args[-1]]}`",
                    )
    pending = list(clause.points)
    while pending:
        point = pending[0]
        if point not in group:
            raise _fault(
                "KeyError",
                "setup",
                clause.index,
                clause.text,
                _not_defined_here(point, clause, defs),
            )
        pending = [p for p in pending if p not in group[point]]


def _draw(clauses: list[_Clause], defs: dict[str, Definition]) -> None:
    """Graph.add_clause: a construction's preconditions and sketch read points drawn before it."""
    drawn: set[str] = set()
    for _, clause in _paced(clauses, "draw"):
        for name, args in clause.constructions:
            definition = defs[name]
            if len(args) != len(definition.args):
                args = clause.points + args
            mapping = dict(zip(definition.args, args, strict=True))
            needed = [a for statement in definition.requires for a in statement.args]
            needed += [a for a in definition.inputs if not _is_int(mapping[a])]
            for point in (mapping[a] for a in needed):
                if point not in drawn:
                    raise _fault(
                        "ValueError",
                        "build",
                        clause.index,
                        clause.text,
                        _not_drawn_yet(point, name, definition, clause),
                    )
        drawn.update(clause.points)


def _not_drawn_yet(point: str, name: str, definition: Definition, clause: _Clause) -> str:
    if point in clause.points:
        return (
            f"`{name}` is given `{point}` as one of its existing points, but `{point}` is the "
            f"point this clause defines: `{name}` takes {len(definition.inputs)} existing "
            f"points (`{definition.form()}`), or all {len(definition.args)} with the new point "
            "first"
        )
    return f"`{name}` is given `{point}`, which no earlier clause draws"


def _unknown_construction(name: str, defs: dict[str, Definition]) -> str:
    close = difflib.get_close_matches(name, defs, n=1)
    hint = f" (did you mean `{close[0]}`?)" if close else ""
    return f"`{name}` is not a construction in defs.txt{hint}"


def _wrong_count(definition: Definition, args: list[str], points: list[str]) -> str:
    given = " ".join(args) or "nothing"
    return (
        f"`{definition.name}` needs {len(definition.inputs)} points after `=` "
        f"(`{definition.form()}`), or all {len(definition.args)} with the new point "
        f"written first; this clause gives {len(args)} (`{given}`) for "
        f"{len(points)} new point(s)"
    )


def _not_defined_here(point: str, clause: _Clause, defs: dict[str, Definition]) -> str:
    if _is_int(point):
        return (
            f"`{point}` cannot name a point: AlphaGeometry reads a number among a construction's "
            "arguments as a number, so no construction defines it; name points with letters"
        )
    for name, args in clause.constructions:
        definition = defs[name]
        if len(args) == len(definition.args) and definition.defines:
            positions = [definition.args.index(d) for d in definition.defines]
            written = ", ".join(f"`{args[i]}`" for i in positions)
            # The user's points in order, with the new point(s) put where the definition wants them.
            rest, new_points = iter(args), iter(clause.points)
            example = [
                next(new_points, point) if i in positions else next(rest) for i in range(len(args))
            ]
            ordinal = " and ".join(_ordinal(i) for i in positions)
            return (
                f"`{point}` is not defined by this clause: with all {len(definition.args)} "
                f"points written out, the {ordinal} argument of `{name}` is the point it "
                f"defines, so it must be `{point}` (e.g. `{point} = {name} {' '.join(example)}`), "
                f"not {written}"
            )
    return f"`{point}` is not defined by any construction of this clause"


def _ordinal(i: int) -> str:
    return {0: "first", 1: "second", 2: "third", 3: "fourth"}.get(i, f"#{i + 1}")


def _goal_text(goal: tuple[str, list[str]]) -> str:
    name, args = goal
    return "? " + " ".join([name, *args])


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
