"""Comparator's conventions as the kit's Lean target mode: a project as a request, and back.

leanprover/comparator judges a challenge/solution pair. Its `config.json` names:
- the challenge and solution modules;
- the theorems the solution must prove exactly as the challenge states them (`theorem_names`);
- the definition holes it may fill (`definition_names`);
- the permitted axioms. It exits 0 when the solution is okay, 1 otherwise.

`request_from_project` makes one CheckRequest of such a project. The solution is the file. The
challenge goes in `options.challenge`, elaborated apart from the solution in the re-check's own
module. The names go in `options.theorems` and `options.definitions`, the permitted axioms in
`allowed_axioms`. Comparator's kernel choice (`external_kernels`, `enable_nanoda`) is the image's to
make, not the request's. `result_of` reads a record back in comparator's terms.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from runner.core.errors import BadRequest
from runner.core.models import CheckRequest, CheckResult, JsonValue, Verdict

MODULE_PART = re.compile(r"«([^»]*)»|([^.«]+)")


def module_path(module: str) -> Path:
    """Where lake finds a module: `Challenge.«12.34».«5»` → Challenge/12.34/5.lean."""
    parts = [escaped or plain for escaped, plain in MODULE_PART.findall(module)]
    if not parts or "".join(parts) == "" or any(p in ("", ".", "..") for p in parts):
        raise BadRequest(f"comparator config: {module!r} is not a module name")
    return Path(*parts).with_suffix(".lean")


def _names(config: dict, key: str) -> tuple[str, ...]:
    value = config.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRequest(f"comparator config: {key} is not a list of names")
    return tuple(value)


def request_from_project(directory: Path, *, timeout: int | None = None) -> CheckRequest:
    """The CheckRequest a comparator project directory stands for (BadRequest when it is none)."""
    try:
        config = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise BadRequest(
            f"comparator config: cannot read {directory / 'config.json'}: {exc}"
        ) from None
    if not isinstance(config, dict):
        raise BadRequest("comparator config: not a JSON object")
    files = {}
    for role in ("challenge", "solution"):
        module = config.get(f"{role}_module")
        if not isinstance(module, str):
            raise BadRequest(f"comparator config: {role}_module is missing")
        path = directory / module_path(module)
        try:
            files[role] = (path.name, path.read_text())
        except (OSError, UnicodeDecodeError) as exc:
            raise BadRequest(f"comparator project: cannot read {path}: {exc}") from None
    theorems = _names(config, "theorem_names")
    if not theorems:
        raise BadRequest("comparator config: theorem_names is empty")
    name, content = files["solution"]
    challenge_name, challenge = files["challenge"]
    return CheckRequest(
        prover="lean",
        mode="proof",
        name=name,
        content=content,
        timeout=timeout,
        allowed_axioms=_names(config, "permitted_axioms"),
        options={
            "challenge": {"name": challenge_name, "content": challenge},
            "theorems": list(theorems),
            "definitions": list(_names(config, "definition_names")),
        },
    )


def result_of(result: CheckResult) -> dict[str, JsonValue]:
    """Comparator's result for a record: its exit code, its message, and a result per theorem.

    A theorem's result is `ok`, the objection naming it, or null. In comparator mode this is what
    the adapter recorded. Otherwise it takes the same form from the verdict, with the kit's first
    diagnostic as the message.
    """
    recorded = result.details.get("comparator")
    if isinstance(recorded, dict):
        return recorded
    passed = result.verdict is Verdict.PASS
    message = result.diagnostics[0].message if result.diagnostics else result.verdict.value
    return {
        "exit_code": 0 if passed else 1,
        "message": "Your solution is okay!" if passed else message,
        "theorems": {},
    }
