"""The suite's own shape: helpers shared by tests live in tests/support/, never in a test module."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_test_module_imports_another():
    offenders = {
        str(path.relative_to(TESTS)): sorted(
            name for name in imported_modules(path) if name.split(".")[-1].startswith("test_")
        )
        for path in TESTS.rglob("test_*.py")
    }
    assert {path: names for path, names in offenders.items() if names} == {}
