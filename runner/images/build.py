"""One image build: docker build, normalize, self-test, tag.

A build runs on the locked offline base, or on another base the user names. It passes the lock's
pins and the build inputs as build arguments, and streams progress. It squashes and normalizes the
result. It runs the image's self-test in a hardened container, and only then tags the image.
Recording it is the caller's choice (runner.images.api).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from docker import DockerClient
from docker.errors import APIError, BuildError

from runner.backends.containers import run_hardened
from runner.core.errors import UserError
from runner.images import context, downloads, machine
from runner.images.inputs import BuildInputs
from runner.images.lock import ImageEntry, ImagesLock, Kit
from runner.images.normalize import normalize_image
from runner.images.pin import check_pins_match
from runner.images.selftest import SelfTestFailed, run_selftest
from runner.images.state import discard, image_id_of, require_base

APT_INSTALL_SUITE = "bookworm"  # the suite images/common/apt-install names in its own lines
CONTEXT_REPOSITORY = "/tmp/build/repo"  # where the Dockerfiles' `COPY build/` puts the closure
PACKAGES = ["dpkg-query", "-W", "-f", "${Package}=${Version}\\n"]


class BuildFailed(RuntimeError):
    """docker build or debootstrap failed (a package missing from the mirror, a checksum mismatch,
    ...).
    """


class InputMissing(BuildFailed):
    """An input the build takes from the store cannot be had: nothing was built."""


@dataclass(frozen=True)
class BuildOptions:
    nocache: bool = False
    pins: dict[str, str] = field(default_factory=dict)  # experiments: override lock pins
    base: str | None = None  # a base reference instead of the locked offline base
    tag: bool = True  # a build that may be tagged: its raw build is kept for docker's cache
    verbose: bool = False  # stream all build output, not only the steps
    allow_drift: bool = False  # build even if not to the locked ID (on a drifted base, too)
    selftest_timeout: int = 1200

    @property
    def experiment(self) -> bool:
        """Pins overridden or another base: the result is not the locked image's build."""
        return bool(self.pins) or self.base is not None


@dataclass(frozen=True)
class BuildPlan:
    """Everything one build needs.

    Which image of which lock, from which definitions, with which build inputs and options, and
    where its logs go.
    """

    name: str
    lock: ImagesLock
    inputs: BuildInputs
    images_root: Path
    log_dir: Path
    options: BuildOptions = field(default_factory=BuildOptions)
    # An apt repository holding exactly the locked closure (runner.images.localrepo), carried
    # in the context: apt-install reads it alone, and the build runs with no network at all.
    repository: Path | None = None
    # The image's downloads in the store, by file name (runner.images.downloads).
    downloads: dict[str, Path] = field(default_factory=dict)

    @property
    def offline(self) -> bool:
        """Every input is in the context: the build's containers get no network."""
        return self.repository is not None

    @classmethod
    def of(
        cls,
        kit: Kit,
        name: str,
        inputs: BuildInputs,
        options: BuildOptions | None = None,
        *,
        log_dir: Path | None = None,
    ) -> BuildPlan:
        kit.lock.entry(name)  # a UserError naming the image when it is unknown
        return cls(
            name,
            kit.lock.rebased(kit.lock.base_of(name)),
            inputs,
            kit.images_root,
            log_dir or inputs.cache_dir / "image-builds",
            options or BuildOptions(),
        )

    @property
    def entry(self) -> ImageEntry:
        return self.lock.entry(self.name)

    @property
    def dockerfile(self) -> Path:
        return self.images_root / self.name / "Dockerfile"

    def with_options(self, **changes: Any) -> BuildPlan:
        return replace(self, options=replace(self.options, **changes))


@dataclass
class BuildResult:
    name: str
    image_id: str
    diff_ids: list[str]
    previous_id: str | None
    packages: list[str]
    size_bytes: int
    seconds: dict[str, int]
    base: dict[str, str]

    @property
    def changed(self) -> bool:
        return self.previous_id != self.image_id


@dataclass(frozen=True)
class Arguments:
    """A plan resolved against this daemon: its base, its build arguments, the raw build's tag."""

    base: str
    epoch: int
    build_args: dict[str, str]
    raw: str


