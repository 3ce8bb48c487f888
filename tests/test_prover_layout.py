"""Each role has one file name in every prover package, so a reader knows where to look.

The roles (README, "Adding a prover"): `source.py` reads the artifact, `judging.py` turns the
prover's output into a verdict and its assumptions, `worker.py` runs the warm server, and
`sandbox/` holds files copied into the container (every file that is not a Python module). Any
other module is the prover's own, and its package docstring introduces it by file name.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

from runner import provers

# Each role: what it does, and other names the same job goes by. A module with one of those
# names does that job under the wrong name.
ROLES = {
    "source": (
        "reads the artifact",
        {"problems", "problem", "lexer", "lexing", "parser", "parse", "reader", "input", "inputs"},
    ),
    "judging": (
        "turns the prover's output into a verdict and its assumptions",
        {"verdict", "verdicts", "outcome", "outcomes", "diagnostics", "judge", "judgement"},
    ),
    "worker": ("runs the warm server", {"forkserver", "server", "servers", "daemon", "warm"}),
}
# What builds a ServerSpec: the class itself, or the JSON-lines helper that fills one in.
SPEC_BUILDERS = {
    "runner.provers.common.server": "ServerSpec",
    "runner.provers.common.jsonlines": "server_spec",
}

# What Python itself leaves beside a module.
PYTHON_FILES = {".py", ".pyc"}


def prover_packages() -> list[ModuleType]:
    """The package of every prover the registry finds (a one-module prover has no layout)."""
    found = {}
    for name in provers.names():
        top = ".".join(provers.get(name).check.__module__.split(".")[:3])
        module = importlib.import_module(top)
        if hasattr(module, "__path__"):
            found[top] = module
    return [found[top] for top in sorted(found)]


PACKAGES = prover_packages()


def folder(package: ModuleType) -> Path:
    return Path(package.__path__[0])


def modules(package: ModuleType) -> list[str]:
    """The package's modules, `__init__` among them."""
    found = {m.name for m in pkgutil.iter_modules(package.__path__) if not m.ispkg}
    return sorted({"__init__", *found})


def beside_the_modules(package: ModuleType) -> list[str]:
    """Files the package ships outside sandbox/ that are not Python (none should be)."""
    root = folder(package)
    return sorted(
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file()
        and path.suffix not in PYTHON_FILES
        and not {"sandbox", "__pycache__"} & set(path.relative_to(root).parts)
    )


def builds_a_server_spec(path: Path) -> bool:
    """Whether the module's code makes a ServerSpec (directly or through jsonlines)."""
    tree = ast.parse(path.read_text())
    names, modules_named = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if SPEC_BUILDERS.get(node.module) == alias.name:
                    names.add(alias.asname or alias.name)
                if f"{node.module}.{alias.name}" in SPEC_BUILDERS:
                    modules_named.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = node.func
        if isinstance(called, ast.Name) and called.id in names:
            return True
        if (
            isinstance(called, ast.Attribute)
            and isinstance(called.value, ast.Name)
            and called.value.id in modules_named
            and called.attr in SPEC_BUILDERS.values()
        ):
            return True
    return False


def test_the_registry_finds_the_prover_packages():
    assert {p.__name__.split(".")[-1] for p in PACKAGES} >= {"rocq", "lean", "isabelle"}


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_each_prover_package_reads_in_source_py_and_judges_in_judging_py(package):
    for role in ("source", "judging"):
        assert (folder(package) / f"{role}.py").is_file(), (
            f"{package.__name__} has no {role}.py: the module that {ROLES[role][0]}"
        )


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_a_warm_server_is_specified_in_worker_py(package):
    building = [m for m in modules(package) if builds_a_server_spec(folder(package) / f"{m}.py")]
    assert set(building) <= {"worker"}, (
        f"{package.__name__}: a warm server's ServerSpec is built in "
        f"{', '.join(f'{m}.py' for m in building)}; it belongs in worker.py"
    )


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_no_module_plays_a_role_under_another_name(package):
    misnamed = [
        f"{module}.py is a name for the module that {does}: call it {role}.py"
        for module in modules(package)
        for role, (does, other_names) in ROLES.items()
        if module in other_names
    ]
    assert not misnamed, f"{package.__name__}: {'; '.join(misnamed)}"


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_every_other_module_is_introduced_by_its_package_docstring(package):
    introduction = package.__doc__ or ""
    own = [m for m in modules(package) if m not in ROLES and m != "__init__"]
    missing = [f"{m}.py" for m in own if f"{m}.py" not in introduction]
    assert not missing, (
        f"{package.__name__}'s docstring does not say what {', '.join(missing)} "
        f"{'is' if len(missing) == 1 else 'are'} for (a module that plays no role is the "
        "prover's own: say what it does)"
    )


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_files_copied_into_a_sandbox_live_in_sandbox_dir(package):
    stray = beside_the_modules(package)
    assert not stray, (
        f"{package.__name__} ships {', '.join(stray)} beside its modules: a file that is not a "
        "Python module is one the prover copies into its sandbox, and lives in sandbox/"
    )
