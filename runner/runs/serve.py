"""`prooflock serve`: a per-user daemon that keeps warm workers between commands.

A HOL Light worker takes minutes to boot.
Without a daemon, every `prooflock check` pays that.
The daemon listens on a Unix socket only its user can open.
The socket has mode 0600, in a 0700 directory.
It serves one JSON line per request:
`{"op": "check", "settings": {...}, "request": {...}, "cold": false}` gets
`{"result": {...}}` or `{"error": {"kind": "user"|"infra", "message": ...}}`.
It keeps one Checker, so one pool of warm servers, per distinct settings.
It stops after an idle timeout, or on `{"op": "stop"}`.
Its results equal a local checker's; only their provenance names the daemon.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Self, TypeVar

import orjson
from pydantic import ValidationError

from runner.check.batching import Unit
from runner.check.checker import (
    Backends,
    Checker,
    CheckService,
    Disagreement,
    Preparing,
    in_order,
    run_units,
)
from runner.check.environment import Environments
from runner.check.resolve import Refusal
from runner.check.schedule import Timings
from runner.core.errors import InfraFailure, UserError
from runner.core.messages import Notify
from runner.core.models import CheckRequest, CheckResult
from runner.core.provenance import kit_version
from runner.core.settings import Settings
from runner.provers.base import ResolvedRequest

K = TypeVar("K")
SOCKET_NAME = "serve.sock"
IDLE_TIMEOUT_S = 15 * 60
# Settings a client sends: all that changes how a check runs, not where logs go.
FORWARDED = (
    "backend",
    "isolation",
    "timeout",
    "memory_mb",
    "pids",
    "cpus",
    "retries",
    "cache",
    "cache_dir",
    "build_missing",
    "canary",
    "local_sandbox",
)


@functools.cache
def installation() -> dict[str, str]:
    """What a daemon must share with its clients: the kit's version and this installation.

    The installation is the package's location and the interpreter.
    So one install never uses another's daemon.
    """
    package = Path(__file__).resolve().parents[1]
    marker = (package / "__init__.py").stat()  # a reinstall at the same path is another install
    return {
        "version": kit_version(),
        "package": str(package),
        "installed": f"{marker.st_ino}:{marker.st_mtime_ns}",
        "python": sys.executable,
    }


def socket_path(settings: Settings) -> Path:
    """One socket per installation and version, so no install reaches another's daemon."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) / "prooflock" if runtime else settings.cache_dir / "serve"
    key = hashlib.sha256(orjson.dumps(installation(), option=orjson.OPT_SORT_KEYS)).hexdigest()
    return base / f"{key[:16]}-{SOCKET_NAME}"


SUN_PATH_MAX = 107  # bytes of a socket's name bind and connect accept (108 with the NUL)


@contextlib.contextmanager
def unix_address(path: Path) -> Iterator[str]:
    """A name that bind and connect accept for `path`.

    A deep cache dir can be longer than a socket's name may be.
    Then the socket is reached through its directory's descriptor: /proc/self/fd/N/NAME.
    """
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        yield str(path)
        return
    directory = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{directory}/{path.name}"
    finally:
        os.close(directory)


def _settings_key(fields: dict[str, Any]) -> bytes:
    return orjson.dumps(fields, option=orjson.OPT_SORT_KEYS, default=str)


class Daemon(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: Path, idle_timeout_s: float):
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(path.parent, 0o700)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        self.path = path
        self.idle_timeout_s = idle_timeout_s
        self.last_used = time.monotonic()
        self.busy = 0
        self._checkers: dict[bytes, Checker] = {}
        self._lock = threading.Lock()
        old_umask = os.umask(0o077)
        try:
            with unix_address(path) as address:
                super().__init__(address, Handler)
        finally:
            os.umask(old_umask)

    def checker(self, fields: dict[str, Any]) -> Checker:
        """One checker, and so one set of warm workers, per settings.

        Each request says where its output files go, so every `run` reuses the same workers.
        """
        key = _settings_key(fields)
        with self._lock:
            if key not in self._checkers:
                self._checkers[key] = Checker(Settings(**fields), notify=self.log)
            return self._checkers[key]

    def log(self, message: str) -> None:
        print(f"prooflock serve: {message}", file=sys.stderr, flush=True)

    def watch_idle(self) -> None:
        while True:
            time.sleep(min(5.0, self.idle_timeout_s))
            idle = time.monotonic() - self.last_used
            if self.busy == 0 and idle > self.idle_timeout_s:
                self.log(f"idle for {idle:.0f} s: stopping")
                self.shutdown()
                return

    def close_checkers(self) -> None:
        with self._lock:
            checkers = list(self._checkers.values())
            self._checkers.clear()
        for checker in checkers:
            with contextlib.suppress(Exception):
                checker.close()


class Handler(socketserver.StreamRequestHandler):
    server: Daemon

    def handle(self) -> None:
        for line in self.rfile:
            try:
                message = orjson.loads(line)
            except orjson.JSONDecodeError:
                self._reply({"error": {"kind": "user", "message": "not a JSON request"}})
                continue
            op = message.get("op")
            if op == "stop":
                self._reply({"stopping": True})
                threading.Thread(target=self.server.shutdown, daemon=True).start()
                return
            if op == "ping":
                self._reply(
                    {
                        "pid": os.getpid(),
                        "checkers": len(self.server._checkers),
                        "installation": installation(),
                    }
                )
                continue
            self._reply(self._check(message))

    def _check(self, message: dict[str, Any]) -> dict[str, Any]:
        daemon = self.server
        daemon.busy += 1
        try:
            checker = daemon.checker(message.get("settings") or {})
            request = CheckRequest.model_validate(message["request"])
            keep = message.get("keep_outputs")
            result = checker.check_one(
                request, cold=bool(message.get("cold")), keep_outputs=Path(keep) if keep else None
            )
            return {"result": result.model_dump(mode="json")}
        except (UserError, ValidationError, KeyError) as exc:
            return {"error": {"kind": "user", "message": str(exc)}}
        except InfraFailure as exc:
            return {"error": {"kind": "infra", "message": str(exc)}}
        finally:
            daemon.busy -= 1
            daemon.last_used = time.monotonic()

    def _reply(self, data: dict[str, Any]) -> None:
        self.wfile.write(orjson.dumps(data) + b"\n")
        self.wfile.flush()


def serve_forever(settings: Settings, idle_timeout_s: float = IDLE_TIMEOUT_S) -> None:
    path = socket_path(settings)
    daemon = Daemon(path, idle_timeout_s)
    daemon.log(f"listening on {path} (pid {os.getpid()}; stops after {idle_timeout_s:.0f} s idle)")
    threading.Thread(target=daemon.watch_idle, daemon=True).start()
    try:
        daemon.serve_forever()
    finally:
        daemon.close_checkers()
        daemon.server_close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


class Client:
    """One connection to a running daemon."""

    def __init__(self, path: Path, timeout_s: float | None = None):
        self.path = path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout_s)
        try:
            with unix_address(path) as address:
                self._sock.connect(address)
        except OSError:
            self._sock.close()
            raise
        self._file = self._sock.makefile("rwb")

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        self._file.write(orjson.dumps(message) + b"\n")
        self._file.flush()
        line = self._file.readline()
        if not line:
            raise ConnectionError("the prooflock daemon closed the connection")
        reply: dict[str, Any] = orjson.loads(line)
        return reply

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()
            self._sock.close()


def ping(settings: Settings) -> dict[str, Any] | None:
    """The daemon's answer to a ping, or None when none answers."""
    try:
        client = Client(socket_path(settings), timeout_s=2)
    except OSError:
        return None
    try:
        return client.call({"op": "ping"})
    except (OSError, ValueError):
        return None
    finally:
        client.close()


def stop(settings: Settings) -> bool:
    try:
        client = Client(socket_path(settings), timeout_s=10)
    except OSError:
        return False
    try:
        client.call({"op": "stop"})
    finally:
        client.close()
    return True


