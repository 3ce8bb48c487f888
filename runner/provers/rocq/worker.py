"""The warm path: a Rocq worker (sandbox/server.ml) with a file's `Require` prefix loaded.

The worker is built at its start, in its own sandbox, from sandbox/ (OCaml, linked against Debian's
coq-core). Once this process has built one, later workers are shipped it. They use it if they have
the same coq-core, compiler and libc (start.sh compares). A worker boots as coqc boots, runs the
prefix it was started with, then forks per check (see server.ml).

A worker serves only files whose prefix is exactly its own. The kit starts only the base worker,
whose prefix is empty. It serves every file through a sub-parent that loaded exactly that file's
prefix, and keeps the few most recently used. So one boot serves a batch mixing headers. No second
worker boots to load a prefix a sub-parent already holds. Workers share what their audits found
through the kit (memo.py), within a run and across runs on one install.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from runner.backends.base import Completed, Sandbox
from runner.core.errors import BackendUnavailable
from runner.provers.base import ResolvedRequest, Sandboxes
from runner.provers.common.server import SandboxServer, ServerSpec
from runner.provers.rocq import report
from runner.provers.rocq.judging import ANOMALY_EXIT, Evidence, target_valid
from runner.provers.rocq.memo import AuditMemo, for_install
from runner.provers.rocq.report import SOURCE
from runner.provers.rocq.source import Prefix

READY = b"\n@@PROOFLOCK-ROCQ-READY "
BINARY = "srv/prooflock-rocq-server"
BUILD_ID = "srv/build.id"  # what the binary was built against (start.sh rebuilds on a mismatch)
MEMO_FILE = "srv/memo"  # the audit memo's lines, adopted at boot (memo.py)
RETIRE = "RETIRE"  # a reply's field: a check changed what the worker held (server.ml)
START = "start.sh"
BUILD_FAILED = "the Rocq worker could not be built"
# Building the worker takes seconds; loading a prefix such as mathcomp's, more.
BOOT_TIMEOUT_S = 900
# A compile that took this much CPU has its re-check split over the CPUs the worker's sandbox may use,
# at most RECHECK_PROCESSES (server.ml, share_proofs): a re-check costs about what the compile's
# kernel did, and one long file is often what a run waits for last.
SPLIT_AFTER_MS = 2000
RECHECK_PROCESSES = 4
# The reply's way back, beyond the check's own limits. The compile and the audit each get the
# timeout, and a sub-parent may first load the file's prefix.
REPLY_SLACK_S = 90

_unavailable: dict[str, str] = {}  # image → why no worker starts there (this process stops trying)
# Built workers (binary, build id) by build id, read from and kept in the user's cache dir. So a new
# process never builds again what another built. start.sh picks the one built for its sandbox: the
# host's coq-core for the local backend, the image's in Docker.
_built: dict[Path, dict[str, tuple[bytes, bytes]]] = {}  # per builds dir
KEEP_BUILDS = 2
_asked: set[str] = set()  # servers whose build was already looked at
_lock = threading.Lock()


@functools.cache
def sandbox_sources() -> dict[str, bytes]:
    root = files(__package__).joinpath("sandbox")
    found = {
        START: root.joinpath(START).read_bytes(),
        "srv/server.ml": root.joinpath("server.ml").read_bytes(),
    }
    return found


@functools.cache
def sources_digest() -> str:
    digest = hashlib.sha256()
    for name, data in sorted(sandbox_sources().items()):
        digest.update(name.encode() + b"\0" + data + b"\0")
    return digest.hexdigest()


def server_spec(
    prefix: Prefix,
    built: dict[str, bytes] | None = None,
    key: str | None = None,
    memo: bytes = b"",
) -> ServerSpec:
    boot_files = {**sandbox_sources(), **(built or {}), SOURCE: prefix.code.encode()}
    # (`built`: the candidates' files, srv/cand/<n>/...; `memo`: the audit memo's lines)
    if memo:
        boot_files[MEMO_FILE] = memo
    if key is None:
        key = hashlib.sha256(prefix.code.encode()).hexdigest()[:24] if prefix.end else "base"
    return ServerSpec(
        name="Rocq worker",
        argv=["sh", START],
        ready=READY,
        boot_timeout_s=BOOT_TIMEOUT_S,
        files=boot_files,
        key=key,
        boot_note="builds the worker, then loads the file's Requires",
        explain_failure=_explain_failure,
        rechecks=True,  # coqchk's code re-checks the compiled file, with its own timeout
    )


def _explain_failure(sandbox: Sandbox) -> str | None:
    """Why the worker did not start, when it is that it could not be built."""
    try:
        sandbox.read_file(BUILD_ID)
        return None  # it was built: the failure is elsewhere
    except (OSError, BackendUnavailable):
        pass
    try:
        log = sandbox.read_file("srv/build.log").decode("utf-8", "replace").strip()
    except (OSError, BackendUnavailable):
        return None
    tail = " ".join(log.splitlines()[-3:])[:400]
    needs = "Debian's libcoq-core-ocaml-dev and coqchk's sources (images/rocq/checker-sources)"
    return f"{BUILD_FAILED} (it needs {needs}): {tail}"


def available(image: str) -> bool:
    return image not in _unavailable


def unavailable(image: str, why: str) -> None:
    _unavailable[image] = why


def start(
    sandboxes: Sandboxes, prefix: Prefix, key: str | None = None, memo: AuditMemo | None = None
) -> SandboxServer:
    """A started worker for `prefix`, given `memo`'s lines when it boots.

    It comes from the pool when one is idle; a new `key` gets a fresh one. One from the pool may
    have booted with fewer lines (or none, started ahead). It is sent what it lacks with its first
    check.
    """
    lines = memo.boot_file() if memo is not None else b""
    builds = _builds_dir(sandboxes)
    server = sandboxes.server(server_spec(prefix, _candidates(builds), key, lines))
    if memo is not None:
        memo.started(server.worker_id, server.spec.files.get(MEMO_FILE, b"").count(b"\n"))
    _remember_build(server, builds)
    return server


def audit_memo(sandboxes: Sandboxes) -> AuditMemo | None:
    """The audit memo of the install this check runs on; none for a cold (canary) check."""
    if sandboxes.cold:
        return None
    return for_install(sandboxes.install_dir, sources_digest())


def _builds_dir(sandboxes: Sandboxes) -> Path:
    """Workers built here, in the Checker's cache dir: start.sh picks the one for its install.

    It is not under `install_dir`, because a worker started ahead must not wait for the install's
    probe.
    """
    return sandboxes.cache_dir / "rocq-worker" / sources_digest()[:24]


def _known_builds(builds: Path) -> dict[str, tuple[bytes, bytes]]:
    with _lock:
        if builds not in _built:
            known = _built[builds] = {}
            try:
                for entry in sorted(builds.iterdir()):
                    if entry.name.startswith("."):
                        continue
                    with contextlib.suppress(OSError):
                        known[entry.name] = (
                            (entry / "prooflock-rocq-server").read_bytes(),
                            (entry / "build.id").read_bytes(),
                        )
            except OSError:
                pass
        return dict(_built[builds])


def _candidates(builds: Path) -> dict[str, bytes]:
    files = {}
    for index, (binary, build_id) in enumerate(list(_known_builds(builds).values())[:KEEP_BUILDS]):
        files[f"srv/cand/{index}/prooflock-rocq-server"] = binary
        files[f"srv/cand/{index}/build.id"] = build_id
    return files


def _remember_build(server: SandboxServer, builds: Path) -> None:
    """Keep the worker a server built (in this process and in the cache dir), unless known."""
    if server.sandbox is None or server.worker_id in _asked:
        return
    _asked.add(server.worker_id)  # once per server: a read from its sandbox per check is not free
    try:
        build_id = server.sandbox.read_file(BUILD_ID)
    except (OSError, BackendUnavailable):
        return
    name = hashlib.sha256(build_id).hexdigest()[:16]
    if name in _known_builds(builds):
        return
    try:
        binary = server.sandbox.read_file(BINARY)
    except (OSError, BackendUnavailable):
        return
    with _lock:
        _built.setdefault(builds, {})[name] = (binary, build_id)
    with contextlib.suppress(OSError):  # a cache that cannot be written only costs a build
        target = builds / name
        staging = target.with_name(f".{name}.{secrets.token_hex(4)}")
        staging.mkdir(parents=True)
        (staging / "prooflock-rocq-server").write_bytes(binary)
        (staging / "build.id").write_bytes(build_id)
        staging.rename(target)


class Garbled(BackendUnavailable):
    """The worker answered, but not in its own format: treated as a worker that died."""


class CannotServe(Exception):
    """The worker cannot check this file, so the cold path checks it instead.

    The worker holds another prefix, or its own prefix failed to load.
    """


@dataclass(frozen=True)
class Reply:
    fields: dict[str, bytes]

    def text(self, tag: str) -> str:
        return self.fields.get(tag, b"").decode("utf-8", "replace")


def request_fields(prefix: Prefix, content: str, mode: str) -> dict[str, str]:
    return {
        "prefix": prefix.code,
        "body": prefix.body(content),
        "mode": mode,
        "split_after_ms": str(SPLIT_AFTER_MS),
        "recheck_processes": str(RECHECK_PROCESSES),
    }


def exchange(
    server: SandboxServer,
    request: ResolvedRequest,
    prefix: Prefix,
    memo: AuditMemo | None = None,
) -> Reply:
    """One check; `memo`'s news go with it, and what its audit found goes back into `memo`."""
    fields: dict[str, str | bytes] = {**request_fields(prefix, request.content, request.mode)}
    if request.target is not None and target_valid(request):
        fields["target_name"] = request.target.name
        fields["target_statement"] = request.target.statement
        fields["target_requires"] = " ".join(request.target.requires)
    if memo is not None and server.ready_line.split()[:1] == [b"ok"]:
        fields["memo"] = memo.news_for(server.worker_id)
    reply = exchange_fields(server, fields, request.timeout_s)
    if RETIRE in reply.fields:  # the check changed what the worker held: no later check sees it
        server.retire()
    if memo is not None:
        memo.learned(reply.fields.get("MEMO", b""), server.worker_id)
    return reply


