"""The warm path: a Rocq worker (sandbox/server.ml) with a file's `Require` prefix loaded.

The worker is built at its start, in its own sandbox, from sandbox/ (OCaml, linked against
Debian's coq-core); once this process has built one, later workers are shipped it and use it
if they have the same coq-core, compiler and libc (start.sh compares). It boots as coqc boots,
runs the prefix it was started with, then forks per check (see server.ml). A worker serves only
files whose prefix is exactly its own (the prefix, digested, is its pool key). The most frequent
prefix gets a worker of its own; the base worker, whose prefix is empty, serves every other
file through a sub-parent that loaded exactly that file's prefix (it keeps the few most recently
used), so a batch mixing headers never has workers evict each other from the pool.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
import threading
from collections import Counter
from dataclasses import dataclass
from importlib.resources import files

from runner.backends.base import Completed, Sandbox
from runner.core.errors import BackendUnavailable
from runner.provers.base import ResolvedRequest, Sandboxes
from runner.provers.common.server import SandboxServer, ServerSpec
from runner.provers.rocq import report
from runner.provers.rocq.report import SOURCE, Inconsistent
from runner.provers.rocq.source import Prefix
from runner.provers.rocq.verdict import Evidence, target_valid

READY = b"\n@@PROOFLOCK-ROCQ-READY "
BINARY = "srv/prooflock-rocq-server"
BUILD_ID = "srv/build.id"  # what the binary was built against (start.sh rebuilds on a mismatch)
START = "start.sh"
BUILD_FAILED = "the Rocq worker could not be built"
# Building the worker takes seconds; loading a prefix such as mathcomp's, more.
BOOT_TIMEOUT_S = 900
# Beyond the check's own limits (the compile and the audit each get the timeout, and a
# sub-parent may first load the file's prefix): the reply's way back.
REPLY_SLACK_S = 90
# The most frequent prefix is given its own worker once it has been seen this often in this
# process; every other file goes to the base worker's sub-parents. One prefix worker beside the
# base one fits the pool's default of two idle servers.
OWN_WORKER_AFTER = 2

_seen: Counter[str] = Counter()
_leader = ""  # the prefix that has a worker of its own
_unavailable: dict[str, str] = {}  # image → why no worker starts there (this process stops trying)
_built: dict[str, dict[str, bytes]] = {}  # sources digest → the files of a built worker
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


def server_spec(prefix: Prefix, built: dict[str, bytes] | None = None) -> ServerSpec:
    boot_files = {**sandbox_sources(), **(built or {}), SOURCE: prefix.code.encode()}
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


def choose_prefix(prefix: Prefix) -> Prefix:
    """The prefix of the worker to use: the file's own if it is the most frequent so far and
    recurs, else the base worker's (empty)."""
    global _leader
    if not prefix.end:
        return prefix
    with _lock:
        _seen[prefix.code] += 1
        count = _seen[prefix.code]
        # A new leader must be seen twice as often: two headers of equal frequency would
        # otherwise take turns and start a worker at each turn.
        if count >= OWN_WORKER_AFTER and count > 2 * _seen[_leader]:
            _leader = prefix.code
        own = _leader == prefix.code
    return prefix if own else Prefix(end=0, code="")


def start(sandboxes: Sandboxes, prefix: Prefix) -> SandboxServer:
    """A started worker for `prefix` (from the pool when one is idle)."""
    digest = sources_digest()
    with _lock:
        built = _built.get(digest)
    server = sandboxes.server(server_spec(prefix, built))
    if built is None:
        _remember_build(server, digest)
    return server


def _remember_build(server: SandboxServer, digest: str) -> None:
    """Keep the worker a server built: the next server in this process is shipped it, and uses
    it if it was built against the same coq-core, compiler and libc (else it builds again)."""
    if server.sandbox is None:
        return
    try:
        files = {name: server.sandbox.read_file(name) for name in (BINARY, BUILD_ID)}
    except (OSError, BackendUnavailable):
        return
    with _lock:
        _built.setdefault(digest, files)


class CannotServe(Exception):
    """The worker cannot check this file (it holds another prefix, or its own failed to load):
    the cold path checks it instead."""


@dataclass(frozen=True)
class Reply:
    fields: dict[str, bytes]

    def text(self, tag: str) -> str:
        return self.fields.get(tag, b"").decode("utf-8", "replace")


def exchange(server: SandboxServer, request: ResolvedRequest, prefix: Prefix) -> Reply:
    if server.ready_line.split()[:1] != [b"ok"]:
        raise CannotServe("the worker's prefix did not load")
    nonce = secrets.token_hex(16)
    fields = {"prefix": prefix.code, "body": prefix.body(request.content), "mode": request.mode}
    if request.target is not None and target_valid(request):
        fields["target_name"] = request.target.name
        fields["target_statement"] = request.target.statement
    frame = f"CHECK {nonce} {request.timeout_s * 1000} {len(fields)}\n".encode()
    for name, value in fields.items():
        data = value.encode()
        frame += f"{name} {len(data)}\n".encode() + data
    marker = f"\n@@{nonce} DONE\n".encode()
    raw = server.exchange(frame, marker, 3 * request.timeout_s + REPLY_SLACK_S)
    return Reply(parse_reply(raw[: -len(marker)], nonce))


def parse_reply(raw: bytes, nonce: str) -> dict[str, bytes]:
    """`\\n@@<nonce> <TAG> <length>\\n<bytes>` fields; the nonce is fresh per check and unknown to
    the artifact, and every field is length-prefixed, so nothing the file prints can pose as one."""
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
    """A child's end as the backends report a process's: `exited N`, `signaled S`, `timeout`,
    `memory`, then its CPU and wall time."""
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
    compiled = _completed(
        reply.text("COMPILE"),
        reply.fields.get("COMPILE_OUT", b""),
        reply.fields.get("COMPILE_ERR", b""),
    )
    found = Evidence(compiled)
    if request.target is not None and not target_valid(request):
        found.target = "INVALID"
    if "CHECK" not in reply.fields:
        return found
    output = reply.fields.get("CHECK_OUT", b"")
    checked = _completed(reply.text("CHECK"), output, b"")
    found.checked = checked
    found.cpu_ms = checked.cpu_ms or 0
    lines = reply.text("CHECK_REPORT").splitlines()
    for line in lines:
        if line.startswith("TARGET ") and found.target is None:
            found.target = line.split()[1]
    if not checked.ok:
        return found
    found.checker = report.read_checker(output.decode("utf-8", "replace"))
    found.roots = [line.removeprefix("ROOT ") for line in lines if line.startswith("ROOT ")]
    found.used = {line.removeprefix("AXIOM ") for line in lines if line.startswith("AXIOM ")}
    variables = [line for line in lines if line.startswith("VARIABLE ")]
    if variables:
        found.problem = str(Inconsistent(f"the audit found section variables: {variables}"))
    return found
