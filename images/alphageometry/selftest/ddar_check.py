"""Run AlphaGeometry's DD+AR on one problem: exit 0 when the goal is proved, 1 when not."""

import sys

import ddar
import graph as gh
import problem as pr

AG = "/opt/ag4masses/alphageometry"


def main(problems_file: str, name: str) -> int:
    defs = pr.Definition.from_txt_file(f"{AG}/defs.txt", to_dict=True)
    rules = pr.Theorem.from_txt_file(f"{AG}/rules.txt", to_dict=True)
    problems = pr.Problem.from_txt_file(problems_file, to_dict=True, translate=False)
    problem = problems[name]
    graph, _ = gh.Graph.build_problem(problem, defs)
    ddar.solve(graph, rules, problem, max_level=1000)
    goal_args = graph.names2nodes(problem.goal.args)
    proved = graph.check(problem.goal.name, goal_args)
    print(f"{name}: {'proved' if proved else 'not proved'}")
    return 0 if proved else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
