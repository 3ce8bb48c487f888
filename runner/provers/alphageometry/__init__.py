"""AlphaGeometry adapter: problems in AlphaGeometry's DSL checked by running an engine's DD+AR.

Each artifact is one problem (`title`, then `clauses ? goal`). The kit's validator replays
AlphaGeometry's front end on defs.txt and explains any syntax error. The engine driver then runs
the problem in the sandbox in AlphaGeometry's own order: parse, rename, setup string, diagram,
DD+AR. So its exception class is the one NL2AGBench counts. AlphaGeometry samples diagrams
forever on a false goal; here the sampling is bounded, so a logic error takes seconds.

Engines (`--engine`):
- `newclid`: PyPI newclid==2.0.2, image `newclid`;
- `ag4masses`: AlphaGeometry's DD+AR from the ag4masses fork, image `alphageometry`.
Both read AlphaGeometry's own defs.txt and rules.txt, shipped in sandbox/. ag4masses is the
reference. Where newclid would read a problem otherwise, its driver does it AlphaGeometry's way.
Where newclid's sampler alone decides otherwise, the record gives AlphaGeometry's outcome beside
newclid's. tests/test_alphageometry_parity.py holds the two to AlphaGeometry's outcomes on
malformed problems.

Modules:
- source.py reads the input formats;
- definitions.py and validator.py are the kit's DSL check;
- engines.py holds the in-sandbox drivers and their jobs;
- worker.py is the server that imports the engine once;
- judging.py maps NL2AGBench's categories to verdicts;
- categories.py makes the batch tables.
sandbox/ holds the scripts that run inside the sandbox, and the data they read there.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from rich.table import Table

from runner.core.models import CheckResult, JsonValue, Outcome
from runner.provers.alphageometry import (
    categories,
    definitions,
    engines,
    judging,
    source,
    validator,
    worker,
)
from runner.provers.alphageometry.engines import Policy
from runner.provers.base import AdapterOptions, ProverAdapter, ResolvedRequest, Sandboxes

# 2: outcomes follow AlphaGeometry's own reading (ag4masses, tests/test_alphageometry_parity.py):
# newclid turns a goal predicate AlphaGeometry cannot check into a logic error, a point defined
# again into a new point, a number used as a point name into KeyError; ag4masses counts an
# exception from DD+AR or its solution writer as the syntax error NL2AGBench counts, not a crash.
# 3: problems are read as AlphaGeometry reads a problem file: lines end at `\n` (and `\r\n`,
# `\r`, as Python's text mode reads them), never at U+2028, U+0085, `\x0c`, ...; only spaces and
# tabs are stripped from a line's ends. Verdicts rest on the engine (newclid or ag4masses) in
# the process that read the problem (trust `kernel`).
# 4: an artifact is a JSON record only when the whole of it is one JSON object (a file splits
# into records only when every line is one holding the problem text): a title starting with `{`
# is a title.
# 5: where newclid's outcome rests on degenerate diagrams AlphaGeometry's drawing rejects (a
# point placed on another, let through because the too-close distance collapsed to 0), the
# record says AlphaGeometry's outcome beside it (details["alphageometry"]).
VERSION = "5"
IMAGES = {"newclid": "newclid", "ag4masses": "alphageometry"}


class AlphaGeometryOptions(AdapterOptions):
    engine: Literal["newclid", "ag4masses"] = Field(
        "newclid",
        description="DD+AR engine (default newclid)",
        json_schema_extra={"metavar": "ENGINE"},
    )
    logic_errors: Literal["fast", "paper"] = Field(
        "fast",
        description="fast = a false goal is found by sampling 5000 diagrams (the timeout bounds "
        "them); paper = NL2AGBench's 300 s of silence",
        json_schema_extra={"metavar": "RULE"},
    )
    syntax_check: Literal["engine", "validator"] = Field(
        "engine",
        description="engine = the engine confirms syntax errors; validator = the kit's validator "
        "alone decides them, in milliseconds",
        json_schema_extra={"metavar": "BY"},
    )
    fences: Literal["reject", "strip"] = Field(
        "reject",
        description="reject (default) or strip Markdown code fences around a problem",
        json_schema_extra={"metavar": "HOW"},
    )

    @property
    def policy(self) -> Policy:
        return Policy(logic_errors=self.logic_errors)

    def image(self) -> str:
        return IMAGES[self.engine]

    def environment(self) -> dict[str, JsonValue]:
        return {
            "engine": self.engine,
            "logic_errors": self.policy.key(),
            "syntax_check": self.syntax_check,
            "fences": self.fences,
            "seeds": {"numpy": engines.SEED, "pythonhashseed": engines.PYTHONHASHSEED},
            "defs_sha256": definitions.SHA256[definitions.DEFS_FILE],
            "rules_sha256": definitions.SHA256[definitions.RULES_FILE],
        }


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


def probe(image: str) -> dict[str, list[str]]:
    script = PROBE_AG4MASSES if image == IMAGES["ag4masses"] else PROBE_NEWCLID
    return {"engine": ["python3", "-c", script]}


def split(name: str, content: str) -> list[tuple[str, str]]:
    return source.split_file(name, content)


def summary(results: list[CheckResult]) -> Table:
    """Problems per NL2AGBench category and per syntax class, with median time per problem."""
    return categories.table(categories.tally(results), "alphageometry")


def check(request: ResolvedRequest, sandboxes: Sandboxes) -> Outcome:
    """Read the problem, let the validator explain it, and run the engine unless it need not.

    The engine worker starts only for a problem that needs it: format errors and validator-only
    outcomes never pay for its import.
    """
    options = request.options_as(AlphaGeometryOptions)
    engine = options.engine
    read = source.read_problem(request.name, request.content, lenient=options.fences == "strip")
    if isinstance(read, source.FormatError):
        return judging.format_error(request.name, read)
    fault = validator.validate(read.line)
    if fault is not None and options.syntax_check == "validator":
        return judging.from_fault(read, fault, engine)
    server = sandboxes.server(worker.server_spec(engine))
    run = worker.run_on(server, read, options.policy, request.timeout_s)
    return judging.from_run(read, run, fault, engine, options.policy, request.timeout_s)


ADAPTER = ProverAdapter(
    name="alphageometry",
    version=VERSION,
    modes=("proof",),
    images=tuple(IMAGES.values()),
    probe=probe,
    check=check,
    options=AlphaGeometryOptions,
    split=source.split_file,
    summary=summary,
    description="AlphaGeometry DSL problems, solved by DD+AR (newclid or ag4masses)",
)
