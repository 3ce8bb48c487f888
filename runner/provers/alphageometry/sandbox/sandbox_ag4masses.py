"""Runs INSIDE the sandbox: one problem through AlphaGeometry's DD+AR as shipped by ag4masses.

`python3 sandbox_ag4masses.py job.json`, with the ag4masses checkout's `alphageometry/` folder at
$AG4MASSES_DIR (default /opt/ag4masses/alphageometry). Written against the public code of
AlphaGeometry and its ag4masses fork (problem.py, graph.py, ddar.py, pretty.py, numericals.py);
NOT run in this project's CI, which cannot fetch ag4masses.

The steps are those of `alphageometry.py` in `alphageometry` mode, the mode NL2AGBench ran:
`Problem.from_txt(..., translate=True)`, `setup_str_from_problem`, `Graph.build_problem`,
`ddar.solve`. alphageometry.py itself is not imported: it loads the language model (jax, flax,
meliad) at import time. The steps run clause by clause, so an exception names its clause, and
Graph.build_problem's endless resampling loop is replayed with a bound (same body, same
exceptions swallowed), so a numerically false goal ends as a logic error.
"""

import os
import signal
import sys

import sandbox_common as common

DEFAULT_DIR = "/opt/ag4masses/alphageometry"


class DeadlineReached(Exception):
    pass


def load_engine():
    """Import AlphaGeometry's DD+AR modules (never alphageometry.py); ImportError if missing."""
    sys.path.insert(0, os.environ.get("AG4MASSES_DIR", DEFAULT_DIR))
    try:
        import ddar
        import graph as gh
        import numericals as nm
        import pretty as pt
        import problem as pr
    except ImportError as error:
        raise ImportError(f"cannot import ag4masses' AlphaGeometry: {error}") from error
    return {"version": "ag4masses", "ddar": ddar, "gh": gh, "nm": nm, "pt": pt, "pr": pr}


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
    signal.signal(signal.SIGALRM, _deadline)
    signal.setitimer(signal.ITIMER_REAL, budget)
    try:
        engine["ddar"].solve(graph, rules, problem, max_level=1000)
        goal_args = graph.names2nodes(problem.goal.args)
        solved = graph.check(problem.goal.name, goal_args)
        proof = _proof_text(engine, graph, problem) if solved else None
    except DeadlineReached:
        return {"status": "timeout", "stage": "solve", **facts}
    except MemoryError:
        raise
    except Exception as error:  # noqa: BLE001 - DD+AR itself failed on a problem that was built
        return common.solve_failure(error, facts)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if solved:
        return {"status": "solved", "proof": proof, **facts}
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
            graph = gh.Graph()
            added = []
            plevel = 0
            for index, clause in enumerate(problem.clauses):  # noqa: B007 - index names the failure
                adds, plevel = graph.add_clause(clause, plevel, definitions, verbose=False)
                added += adds
            graph.plevel = plevel
            index = goal_index
            args = [graph.get(x, lambda x=x: int(x)) for x in problem.goal.args]
            holds = nm.check(problem.goal.name, args)
        except resampled as error:
            return ("failed", index, type(error).__name__)
        except MemoryError:
            raise
        except Exception as error:  # noqa: BLE001 - anything else: the engine rejects the problem
            raise common.StageError(
                "build", goal_index if index is None else index, error
            ) from error
        if not holds:
            return ("goal_false",)
        graph.url = problem.url
        graph.build_def = (problem, definitions)
        for add in added:
            graph.add_algebra(add, level=0)
        return ("ok", graph)

    return draw_once


def _proof_text(engine, graph, problem):
    """The proof steps, one per line, in AlphaGeometry's short notation (provenance only)."""
    pt = engine["pt"]
    try:
        _setup, _aux, steps, _refs = engine["ddar"].get_proof_steps(graph, problem.goal)
        lines = []
        for premises, [conclusion] in steps:
            left = ", ".join(pt.pretty([p.name] + [a.name for a in p.args]) for p in premises)
            right = pt.pretty([conclusion.name] + [a.name for a in conclusion.args])
            lines.append(f"{left} => {right}")
        return "\n".join(lines)
    except Exception as error:  # noqa: BLE001 - the proof text is provenance, not the verdict
        return f"(proof text unavailable: {common.exception_text(error)})"


if __name__ == "__main__":
    common.main(load_engine, solve)
