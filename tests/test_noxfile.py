"""The noxfile names no prover: what a fresh machine needs for each is its adapter's word.

Adding a prover is one adapter, one Dockerfile and one test file (STYLE.md); a prover's
Debian packages written into the noxfile would be a second home for them, and one more file to
touch. The sessions read them from the registry (`ensure_provers`) and the images from the lock.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from runner import provers

ROOT = Path(__file__).resolve().parent.parent
NOXFILE = ROOT / "noxfile.py"


def words_naming_a_prover() -> set[str]:
    """Every prover's name, its aliases, images and lines, and its host and corpus packages."""
    words: set[str] = set(provers.ALIASES)
    for name in provers.names():
        adapter = provers.get(name)
        words |= {name, *adapter.all_lines(), *adapter.host_packages, *adapter.corpus_packages}
    return words | {word.replace("-", " ") for word in words}  # `HOL Light`, as prose says it


def noxfile_constants() -> dict[str, Any]:
    """The noxfile's literal constants (nox itself is not installed in the tests' environment)."""
    tree = ast.parse(NOXFILE.read_text())
    return {
        target.id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Constant | ast.List)
    }


def test_the_noxfile_names_no_prover():
    text = NOXFILE.read_text()
    named = {
        word
        for word in words_naming_a_prover()
        if re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text, re.IGNORECASE)
    }
    assert named == set(), f"noxfile.py names {sorted(named)}: declare it in the adapter"


def test_the_sessions_read_each_provers_host_needs_from_the_registry():
    """What the sessions install is what the adapters declare, and every adapter that runs on the
    host declares something (a prover without a host package would not run locally)."""
    constants = noxfile_constants()
    said = subprocess.run(
        [sys.executable, "-c", constants["PROVERS_NEEDS"]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    needs = json.loads(said.stdout)
    adapters = [provers.get(name) for name in provers.names()]
    assert needs["host"] == sorted({p for a in adapters for p in a.host_packages})
    assert needs["corpora"] == sorted({p for a in adapters for p in a.corpus_packages})
    assert needs["setup"] == sorted(
        [a.host_setup.makes, a.host_setup.script] for a in adapters if a.host_setup
    )
    assert {"hol-light", "asymptote", "coq"} <= set(needs["host"])
    assert not set(needs["host"]) & set(constants["KIT_PACKAGES"])  # one home for each package