def exchange_fields(
    server: SandboxServer, fields: Mapping[str, str | bytes], timeout_s: int
) -> Reply:
    """One check: a frame of length-prefixed fields out, the fields of the reply back."""
    if server.ready_line.split()[:1] != [b"ok"]:
        raise CannotServe("the worker's prefix did not load")
    nonce = secrets.token_hex(16)
    frame = f"CHECK {nonce} {timeout_s * 1000} {len(fields)}\n".encode()
    for name, value in fields.items():
        data = value.encode() if isinstance(value, str) else value
        frame += f"{name} {len(data)}\n".encode() + data
    marker = f"\n@@{nonce} DONE\n".encode()
    raw = server.exchange(frame, marker, 3 * timeout_s + REPLY_SLACK_S)
    try:
        return Reply(parse_reply(raw[: -len(marker)], nonce))
    except (ValueError, IndexError) as exc:  # the worker's own frame is broken: it is suspect
        raise Garbled(f"the Rocq worker's reply could not be read: {exc}") from None


def parse_reply(raw: bytes, nonce: str) -> dict[str, bytes]:
    """`\\n@@<nonce> <TAG> <length>\\n<bytes>` fields.

    The nonce is fresh per check and unknown to the artifact, and every field is length-prefixed. So
    nothing the file prints can pose as one.
    """
    head = f"\n@@{nonce} ".encode()
    found: dict[str, bytes] = {}
    at = raw.find(head)
    while at >= 0:
        line_end = raw.index(b"\n", at + len(head))
        tag, _, length = raw[at + len(head) : line_end].decode().partition(" ")
        size = int(length)
        found[tag] = raw[line_end + 1 : line_end + 1 + size]
        at = raw.find(head, line_end + 1 + size)
    return found