def start_background(settings: Settings, idle_timeout_s: float, log: Path) -> int:
    """Start a daemon in its own session, wait until it answers, and return its pid."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "runner",
                "serve",
                "--foreground",
                "--idle-timeout",
                str(idle_timeout_s),
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    for _ in range(100):
        if ping(settings) is not None:
            return proc.pid
        if proc.poll() is not None:
            raise InfraFailure(f"the prooflock daemon exited at once; see {log}")
        time.sleep(0.1)
    raise InfraFailure(f"the prooflock daemon did not answer within 10 s; see {log}")


class DaemonChecker(Preparing):
    """Checks in the daemon, whose warm workers outlive this command.

    It holds only what a command needs on this side.
    Requests are resolved here, and the run's timings kept here.
    Environments are probed here, for a second opinion.
    Each thread has its own connection to the daemon.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        notify: Notify | None = None,
        keep_outputs: Path | None = None,
    ):
        # One request per daemon call; the daemon's checkers do the batching.
        self.settings = settings.model_copy(update={"batch": 1})
        self.notify = notify or (lambda _message: None)
        self.keep_outputs = keep_outputs
        self.timings = Timings(settings.cache_dir)
        self.canary_disagreements: list[Disagreement] = []
        self.socket = socket_path(settings)
        self._fields = settings.model_dump(mode="json", include=set(FORWARDED))
        self._local = threading.local()
        self.backends = Backends(self.settings, notify, self.notify)
        self.environments = Environments(self.backends.for_image)

    def map(
        self, requests: Iterable[CheckRequest | ResolvedRequest | Refusal]
    ) -> Iterator[CheckResult]:
        """Results in input order, `settings.workers` daemon calls at a time."""
        return in_order(requests, self._prepared, self._check_all)

    def map_unordered(
        self, work: Iterable[tuple[K, CheckRequest | ResolvedRequest]]
    ) -> Iterator[tuple[K, CheckResult]]:
        """Results as they finish, `settings.workers` daemon calls at a time."""
        return self._check_all((key, self._resolved(request)) for key, request in work)

    def _check_all(
        self, work: Iterator[tuple[K, ResolvedRequest]]
    ) -> Iterator[tuple[K, CheckResult]]:
        units = ([(key, request)] for key, request in work)
        return run_units(units, self._check_unit, self.settings.workers)

    def _check_unit(self, unit: Unit[K]) -> list[tuple[K, CheckResult]]:
        return [(key, self.check_one(request)) for key, request in unit]

    def _client(self) -> Client:
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = Client(self.socket)
        return client

    def close(self) -> None:
        self.timings.save()
        self.backends.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check_one(
        self,
        request: CheckRequest | ResolvedRequest | Refusal,
        *,
        cold: bool = False,
        keep_outputs: Path | None = None,
    ) -> CheckResult:
        resolved = self._prepared(request)
        keep = keep_outputs or self.keep_outputs
        if isinstance(resolved, Refusal):  # nothing to run, here or in the daemon
            return resolved.result
        try:
            reply = self._client().call(
                {
                    "op": "check",
                    "settings": self._fields,
                    "request": resolved.request.record(),
                    "cold": cold,
                    "keep_outputs": str(keep.resolve()) if keep else None,
                }
            )
        except (OSError, ConnectionError, ValueError) as exc:
            self._local.client = None
            raise InfraFailure(
                f"the prooflock daemon at {self.socket} stopped answering: {exc}"
            ) from None
        if "error" in reply:
            error = reply["error"]
            raise (UserError if error.get("kind") == "user" else InfraFailure)(error.get("message"))
        result = CheckResult.model_validate(reply["result"])
        canary = result.provenance.extra.get("canary")
        if isinstance(canary, dict) and canary.get("agrees") is False:
            self.canary_disagreements.append(
                Disagreement(
                    resolved.name,
                    str(canary.get("warm_verdict")),
                    result.verdict.value,
                    "?" * 12,
                    result.result_digest,
                )
            )
        return result.with_extra(daemon=str(self.socket))


def open_checker(settings: Settings, mode: str, **kwargs: Any) -> CheckService:
    """A daemon-backed checker if `mode` allows and a daemon answers; else a local one.

    With mode `start`, a daemon is started when none answers.
    """
    if mode == "off":
        return Checker(settings, **kwargs)
    notify = kwargs.get("notify") or (lambda _m: None)
    answer = ping(settings)
    if answer is not None and answer.get("installation") != installation():
        notify(
            f"the daemon on {socket_path(settings)} belongs to another prooflock installation "
            "or version: checking in this process"
        )
        return Checker(settings, **kwargs)
    if answer is None:
        if mode != "start":
            return Checker(settings, **kwargs)
        log = settings.cache_dir / "serve.log"
        pid = start_background(settings, IDLE_TIMEOUT_S, log)
        notify(f"started the prooflock daemon (pid {pid}; log {log})")
    return DaemonChecker(settings, **kwargs)
