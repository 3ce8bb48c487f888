"""The host half of the sandbox agent: request and reply frames over a container's attach stream.

The stream is Docker's multiplexed (non-tty) attach: 8-byte headers saying stdout or stderr, then
the bytes. The agent's frames travel on stdout. Its stderr (a traceback, if it ever dies) is kept
for the error message. There is one request at a time: a sandbox belongs to one check.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from typing import Any

from runner.backends.sandbox_agent import PROTOCOL, Header, pack, unpack
from runner.core.errors import BackendUnavailable

MUX = struct.Struct(">BxxxI")
STDERR_KEPT = 8192


class AgentLost(BackendUnavailable):
    """The agent stopped answering (it died, its container is gone, or the daemon went away)."""


class AgentLink:
    def __init__(self, sock: Any, max_frame: int):
        self._io = sock  # docker-py's wrapper: keeps the HTTP response (and the socket) alive
        self._sock: socket.socket = getattr(sock, "_sock", sock)
        self._max_frame = max_frame
        self._raw = bytearray()  # multiplexed bytes not parsed yet
        self._out = bytearray()  # the agent's stdout
        self._err = bytearray()
        self._seq = 0
        self.pid: int | None = None

    def hello(self, timeout_s: float) -> Header:
        header, _ = self._read_frame(time.monotonic() + timeout_s)
        if header.get("agent") != "prooflock" or header.get("protocol") != PROTOCOL:
            raise AgentLost(f"unexpected agent greeting {header!r}")
        self.pid = header.get("pid")
        return header

    def request(
        self, header: Header, *blobs: bytes, timeout_s: float
    ) -> tuple[Header, list[bytes]]:
        """Send one request and wait up to `timeout_s` for its reply."""
        deadline = time.monotonic() + timeout_s
        self._seq += 1
        try:
            self._sock.settimeout(timeout_s)
            self._sock.sendall(pack({**header, "seq": self._seq}, *blobs))
        except OSError as exc:  # socket.timeout included
            raise AgentLost(f"cannot reach the sandbox agent: {exc}{self._why()}") from None
        reply, out = self._read_frame(deadline)
        if reply.get("seq") != self._seq:
            raise AgentLost("the sandbox agent's reply is out of step")
        return reply, out

    def stderr(self) -> str:
        return bytes(self._err).decode("utf-8", errors="replace")

    def _why(self) -> str:
        tail = self.stderr().strip().splitlines()[-1:]
        return f" ({tail[0]})" if tail else ""

    def _read_frame(self, deadline: float) -> tuple[Header, list[bytes]]:
        self._fill(4, deadline)
        (size,) = struct.unpack_from(">I", self._out)
        if size > self._max_frame:
            raise AgentLost(f"the sandbox agent sent a {size}-byte frame")
        self._fill(4 + size, deadline)
        body = bytes(self._out[4 : 4 + size])
        del self._out[: 4 + size]
        try:
            return unpack(body)
        except ValueError as exc:
            raise AgentLost(f"malformed frame from the sandbox agent: {exc}") from None

    def _fill(self, wanted: int, deadline: float) -> None:
        while len(self._out) < wanted:
            while len(self._raw) >= MUX.size:
                stream, size = MUX.unpack_from(self._raw)
                if len(self._raw) < MUX.size + size:
                    break
                chunk = self._raw[MUX.size : MUX.size + size]
                del self._raw[: MUX.size + size]
                if stream == 2:
                    self._err = (self._err + chunk)[-STDERR_KEPT:]
                else:
                    self._out += chunk
            if len(self._out) >= wanted:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise AgentLost(f"the sandbox agent did not answer in time{self._why()}")
            try:
                self._sock.settimeout(left)
                data = self._sock.recv(1 << 20)
            except OSError as exc:  # socket.timeout included
                raise AgentLost(f"the sandbox agent did not answer: {exc}{self._why()}") from None
            if not data:
                raise AgentLost(f"the sandbox agent has exited{self._why()}")
            self._raw += data

    def close(self) -> None:
        """Close the agent's stdin: it exits, and as PID 1 takes every process with it."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._io.close()
