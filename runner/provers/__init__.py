"""The prover registry: a name → adapter module table. The core looks adapters up here only."""

from __future__ import annotations

import importlib

from runner.provers.base import ProverAdapter

ADAPTER_MODULES = {
    "rocq": "runner.provers.rocq",
    "hol-light": "runner.provers.hol_light",
    "alphageometry": "runner.provers.alphageometry",
    "asymptote": "runner.provers.asymptote",
}


class UnknownProver(ValueError):
    pass


def names() -> list[str]:
    return sorted(ADAPTER_MODULES)


def get(name: str) -> ProverAdapter:
    try:
        module = ADAPTER_MODULES[name]
    except KeyError:
        raise UnknownProver(f"unknown prover {name!r} (known: {', '.join(names())})") from None
    return importlib.import_module(module)  # type: ignore[return-value]