def _completed(status: str, stdout: bytes, stderr: bytes) -> Completed:
    """A child's end as the backends report a process's, then its CPU and wall time.

    The end is `exited N`, `signaled S`, `timeout` or `memory`.
    """
    kind, code, cpu, wall = status.split()
    return Completed(
        argv=["prooflock-rocq-server"],
        exit_code=int(code) if kind == "exited" else None if kind == "timeout" else 137,
        stdout=stdout,
        stderr=stderr,
        timed_out=kind == "timeout",
        out_of_memory=kind == "memory",
        signal=int(code) if kind == "signaled" else None,
        wall_ms=int(wall),
        cpu_ms=int(cpu),
    )


def evidence(reply: Reply, request: ResolvedRequest) -> Evidence:
    if "BOOTFAILED" in reply.fields or "MISMATCH" in reply.fields:
        raise CannotServe("the worker does not hold this file's prefix")
    try:
        compiled = _completed(
            reply.text("COMPILE"),
            reply.fields.get("COMPILE_OUT", b""),
            reply.fields.get("COMPILE_ERR", b""),
        )
        checked = (
            _completed(reply.text("CHECK"), reply.fields.get("CHECK_OUT", b""), b"")
            if "CHECK" in reply.fields
            else None
        )
    except ValueError as exc:
        raise Garbled(f"the Rocq worker's report could not be read: {exc}") from None
    if compiled.ok and checked is not None and (checked.out_of_memory or checked.signal):
        # The worker's re-check (coqchk's code and the audit, in one process) needs far more memory
        # than coqchk alone. Coq's Nia.v is killed at 4 GB; bare coqchk peaks at 745 MB. A re-check
        # it could not finish is the kit's failure, never the file's verdict. The cold path checks
        # the file again with bare coqc and coqchk, each in a fresh sandbox.
        raise CannotServe(f"the worker's re-check did not finish ({reply.text('CHECK')})")
    found = Evidence(compiled, library="NOLIBRARY" not in reply.fields)
    if request.target is not None and not target_valid(request):
        found.target = "INVALID"
    if checked is None:
        return found
    output = checked.stdout
    found.checked = checked
    found.cpu_ms = checked.cpu_ms or 0
    found.recheck_processes = int(reply.text("CHECK_PROCESSES") or 1)
    lines = reply.text("CHECK_REPORT").splitlines()
    for line in lines:
        if line.startswith("TARGET ") and found.target is None:
            found.target = line.split()[1]
        if line.startswith("CHECKER_ANOMALY ") and checked.exit_code == ANOMALY_EXIT:
            found.checker_anomaly = report.anomaly_text(line.removeprefix("CHECKER_ANOMALY "))
    if request.target is not None and found.target is None and checked.timed_out:
        found.target = "TIMEOUT"
    elif request.target is not None and found.target is None and checked.out_of_memory:
        found.target = "MEMORY"
    if not checked.ok:
        return found
    found.checker = report.read_checker(output.decode("utf-8", "replace"))
    found.checker.primitives = {
        line.removeprefix("PRIMITIVE ") for line in lines if line.startswith("PRIMITIVE ")
    }
    found.roots = [line.removeprefix("ROOT ") for line in lines if line.startswith("ROOT ")]
    found.used = {line.removeprefix("AXIOM ") for line in lines if line.startswith("AXIOM ")}
    variables = [line for line in lines if line.startswith("VARIABLE ")]
    if variables:
        found.unread = f"the audit found section variables: {variables}"
    return found
