"""The prover adapter protocol: what one prover tells the core, and what the core hands it.

Each prover is one module (or package) under `runner/provers/` that defines `ADAPTER`, a
`ProverAdapter`. The registry finds them; the core never names a prover. An adapter:

- declares its name, version, modes, images and options. Bump the version when verdict logic
  changes: it is in every environment key. The first mode is the default. Options are an
  `AdapterOptions` model; the core validates each request's options into it.
- says how to identify a local install (`probe`: commands whose output is keyed).
- checks one resolved request: `check(request, sandboxes) -> Outcome`. `sandboxes` gives a fresh
  cold sandbox (`sandboxes.sandbox()`) or a warm server started from a `ServerSpec`
  (`sandboxes.server(spec)`, pooled by the core). The adapter alone turns what comes back into an
  Outcome. `runner.provers.common` holds the shared verdict ladder, lexing and servers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar, get_args, get_origin

from pydantic import BaseModel, ConfigDict

from runner.backends.base import Sandbox
from runner.core.errors import BadRequest
from runner.core.models import CheckRequest, CheckResult, JsonValue, Limits, Outcome, Target

if TYPE_CHECKING:
    from rich.table import Table

    from runner.provers.common.server import SandboxServer, ServerSpec


class BadOption(BadRequest):
    """A request option the adapter cannot use: refused before any check (exit 2)."""


class AdapterOptions(BaseModel):
    """An adapter's options as a pydantic model.

    Each field has a default and a `description` (the CLI's help; a `Literal` gives the choices).
    The core validates a request's options into it once, when the request is resolved. Adapters read
    attributes, never a dict.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    def environment(self) -> dict[str, JsonValue]:
        """The options that select another environment: they go into the environment key."""
        return {}

    def image(self) -> str | None:
        """Which of the adapter's images these options need (None: the first)."""
        return None


OptionsModel = TypeVar("OptionsModel", bound=AdapterOptions)


class NoOptions(AdapterOptions):
    """An adapter without options."""


class FileOption(BaseModel):
    """An option whose CLI value is a path: the request carries the file's name and text."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    content: str


@dataclass(frozen=True)
class OptionFlag:
    """One adapter option as a CLI flag: `--format svg` → `options["format"] = "svg"`."""

    key: str
    help: str
    metavar: str
    choices: tuple[str, ...] | None
    reads_file: bool

    @property
    def flag(self) -> str:
        return "--" + self.key.replace("_", "-")


def option_flags(model: type[AdapterOptions]) -> list[OptionFlag]:
    """The CLI flags of an options model, from its fields' types and descriptions."""
    flags = []
    for key, info in model.model_fields.items():
        members = [a for a in get_args(info.annotation) if a is not type(None)]
        first = members[0] if members and get_origin(info.annotation) is not Literal else None
        literal = info.annotation if get_origin(info.annotation) is Literal else first
        choices = get_args(literal) if get_origin(literal) is Literal else None
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        flags.append(
            OptionFlag(
                key=key,
                help=info.description or key,
                metavar=str(extra.get("metavar", "VALUE")),
                choices=tuple(map(str, choices)) if choices else None,
                reads_file=info.annotation is FileOption or FileOption in members,
            )
        )
    return flags


class Sandboxes(Protocol):
    """What the core hands an adapter for one check."""

    @property
    def cold(self) -> bool:
        """True when warm state must not be used (a canary re-check): servers are fresh."""
        ...

    def sandbox(self, purpose: str = "check") -> Sandbox:
        """A fresh, empty sandbox for this check alone, opened on first call.

        Each `purpose` is a separate sandbox (e.g. a reference rendered where the artifact cannot
        read it).
        """
        ...

    def server(self, spec: ServerSpec) -> SandboxServer:
        """A started server for `spec`, warm from the pool when one is idle.

        Its reads during this check stop at the check's deadline.
        """
        ...

    @property
    def cache_dir(self) -> Path:
        """The kit's cache directory (the Checker's settings), for what an adapter keeps across runs.

        It serves whatever the install. It may not exist yet; what is kept there must be safe to
        lose.
        """
        ...

    @property
    def install_dir(self) -> Path:
        """A directory in the kit's cache for what an adapter keeps about one prover install.

        There is one per install (package versions, or the image ID): the install this check runs
        on. It may not exist yet; what is kept there must be safe to lose.
        """
        ...

    def remaining_s(self) -> float:
        """Seconds left of this check's whole budget (its timeout and a little for the kit).

        Sandbox commands and server reads are cut there, whatever timeout they ask for.
        """
        ...

    def give_back_s(self, seconds: float) -> None:
        """Return to the budget time the kit's own machinery spent and threw away.

        An example is a warm attempt whose re-check the kit could not finish. That time was never
        the artifact's.
        """
        ...


def whole_file(name: str, content: str) -> list[tuple[str, str]]:
    return [(name, content)]


def no_summary(results: list[CheckResult]) -> Table | None:
    return None


@dataclass(frozen=True)
class HostSetup:
    """A file a local install needs that no Debian package holds, and how it is made."""

    makes: str  # the file's absolute path; its presence means the set-up is done
    script: str  # run as root from the checkout's root: `sh SCRIPT`


@dataclass(frozen=True)
class ProverAdapter:
    name: str
    version: str  # part of every environment key: bumped when verdicts may change
    modes: tuple[str, ...]
    images: tuple[str, ...]  # directories under images/ it may run in; the first is the default
    probe: Callable[[str], dict[str, list[str]]]  # image → commands identifying a local install
    check: Callable[[ResolvedRequest, Sandboxes], Outcome]
    options: type[AdapterOptions] = NoOptions
    # Other pinned versions of the prover (images too), picked per request (`line`). They run only
    # in their image, never on the host, whose install is the default line's.
    lines: tuple[str, ...] = ()
    # The line a run asks by default (`run --second-opinion auto`) about each pass that rests on a
    # known bug fixed there. It is the newest line that fixes bugs the default line has.
    second_opinion: str | None = None
    split: Callable[[str, str], list[tuple[str, str]]] = whole_file  # artifacts inside a file
    summary: Callable[[list[CheckResult]], Table | None] = no_summary  # a batch in its own terms
    # Refuse a request before any check (raise BadRequest: exit 2), e.g. a target that does not
    # parse. It is cheap and deterministic, and runs when the request is resolved.
    validate: Callable[[ResolvedRequest], None] | None = None
    # Many requests (same image and limits) in one worker call, where the prover allows it. It gives
    # one Outcome per request, or None for those the batch could not decide. The core then checks
    # those again in halves, down to one at a time. Verdicts must equal one-at-a-time checks.
    check_batch: Callable[[list[ResolvedRequest], Sandboxes], list[Outcome | None]] | None = None
    # Requests with the same key share what a warm worker loads for them (Rocq: the `Require`
    # header). With several checks at once, each thread prefers the key it served last.
    affinity: Callable[[ResolvedRequest], str | None] | None = None
    # Start what the first checks like `request` will ask for, while the kit still probes the
    # install. It goes through the Sandboxes' servers. It must not need the install's identity
    # (`Sandboxes.install_dir`), nor hold anything a check's result depends on.
    start_ahead: Callable[[ResolvedRequest, Sandboxes], None] | None = None
    targets: bool = False  # whether requests may name a target statement
    description: str = ""  # one line for `--help`
    # A fix to the kit's judgement that the bundled examples' records do not exercise. It is made
    # before they are re-recorded under a new `version`. The result cache keys by it, so a verdict
    # judged by the older rules is never served again.
    rules: str = ""
    # A file that passes on any working install. It is checked right after `prooflock images build`
    # or `images load` leaves one of its images here. Its servers boot then, and are kept as
    # snapshots where they allow it (ServerSpec.snapshot). So a machine's first check starts from
    # them.
    warm_up: str | None = None
    # What the local backend needs on the host to run this prover: Debian packages, and a file no
    # package holds with the checkout's script that makes it. Nox reads them here and installs them
    # on a fresh machine. `corpus_packages` hold only the suite's test corpora.
    host_packages: tuple[str, ...] = ()
    host_setup: HostSetup | None = None
    corpus_packages: tuple[str, ...] = ()

    def image_for(self, options: AdapterOptions, line: str | None = None) -> str:
        if line is not None:
            return line
        return options.image() or self.images[0]

    def all_lines(self) -> tuple[str, ...]:
        """Every version a request may pick: the default line first."""
        return (self.images[0], *self.lines)


@dataclass(frozen=True)
class ResolvedRequest:
    """A request with every default filled in; `request.digest()` says exactly what was checked."""

    request: CheckRequest
    adapter: ProverAdapter
    options: AdapterOptions  # validated, defaults filled in
    limits: Limits
    image: str
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", self.request.digest())

    def options_as(self, model: type[OptionsModel]) -> OptionsModel:
        """The options as the adapter's own model (the core validated them into it)."""
        if not isinstance(self.options, model):
            raise TypeError(f"options are {type(self.options).__name__}, not {model.__name__}")
        return self.options

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
