"""Runs INSIDE the sandbox: one problem through newclid 2.0.2, in AlphaGeometry's order.

`python3 sandbox_newclid.py job.json` (with PYTHONHASHSEED fixed by the caller). The steps are
those of AlphaGeometry's `alphageometry` mode, the one whose exceptions NL2AGBench classifies:
parse, rename the points, build the setup string, build the diagram, run DD+AR. Wherever
newclid reads a problem differently from AlphaGeometry (ag4masses, checked case by case in
tests/test_alphageometry_parity.py), the step is done AlphaGeometry's way:

- parse: a construction is its words split on spaces (newclid reads `x:Type` arguments);
- rename: an argument that is a number stays a number and any other unknown name is a KeyError
  (newclid renames what it knows and keeps the rest);
- a point defined again: AlphaGeometry's graph gives it a new node that takes over the name from
  then on; newclid cannot hold two points of one name, so the new one gets a name of its own;
- the goal's numerical check: a predicate AlphaGeometry's `numericals.check` does not know is
  never true there, so the diagram is redrawn forever (a logic error), where newclid raises.

newclid quirks handled here: its setup-string builder concatenates a list with the tuple of
arguments when a clause omits its new points, so it is given list-argument copies; its diagram
builder takes a bounded number of attempts, which is called once per sample so the loop (and
the logic-error decision) stays ours. newclid also speaks a slightly different dialect of
defs.txt; `bridge_dialect` maps AlphaGeometry's spelling onto it (see there). A construction
newclid cannot draw at all (no numeric sketch) is an engine gap, reported as engine_error.
"""

import copy
import pathlib

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

    newclid renamed the construction `eq_trapezoid` to `iso_trapezoid` (same drawing), and it
    reads an `s_angle` constant as `60o` where AlphaGeometry writes degrees as a bare `60`.
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

    sampler = diagram_sampler(job, engine, problem, definitions, goal_index)
    try:
        built = common.sample_diagrams(job, sampler, goal_index)
    except EngineGap as gap:
        return {"status": "engine_error", "stage": "build", "exception_text": str(gap)}
    facts = {"samples": built["samples"], "build_ms": built["build_ms"]}
    if built.get("deadline"):
        return {"status": "timeout", "stage": "build", **facts}
    if "logic" in built:
        return {"status": "logic_error", "logic": built["logic"], **facts}

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
    clauses, goal = _new_names_for_redefined_points(renamed, goal, definitions)
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


def _new_names_for_redefined_points(clauses, goal, definitions):
    """A point defined again gets a name of its own, which later clauses and the goal use.

    AlphaGeometry's Graph.add_clause makes a new node for it and moves the name onto that node;
    the old node keeps its facts. Inside its own clause the construction's inputs are still the
    old point, the point it defines is the new one.
    """
    taken = {p for clause in clauses for p in clause.points}
    current = {}  # name as renamed -> the name of its latest definition
    for clause in clauses:
        written = list(clause.points)
        fresh = {}
        for point in written:
            if point in current and point not in fresh:
                fresh[point] = _unused(point, taken)
        for construction in clause.constructions:
            definition = definitions[construction.name]
            args = list(construction.args)
            if len(args) != len(definition.construction.args):
                args = list(clause.points) + args  # as the setup string and the build complete it
            defines = [a in definition.points for a in definition.construction.args]
            construction.args = tuple(
                fresh.get(a, a) if defined else current.get(a, a)
                for a, defined in zip(args, defines, strict=True)
            )
        clause.points = [fresh.get(p, p) for p in written]
        current.update({p: fresh.get(p, p) for p in written})
    renamed_goal = goal.translate({a: current[a] for a in goal.args if a in current})
    return clauses, renamed_goal


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


def diagram_sampler(job, engine, problem, definitions, goal_index):
    """One diagram per call: newclid's builder with one attempt, watching which clause fails."""
    Proof = engine["Proof"]
    rng = engine["numpy"].random.default_rng(job["seed"])
    index_of = {id(clause): i for i, clause in enumerate(problem.clauses)}
    where = {"index": None}
    add_clause = Proof.add_clause

    def tracked_add_clause(self, clause, plevel, definitions):
        where["index"] = index_of.get(id(clause))
        result = add_clause(self, clause, plevel, definitions)
        where["index"] = None  # past the clauses: a failure now is the goal's
        return result

    Proof.add_clause = tracked_add_clause
    # A goal AlphaGeometry cannot check numerically is false in every diagram it draws: the
    # clauses are drawn (and may fail) as before, then the diagram is drawn again.
    [goal] = problem.goals
    checked = goal.name in AG_GOAL_CHECKS
    built = problem if checked else engine["Problem"](problem.url, problem.clauses, [])

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
        return ("ok", state) if checked else ("goal_false",)

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
