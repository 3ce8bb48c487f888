"""The architecture lint checks is the code's: every package is in a layer, every prover is
independent of the others and in the registry, so adding a prover needs no hidden entry."""

from __future__ import annotations

import ast
import importlib
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import runner
from runner import provers

ROOT = Path(runner.__file__).parent
SHARED = {"common"}  # runner/provers/common: what provers share, not a prover (nor is base.py)


def contracts() -> dict[str, dict]:
    config = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())
    return {c["type"]: c for c in config["tool"]["importlinter"]["contracts"]}


def packages(folder: Path) -> set[str]:
    return {p.parent.name for p in folder.glob("*/__init__.py")}


def test_every_prover_package_is_in_the_independence_contract():
    contract = contracts()["independence"]
    # A wildcard: a new prover package joins the contract by itself.
    assert contract["modules"] == ["runner.provers.*"]
    exempt = {rule.split(" -> ")[1].split(".")[2] for rule in contract["ignore_imports"]}
    assert exempt == {"base", *SHARED}  # the shared parts alone may be imported by every prover


def test_every_prover_package_is_in_the_registry():
    registered = list(provers.registry().values())
    for name in packages(ROOT / "provers") - SHARED:
        adapter = importlib.import_module(f"runner.provers.{name}").ADAPTER
        assert any(adapter is found for found in registered), name
    assert len(registered) == len(packages(ROOT / "provers") - SHARED)


def test_every_package_of_the_kit_is_in_a_layer():
    layers = {m.removeprefix("runner.") for m in contracts()["layers"]["layers"]}
    assert layers == packages(ROOT)


def test_a_cycle_inside_any_package_fails_lint():
    assert contracts()["acyclic_siblings"]["ancestors"] == ["runner"]


# Where settings may be built from the environment: the CLI, the Checker (the library's entry
# point, which may default to the environment), the settings classes' own modules, and the two
# processes that receive a client's settings as data (the `serve` daemon, a Ray node's actor).
SETTINGS_READERS = ("cli/", "check/checker.py", "runs/serve.py", "runs/executors/ray_cluster.py")


def settings_builders() -> dict[str, str]:
    """Each BaseSettings subclass of the kit, and each function returning one: name -> module
    (its path under runner/)."""
    trees = {p.relative_to(ROOT).as_posix(): ast.parse(p.read_text()) for p in ROOT.rglob("*.py")}
    found = {
        node.name: path
        for path, tree in trees.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any(getattr(base, "id", None) == "BaseSettings" for base in node.bases)
    }
    classes = set(found)
    for path, tree in trees.items():
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.returns is not None:
                returned = set(re.findall(r"\w+", ast.unparse(node.returns)))
                if returned & classes:
                    found[node.name] = path
    return found


def calls_in(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(the name called, its line) for each call in `tree`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            yield str(name), node.lineno


def test_settings_are_built_at_the_entry_points_and_passed_down():
    builders = settings_builders()
    assert {"Settings", "S3Settings", "SigningSettings", "load_s3_settings"} <= builders.keys()
    built_below = set()
    for source in ROOT.rglob("*.py"):
        path = source.relative_to(ROOT).as_posix()
        if path.startswith(SETTINGS_READERS):
            continue
        for name, line in calls_in(ast.parse(source.read_text())):
            if name in builders and builders[name] != path:
                built_below.add(f"{path}:{line} {name}()")
    assert not built_below, "built below the entry points: " + ", ".join(sorted(built_below))


def imported_modules(tree: ast.Module) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def test_no_test_module_imports_another():
    """What tests share lives in tests/support/; a test module imported by another would run
    its tests twice and tie two stories together."""
    tests = ROOT.parent / "tests"
    offenders = [
        f"{path.relative_to(tests)} imports {name}"
        for path in sorted(tests.rglob("*.py"))
        for name in imported_modules(ast.parse(path.read_text()))
        if name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_")
    ]
    assert not offenders, offenders
