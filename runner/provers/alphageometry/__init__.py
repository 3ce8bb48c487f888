"""AlphaGeometry adapter: problems in AlphaGeometry's DSL checked by running an engine's DD+AR.

Each artifact is one problem (`title`, then `clauses ? goal`). The kit's validator replays
AlphaGeometry's front end on defs.txt and explains any syntax error; the engine driver then runs
the problem in the sandbox in AlphaGeometry's own order (parse, rename, setup string, diagram,
DD+AR), so its exception class is the one NL2AGBench counts. The diagram sampling that
AlphaGeometry repeats forever on a false goal is bounded, so a logic error takes seconds.

Engines (`--engine`): `newclid` (PyPI newclid==2.0.2, image `newclid`) and `ag4masses`
(AlphaGeometry's DD+AR from the ag4masses fork, image `alphageometry`). Both read AlphaGeometry's
own defs.txt and rules.txt, shipped beside this module.

Modules: problems (input formats), definitions + validator (the kit's DSL check), engines (one
cold driver run), worker (a warm forkserver that imports the engine once per worker), outcomes
(NL2AGBench's categories → verdicts), categories (batch tables); sandbox_*.py run in the sandbox.
"""

from __future__ import annotations

from rich.table import Table

from runner.backends.base import Backend, Limits, Sandbox
from runner.models import CheckRequest, CheckResult, JsonValue, Outcome
from runner.provers.alphageometry import (
    categories,
    definitions,
    engines,
    outcomes,
    problems,
    validator,
)
from runner.provers.alphageometry.engines import ENGINES, Policy
from runner.provers.alphageometry.worker import EngineWorker, RunEngine
from runner.provers.base import OptionSpec, defaults

NAME = "alphageometry"
VERSION = "1"
IMAGE = "newclid"
MODES = ("proof",)
SUFFIXES = (".txt", ".jsonl")
IMAGES = {"newclid": "newclid", "ag4masses": "alphageometry"}
LOGIC_ERRORS = ("fast", "paper")
SYNTAX_CHECKS = ("engine", "validator")
FENCES = ("reject", "strip")
CLI_OPTIONS = (
    OptionSpec(
        "--engine",
        "engine",
        "alphageometry: DD+AR engine (default newclid)",
        ENGINES,
        default="newclid",
    ),
    OptionSpec(
        "--logic-errors",
        "logic_errors",
        "alphageometry: fast = bounded diagram sampling (<= 20 s); "
        "paper = NL2AGBench's 300 s of silence",
        LOGIC_ERRORS,
        default="fast",
    ),
    OptionSpec(
        "--syntax-check",
        "syntax_check",
        "alphageometry: engine = the engine confirms syntax errors; "
        "validator = the kit's validator "
        "alone decides them, in milliseconds",
        SYNTAX_CHECKS,
        default="engine",
    ),
    OptionSpec(
        "--fences",
        "fences",
        "alphageometry: reject (default) or strip Markdown code fences around a problem",
        FENCES,
        default="reject",
    ),
)
worker_key = defaults.worker_key
# Short, because a failing probe's command line is quoted in the infra-error message.
PROBE_NEWCLID = (
    "import sys, importlib.metadata as m\n"
    "try: print(sys.version.split()[0], *(f'{p}=={m.version(p)}' for p in "
    "('newclid', 'numpy', 'scipy', 'matplotlib', 'networkx')))\n"
    "except m.PackageNotFoundError as e: sys.exit(f'{e} is not installed for python3 on PATH: "
    "pip install newclid==2.0.2')"
)
PROBE_AG4MASSES = """
import hashlib, os, sys
from importlib.metadata import PackageNotFoundError, version
home = os.environ.get("AG4MASSES_DIR", "/opt/ag4masses/alphageometry")
print("python", sys.version.split()[0])
for name in ("numpy", "scipy", "matplotlib", "absl-py"):
    try:
        print(name, version(name))
    except PackageNotFoundError:
        print(name, "missing")
for name in ("problem.py", "graph.py", "geometry.py", "numericals.py", "pretty.py", "dd.py",
             "ddar.py", "ar.py", "trace_back.py", "graph_utils.py"):
    path = os.path.join(home, name)
    if not os.path.exists(path):
        sys.exit(f"ag4masses not found: no {path} (set AG4MASSES_DIR or use its image)")
    print(name, hashlib.sha256(open(path, "rb").read()).hexdigest())
"""


def options(request: CheckRequest) -> dict[str, str]:
    """The request's adapter options with defaults filled in."""
    found = {spec.key: str(request.options.get(spec.key, spec.default)) for spec in CLI_OPTIONS}
    return found


def _bad_option(request: CheckRequest) -> str | None:
    for spec in CLI_OPTIONS:
        value = str(request.options.get(spec.key, spec.default))
        if spec.choices and value not in spec.choices:
            return f"unknown {spec.key} {value!r} (choices: {', '.join(spec.choices)})"
    return None


def policy(request: CheckRequest) -> Policy:
    return Policy(logic_errors=options(request)["logic_errors"])


def image(request: CheckRequest) -> str:
    return IMAGES.get(options(request)["engine"], IMAGE)


def probe(image: str) -> dict[str, list[str]]:
    script = PROBE_AG4MASSES if image == IMAGES["ag4masses"] else PROBE_NEWCLID
    return {"engine": ["python3", "-c", script]}


def split(name: str, content: str) -> list[tuple[str, str]]:
    return problems.split_file(name, content)


def environment_options(request: CheckRequest) -> dict[str, JsonValue]:
    chosen = options(request)
    return {
        "engine": chosen["engine"],
        "logic_errors": policy(request).key(),
        "syntax_check": chosen["syntax_check"],
        "fences": chosen["fences"],
        "seeds": {"numpy": engines.SEED, "pythonhashseed": engines.PYTHONHASHSEED},
        "defs_sha256": definitions.SHA256[definitions.DEFS_FILE],
        "rules_sha256": definitions.SHA256[definitions.RULES_FILE],
    }


def summary(results: list[CheckResult]) -> Table:
    """Problems per NL2AGBench category and per syntax class, with median time per problem."""
    return categories.table(categories.tally(results), "alphageometry")


def check(request: CheckRequest, sandbox: Sandbox) -> Outcome:
    """A cold check: a fresh python3 in the fresh sandbox imports the engine for this problem."""
    engine = options(request)["engine"]
    return check_with(request, lambda *job: engines.run(sandbox, engine, *job))


def open_worker(backend: Backend, limits: Limits, request: CheckRequest) -> EngineWorker | None:
    if _bad_option(request) is not None:
        return None
    return EngineWorker(backend, limits, options(request)["engine"], image(request), check_with)


def check_with(request: CheckRequest, run_engine: RunEngine) -> Outcome:
    """Read the problem, let the validator explain it, and run the engine unless it need not."""
    bad = _bad_option(request)
    if bad is not None:
        return outcomes.option_error(request.name, bad)
    chosen = options(request)
    read = problems.read_problem(request.name, request.content, lenient=chosen["fences"] == "strip")
    if isinstance(read, problems.FormatError):
        return outcomes.format_error(request.name, read)
    fault = validator.validate(read.line)
    if fault is not None and chosen["syntax_check"] == "validator":
        return outcomes.from_fault(read, fault, chosen["engine"])
    timeout = int(request.timeout or 60)
    run = run_engine(read, policy(request), timeout)
    return outcomes.from_run(read, run, fault, chosen["engine"], policy(request), timeout)
