"""Runs INSIDE the sandbox: one problem through newclid 2.0.2, in AlphaGeometry's order.

`python3 sandbox_newclid.py job.json` (with PYTHONHASHSEED fixed by the caller). The steps are
those of AlphaGeometry's `alphageometry` mode, the one whose exceptions NL2AGBench classifies:
parse, rename the points, build the setup string, build the diagram, run DD+AR. newclid supplies
every step except one: its renaming keeps names it does not know, where AlphaGeometry (and
ag4masses) raise KeyError, so the rename step adds AlphaGeometry's lookup.

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


class EngineGap(Exception):
    """A valid AlphaGeometry problem that newclid cannot run (not the problem's fault)."""


def load_engine():
    """Import newclid once (the forkserver shares it with every job); ImportError if missing."""
    from importlib.metadata import version

    try:
        import numpy
        import scipy.optimize  # noqa: F401 - newclid's AR imports it lazily: load it before jobs
        from newclid.api import GeometricSolver
        from newclid.defs.clause import Clause, Construction
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
    Clause, Construction, Problem = engine["Clause"], engine["Construction"], engine["Problem"]
    texts, goal_text = common.at_stage("parse", None, lambda: common.split_problem(job["line"]))
    goal_index = len(texts)
    clauses = [
        common.at_stage("parse", i, lambda t=t: Clause.from_txt(t)) for i, t in enumerate(texts)
    ]
    goal = common.at_stage("parse", goal_index, lambda: Construction.from_txt(goal_text))

    mapping = {}
    renamed = [
        common.at_stage("rename", i, lambda c=c: _rename_clause(c, mapping))
        for i, c in enumerate(clauses)
    ]
    goal = common.at_stage("rename", goal_index, lambda: _rename_construction(goal, mapping))
    problem = Problem(job["title"], renamed, [goal])

    for i, clause in enumerate(renamed):
        alone = Problem(job["title"], [_with_list_args(clause)], [])
        common.at_stage(
            "setup", i, lambda p=alone: engine["setup_str_from_problem"](p, definitions)
        )
    goal_only = Problem(job["title"], [], [goal])
    common.at_stage(
        "setup", goal_index, lambda: engine["setup_str_from_problem"](goal_only, definitions)
    )
    return problem, goal_index


def _rename_clause(clause, mapping):
    renamed = clause.translate(mapping)  # new points join the mapping here, as in AlphaGeometry
    for construction in clause.constructions:
        _lookup_args(construction, mapping)
    return renamed


def _rename_construction(construction, mapping):
    _lookup_args(construction, mapping)
    return construction.translate(mapping)


def _lookup_args(construction, mapping):
    """AlphaGeometry's Construction.translate: `a if isint(a) else mapping[a]` (KeyError)."""
    for arg in construction.args:
        if not _is_int(arg):
            mapping[arg]  # noqa: B018 - the lookup is the check


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

    def draw_once():
        try:
            state = Proof.build_problem(
                problem,
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
