"""`prooflock serve`: warm workers that outlive one command, with the records a local check gives."""

from __future__ import annotations

import json
import socketserver
import threading
import time

import orjson
import pytest

from runner.runs import serve
from tests.helpers import ARTIFACTS


@pytest.fixture
def daemon(cli, tmp_path):
    started = cli("serve", "--idle-timeout", "600")
    assert started.returncode == 0, started.stderr
    yield
    assert cli("serve", "--stop").returncode == 0
    assert cli("serve", "--status").returncode == 1


def lines(done) -> list[dict]:
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_records_through_the_daemon_equal_the_local_ones(cli, tmp_path, daemon):
    names = ["pass_arith.v", "fail_tactic.v", "admitted.v"]
    for name in names:
        (tmp_path / name).write_text((ARTIFACTS / "rocq" / name).read_text())
    via_daemon = lines(cli("check", "--prover", "rocq", "--no-cache", *names))
    alone = lines(cli("check", "--prover", "rocq", "--no-cache", "--daemon", "off", *names))
    for served, local in zip(via_daemon, alone, strict=True):
        for key in ("verdict", "result_digest", "env_key", "request_digest"):
            assert served[key] == local[key], (served["artifact"], key)


def test_a_bad_request_through_the_daemon_is_still_exit_2(cli, tmp_path, daemon):
    (tmp_path / "a.ml").write_text("let x = 1;;\n")
    done = cli("check", "--prover", "hol-light", "--placeholder", "x; exit", "a.ml")
    assert done.returncode == 2 and "placeholder" in done.stderr


def test_a_cache_dir_deeper_than_a_sockets_name_may_be_still_serves(cli, tmp_path):
    """A socket's name holds 107 bytes; a project's cache dir is often longer than that."""
    deep = tmp_path.joinpath(*["a-rather-long-directory-name"] * 5, "cache")
    env = {"PROOFLOCK_CACHE_DIR": str(deep)}
    (tmp_path / "a.v").write_text((ARTIFACTS / "rocq" / "pass_arith.v").read_text())
    assert cli("serve", "--idle-timeout", "600", env=env).returncode == 0
    try:
        served = cli("check", "--prover", "rocq", "--no-cache", "a.v", env=env)
        assert lines(served)[0]["verdict"] == "pass", served.stderr
        assert "infra" not in served.stderr and "starting Rocq worker" not in served.stderr
    finally:
        assert cli("serve", "--stop", env=env).returncode == 0
    assert cli("serve", "--status", env=env).returncode == 1


def test_status_and_stop_without_a_daemon(cli):
    assert cli("serve", "--status").returncode == 1
    assert "no prooflock daemon" in cli("serve", "--stop").stdout


def test_commands_on_a_warm_daemon_never_boot_a_worker_themselves(cli, tmp_path, daemon):
    """The daemon, not the command, boots the worker, and keeps it for the next command (HOL
    Light's minutes-long boot is what this saves: `nox -s bench` times it; Rocq's worker shows
    the mechanism here in seconds)."""
    (tmp_path / "a.v").write_text((ARTIFACTS / "rocq" / "pass_arith.v").read_text())
    first = cli("check", "--prover", "rocq", "--no-cache", "a.v")
    assert lines(first)[0]["verdict"] == "pass", first.stderr
    assert "starting Rocq worker" not in first.stderr  # the daemon boots it, not this command
    clock = time.monotonic()
    second = cli("check", "--prover", "rocq", "--no-cache", "a.v")
    elapsed = time.monotonic() - clock
    assert lines(second)[0]["result_digest"] == lines(first)[0]["result_digest"]
    assert "starting Rocq worker" not in second.stderr
    print(f"\nsecond rocq check through the daemon: {elapsed:.2f} s end to end")


def test_a_daemon_of_another_installation_is_never_used(settings, tmp_path):
    """Something answers on this install's socket but is another version or install (a stale
    daemon from a deleted virtualenv): the command says so in one line and checks in-process."""
    path = serve.socket_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    stranger = {**serve.installation(), "version": "0.0.1", "package": "/deleted/venv/runner"}

    class Stranger(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            for _ in self.rfile:
                self.wfile.write(orjson.dumps({"pid": 1, "installation": stranger}) + b"\n")
                self.wfile.flush()

    with serve.unix_address(path) as address:
        server = socketserver.ThreadingUnixStreamServer(address, Stranger)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    said: list[str] = []
    try:
        checker = serve.open_checker(settings, "auto", notify=said.append)
    finally:
        server.shutdown()
        server.server_close()
    assert not isinstance(checker, serve.DaemonChecker)
    assert said == [
        f"the daemon on {path} belongs to another prooflock installation or version: "
        "checking in this process"
    ]


def test_each_installation_and_version_has_its_own_socket(settings, monkeypatch):
    mine = serve.socket_path(settings)
    monkeypatch.setattr(serve, "installation", lambda: {"version": "9.9.9"})
    assert serve.socket_path(settings) != mine
