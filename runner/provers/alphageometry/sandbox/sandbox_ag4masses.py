"""Runs INSIDE the sandbox: one problem through AlphaGeometry's DD+AR as shipped by ag4masses.

Usage: `python3 sandbox_ag4masses.py job.json`. The ag4masses checkout's `alphageometry/` folder is
at $AG4MASSES_DIR (default /opt/ag4masses/alphageometry). The code follows the public source of
AlphaGeometry and its ag4masses fork (problem.py, graph.py, ddar.py, pretty.py, numericals.py,
alphageometry.py). It runs in the `alphageometry` image, which this project's CI cannot build.

The steps are those of `alphageometry.py` in `alphageometry` mode, the mode NL2AGBench ran:
`Problem.from_txt(..., translate=True)`, `setup_str_from_problem`, `Graph.build_problem`, then
`run_ddar` (DD+AR, the solution writer and the drawing).

alphageometry.py is not imported, because its imports load the language model (jax, flax, meliad).
Its `run_ddar` and solution writer still run as its own code: their definitions are read out of the
file and run unchanged.

The front-end steps run clause by clause, so an exception names its clause. Graph.build_problem's
endless resampling loop is replayed with a bound: same body, same exceptions swallowed, the goal's
numerical check outside them. So a numerically false goal ends as a logic error. An exception from
any step (DD+AR and the solution writer included) is what AlphaGeometry raises on this problem.
NL2AGBench counts it by its class, and so does the kit.
"""

import ast
import os
import signal
import sys

import sandbox_common as common

DEFAULT_DIR = "/opt/ag4masses/alphageometry"
# alphageometry.py's functions from DD+AR's result to its verdict: run_ddar and what it calls.
RUN_DDAR = ("run_ddar", "write_solution", "proof_step_string", "natural_language_statement")
SOLUTION_FILE = "solution.txt"


class DeadlineReached(Exception):
    pass


def load_engine():
    """Import AlphaGeometry's DD+AR modules (never alphageometry.py); ImportError if missing."""
    home = os.environ.get("AG4MASSES_DIR", DEFAULT_DIR)
    sys.path.insert(0, home)
    try:
        import ddar
        import graph as gh
        import numericals as nm
        import pretty as pt
        import problem as pr
        from absl import logging
    except ImportError as error:
        raise ImportError(f"cannot import ag4masses' AlphaGeometry: {error}") from error
    modules = {"ddar": ddar, "gh": gh, "pt": pt, "pr": pr, "logging": logging}
    return {
        "version": "ag4masses",
        "ddar": ddar,
        "gh": gh,
        "nm": nm,
        "pt": pt,
        "pr": pr,
        "alphageometry": _functions_of(os.path.join(home, "alphageometry.py"), RUN_DDAR, modules),
    }


def _functions_of(path, names, modules):
    """The named top-level functions of a module, defined in a namespace holding `modules`."""
    try:
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), path)
    except OSError as error:
        raise ImportError(f"cannot read ag4masses' alphageometry.py: {error}") from error
    chosen = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    missing = set(names) - {n.name for n in chosen}
    if missing:
        raise ImportError(f"{path} defines no {', '.join(sorted(missing))}")
    namespace = dict(modules)
    exec(compile(ast.Module(body=chosen, type_ignores=[]), path, "exec"), namespace)
    return namespace


def solve(job, engine):
    pr = engine["pr"]
    definitions = pr.Definition.from_txt_file(common.data_file(job, "defs.txt"), to_dict=True)
    rules = pr.Theorem.from_txt_file(common.data_file(job, "rules.txt"), to_dict=True)
    problem, goal_index = front_end(job, pr, definitions)

    sampler = diagram_sampler(engine, problem, definitions, goal_index)
    built = common.sample_diagrams(job, sampler, goal_index)
    facts = {"samples": built["samples"], "build_ms": built["build_ms"]}
    if built.get("deadline"):
        return {"status": "timeout", "stage": "build", **facts}
    if "logic" in built:
        return {"status": "logic_error", "logic": built["logic"], **facts}

    graph = built["state"]
    budget = common.remaining(job)
    if budget <= 0:
        return {"status": "timeout", "stage": "solve", **facts}
    alphageometry = engine["alphageometry"]
    alphageometry["RULES"] = rules  # run_ddar reads the rules from alphageometry.py's global
    signal.signal(signal.SIGALRM, _deadline)
    signal.setitimer(signal.ITIMER_REAL, budget)
    try:
        solved = alphageometry["run_ddar"](graph, problem, SOLUTION_FILE)
    except DeadlineReached:
        return {"status": "timeout", "stage": "solve", **facts}
    except MemoryError:
        raise
    except Exception as error:  # noqa: BLE001 - AlphaGeometry's own answer to this problem
        raise common.StageError("solve", goal_index, error) from error
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if solved:
        return {"status": "solved", "proof": _solution_text(), **facts}
    return {"status": "unsolved", **facts}


