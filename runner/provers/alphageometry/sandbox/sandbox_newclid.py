"""Runs INSIDE the sandbox: one problem through newclid 2.0.2, in AlphaGeometry's order.

Usage: `python3 sandbox_newclid.py job.json`, with PYTHONHASHSEED fixed by the caller. The steps are
those of AlphaGeometry's `alphageometry` mode, whose exceptions NL2AGBench classifies: parse, rename
the points, build the setup string, build the diagram, run DD+AR.

Where newclid reads a problem differently from AlphaGeometry, the step is done AlphaGeometry's way.
tests/test_alphageometry_parity.py checks each case against ag4masses:
- parse: a construction is its words split on spaces (newclid reads `x:Type` arguments);
- rename: an argument that is a number stays a number. Any other unknown name is a KeyError
  (newclid renames what it knows and keeps the rest).
- a point defined again: AlphaGeometry's graph gives it a new node that takes over the name.
  But newclid cannot hold two points of one name, so the new one gets a name of its own.
- the goal's numerical check: a predicate AlphaGeometry's `numericals.check` does not know is
  never true there. So the diagram is redrawn forever (a logic error), where newclid raises.

Where the sampler alone decides, the outcome is newclid's. The report then says what AlphaGeometry
gives instead (Placements). Take a clause whose new point was placed only in degenerate diagrams: on
an existing point, let through because every too-close distance collapsed to 0. AlphaGeometry finds
that clause impossible in the diagrams it draws.

newclid quirks handled here:
- its setup-string builder concatenates a list with the tuple of arguments when a clause omits
  its new points. So it is given list-argument copies.
- its diagram builder takes a bounded number of attempts. It is called once per sample, so the
  loop (and the logic-error decision) stays ours.
- it speaks a slightly different dialect of defs.txt. `bridge_dialect` maps AlphaGeometry's
  spelling onto it.
- a construction newclid cannot draw at all (no numeric sketch) is an engine gap, reported as
  engine_error.
"""

import copy
import pathlib
from collections import Counter

import sandbox_common as common

# The goal predicates AlphaGeometry's numericals.check answers (its check_* functions and the names
# it maps onto them); for any other it returns None, and Graph.build_problem draws again.
# fmt: off
AG_GOAL_CHECKS = frozenset((
    "too_close", "too_far", "aconst", "circle", "coll", "ncoll", "sameside", "para_or_coll",
    "para", "perp", "cyclic", "const_angle", "eqangle", "eqratio", "cong", "midp", "simtri",
    "contri", "ratio", "eqangle6", "eqratio6", "simtri2", "simtri*", "contri2", "contri*",
    "on_line", "rcompute", "acompute", "fixl", "fixc", "fixb", "fixt", "fixp",
))
# fmt: on


FIXED = ("fixl", "fixc", "fixb", "fixt", "fixp")
# Goals AlphaGeometry checks numerically but then fails on, where newclid reads them otherwise. Each
# maps to what newclid checks numerically in their place (None: nothing, as AlphaGeometry's check is
# always true). It also gives the exception AlphaGeometry raises once a diagram passes that check.
# That is raised in its DD (Graph.check, or hashing the goal) or in numericals.check itself.
AG_GOAL_FAILURES = {
    "on_line": ("coll", "solve", ValueError("Not recognize on_line")),
    "para_or_coll": ("para", "solve", ValueError("Not recognize para_or_coll")),
    **{name: (None, "solve", ValueError(f"Not recognize {name} to hash.")) for name in FIXED},
    "too_close": (
        None,
        "build",
        TypeError("check_too_close() missing 1 required positional argument: 'points'"),
    ),
    "too_far": (
        None,
        "build",
        TypeError("check_too_far() missing 1 required positional argument: 'points'"),
    ),
}
# A new point nearer an existing one than this share of the diagram's size lies on it.
ON_A_POINT = 1e-4
# numericals.check's functions that unpack exactly six arguments (`a, b, c, d, m, n = args`).
AG_SIX_ARGUMENT_CHECKS = ("aconst", "const_angle", "ratio")


class EngineGap(Exception):
    """A valid AlphaGeometry problem that newclid cannot run (not the problem's fault)."""