def raw_tag(entry: ImageEntry, *, scratch: bool = False) -> str:
    """Where the un-normalized build is kept, so its layers stay in docker's build cache.

    Experiments (verify, changed pins) build under a scratch tag, removed afterwards.
    """
    repository, _, version = entry.tag.rpartition(":")
    suffix = "-scratch" if scratch else ""
    return f"{repository.replace('prooflock/', 'prooflock-build/', 1)}:{version}{suffix}"


def build_image(client: DockerClient, plan: BuildPlan, *, out: TextIO = sys.stderr) -> BuildResult:
    arguments = resolve_arguments(client, plan)
    plan.log_dir.mkdir(parents=True, exist_ok=True)
    replaced = image_id_of(client, arguments.raw)
    try:
        return _build(client, plan, arguments, out)
    finally:
        if replaced is not None and replaced != image_id_of(client, arguments.raw):
            discard(client, replaced)  # an older raw build nothing refers to any more
        if not plan.options.tag:
            discard(client, arguments.raw, untag=True)  # experiments leave no raw build behind


def resolve_arguments(client: DockerClient, plan: BuildPlan) -> Arguments:
    """Check the plan against the lock and find its base; a UserError says what is wrong."""
    entry, options = plan.entry, plan.options
    declared = check_pins_match(plan.images_root, plan.name, plan.lock)
    unknown = sorted(set(options.pins) - set(entry.inputs) - {"SOURCE_DATE_EPOCH"})
    if unknown:
        raise UserError(
            f"--pin {', '.join(unknown)}: not a pin of {plan.name} "
            f"(pins: {', '.join(entry.inputs)})"
        )
    state_file = machine.state_path(plan.inputs.cache_dir)
    base = options.base or require_base(
        client, plan.lock, state_file, allow_drift=options.allow_drift
    )
    epoch_pin = str(options.pins.get("SOURCE_DATE_EPOCH", plan.lock.source_date_epoch))
    if not epoch_pin.isdigit():
        raise UserError(f"--pin SOURCE_DATE_EPOCH={epoch_pin}: expected seconds since 1970")
    epoch = int(epoch_pin)
    args = {
        **entry.inputs,
        **plan.inputs.build_args(),
        **(downloads.build_args(entry.downloads) if plan.downloads else {}),
        "BASE": base,
        "SOURCE_DATE_EPOCH": str(epoch),
        **options.pins,
    }
    return Arguments(
        base=base,
        epoch=epoch,
        build_args={key: value for key, value in args.items() if key in declared},
        raw=raw_tag(entry, scratch=not options.tag),
    )


def _build(client: DockerClient, plan: BuildPlan, arguments: Arguments, out: TextIO) -> BuildResult:
    name, entry, options = plan.name, plan.entry, plan.options
    log_path = plan.log_dir / f"{name}.log"
    seconds: dict[str, int] = {}
    clock = time.monotonic()
    nocache = " without cache" if options.nocache else ""
    print(f"{name}: building on {arguments.base}{nocache} (log: {log_path})", file=out, flush=True)
    _docker_build(client, plan, arguments, log_path, out)
    seconds["build"] = int(time.monotonic() - clock)

    clock = time.monotonic()
    print(f"{name}: normalizing", file=out, flush=True)
    normalized = normalize_image(
        client,
        arguments.raw,
        base_reference=arguments.base,
        epoch=arguments.epoch,
        created_by=f"prooflock images build {name}",
    )
    seconds["normalize"] = int(time.monotonic() - clock)
    if options.verbose:
        print(f"{name}: normalization took {normalized.seconds} s", file=out, flush=True)

    clock = time.monotonic()
    print(f"{name}: self-test in {normalized.image_id[:19]}", file=out, flush=True)
    result = run_selftest(
        client, normalized.image_id, plan.images_root, name, timeout_s=options.selftest_timeout
    )
    (plan.log_dir / f"{name}.selftest.log").write_text(result.output)
    seconds["selftest"] = int(time.monotonic() - clock)
    if not result.passed:
        discard(client, normalized.image_id)
        raise SelfTestFailed(name, result)

    listed = run_hardened(client, normalized.image_id, PACKAGES, timeout_s=120)
    if not listed.ok:
        raise BuildFailed(f"{name}: dpkg-query failed in the built image:\n{listed.output[-2000:]}")
    size = int(client.images.get(normalized.image_id).attrs["Size"])
    print(
        f"{name}: {normalized.image_id} ({size / 1e6:.0f} MB; build {seconds['build']} s, "
        f"normalize {seconds['normalize']} s, self-test {seconds['selftest']} s)",
        file=out,
        flush=True,
    )
    return BuildResult(
        name=name,
        image_id=normalized.image_id,
        diff_ids=normalized.diff_ids,
        previous_id=entry.image_id,
        packages=sorted(listed.output.split()),
        size_bytes=size,
        seconds=seconds,
        base={"reference": arguments.base, "image_id": image_id_of(client, arguments.base) or ""},
    )