def _deadline(signum, frame):
    raise DeadlineReached()


def front_end(job, pr, definitions):
    """Problem.from_txt + translate + setup_str_from_problem, one clause at a time."""
    texts, goal_text = common.at_stage("parse", None, lambda: common.split_problem(job["line"]))
    goal_index = len(texts)
    clauses = [
        common.at_stage("parse", i, lambda t=t: pr.Clause.from_txt(t)) for i, t in enumerate(texts)
    ]
    goal = common.at_stage("parse", goal_index, lambda: pr.Construction.from_txt(goal_text))

    mapping = {}  # Problem.translate, in its order: every clause, then the goal
    renamed = [
        common.at_stage("rename", i, lambda c=c: c.translate(mapping))
        for i, c in enumerate(clauses)
    ]
    goal = common.at_stage("rename", goal_index, lambda: goal.translate(mapping))
    problem = pr.Problem(url=job["title"], clauses=renamed, goal=goal)
    problem.mapping = mapping

    # A neutral goal (`ind`, printed as `Y`) lets one clause be formatted on its own. Like
    # AlphaGeometry, this completes the clauses' argument lists in place before the build.
    neutral = pr.Construction("ind", [])
    for i, clause in enumerate(renamed):
        alone = pr.Problem(url=job["title"], clauses=[clause], goal=neutral)
        common.at_stage("setup", i, lambda p=alone: p.setup_str_from_problem(definitions))
    goal_only = pr.Problem(url=job["title"], clauses=[], goal=goal)
    common.at_stage("setup", goal_index, lambda: goal_only.setup_str_from_problem(definitions))
    return problem, goal_index


def diagram_sampler(engine, problem, definitions, goal_index):
    """One pass of Graph.build_problem's loop body per call (graph.py), watching the clause."""
    gh, nm = engine["gh"], engine["nm"]
    resampled = (
        nm.InvalidLineIntersectError,
        nm.InvalidQuadSolveError,
        gh.DepCheckFailError,
        gh.PointTooCloseError,
        gh.PointTooFarError,
    )

    def draw_once():
        index = None
        try:
            try:
                graph = gh.Graph()
                added = []
                plevel = 0
                for index, clause in enumerate(problem.clauses):  # noqa: B007 - names the failure
                    adds, plevel = graph.add_clause(clause, plevel, definitions, verbose=False)
                    added += adds
                graph.plevel = plevel
            except resampled as error:
                return ("failed", index, type(error).__name__)
            index = goal_index  # Graph.build_problem checks the goal outside its `try`
            args = [graph.get(x, lambda x=x: int(x)) for x in problem.goal.args]
            if not nm.check(problem.goal.name, args):
                return ("goal_false",)
            graph.url = problem.url
            graph.build_def = (problem, definitions)
            for add in added:
                graph.add_algebra(add, level=0)
        except MemoryError:
            raise
        except Exception as error:  # noqa: BLE001 - anything else: the engine rejects the problem
            raise common.StageError(
                "build", goal_index if index is None else index, error
            ) from error
        return ("ok", graph)

    return draw_once


def _solution_text():
    """The solution AlphaGeometry's write_solution wrote (provenance only)."""
    try:
        with open(SOLUTION_FILE, encoding="utf-8") as handle:
            return handle.read()
    except OSError as error:
        return f"(solution text unavailable: {common.exception_text(error)})"


if __name__ == "__main__":
    common.main(load_engine, solve)
