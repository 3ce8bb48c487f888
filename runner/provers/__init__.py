"""The prover registry: every module or package here that defines `ADAPTER` is a prover.

Adding a prover is one module (or package) beside these. Nothing else in the core names it.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from types import MappingProxyType

from runner.provers.base import ProverAdapter

NOT_ADAPTERS = {"base", "common"}
# Names people reach for that are another name of a prover here.
ALIASES = {
    "coq": "rocq",
    "hol": "hol-light",
    "hollight": "hol-light",
    "asy": "asymptote",
    "ag": "alphageometry",
    "lean4": "lean",
    "isabelle/hol": "isabelle",
}


class UnknownProver(ValueError):
    pass


# Adapters registered at run time: an embedder's own prover outside runner/provers, or a test's.
_registered: dict[str, ProverAdapter] = {}


@cache
def _discovered() -> dict[str, ProverAdapter]:
    found: dict[str, ProverAdapter] = {}
    for module in pkgutil.iter_modules(__path__):
        if module.name in NOT_ADAPTERS or module.name.startswith("_"):
            continue
        adapter = getattr(importlib.import_module(f"{__name__}.{module.name}"), "ADAPTER", None)
        if not isinstance(adapter, ProverAdapter):
            raise TypeError(f"runner.provers.{module.name} defines no ADAPTER (a ProverAdapter)")
        found[adapter.name] = adapter
    return found


def registry() -> Mapping[str, ProverAdapter]:
    """Every prover by name, read-only: the discovered modules, then those registered."""
    return MappingProxyType({**_discovered(), **_registered})


def register(adapter: ProverAdapter) -> Callable[[], None]:
    """Add (or shadow) a prover for this process; returns the function that removes it again."""
    previous = _registered.get(adapter.name)
    _registered[adapter.name] = adapter

    def unregister() -> None:
        if previous is None:
            _registered.pop(adapter.name, None)
        else:
            _registered[adapter.name] = previous

    return unregister


def names() -> list[str]:
    return sorted(registry())


def suggestion(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for a near miss, else ``."""
    choices = list(choices)
    lowered = word.lower()
    alias = ALIASES.get(lowered)
    if alias in choices:
        return f" (did you mean {alias!r}?)"
    close = difflib.get_close_matches(lowered, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def get(name: str) -> ProverAdapter:
    try:
        return registry()[name]
    except KeyError:
        raise UnknownProver(
            f"unknown prover {name!r}{suggestion(name, names())} (known: {', '.join(names())})"
        ) from None
