"""A byte buffer filled by a reader thread, read with deadlines: the shared half of every Channel."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from runner.backends.base import OUTPUT_CAP_BYTES


class StreamBuffer:
    def __init__(self, cap: int = OUTPUT_CAP_BYTES) -> None:
        self._data = bytearray()
        self._eof = False
        self._cond = threading.Condition()
        self._cap = cap
        self.overflowed = False  # bytes past the cap were dropped

    def feed(self, chunk: bytes) -> None:
        with self._cond:
            if len(self._data) < self._cap:
                self._data += chunk
            else:
                self.overflowed = True
            self._cond.notify_all()

    def finish(self) -> None:
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def read_until(self, marker: bytes, timeout_s: float) -> bytes:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                at = self._data.find(marker)
                if at >= 0:
                    end = at + len(marker)
                    chunk = bytes(self._data[:end])
                    del self._data[:end]
                    return chunk
                if self._eof:
                    raise EOFError(bytes(self._data).decode("utf-8", errors="replace")[-2000:])
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no {marker!r} within {timeout_s:.0f} s")
                self._cond.wait(left)

    def take(self) -> bytes:
        with self._cond:
            chunk = bytes(self._data)
            self._data.clear()
            return chunk


def pump(read: Callable[[int], bytes], into: StreamBuffer) -> threading.Thread:
    """Start a daemon thread copying `read(n)` chunks into `into` until EOF."""

    def loop() -> None:
        try:
            while chunk := read(65536):
                into.feed(chunk)
        except (OSError, ValueError):
            pass
        finally:
            into.finish()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread
