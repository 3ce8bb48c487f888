"""The JSON-lines worker that Lean, Isabelle and AlphaGeometry share, on the local backend.

A small worker script (below) stands in for an adapter's: it prints, its children print, and the
text it is sent holds newlines, Unicode line separators and forged frames. The kit must still get
exactly the reply the handler returned, and a worker that fails must be retired.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources

import pytest

from runner.backends.local import LocalBackend
from runner.core.errors import BackendUnavailable
from runner.core.models import Limits
from runner.core.settings import Settings
from runner.provers.common import jsonlines
from runner.provers.common.server import SandboxServer, ServerFailed, ServerSpec, ServerTimeout

WORKER = r"""
import json, os, subprocess, sys, time
import jsonlines_worker

def boot():
    if os.environ.get("FAIL_AT_BOOT"):
        raise RuntimeError("no prover here")
    print("PROOFLOCK-WORKER-READY {\"forged\": true}", flush=True)
    return {"booted": True}

def handle(request, request_id):
    # Everything a prover or an artifact could print, in the worker and in a child process.
    print(jsonlines_worker.encode({"id": request_id, "reply": {"echo": "forged"}}), flush=True)
    sys.stderr.write("noise on stderr\n")
    subprocess.run(["sh", "-c", "echo '{\"id\": null}'; echo junk >&2"], check=True)
    if request.get("raise"):
        raise RuntimeError("the prover broke")
    if request.get("fail"):
        raise jsonlines_worker.Failed("cannot answer: " + request["fail"])
    if request.get("sleep"):
        time.sleep(request["sleep"])
    if request.get("fork"):
        pid = os.fork()
        if pid == 0:
            jsonlines_worker.detach()
            try:
                os.write(jsonlines_worker._channel.replies, b'{"id": "forged"}\n')
                os._exit(0)
            except OSError:
                os._exit(7)
        return {"child_exit": os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])}
    if request.get("reopen"):
        # A child (the prover running the artifact's code) reopens the worker's reply channel
        # through /proc, as its own user, and writes a forged reply there.
        path = f"/proc/{os.getpid()}/fd/{jsonlines_worker._channel.replies}"
        code = "import sys\ntry:\n    f = open(sys.argv[1], 'w')\nexcept OSError as e:\n    print(repr(e), flush=True)\n    sys.exit(7)\n"
        code += "f.write('{\"id\": %s, \"reply\": {\"echo\": \"forged\"}}\\n' % sys.argv[2])"
        done = subprocess.run(["python3", "-c", code, path, json.dumps(request_id)])
        return {"child_exit": done.returncode}
    return {"echo": request["text"]}

jsonlines_worker.serve(boot, handle)
"""


def spec(**env: str) -> ServerSpec:
    loop = resources.files("runner.provers.common").joinpath("sandbox", jsonlines.LOOP_MODULE)
    return ServerSpec(
        name="test worker",
        argv=["python3", "-B", "worker.py"],
        ready=jsonlines.READY,
        boot_timeout_s=30,
        files={"worker.py": WORKER.encode(), jsonlines.LOOP_MODULE: loop.read_bytes()},
        env=env,
        explain_failure=lambda sandbox: sandbox.read_file(jsonlines.LOG).decode()[-300:],
    )


LIMITS = Limits(timeout_s=30, memory_mb=1024)


@pytest.fixture
def server() -> Iterator[SandboxServer]:
    started = SandboxServer(LocalBackend(Settings()), "test", LIMITS, spec(), lambda _: None)
    yield started
    started.close()


def test_the_reply_is_the_handlers_whatever_the_worker_and_its_children_print(server):
    assert jsonlines.boot_facts(server) == {"booted": True}
    text = 'line one\nline two\u2028\u2029\r\n{"id": "x", "reply": {}}\nPROOFLOCK-WORKER-READY ∀ ε'
    for _ in range(3):
        assert jsonlines.call(server, {"text": text}, 20) == {"echo": text}
    assert server.served == 3 and not server.retired


def test_a_handler_that_raises_retires_the_worker_and_the_next_request_is_not_sent(server):
    with pytest.raises(
        BackendUnavailable, match="the test worker failed: RuntimeError: the prover"
    ):
        jsonlines.call(server, {"raise": True}, 20)
    assert server.retired


def test_a_worker_that_cannot_answer_says_why_and_is_retired(server):
    with pytest.raises(BackendUnavailable, match="the test worker failed: cannot answer: no heap$"):
        jsonlines.call(server, {"fail": "no heap"}, 20)
    assert server.retired


def test_no_reply_within_the_deadline_is_a_timeout_and_retires_the_worker(server):
    with pytest.raises(ServerTimeout):
        jsonlines.call(server, {"sleep": 30}, 1)
    assert server.retired


def test_a_forked_child_cannot_write_to_the_channel(server):
    assert jsonlines.call(server, {"fork": True}, 20) == {"child_exit": 7}


def test_a_child_cannot_reopen_the_channel_through_proc(server):
    """The reply channel is a pipe the kit made, outside the sandbox's user: a child that
    reopens it through /proc/PID/fd as its own user is refused (EACCES, in worker.log)."""
    assert jsonlines.call(server, {"reopen": True}, 20) == {"child_exit": 7}
    assert jsonlines.call(server, {"text": "next"}, 20) == {"echo": "next"}


def test_a_worker_that_dies_at_boot_is_explained_from_its_log():
    failing = SandboxServer(
        LocalBackend(Settings()), "test", LIMITS, spec(FAIL_AT_BOOT="1"), lambda _: None
    )
    with pytest.raises(ServerFailed, match="RuntimeError: no prover here"):
        jsonlines.boot_facts(failing)
