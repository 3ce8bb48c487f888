"""`prooflock serve`: warm workers that outlive one command, with the records a local check gives."""

from __future__ import annotations

import json
import socketserver
import threading

import orjson
import pytest

from runner.runs import serve
from tests.helpers import ARTIFACTS

ADD_SYM = "let ADD_SYM_AGAIN = prove(`!a b. a + b = b + a`, ARITH_TAC);;\n"


@pytest.fixture
def daemon(cli, tmp_path):
    started = cli("serve", "--idle-timeout", "600")
    assert started.returncode == 0, started.stderr
    yield
    assert cli("serve", "--stop").returncode == 0
    assert cli("serve", "--status").returncode == 1


def lines(done) -> list[dict]:
    return [json.loads(line) for line in done.stdout.splitlines()]


def run_records(cli, tmp_path, name: str, requests: list[dict], *flags: str, env=None):
    """`prooflock run` of `requests`: its log's results, whose provenance says who checked."""
    (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in requests))
    log = tmp_path / f"{name}.log.jsonl"
    done = cli("run", f"{name}.jsonl", "--checkpoint", log.name, "--no-cache", *flags, env=env)
    assert done.returncode in (0, 1), done.stderr
    records = [json.loads(line)["body"] for line in log.read_text().splitlines()]
    return [record["result"] for record in records if "result" in record], done.stderr


def servers_of(result: dict) -> list[dict]:
    """The warm servers a result's check used (one, or a worker and its replayer)."""
    extra = result["provenance"]["extra"]
    return extra.get("servers", [extra])


def rocq_requests(*names: str) -> list[dict]:
    return [
        {"prover": "rocq", "name": name, "content": (ARTIFACTS / "rocq" / name).read_text()}
        for name in names
    ]


def daemon_log(tmp_path) -> str:
    return (tmp_path / "cache" / "serve.log").read_text()


def test_records_through_the_daemon_equal_the_local_ones(cli, tmp_path, daemon):
    requests = rocq_requests("pass_arith.v", "fail_tactic.v", "admitted.v")
    via_daemon, said = run_records(cli, tmp_path, "served", requests)
    alone, _ = run_records(cli, tmp_path, "alone", requests, "--daemon", "off")
    # served: the daemon booted the worker (its log says so, this command's stderr does not),
    # and every record names the daemon and one of its workers
    assert "starting Rocq worker" in daemon_log(tmp_path)
    assert "starting Rocq worker" not in said
    assert all(result["provenance"]["extra"].get("daemon") for result in via_daemon)
    assert not any(result["provenance"]["extra"].get("daemon") for result in alone)
    daemon_workers = {server["worker_id"] for r in via_daemon for server in servers_of(r)}
    local_workers = {server["worker_id"] for r in alone for server in servers_of(r)}
    assert daemon_workers and not daemon_workers & local_workers
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
    """The daemon, not the command, boots the worker, and keeps it for the next command: the
    daemon's log (only the daemon writes it) shows one boot for two commands."""
    (tmp_path / "a.v").write_text((ARTIFACTS / "rocq" / "pass_arith.v").read_text())
    done = [cli("check", "--prover", "rocq", "--no-cache", "a.v") for _ in "12"]
    first, second = (lines(command)[0] for command in done)
    assert first["verdict"] == second["verdict"] == "pass", done[1].stderr
    assert second["result_digest"] == first["result_digest"]
    for command in done:
        assert "starting Rocq worker" not in command.stderr  # the daemon boots it, not this command
    assert daemon_log(tmp_path).count("starting Rocq worker") == 1


def test_two_runs_with_their_own_checkpoints_share_the_daemons_worker(cli, tmp_path, daemon):
    """Each run keeps its output files beside its own checkpoint: that never costs the
    daemon's warm workers (one boot for two runs)."""
    for name in ("first", "second"):
        results, stderr = run_records(cli, tmp_path, name, rocq_requests("pass_arith.v"))
        assert [r["verdict"] for r in results] == ["pass"], stderr
    assert daemon_log(tmp_path).count("starting Rocq worker") == 1


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.xdist_group("hol-light-docker")
def test_hol_light_through_the_daemon_is_answered_by_the_warm_worker(cli, tmp_path):
    """HOL Light's boot is what the daemon saves: the second command's check is answered by the
    worker and replayer the first left in the daemon (restored from the machine's snapshots, or
    booted where there are none): the daemon starts each once, the commands never."""
    env = {"PROOFLOCK_BACKEND": "docker"}
    (tmp_path / "a.ml").write_text(ADD_SYM)
    assert cli("serve", "--idle-timeout", "600", env=env).returncode == 0
    try:
        done = [cli("check", "--prover", "hol-light", "--no-cache", "a.ml", env=env) for _ in "12"]
    finally:
        assert cli("serve", "--stop", env=env).returncode == 0
    first, second = (lines(command)[0] for command in done)
    assert first["verdict"] == second["verdict"] == "pass", done[1].stderr
    assert second["result_digest"] == first["result_digest"]
    for command in done:
        assert "HOL Light worker" not in command.stderr  # neither booted nor restored here
    started = [line for line in daemon_log(tmp_path).splitlines() if "HOL Light" in line]
    assert sum("HOL Light worker" in line for line in started) == 1, started
    assert sum("HOL Light replayer" in line for line in started) == 1, started


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
