"""The prover adapter protocol: what one prover tells the core, and what the core hands it.

Each prover is one module (or package) under `runner/provers/` that defines `ADAPTER`, a
`ProverAdapter`. The registry finds them; the core never names a prover. An adapter:

- declares its name, version (bump it when verdict logic changes: it is in every environment
  key), modes (the first is the default), images, and options (validated by the core);
- says how to identify a local install (`probe`: commands whose output is keyed);
- checks one resolved request: `check(request, runner) -> Outcome`. The `runner` gives a fresh
  cold sandbox (`runner.sandbox()`) or a warm server started from a `ServerSpec`
  (`runner.server(spec)`, pooled by the core); the adapter alone turns what comes back into an
  Outcome (see `runner.provers.common` for the shared verdict ladder, lexing and servers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from runner.backends.base import Sandbox
from runner.core.errors import BadRequest
from runner.core.models import CheckRequest, CheckResult, JsonValue, Limits, Outcome, Target

if TYPE_CHECKING:
    from rich.table import Table

    from runner.provers.common.server import SandboxServer, ServerSpec

Options = Mapping[str, JsonValue]


class BadOption(BadRequest):
    """A request option the adapter cannot use: refused before any check (exit 2)."""


@dataclass(frozen=True)
class OptionSpec:
    """An adapter option: `prooflock check --format svg` → `request.options["format"] = "svg"`.

    `parse` turns a raw value (CLI string or JSON from a requests file) into the plain value the
    adapter reads, or raises BadOption; the core applies it to every request before checking.
    """

    key: str
    help: str
    metavar: str = "VALUE"
    choices: tuple[str, ...] | None = None
    default: JsonValue = None
    reads_file: bool = False  # the CLI value is a path; the request carries {"name", "content"}
    parse: Callable[[JsonValue], JsonValue] | None = None

    @property
    def flag(self) -> str:
        return "--" + self.key.replace("_", "-")

    def resolve(self, prover: str, value: JsonValue) -> JsonValue:
        if value is None:
            return self.default
        if self.choices is not None and value not in self.choices:
            raise BadOption(
                f"{prover} option {self.key!r} must be one of {', '.join(self.choices)}, "
                f"not {value!r}"
            )
        if self.reads_file and not (
            isinstance(value, dict) and isinstance(value.get("content"), str)
        ):
            raise BadOption(f'{prover} option {self.key!r} must be {{"name": ..., "content": ...}}')
        return self.parse(value) if self.parse is not None else value


class Sandboxes(Protocol):
    """What the core hands an adapter for one check."""

    @property
    def cold(self) -> bool:
        """True when warm state must not be used (a canary re-check): servers are fresh."""
        ...

    def sandbox(self, purpose: str = "check") -> Sandbox:
        """A fresh, empty sandbox for this check alone, opened on first call; each `purpose` is a
        separate sandbox (e.g. a reference rendered where the artifact cannot read it)."""
        ...

    def server(self, spec: ServerSpec) -> SandboxServer:
        """A started server for `spec`, warm from the pool when one is idle."""
        ...


def whole_file(name: str, content: str) -> list[tuple[str, str]]:
    return [(name, content)]


def no_environment_options(options: Options) -> dict[str, JsonValue]:
    return {}


def no_summary(results: list[CheckResult]) -> Table | None:
    return None


@dataclass(frozen=True)
class ProverAdapter:
    name: str
    version: str
    modes: tuple[str, ...]
    images: tuple[str, ...]  # directories under images/ it may run in; the first is the default
    probe: Callable[[str], dict[str, list[str]]]  # image → commands identifying a local install
    check: Callable[[ResolvedRequest, Sandboxes], Outcome]
    options: tuple[OptionSpec, ...] = ()
    image: Callable[[Options], str] | None = None  # which of `images` a request needs
    split: Callable[[str, str], list[tuple[str, str]]] = whole_file  # artifacts inside a file
    environment_options: Callable[[Options], dict[str, JsonValue]] = no_environment_options
    summary: Callable[[list[CheckResult]], Table | None] = no_summary  # a batch in its own terms
    # Refuse a request before any check (raise BadRequest: exit 2), e.g. a target that does not
    # parse; cheap and deterministic, it runs when the request is resolved.
    validate: Callable[[ResolvedRequest], None] | None = None
    # Many requests (same image and limits) in one worker call, where the prover allows it: one
    # Outcome per request, or None for those the batch could not decide (the core then checks
    # them again in halves, down to one at a time). Verdicts must equal one-at-a-time checks.
    check_batch: Callable[[list[ResolvedRequest], Sandboxes], list[Outcome | None]] | None = None
    targets: bool = False  # whether requests may name a target statement
    description: str = ""  # one line for `--help`
    extras: dict[str, str] = field(default_factory=dict)  # pip extra → why (for messages)

    def image_for(self, options: Options) -> str:
        return self.image(options) if self.image is not None else self.images[0]

    def option(self, key: str) -> OptionSpec:
        for spec in self.options:
            if spec.key == key:
                return spec
        raise KeyError(key)


@dataclass(frozen=True)
class ResolvedRequest:
    """A request with every default filled in; `request.digest()` says exactly what was checked."""

    request: CheckRequest
    adapter: ProverAdapter
    options: Mapping[str, JsonValue]  # every declared option, validated, defaults filled in
    limits: Limits
    image: str
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", self.request.digest())

    @property
    def name(self) -> str:
        return self.request.name

    @property
    def content(self) -> str:
        return self.request.content

    @property
    def mode(self) -> str:
        assert self.request.mode is not None
        return self.request.mode

    @property
    def timeout_s(self) -> int:
        return self.limits.timeout_s

    @property
    def allowed_axioms(self) -> tuple[str, ...]:
        return self.request.allowed_axioms

    @property
    def target(self) -> Target | None:
        return self.request.target