def load_engine():
    """Import newclid once (the forkserver shares it with every job); ImportError if missing."""
    from importlib.metadata import version

    try:
        import numpy
        import scipy.optimize  # noqa: F401 - newclid's AR imports it lazily: load it before jobs
        from newclid.api import GeometricSolver
        from newclid.defs.clause import ArgType, Clause, Construction
        from newclid.defs.definition import Definition
        from newclid.problem import Problem, setup_str_from_problem
        from newclid.proof import Proof
        from newclid.reasoning_engines import AlgebraicManipulator
        from newclid.theorem import Theorem
    except ImportError as error:
        raise ImportError(f"cannot import newclid: {error}") from error
    bridge_dialect()

    return {
        "version": version("newclid"),
        "numpy": numpy,
        "GeometricSolver": GeometricSolver,
        "ArgType": ArgType,
        "Clause": Clause,
        "Construction": Construction,
        "Definition": Definition,
        "Problem": Problem,
        "setup_str_from_problem": setup_str_from_problem,
        "Proof": Proof,
        "AlgebraicManipulator": AlgebraicManipulator,
        "Theorem": Theorem,
    }


def bridge_dialect():
    """AlphaGeometry's defs.txt in newclid 2.0.2's words, for the two differences JGEX meets.

    newclid calls the construction `eq_trapezoid` `iso_trapezoid` (same drawing). It reads an
    `s_angle` constant as `60o`, where AlphaGeometry writes degrees as a bare `60`.
    """
    import newclid.numerical.sketch as sketch
    import newclid.proof as proof
    import newclid.symbols_graph as symbols_graph

    sketch.sketch_eq_trapezoid = sketch.sketch_iso_trapezoid
    if "eq_trapezoid" not in proof.FREE:
        proof.FREE.append("eq_trapezoid")
    graph = symbols_graph.SymbolsGraph
    get_or_create_const = graph.get_or_create_const

    def degrees_as_alphageometry_writes_them(self, const_value, construction_name):
        if construction_name == "s_angle" and _is_int(const_value):
            const_value = f"{const_value}o"
        return get_or_create_const(self, const_value, construction_name)

    graph.get_or_create_const = degrees_as_alphageometry_writes_them


def solve(job, engine):
    Definition = engine["Definition"]
    definitions = Definition.to_dict(Definition.from_txt_file(common.data_file(job, "defs.txt")))
    rules = engine["Theorem"].from_txt_file(common.data_file(job, "rules.txt"))
    problem, goal_index = front_end(job, engine, definitions)

    goal = alphageometry_goal(engine, problem.goals[0])
    placements = Placements()
    sampler = diagram_sampler(job, engine, problem, definitions, goal_index, goal, placements)
    try:
        built = common.sample_diagrams(job, sampler, goal_index)
    except EngineGap as gap:
        return {"status": "engine_error", "stage": "build", "exception_text": str(gap)}
    facts = {"samples": built["samples"], "build_ms": built["build_ms"]}
    alphageometry = placements.alphageometry()
    if alphageometry is not None:
        facts["alphageometry"] = alphageometry
    if built.get("deadline"):
        return {"status": "timeout", "stage": "build", **facts}
    if "logic" in built:
        return {"status": "logic_error", "logic": built["logic"], **facts}
    if goal.fails_in == "solve":
        raise common.StageError("solve", goal_index, goal.failure)

    budget = common.remaining(job)
    if budget <= 0:
        return {"status": "timeout", "stage": "solve", **facts}
    solver = engine["GeometricSolver"](built["state"], problem, definitions, rules)
    try:
        solved = solver.run(max_steps=10**9, timeout=budget, seed=job["seed"])
    except MemoryError:
        raise
    except Exception as error:  # noqa: BLE001 - DD+AR itself failed on a problem that was built
        return common.solve_failure(error, facts)
    infos = solver.run_infos or {}
    facts.update(solve_ms=int(infos.get("runtime", 0) * 1000), steps=infos.get("step"))
    if solved:
        return {"status": "solved", "proof": _proof_text(solver), **facts}
    if infos.get("timeout"):
        return {"status": "timeout", "stage": "solve", **facts}
    return {"status": "unsolved", **facts}


def front_end(job, engine, definitions):
    """Parse, rename and build the setup string, one clause at a time so a failure names it."""
    Problem = engine["Problem"]
    texts, goal_text = common.at_stage("parse", None, lambda: common.split_problem(job["line"]))
    goal_index = len(texts)
    clauses = [
        common.at_stage("parse", i, lambda t=t: _clause(engine, t)) for i, t in enumerate(texts)
    ]
    goal = common.at_stage("parse", goal_index, lambda: _construction(engine, goal_text))

    mapping = {}
    renamed = [
        common.at_stage("rename", i, lambda c=c: _rename_clause(engine, c, mapping))
        for i, c in enumerate(clauses)
    ]
    goal = common.at_stage("rename", goal_index, lambda: _rename(engine, goal, mapping))

    for i, clause in enumerate(renamed):
        alone = Problem(job["title"], [_with_list_args(clause)], [])
        common.at_stage(
            "setup", i, lambda p=alone: engine["setup_str_from_problem"](p, definitions)
        )
    goal_only = Problem(job["title"], [], [goal])
    common.at_stage(
        "setup", goal_index, lambda: engine["setup_str_from_problem"](goal_only, definitions)
    )
    clauses, goal = _new_names_for_redefined_points(engine, renamed, goal, definitions)
    return Problem(job["title"], clauses, [goal]), goal_index


def _clause(engine, text):
    """AlphaGeometry's Clause.from_txt."""
    if text == " =":
        return engine["Clause"]([], [])
    points, constructions = text.split(" = ")
    return engine["Clause"](
        points.split(" "), [_construction(engine, c) for c in constructions.split(", ")]
    )


def _construction(engine, text):
    """AlphaGeometry's Construction.from_txt: the name, then every word as an argument."""
    name, *args = text.split(" ")
    return _made(engine, name, args)


def _made(engine, name, args):
    point = engine["ArgType"].POINT
    return engine["Construction"](name, tuple(args), tuple(point for _ in args))


def _rename_clause(engine, clause, mapping):
    """AlphaGeometry's Clause.translate: new points join the mapping, then the constructions."""
    renamed = clause.translate(mapping)
    renamed.constructions = [_rename(engine, c, mapping) for c in clause.constructions]
    return renamed


def _rename(engine, construction, mapping):
    """AlphaGeometry's Construction.translate: `a if isint(a) else mapping[a]` (KeyError)."""
    args = [a if _is_int(a) else mapping[a] for a in construction.args]
    return _made(engine, construction.name, args)


def _new_names_for_redefined_points(engine, clauses, goal, definitions):
    """A point defined again gets a name of its own, which later clauses and the goal use.

    AlphaGeometry's Graph.add_clause makes a new node for it and moves the name onto that node. The
    first node keeps its facts. Inside its own clause, the construction's inputs are still the first
    point; the point it defines is the new one.
    """
    written = [p for clause in clauses for p in dict.fromkeys(clause.points)]
    if len(written) == len(set(written)):
        return clauses, goal
    taken = set(written)
    current = {}  # name as renamed -> the name of its latest definition
    for clause in clauses:
        points = list(clause.points)
        fresh = {p: _unused(p, taken) for p in dict.fromkeys(points) if p in current}
        constructions = []
        for construction in clause.constructions:
            definition = definitions[construction.name]
            args = list(construction.args)
            if len(args) != len(definition.construction.args):
                args = points + args  # as the setup string and the build complete them
            defines = [a in definition.points for a in definition.construction.args]
            args = [
                fresh.get(a, a) if defined else current.get(a, a)
                for a, defined in zip(args, defines, strict=True)
            ]
            constructions.append(_made(engine, construction.name, args))
        clause.points = [fresh.get(p, p) for p in points]
        clause.constructions = constructions
        current.update({p: fresh.get(p, p) for p in points})
    return clauses, _made(engine, goal.name, [current.get(a, a) for a in goal.args])


def _unused(point, taken):
    n = 1
    while f"{point}_{n}" in taken:
        n += 1
    taken.add(f"{point}_{n}")
    return f"{point}_{n}"


def _is_int(text):
    try:
        int(text)
    except ValueError:
        return False
    return True


def _with_list_args(clause):
    clause = copy.deepcopy(clause)
    for construction in clause.constructions:
        construction.args = list(construction.args)
    return clause


class AlphaGeometryGoal:
    """The goal as AlphaGeometry's diagram loop takes it.

    It holds what to check numerically (None: nothing), whether that check ever holds, and the
    exception AlphaGeometry raises, and where.
    """

    def __init__(self, numeric, holds=True, fails_in=None, failure=None):
        self.numeric = numeric
        self.holds = holds
        self.fails_in = fails_in
        self.failure = failure


def alphageometry_goal(engine, goal):
    if goal.name in AG_GOAL_FAILURES:
        stand_in, stage, failure = AG_GOAL_FAILURES[goal.name]
        numeric = None if stand_in is None else _made(engine, stand_in, goal.args)
        return AlphaGeometryGoal(numeric, fails_in=stage, failure=failure)
    if goal.name not in AG_GOAL_CHECKS:  # numericals.check returns None: never true
        return AlphaGeometryGoal(None, holds=False)
    unpacked = _numerical_unpacking(goal)
    if unpacked is not None:  # the very message numericals.check raises
        return AlphaGeometryGoal(None, fails_in="build", failure=unpacked)
    if goal.name == "cyclic" and len(set(goal.args)) < 4:
        # Graph.check_cyclic calls fewer than four points concyclic without a reason, and the
        # solution writer finds no proof steps to print.
        failure = TypeError("'NoneType' object is not iterable")
        return AlphaGeometryGoal(goal, fails_in="solve", failure=failure)
    return AlphaGeometryGoal(goal)


