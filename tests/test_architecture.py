"""The architecture lint checks is the code's: every package is in a layer, every prover is
independent of the others and in the registry, so adding a prover needs no hidden entry."""

from __future__ import annotations

import importlib
import tomllib
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
