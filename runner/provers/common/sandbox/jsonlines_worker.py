"""Runs INSIDE the sandbox, beside an adapter's script: the JSON-lines worker loop.

An adapter's script (lean_server.py, isabelle_worker.py, sandbox_server.py) imports this module by
its bare name and hands it two functions:

    jsonlines_worker.serve(boot, handle, on_error=stop)

- `boot()` returns the facts of the boot handshake (a JSON object).
- `handle(request, request_id)` returns one reply (a JSON object) per request.
- `on_error()` runs when `handle` raised, before the error goes back to the kit. It can stop a
  prover whose state is unknown.

The channel is private. Before `boot` runs, the requests (fd 0) and the replies (fd 1) move to
descriptors of their own that no child process inherits. Then fd 0 becomes /dev/null, and fds 1 and
2 append to worker.log. So whatever the prover, the engine or the artifact prints lands in the log.
Only this module writes to the kit.

Frames are one per line, ASCII-only JSON. A newline inside a string is `\\n`, so no text can end a
frame early:

    worker → kit, once:  PROOFLOCK-WORKER-READY {boot facts}
    kit → worker:        {"id": ID, "request": {...}}
    worker → kit:        {"id": ID, "reply": {...}}    or    {"id": ID, "error": "why"}

There is exactly one reply per request, in order. An `error` says the worker could not answer, and
the kit retires it. Standard library only.
"""

import contextlib
import json
import os
import sys
import traceback

READY = "PROOFLOCK-WORKER-READY"
LOG = "worker.log"

_channel = None


class Failed(Exception):
    """This request cannot be answered.

    The message goes to the kit as is, and the kit retires the worker.
    """


class _Channel:
    def __init__(self):
        self.requests = os.dup(0)  # dup()ed descriptors are not inherited across exec
        self.replies = os.dup(1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        log = os.open(LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        self.reader = os.fdopen(self.requests, "rb")

    def send(self, line):
        data = memoryview((line + "\n").encode("ascii"))
        while data:
            data = data[os.write(self.replies, data) :]

    def lines(self):
        for raw in self.reader:
            if raw.strip():
                yield raw

    def close(self):
        with contextlib.suppress(OSError):
            self.reader.close()
        with contextlib.suppress(OSError):
            os.close(self.replies)


def encode(value):
    """One frame's text: ASCII-only JSON, keys sorted, nothing that could end a line."""
    return json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":"))


def serve(boot, handle, on_error=None):
    """Take the channel, boot, then answer every request until the kit closes the channel."""
    global _channel
    _channel = _Channel()
    _channel.send(f"{READY} {encode(boot())}")
    for raw in _channel.lines():
        request_id = None
        try:
            frame = json.loads(raw)
            request_id = frame["id"]
            reply = {"id": request_id, "reply": handle(frame["request"], request_id)}
        except Failed as exc:
            reply = {"id": request_id, "error": str(exc)}
        except Exception as exc:  # noqa: BLE001 - the kit must get one reply per request
            traceback.print_exc()  # into worker.log
            if on_error is not None:
                with contextlib.suppress(Exception):
                    on_error()
            reply = {"id": request_id, "error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.flush()
        sys.stderr.flush()
        _channel.send(encode(reply))


def detach():
    """In a forked child: drop the kit's channel, so the child can neither read nor reply."""
    if _channel is not None:
        _channel.close()