def closure_list(repository: Path | None, suite: str, inputs: BuildInputs) -> dict[str, bytes]:
    """The context file apt-install reads instead of its own bookworm lines.

    It names the closure's repository when there is one. Otherwise it names the build's mirrors for
    the base's suite.
    """
    if repository is not None:
        line = f"deb [trusted=yes] file:{CONTEXT_REPOSITORY} {suite} main\n"
        return {"closure.list": line.encode()}
    if suite == APT_INSTALL_SUITE:
        return {}  # apt-install's own lines
    lines = f"deb [check-valid-until=no] {inputs.apt_mirror} {suite} main\n"
    if inputs.apt_security_mirror:
        lines += f"deb [check-valid-until=no] {inputs.apt_security_mirror} {suite}-security main\n"
    return {"closure.list": lines.encode()}


def _docker_build(
    client: DockerClient, plan: BuildPlan, arguments: Arguments, log_path: Path, out: TextIO
) -> None:
    name = plan.name
    tail: list[str] = []
    steps: list[str] = []  # the images of the steps that succeeded, last one last
    extra = {
        **closure_list(plan.repository, plan.lock.base.suite, plan.inputs),
        **(downloads.wheel_index(plan.entry.downloads) if plan.downloads else {}),
    }
    stored = {
        **_repository_files(plan.repository),
        **downloads.context_files(plan.entry.downloads, plan.downloads),
    }
    with (
        log_path.open("w") as log,
        context.build_context(plan.images_root, name, plan.inputs, extra, stored) as tar,
    ):
        try:
            stream = client.api.build(
                fileobj=tar,
                network_mode="none" if plan.offline else None,
                custom_context=True,
                tag=arguments.raw,
                buildargs=arguments.build_args,
                nocache=plan.options.nocache,
                rm=True,
                forcerm=True,
                pull=False,
                decode=True,
            )
            for message in stream:
                if "error" in message:
                    log.write(message["error"] + "\n")
                    raise BuildFailed(_failure(name, message["error"], tail, log_path))
                text = message.get("stream", "")
                if not text:
                    continue
                log.write(text)
                for line in text.splitlines():
                    tail = [*tail[-60:], line]
                    if line.startswith(" ---> ") and len(line.split()) == 2:
                        steps.append(line.split()[1])
                    if plan.options.verbose or line.startswith("Step "):
                        print(f"{name}: {line}", file=out, flush=True)
        except (APIError, BuildError) as exc:
            raise BuildFailed(_failure(name, str(exc), tail, log_path)) from None
        except BuildFailed:
            if steps:
                discard(client, steps[-1])  # the failed build's last step: nothing tags it
            raise


def _repository_files(repository: Path | None) -> dict[str, Path]:
    """The closure's repository as context files below `build/repo/` (its links followed)."""
    if repository is None:
        return {}
    return {
        f"repo/{path.relative_to(repository).as_posix()}": path.resolve()
        for path in sorted(repository.rglob("*"))
        if path.is_file()
    }


def _failure(name: str, error: str, tail: list[str], log_path: Path) -> str:
    """The error and the last lines before it; the whole output is in the log."""
    shown = "\n".join(f"  {line}" for line in tail[-12:])
    return f"{name}: docker build failed: {error.strip()}\n{shown}\n(all of it: {log_path})"