def _numerical_unpacking(goal):
    """The ValueError numericals.check raises unpacking the goal's points, if it does."""
    try:
        if goal.name in AG_SIX_ARGUMENT_CHECKS:
            _a, _b, _c, _d, _m, _n = goal.args
        elif goal.name == "cyclic":
            _a, _b, _c, *_rest = set(goal.args)
        elif goal.name == "coll":
            _a, _b = goal.args[:2]
    except ValueError as error:
        return error
    return None


class Placements:
    """Per clause, the diagrams that placed its new points normally, and those that did not.

    The others placed one on an existing point. newclid's too-close check, as AlphaGeometry's,
    compares with the least distance of a point from the centroid. That is 0 when one lies on it,
    and then any point passes.
    """

    def __init__(self):
        self.normal = Counter()
        self.on_a_point = Counter()
        self.landed = False  # in the clause being added: a new point on an existing one

    def checked(self, new, existing):
        """Called with each too-close check newclid makes for a clause's new points."""
        if len(existing) < 2 or not new:  # a bare ` =` clause adds no point
            return
        centre = sum(existing[1:], existing[0]) * (1.0 / len(existing))
        size = max(point.distance(centre) for point in existing)
        nearest = min(p.distance(q) for p in new for q in existing)
        self.landed = self.landed or nearest <= ON_A_POINT * size

    def added(self, index):
        (self.on_a_point if self.landed else self.normal)[index] += 1
        self.landed = False

    def alphageometry(self):
        """AlphaGeometry's outcome where it differs: the first clause placed only on a point."""
        for index in sorted(self.on_a_point):
            if not self.normal[index]:
                return {
                    "outcome": "logic_error",
                    "logic": "construction_impossible",
                    "index": index,
                    "error": "PointTooCloseError",
                    "diagrams": self.on_a_point[index],
                }
        return None


def diagram_sampler(job, engine, problem, definitions, goal_index, goal, placements):
    """One diagram per call: newclid's builder with one attempt.

    It watches which clause fails and how each clause placed its points.
    """
    import newclid.proof as newclid_proof

    Proof = engine["Proof"]
    rng = engine["numpy"].random.default_rng(job["seed"])
    index_of = {id(clause): i for i, clause in enumerate(problem.clauses)}
    where = {"index": None}
    add_clause = Proof.add_clause
    too_close = newclid_proof.check_too_close_numerical

    def tracked_add_clause(self, clause, plevel, definitions):
        where["index"] = index_of.get(id(clause))
        placements.landed = False
        result = add_clause(self, clause, plevel, definitions)
        if where["index"] is not None:
            placements.added(where["index"])
        where["index"] = None  # past the clauses: a failure now is the goal's
        return result

    def watched_too_close(new, existing, *tolerance):
        placements.checked(new, existing)
        return too_close(new, existing, *tolerance)

    Proof.add_clause = tracked_add_clause
    newclid_proof.check_too_close_numerical = watched_too_close
    # The clauses are drawn (and may fail) as always; then the goal's numerical check as
    # AlphaGeometry makes it: newclid's own, a stand-in, or none.
    goals = [] if goal.numeric is None else [goal.numeric]
    built = engine["Problem"](problem.url, problem.clauses, goals)

    def draw_once():
        try:
            state = Proof.build_problem(
                built,
                definitions,
                additional_reasoning_engine={"AR": engine["AlgebraicManipulator"]},
                max_attempts=1,
                rnd_generator=rng,
            )
        except MemoryError:
            raise
        except Exception as error:  # noqa: BLE001 - sorted into resample / goal / syntax below
            index = where["index"]
            if isinstance(error, KeyError) and str(error.args[0]).startswith("sketch_"):
                name = str(error.args[0])[len("sketch_") :]
                raise EngineGap(f"newclid 2.0.2 cannot draw AlphaGeometry's `{name}`") from error
            if type(error).__name__ in common.RESAMPLED:
                if index is None:
                    return ("goal_false",)
                return ("failed", index, type(error).__name__)
            raise common.StageError(
                "build", goal_index if index is None else index, error
            ) from error
        if not goal.holds:
            return ("goal_false",)
        if goal.fails_in == "build":
            raise common.StageError("build", goal_index, goal.failure)
        return ("ok", state)

    return draw_once


def _proof_text(solver):
    try:
        solver.write_solution(pathlib.Path("proof.txt"))
        with open("proof.txt", encoding="utf-8") as handle:
            return handle.read()
    except Exception as error:  # noqa: BLE001 - the proof text is provenance, not the verdict
        return f"(proof text unavailable: {common.exception_text(error)})"


if __name__ == "__main__":
    common.main(load_engine, solve)
